-- name: claim_due
-- Claim up to $2 due operations. Claiming pushes next_poll_at to the lease
-- expiry, so a leased row is not "due" again until its lease lapses: the claim
-- is an index range scan on operations_due, and a crashed worker's rows come
-- back by themselves (no separate rescuer). The fence counter goes up on every
-- claim; writes carry it, so the previous holder can no longer write.
-- now() (not clock_timestamp()) so the bound is an index condition: a claim
-- that cannot fill its batch must not walk every scheduled row.
WITH due AS (
    SELECT operation_id FROM operations
    WHERE next_poll_at <= now()
    ORDER BY next_poll_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE operations o SET
    lease_owner = $1,
    lease_expires_at = clock_timestamp() + make_interval(secs => $3),
    lease_fence = o.lease_fence + 1,
    wake_requested = false,
    next_poll_at = clock_timestamp() + make_interval(secs => $3)
FROM due
WHERE o.operation_id = due.operation_id
RETURNING o.*;

-- name: release
-- Give the row back with its next appointment.
UPDATE operations SET
    lease_owner = NULL, lease_expires_at = NULL,
    wake_requested = false,
    -- a wake that arrived while we held the lease makes the row due at once
    next_poll_at = CASE
        WHEN finished_at IS NOT NULL THEN NULL
        WHEN wake_requested AND state NOT IN ('needs_attention', 'result_timed_out',
             'result_unavailable', 'result_validation_failed') THEN clock_timestamp()
        WHEN $3::double precision IS NULL THEN NULL
        ELSE clock_timestamp() + make_interval(secs => $3) END
WHERE operation_id = $1 AND lease_fence = $2
RETURNING operation_id;

-- name: release_all_mine
-- Graceful shutdown: hand every lease back so another worker can go on at once.
UPDATE operations SET
    lease_owner = NULL, lease_expires_at = NULL,
    next_poll_at = CASE WHEN finished_at IS NULL THEN clock_timestamp() END
WHERE lease_owner = $1;

-- name: bump_create_attempt
-- The recovery point before a create leaves: only while the lease is held and
-- the operation still wants a create (an agent may have abandoned it meanwhile).
UPDATE operations SET create_attempts = create_attempts + 1
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > clock_timestamp()
  AND state IN ('create_pending', 'create_unknown', 'cancel_requested')
  AND remote_job_id IS NULL AND finished_at IS NULL
RETURNING create_attempts;

-- name: renew_lease
-- Just before a provider call: the lease must outlast the call, or the call is not made.
UPDATE operations SET
    lease_expires_at = clock_timestamp() + make_interval(secs => $3),
    next_poll_at = clock_timestamp() + make_interval(secs => $3)
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > clock_timestamp()
RETURNING lease_expires_at;

-- name: bump_lookup_attempt
UPDATE operations SET lookup_attempts = lookup_attempts + 1
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > clock_timestamp()
RETURNING lookup_attempts;

-- name: bump_result_attempt
UPDATE operations SET result_attempts = result_attempts + 1
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > clock_timestamp()
RETURNING result_attempts;

-- name: record_polls
-- Status reads, any number in one statement (the reconciler's group commit,
-- reconciler/poll_writer.py). $1 is a JSON array built by
-- reconciler/recording.py:poll_row (sent as text, so no codec re-encodes it),
-- at most one element per operation. For each element: the call, the
-- observation and the operation's observed facts, each conditional on that
-- element's fence; an element whose lease was lost writes nothing and
-- returns no row. With "release" true the lease is also handed back with the
-- next appointment "release_after" seconds away (a wake that arrived
-- meanwhile makes it due at once).
WITH r AS (
    SELECT * FROM jsonb_to_recordset($1::text::jsonb) AS r (
        operation_id text, fence bigint, attempt integer, worker text, traceparent text,
        method text, url text, request_headers jsonb, duration_ms integer,
        status_code integer, provider_request_id text, remote_state jw_remote_state,
        remote_state_raw text, progress_completed bigint, progress_total bigint,
        progress_percent numeric, poll_after_seconds integer, error jsonb,
        response_headers jsonb, error_category text, response_sha256 text,
        response_size integer, response_body text, provider_updated_at timestamptz,
        result_url text, errors_url text, counts jsonb, release boolean,
        release_after double precision)
), op AS (
    UPDATE operations o SET
        lease_owner = CASE WHEN r.release THEN NULL ELSE o.lease_owner END,
        lease_expires_at = CASE WHEN r.release THEN NULL ELSE o.lease_expires_at END,
        next_poll_at = CASE
            WHEN NOT r.release THEN o.next_poll_at
            WHEN o.wake_requested THEN clock_timestamp()
            ELSE clock_timestamp() + make_interval(secs => r.release_after) END,
        wake_requested = CASE WHEN r.release THEN false ELSE o.wake_requested END,
        remote_state = coalesce(r.remote_state, o.remote_state),
        remote_state_raw = coalesce(r.remote_state_raw, o.remote_state_raw),
        progress_completed = coalesce(r.progress_completed, o.progress_completed),
        progress_total = coalesce(r.progress_total, o.progress_total),
        progress_percent = coalesce(r.progress_percent, o.progress_percent),
        poll_after_seconds = r.poll_after_seconds,
        poll_attempts = o.poll_attempts + 1,
        last_error = r.error
    FROM r
    WHERE o.operation_id = r.operation_id AND o.lease_fence = r.fence
      AND o.lease_expires_at > clock_timestamp()
    RETURNING o.operation_id, o.trace_id
), call AS (
    INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, fence, trace_id,
                                traceparent, method, url, request_headers, started_at,
                                finished_at, duration_ms, status_code, provider_request_id,
                                response_headers, error_category, response_sha256,
                                response_size, response_body)
    SELECT op.operation_id, 'status', r.attempt, r.worker, r.fence, op.trace_id,
           r.traceparent, r.method, r.url, r.request_headers,
           clock_timestamp() - make_interval(secs => r.duration_ms::double precision / 1000),
           clock_timestamp(), r.duration_ms, r.status_code, r.provider_request_id,
           r.response_headers, r.error_category, r.response_sha256, r.response_size,
           r.response_body
    FROM op JOIN r USING (operation_id)
    RETURNING call_id, operation_id
)
INSERT INTO observations (operation_id, source, call_id, remote_state, remote_state_raw,
                          provider_updated_at, progress_completed, progress_total,
                          progress_percent, poll_after_seconds, error, result_url, errors_url,
                          counts)
