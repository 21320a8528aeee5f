-- Queries of shared/ledger/evidence.py: provider calls, status reads and
-- results — the rows transitions cite. Many-column rows travel as one JSON
-- document built by the ledger's encoder (shared/ledger/evidence.py), not as
-- dozens of positional parameters.

-- name: call_started
-- Recorded before the request leaves, so a crash mid-call still shows it was (maybe) sent.
INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, fence, trace_id, traceparent,
                            idempotency_token, method, url, request_headers)
SELECT r.operation_id, r.call_kind, r.attempt, r.worker, r.fence, o.trace_id, r.traceparent,
       r.idempotency_token, r.method, r.url, coalesce(r.request_headers, '{}'::jsonb)
FROM jsonb_to_record($1::text::jsonb) AS r (
    operation_id text, call_kind text, attempt integer, worker text, fence bigint,
    traceparent text, idempotency_token text, method text, url text, request_headers jsonb)
JOIN operations o USING (operation_id)
RETURNING call_id;

-- name: call_finished
-- The outcome of call $1. A back-pressure window the answer imposed
-- (not_before_seconds) is kept on the call and, absolutely, on the operation.
WITH r AS (
    SELECT r.*, CASE WHEN r.not_before_seconds IS NOT NULL
                     THEN jw_now() + make_interval(secs => r.not_before_seconds) END AS imposed
    FROM jsonb_to_record($2::text::jsonb) AS r (
        duration_ms integer, status_code integer, provider_request_id text,
        response_headers jsonb, error_category text, response_sha256 text,
        response_size integer, response_body text, remote_job_id text, traceparent text,
        not_before_seconds double precision, anomalies text[])
), call AS (
    UPDATE provider_calls c SET
        finished_at = jw_now(),
        duration_ms = r.duration_ms,
        status_code = r.status_code,
        provider_request_id = r.provider_request_id,
        response_headers = r.response_headers,
        error_category = r.error_category,
        response_sha256 = r.response_sha256,
        response_size = r.response_size,
        response_body = r.response_body,
        remote_job_id = r.remote_job_id,
        traceparent = coalesce(r.traceparent, c.traceparent),
        not_before = r.imposed,
        anomalies = r.anomalies
    FROM r
    WHERE c.call_id = $1 AND c.finished_at IS NULL
    RETURNING c.call_id, c.operation_id, c.not_before
), held_back AS (  -- data-modifying: runs whether or not anything reads it
    UPDATE operations o SET not_before = greatest(o.not_before, call.not_before)
    FROM call
    WHERE call.not_before IS NOT NULL AND o.operation_id = call.operation_id
    RETURNING o.not_before
)
SELECT call.call_id, (SELECT max(not_before) FROM held_back) AS not_before FROM call;

