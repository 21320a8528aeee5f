-- Queries of shared/ledger/leases.py: claims, renewals and releases, all fenced.

-- name: claim_due
-- Claim up to $2 due operations for worker $1 for $3 seconds. Claiming pushes
-- next_poll_at to the lease expiry, so a leased row is not "due" again until
-- its lease lapses: the claim is an index range scan on operations_due, and
-- a crashed worker's rows come back by themselves (no separate rescuer). The
-- fence counter goes up on every claim; writes carry it, so the previous
-- holder can no longer write.
-- The cut-off is an uncorrelated subquery, evaluated once: an index
-- condition, so a claim that cannot fill its batch never walks every
-- scheduled row.
-- A claim in a polled state is a status read about to leave: it is recorded
-- here (provider_calls, not yet finished) from the request stored with the
-- job id, so a read that leaves and is never answered or recorded is still
-- on record. No extra round trip; the read's outcome completes that row.
WITH due AS (
    SELECT operation_id FROM operations
    WHERE next_poll_at <= (SELECT jw_now())
    ORDER BY next_poll_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE operations o SET
        lease_owner = $1,
        lease_expires_at = jw_now() + make_interval(secs => $3),
        lease_fence = o.lease_fence + 1,
        wake_requested = false,
        next_poll_at = jw_now() + make_interval(secs => $3)
    FROM due
    WHERE o.operation_id = due.operation_id
    RETURNING o.*
), intent AS (
    INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, fence, trace_id,
                                method, url, request_headers)
    SELECT c.operation_id, 'status', c.poll_attempts + 1, 'reconciler:' || $1, c.lease_fence,
           c.trace_id, c.status_request ->> 'method', c.status_request ->> 'url',
           coalesce(c.status_request -> 'headers', '{}'::jsonb)
    FROM claimed c
    WHERE c.state = ANY (jw_state_set('polled')) AND c.status_request IS NOT NULL
      AND c.follow_up IS NULL
    RETURNING operation_id, call_id
)
SELECT c.*, i.call_id AS status_call_id
FROM claimed c LEFT JOIN intent i USING (operation_id);

-- name: renew_lease
-- Just before a provider call: the lease must outlast the call, or the call is not made.
UPDATE operations SET
    lease_expires_at = jw_now() + make_interval(secs => $3),
    next_poll_at = jw_now() + make_interval(secs => $3)
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING lease_expires_at;

-- name: release
-- Give the row back with its next appointment, $3 seconds away (NULL: none),
-- never before not_before. A wake that arrived while we held the lease makes
-- the row due at once (as far as the provider allows). $4, when given, is a
-- status read recorded by the claim that this worker knows it never sent.
WITH unsent AS (
    UPDATE provider_calls SET finished_at = jw_now(), duration_ms = 0,
                              error_category = 'not_sent'
    WHERE call_id = $4 AND operation_id = $1 AND fence = $2 AND finished_at IS NULL
    RETURNING call_id
)
UPDATE operations SET
    lease_owner = NULL, lease_expires_at = NULL,
    wake_requested = false,
    next_poll_at = CASE
        WHEN NOT (state = ANY (jw_state_set('scheduled'))) THEN NULL
        WHEN wake_requested THEN greatest(jw_now(), not_before)
        WHEN $3::double precision IS NULL THEN NULL
        ELSE greatest(jw_now() + make_interval(secs => $3), not_before) END
WHERE operation_id = $1 AND lease_fence = $2
RETURNING operation_id, (SELECT count(*) FROM unsent) AS unsent;

-- name: release_all_mine
-- Graceful shutdown: hand every lease back so another worker can go on at once
-- (as far as the provider allows).
UPDATE operations SET
    lease_owner = NULL, lease_expires_at = NULL,
    next_poll_at = CASE WHEN state = ANY (jw_state_set('scheduled'))
                        THEN greatest(jw_now(), not_before) END
WHERE lease_owner = $1;

-- name: lease_held
SELECT lease_fence = $2 AND lease_expires_at > jw_now()
FROM operations WHERE operation_id = $1;
