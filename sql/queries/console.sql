-- Queries of the operator console (receiver/console): sessions and its reads.
-- Times come from jw_now(), so tests that shift the clock see sessions expire.

-- name: console_session_open
-- A session for a live operator token; NULL (no row) for an agent or an
-- unknown or revoked token. $3 = absolute lifetime in seconds.
INSERT INTO console_sessions (session_sha256, token_id, expires_at)
SELECT $1, t.token_id, jw_now() + make_interval(secs => $3)
FROM api_tokens t
WHERE t.token_id = $2 AND t.scope = 'operator' AND t.revoked_at IS NULL
RETURNING token_id, expires_at;

-- name: console_session_touch
-- The live session with this digest, refreshed: within its absolute lifetime,
-- used within the last $2 seconds, its token still a live operator token.
UPDATE console_sessions s SET last_seen_at = jw_now()
FROM api_tokens t
WHERE s.session_sha256 = $1
  AND t.token_id = s.token_id AND t.scope = 'operator' AND t.revoked_at IS NULL
  AND s.expires_at > jw_now()
  AND s.last_seen_at > jw_now() - make_interval(secs => $2)
RETURNING t.token_id, t.caller, s.expires_at;

-- name: console_session_live
-- Whether the session is still live, without refreshing it: what a page's
-- live-update stream checks, so an open tab does not keep an unattended
-- session from idling out.
SELECT t.token_id, t.caller, s.expires_at
FROM console_sessions s
JOIN api_tokens t ON t.token_id = s.token_id
WHERE s.session_sha256 = $1
  AND t.scope = 'operator' AND t.revoked_at IS NULL
  AND s.expires_at > jw_now()
  AND s.last_seen_at > jw_now() - make_interval(secs => $2);

-- name: console_session_end
DELETE FROM console_sessions WHERE session_sha256 = $1;

-- name: console_sessions_purge
-- Sessions past either expiry ($1 = the idle limit in seconds), a bounded slice.
DELETE FROM console_sessions WHERE session_sha256 IN (
    SELECT session_sha256 FROM console_sessions
    WHERE expires_at <= jw_now() OR last_seen_at <= jw_now() - make_interval(secs => $1)
    LIMIT $2
);

-- name: console_operations
-- One page of operations, newest first. The order is the primary key (ids are
-- ULIDs, so newest first by creation) and the cursor a keyset bound on it, so
-- a page costs the same at row 10 and at row 1,000,000: never an OFFSET.
-- $5/$6: created at least / at most this many seconds ago. With a state
-- filter, console_operations_in_state instead.
SELECT operation_id, provider, kind, state, remote_state, outcome, requested_by,
       created_at, updated_at, message
FROM operations_overview
WHERE ($1::text IS NULL OR provider = $1)
  AND ($2::text IS NULL OR kind = $2)
  AND ($3::text IS NULL OR outcome = $3 OR ($3 = 'none' AND outcome IS NULL))
  AND ($4::text IS NULL OR operation_id < $4)
  AND ($5::double precision IS NULL OR created_at <= jw_now() - make_interval(secs => $5))
  AND ($6::double precision IS NULL OR created_at >= jw_now() - make_interval(secs => $6))
ORDER BY operation_id DESC
LIMIT $7;

-- name: console_operations_in_state
-- The same page for one state ($1, then console_operations' parameters
-- shifted by one), walking operations_by_state (migration 014): equality on
-- the index's first column keeps its order by id.
SELECT v.operation_id, v.provider, v.kind, v.state, v.remote_state, v.outcome,
       v.requested_by, v.created_at, v.updated_at, v.message
FROM operations o
JOIN operations_overview v ON v.operation_id = o.operation_id
WHERE o.state = $1::jw_state
  AND ($2::text IS NULL OR o.provider = $2)
  AND ($3::text IS NULL OR o.kind = $3)
  AND ($4::text IS NULL OR v.outcome = $4 OR ($4 = 'none' AND v.outcome IS NULL))
  AND ($5::text IS NULL OR o.operation_id < $5)
  AND ($6::double precision IS NULL OR o.created_at <= jw_now() - make_interval(secs => $6))
  AND ($7::double precision IS NULL OR o.created_at >= jw_now() - make_interval(secs => $7))
ORDER BY o.operation_id DESC
LIMIT $8;

-- name: console_providers_seen
SELECT DISTINCT provider FROM operations ORDER BY provider;