-- name: record_polls
-- Status reads, any number in one statement (the reconciler's group commit,
-- reconciler/poll_writer.py). $1 is a JSON array of the ledger's status rows,
-- at most one per operation. For each: the operation's observed facts, the
-- call (completing the row recorded before it left, or a new one for the
-- read the claim marked, whose mark this clears), and — when "observe" —
-- the observation; each conditional on that row's fence (a NULL fence: an
-- unleased writer, e.g. an operator's tool or a test). With "release" the
-- lease is also handed back with the next appointment "release_after"
-- seconds away (a wake that arrived meanwhile: now), through jw_due_at.
-- A read whose lease was lost updates no operation and records no
-- observation, and returns no row; its call is still recorded and its
-- Retry-After still holds the operation back: the provider said it. A read
-- the claim marked is one row per claim (provider_calls_one_marked_read):
-- if the next claim or a transition already recorded it as lost, its answer
-- completes that row instead of adding one. Any other read (a second call
-- under one fence) is its own, unmarked row: every call that left is kept.
WITH r AS (
    SELECT r.*,
           CASE WHEN r.not_before_seconds IS NOT NULL
                THEN jw_now() + make_interval(secs => r.not_before_seconds) END AS imposed,
           CASE WHEN r.observe AND r.poll_after_seconds IS NOT NULL
                THEN jw_now() + make_interval(secs => r.poll_after_seconds) END AS poll_until,
           -- the share done this read shows (0..1), for the forecast's anchor
           CASE WHEN NOT r.observe THEN NULL
                WHEN r.progress_total > 0 AND r.progress_completed >= 0
                THEN least(r.progress_completed::float8 / r.progress_total, 1)
                WHEN r.progress_percent BETWEEN 0 AND 100 THEN r.progress_percent::float8 / 100
           END AS share
    FROM jsonb_to_recordset($1::text::jsonb) AS r (
        operation_id text, fence bigint, call_id bigint, attempt integer, worker text,
        traceparent text, method text, url text, request_headers jsonb, duration_ms integer,
        status_code integer, provider_request_id text, remote_state jw_remote_state,
        remote_state_raw text, progress_completed bigint, progress_total bigint,
        progress_percent numeric, poll_after_seconds integer, error jsonb,
        response_headers jsonb, error_category text, response_sha256 text,
        response_size integer, response_body text, provider_updated_at timestamptz,
        result_url text, errors_url text, counts jsonb, not_before_seconds double precision,
        anomalies text[], observe boolean, release boolean, release_after double precision)
), op AS (
    UPDATE operations o SET
        lease_owner = CASE WHEN r.release THEN NULL ELSE o.lease_owner END,
        lease_expires_at = CASE WHEN r.release THEN NULL ELSE o.lease_expires_at END,
        not_before = greatest(o.not_before, r.imposed),
        poll_not_before = CASE WHEN r.observe THEN r.poll_until ELSE o.poll_not_before END,
        next_poll_at = CASE
            WHEN NOT r.release THEN o.next_poll_at
            WHEN NOT (o.state = ANY (jw_state_set('scheduled'))) THEN NULL
            ELSE jw_due_at(o.state, jw_now() + make_interval(secs => r.release_after),
                           greatest(o.not_before, r.imposed),
                           CASE WHEN r.observe THEN r.poll_until ELSE o.poll_not_before END,
                           o.result_deadline, o.cancel_deadline) END,
        remote_state = coalesce(r.remote_state, o.remote_state),
        remote_state_raw = coalesce(r.remote_state_raw, o.remote_state_raw),
        progress_completed = coalesce(r.progress_completed, o.progress_completed),
        progress_total = coalesce(r.progress_total, o.progress_total),
        progress_percent = coalesce(r.progress_percent, o.progress_percent),
        -- the forecast's baseline (migration 013): kept while progress grows
        progress_anchor = CASE
            WHEN r.share IS NULL THEN o.progress_anchor
            WHEN r.share <= 0 THEN NULL
            WHEN o.progress_anchor IS NULL OR r.share < o.progress_anchor THEN r.share
            ELSE o.progress_anchor END,
        progress_anchor_at = CASE
            WHEN r.share IS NULL THEN o.progress_anchor_at
            WHEN r.share <= 0 THEN NULL
            WHEN o.progress_anchor IS NULL OR r.share < o.progress_anchor
            THEN least(coalesce(r.provider_updated_at, jw_now()), jw_now())
            ELSE o.progress_anchor_at END,
        poll_after_seconds = CASE WHEN r.observe THEN r.poll_after_seconds
                                  ELSE o.poll_after_seconds END,
        poll_attempts = o.poll_attempts + 1,
        -- the read the claim marked is on record now (only that claim's read)
        read_fence = CASE WHEN o.read_fence IS NOT DISTINCT FROM r.fence THEN NULL
                          ELSE o.read_fence END,
        last_error = CASE WHEN r.observe THEN r.error ELSE o.last_error END
    FROM r
    WHERE o.operation_id = r.operation_id
      AND (r.fence IS NULL OR (o.lease_fence = r.fence AND o.lease_expires_at > jw_now()))
    RETURNING o.operation_id, o.trace_id
), late AS (
    -- reads whose lease was lost: evidence all the same
    SELECT r.* FROM r WHERE NOT EXISTS (SELECT 1 FROM op WHERE op.operation_id = r.operation_id)
), held_back AS (  -- data-modifying: runs whether or not anything reads it
    UPDATE operations o SET not_before = greatest(o.not_before, late.imposed)
    FROM late WHERE o.operation_id = late.operation_id AND late.imposed IS NOT NULL
    RETURNING o.operation_id
), completed AS (
    -- the row recorded before the read left (a read chained after another
    -- step): by its id, an index probe
    UPDATE provider_calls c SET
        traceparent = x.traceparent, method = x.method, url = x.url,
        request_headers = x.request_headers, finished_at = jw_now(),
        duration_ms = x.duration_ms, status_code = x.status_code,
        provider_request_id = x.provider_request_id, response_headers = x.response_headers,
        error_category = x.error_category, response_sha256 = x.response_sha256,
        response_size = x.response_size, response_body = x.response_body,
        not_before = x.imposed, anomalies = x.anomalies
    FROM r x
    WHERE x.call_id IS NOT NULL AND c.call_id = x.call_id AND c.operation_id = x.operation_id
    RETURNING c.call_id, c.operation_id
), inserted AS (
    INSERT INTO provider_calls AS c (
        operation_id, call_kind, attempt, worker, fence, trace_id, traceparent, method, url,
        request_headers, started_at, finished_at, duration_ms, status_code,
        provider_request_id, response_headers, error_category, response_sha256,
        response_size, response_body, not_before, anomalies, marked)
    SELECT x.operation_id, 'status', x.attempt, x.worker, x.fence, o.trace_id,
           x.traceparent, x.method, x.url, x.request_headers,
           jw_now() - make_interval(secs => x.duration_ms::double precision / 1000),
           jw_now(), x.duration_ms, x.status_code, x.provider_request_id,
           x.response_headers, x.error_category, x.response_sha256, x.response_size,
           x.response_body, x.imposed, x.anomalies,
           -- the claim's marked read: still pending, or already recorded as lost
           x.fence IS NOT NULL AND (
               o.read_fence IS NOT DISTINCT FROM x.fence
               OR EXISTS (SELECT 1 FROM provider_calls p
                          WHERE p.operation_id = x.operation_id AND p.fence = x.fence
                            AND p.marked AND p.error_category = 'lost'
                            AND p.status_code IS NULL AND p.response_sha256 IS NULL))
    FROM r x
    JOIN operations o ON o.operation_id = x.operation_id
    WHERE x.call_id IS NULL
    ON CONFLICT (operation_id, fence) WHERE marked DO UPDATE SET
        traceparent = EXCLUDED.traceparent, finished_at = EXCLUDED.finished_at,
        duration_ms = EXCLUDED.duration_ms, status_code = EXCLUDED.status_code,
        provider_request_id = EXCLUDED.provider_request_id,
        response_headers = EXCLUDED.response_headers,
        error_category = EXCLUDED.error_category,
        response_sha256 = EXCLUDED.response_sha256, response_size = EXCLUDED.response_size,
        response_body = EXCLUDED.response_body, not_before = EXCLUDED.not_before,
        anomalies = EXCLUDED.anomalies
    RETURNING c.call_id, c.operation_id
), call AS (
    SELECT call_id, operation_id FROM completed
    UNION ALL
    SELECT call_id, operation_id FROM inserted
), observed AS (
    INSERT INTO observations (operation_id, source, call_id, remote_state, remote_state_raw,
                              provider_updated_at, progress_completed, progress_total,
                              progress_percent, poll_after_seconds, error, result_url,
                              errors_url, counts, anomalies)
    SELECT call.operation_id, 'poll', call.call_id, r.remote_state, r.remote_state_raw,
           r.provider_updated_at, r.progress_completed, r.progress_total, r.progress_percent,
           r.poll_after_seconds, r.error, r.result_url, r.errors_url, r.counts, r.anomalies
    FROM call JOIN r USING (operation_id) JOIN op USING (operation_id)
    WHERE r.observe
    RETURNING operation_id, observation_id
)
SELECT call.operation_id, call.call_id, observed.observation_id
FROM call JOIN op USING (operation_id) LEFT JOIN observed USING (operation_id);

-- name: observe_result_answer
-- What a result fetch's answer showed about the job, when that answer is the
-- provider's verdict (`[result.failed]`: the job failed): an observation of
-- source 'result' citing that fetch's call ($1 as in record_polls' rows), and
-- the operation's observed state and error as after a status read. Fenced
-- like a status read: once the lease is lost nothing is written and no row
-- is returned.
WITH r AS (
    SELECT * FROM jsonb_to_record($1::text::jsonb) AS r (
        operation_id text, fence bigint, call_id bigint, remote_state jw_remote_state,
        remote_state_raw text, error jsonb)
), op AS (
    UPDATE operations o SET
        remote_state = r.remote_state,
        remote_state_raw = r.remote_state_raw,
        last_error = r.error
    FROM r
    WHERE o.operation_id = r.operation_id
      AND (r.fence IS NULL OR (o.lease_fence = r.fence AND o.lease_expires_at > jw_now()))
    RETURNING o.operation_id
)
INSERT INTO observations (operation_id, source, call_id, remote_state, remote_state_raw, error)
SELECT r.operation_id, 'result', c.call_id, r.remote_state, r.remote_state_raw, r.error
FROM r
JOIN op USING (operation_id)
JOIN provider_calls c ON c.call_id = r.call_id AND c.operation_id = r.operation_id
                     AND c.call_kind = 'result' AND c.status_code IS NOT NULL