SELECT call.operation_id, 'poll', call.call_id, r.remote_state, r.remote_state_raw,
       r.provider_updated_at, r.progress_completed, r.progress_total, r.progress_percent,
       r.poll_after_seconds, r.error, r.result_url, r.errors_url, r.counts
FROM call JOIN r USING (operation_id)
RETURNING operation_id, observation_id, call_id;

-- name: open_escalation
INSERT INTO escalations (operation_id, state, reason, details)
VALUES ($1, $2::jw_state, $3, $4)
ON CONFLICT (operation_id) WHERE resolved_at IS NULL DO UPDATE
    SET state = EXCLUDED.state, reason = EXCLUDED.reason, details = EXCLUDED.details
RETURNING escalation_id;

-- name: latest_create_call
SELECT * FROM provider_calls
WHERE operation_id = $1 AND call_kind = 'create'
ORDER BY call_id DESC LIMIT 1;

-- name: escalation_context
SELECT call_kind, method, url, status_code, provider_request_id, error_category, started_at
FROM provider_calls WHERE operation_id = $1 ORDER BY call_id DESC LIMIT 20;

-- name: request_wake
SELECT jw_request_wake($1);

-- name: known_remote_job_ids
-- Every job id the provider ever named for this operation (create and lookup answers).
SELECT DISTINCT remote_job_id FROM provider_calls
WHERE operation_id = $1 AND call_kind IN ('create', 'lookup') AND remote_job_id IS NOT NULL;

-- name: set_last_error
UPDATE operations SET last_error = $3
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > clock_timestamp()
RETURNING operation_id;

-- name: latest_poll_call
SELECT c.status_code, c.response_headers, c.response_body, c.response_sha256, c.url
FROM provider_calls c
WHERE c.operation_id = $1 AND c.call_kind = 'status' AND c.status_code BETWEEN 200 AND 299
ORDER BY c.call_id DESC LIMIT 1;

-- name: result_fetch_may_have_arrived
-- Did any earlier result fetch possibly reach the provider (anything but a
-- failure to connect)? For a fetch with side effects, that one may have
-- consumed the result.
SELECT EXISTS (
    SELECT 1 FROM provider_calls
    WHERE operation_id = $1 AND call_kind = 'result'
      AND error_category IS DISTINCT FROM 'connect'
);

-- name: lease_held
SELECT lease_fence = $2 AND lease_expires_at > clock_timestamp()
FROM operations WHERE operation_id = $1;