-- name: console_operation
SELECT o.operation_id, o.provider, o.kind, o.state::text AS state,
       o.remote_state::text AS remote_state, o.remote_job_id, o.requested_by,
       o.client_reference, o.trace_id, o.created_at, o.updated_at, o.result_deadline,
       o.cancel_deadline, o.cancel_reason, o.create_mode, o.last_error,
       v.message, v.outcome, v.items_total, v.items_failed, v.items_succeeded,
       v.result_ref, v.result, v.done, v.final
FROM operations o
JOIN operations_overview v ON v.operation_id = o.operation_id
WHERE o.operation_id = $1;

-- name: console_webhook_deliveries
SELECT webhook_event_id, event_id, received_at, signature_scheme, id_signed,
       remote_state::text AS remote_state, remote_state_raw, attached_at,
       duplicate_deliveries
FROM webhook_events WHERE operation_id = $1
ORDER BY webhook_event_id;

-- name: console_result
SELECT result_id, fetched_at, valid, sha256, storage_ref, items_total, items_succeeded,
       items_failed, reason, size_bytes, content_type
FROM results WHERE operation_id = $1
ORDER BY result_id DESC;

-- name: console_receipt_status
-- Whether each evidence row of the operation has a leaf below the newest signed
-- checkpoint ($2 = its tree size): covered vs not yet covered, by kind.
SELECT kind, count(*) AS rows, count(leaf_index) AS covered
FROM (
    SELECT e.kind,
           (SELECT l.leaf_index FROM log_leaves l
            WHERE l.kind = e.kind AND l.row_id = e.row_id AND l.leaf_index < $2
              AND NOT l.deleted
            ORDER BY l.leaf_index DESC LIMIT 1) AS leaf_index
    FROM (
        SELECT 'operation' AS kind, operation_id AS row_id
        FROM operations WHERE operation_id = $1
        UNION ALL
        SELECT 'history', history_id::text FROM history WHERE operation_id = $1
        UNION ALL
        SELECT 'call', call_id::text FROM provider_calls WHERE operation_id = $1
        UNION ALL
        SELECT 'observation', observation_id::text FROM observations WHERE operation_id = $1
        UNION ALL
        SELECT 'webhook', webhook_event_id::text FROM webhook_events WHERE operation_id = $1
        UNION ALL
        SELECT 'result', result_id::text FROM results WHERE operation_id = $1
        UNION ALL
        SELECT 'decision', decision_id::text FROM decisions WHERE operation_id = $1
        UNION ALL
        SELECT 'escalation', escalation_id::text FROM escalations WHERE operation_id = $1
    ) e
) covered
GROUP BY kind
ORDER BY kind;

-- name: console_webhook_totals
-- Per provider, what the database holds about deliveries: stored (verified,
-- first copy) events, duplicate copies folded into them, and how many were
-- matched to an operation. Refusals are not stored (see the page).
SELECT provider,
       count(*) AS events,
       coalesce(sum(duplicate_deliveries), 0)::bigint AS duplicates,
       count(operation_id) AS attached,
       max(received_at) AS latest
FROM webhook_events
GROUP BY provider
ORDER BY provider;

-- name: console_webhook_latest
SELECT provider, event_id, received_at, signature_scheme, id_signed,
       remote_state::text AS remote_state, operation_id, duplicate_deliveries
FROM webhook_events
ORDER BY received_at DESC, webhook_event_id DESC
LIMIT $1;

-- name: console_escalation
SELECT escalation_id, opened_at, state::text AS state, reason, details
FROM escalations WHERE operation_id = $1 AND resolved_at IS NULL;

-- name: console_webhook_refusals
-- Refused deliveries by provider and reason (migration 017): in all, in the
-- last day, and the newest.
SELECT provider, reason, sum(refusals)::bigint AS refusals,
       coalesce(sum(refusals) FILTER (WHERE day >= (jw_now() AT TIME ZONE 'UTC')::date - 1),
                0)::bigint AS recent,
       max(last_at) AS last_at
FROM webhook_refusal_counts
GROUP BY provider, reason
ORDER BY provider, reason;

-- name: console_webhook_latest_refusals
SELECT provider, reason, status, at
FROM webhook_refusals_latest
ORDER BY at DESC, refusal_id DESC
LIMIT $1;

-- name: console_last_verification
SELECT verified_at, verified_by, ok, tree_size, root_hash, checkpoint_origin, checkpoint_size,
       chains_checked, chain_breaks, rows_checked, problems, pending, seconds
FROM audit_verifications
ORDER BY verified_at DESC, verification_id DESC
LIMIT 1;