RETURNING observation_id;

-- name: newest_result_answer
-- The newest result fetch of this collection attempt ($2) that was answered:
-- a part of the result just fetched, which a verdict drawn from its content
-- (every item failed) cites. NULL when the attempt fetched nothing (the
-- result was the status read's own answer).
SELECT max(call_id) FROM provider_calls
WHERE operation_id = $1 AND call_kind = 'result' AND attempt = $2
  AND status_code IS NOT NULL;

-- name: insert_result
INSERT INTO results (operation_id, call_id, valid, reason, content_type, size_bytes, sha256,
                     storage_ref, inline, items_total, items_succeeded, items_failed)
SELECT r.operation_id, r.call_id, r.valid, r.reason, r.content_type, r.size_bytes, r.sha256,
       r.storage_ref, r.inline, r.items_total, r.items_succeeded, r.items_failed
FROM jsonb_to_record($1::text::jsonb) AS r (
    operation_id text, call_id bigint, valid boolean, reason text, content_type text,
    size_bytes bigint, sha256 text, storage_ref text, inline jsonb, items_total bigint,
    items_succeeded bigint, items_failed bigint)
RETURNING result_id;

-- name: insert_item_failures
-- All the failed items of one result in one statement (the evidence log's
-- trigger then runs once for them, not once per item).
INSERT INTO result_item_failures (result_id, item_key, code, message)
SELECT $1, k, c, m FROM unnest($2::text[], $3::text[], $4::text[]) AS f (k, c, m)
ON CONFLICT DO NOTHING;

-- name: adopted_job_unseen
-- The decision by which an operator adopted operation $1's job id (the first
-- history row carrying the id cites it: no provider answer of ours named the
-- job), while no status read has ever seen that job (a 2xx); no row otherwise.
SELECT first.evidence_id FROM (
    SELECT h.evidence_kind, h.evidence_id FROM history h
    WHERE h.operation_id = $1 AND h.remote_job_id IS NOT NULL
    ORDER BY h.seq LIMIT 1
) first
WHERE first.evidence_kind = 'decision'
  AND NOT EXISTS (SELECT 1 FROM provider_calls s
                  WHERE s.operation_id = $1 AND s.call_kind = 'status'
                    AND s.status_code BETWEEN 200 AND 299 AND s.error_category IS NULL);

-- name: stateless_reads_in_a_row
-- How many of operation $1's status reads in a row, newest first, answered a
-- success (2xx) naming no state the description maps: those since its
-- newest observation that named one. Reads answered otherwise (an error, no
-- answer, a 200 saying the request failed: error_category 'request_failed')
-- neither count nor break the run.
SELECT count(*) FROM observations o
JOIN provider_calls c ON c.call_id = o.call_id
WHERE o.operation_id = $1 AND o.source = 'poll' AND o.remote_state IS NULL
  AND c.status_code BETWEEN 200 AND 299 AND c.error_category IS NULL
  AND o.observation_id > coalesce((
      SELECT max(s.observation_id) FROM observations s
      WHERE s.operation_id = $1 AND s.remote_state IS NOT NULL
        AND s.source IN ('poll', 'lookup', 'create')), 0);

-- name: refused_reads_in_a_row
-- How many of operation $1's status reads in a row, newest first, were refused
-- with a 4xx not in $2 (a revoked key's 401, a 406): those since its newest
-- read that saw the job (a 2xx that is no failed request). Reads with no
-- answer, a 5xx, a code in $2 or a throttle (error_category 'back_pressure':
-- GitHub's rate-limited 403) neither count nor break the run.
SELECT count(*) FROM provider_calls c
WHERE c.operation_id = $1 AND c.call_kind = 'status' AND c.status_code BETWEEN 400 AND 499
  AND NOT c.status_code = ANY ($2::int[])
  AND c.error_category IS DISTINCT FROM 'back_pressure'
  AND c.call_id > coalesce((
      SELECT max(s.call_id) FROM provider_calls s
      WHERE s.operation_id = $1 AND s.call_kind = 'status'
        AND s.status_code BETWEEN 200 AND 299 AND s.error_category IS NULL), 0);

-- name: status_misses_in_a_row
-- How many of operation $1's status reads in a row, newest first, answered
-- "no such job" (a status code in $2, or a code status.not_found_codes lists:
-- error_category 'not_found', Dropbox's 409, Leonardo's 200 null): those since
-- its newest read that saw the job (a 2xx that is no failed request: a GraphQL
-- throttle, error_category 'request_failed', saw nothing). Reads with no
-- answer, or held back, neither prove nor disprove the job, and neither count
-- nor break the run.
SELECT count(*) FROM provider_calls c
WHERE c.operation_id = $1 AND c.call_kind = 'status'
  AND (c.status_code = ANY ($2::int[]) OR c.error_category = 'not_found')
  AND c.call_id > coalesce((
      SELECT max(s.call_id) FROM provider_calls s
      WHERE s.operation_id = $1 AND s.call_kind = 'status'
        AND s.status_code BETWEEN 200 AND 299 AND s.error_category IS NULL), 0);
