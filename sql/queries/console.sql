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

-- name: console_session_hold
-- The session, still live, with its token share-locked until the decision's
-- transaction ends: a revocation (token_revoke's UPDATE) committed after the
-- session was checked is seen here (the row re-read once it commits), and one
-- started after this waits for the decision's commit. Either way no decision
-- commits after its token's revocation. Locks the token row only (FOR SHARE
-- needs UPDATE on a column of it: jobwarden_operator and jobwarden_receiver
-- each have one).
SELECT t.token_id, t.caller, s.expires_at
FROM console_sessions s
JOIN api_tokens t ON t.token_id = s.token_id
WHERE s.session_sha256 = $1
  AND t.scope = 'operator' AND t.revoked_at IS NULL
  AND s.expires_at > jw_now()
  AND s.last_seen_at > jw_now() - make_interval(secs => $2)
FOR SHARE OF t;

-- name: console_session_end
DELETE FROM console_sessions WHERE session_sha256 = $1;

-- name: console_sessions_purge
-- Sessions past either expiry ($1 = the idle limit in seconds), a bounded slice.
DELETE FROM console_sessions WHERE session_sha256 IN (
    SELECT session_sha256 FROM console_sessions
    WHERE expires_at <= jw_now() OR last_seen_at <= jw_now() - make_interval(secs => $1)
    LIMIT $2
);

-- name: console_custom_plans
-- For the rest of this transaction, plan every statement for its parameters.
-- asyncpg prepares statements, and after five runs PostgreSQL may keep one
-- generic plan: for a provider filter that is a walk of every operation, where
-- a plan for the actual name finds a rare provider through its index.
SELECT set_config('plan_cache_mode', 'force_custom_plan', true);

-- name: console_operations
-- One page of operations, newest first by creation, with no state, outcome or
-- kind filter. The cursor ($2) is the last operation id shown; the page goes
-- on below its (created_at, operation_id), so a page costs the same at row 10
-- and at row 1,000,000 (operations_by_creation, migration 019): never an
-- OFFSET. "Older than" ($3) and the cursor make one row bound where the index
-- scan starts (jw_console_upper_at/_id); "newer than" ($4) is where it stops.
-- Both times are computed once per page by the console. They are always
-- bounds (no "$n IS NULL OR"), so even a generic plan scans a range. A cursor
-- that names no operation starts from the newest. A provider ($1) is planned
-- for the name asked (console_custom_plans): a rare one is found through an
-- index led by provider, a common one on the walk.
SELECT v.operation_id, v.provider, v.kind, v.state, v.remote_state, v.outcome,
       v.requested_by, v.created_at, v.updated_at, v.message
FROM (
    SELECT o.operation_id, o.created_at
    FROM operations o
    WHERE ($1::text IS NULL OR o.provider = $1)
      AND (o.created_at, o.operation_id)
          < ((SELECT jw_console_upper_at($2, $3)), (SELECT jw_console_upper_id($2, $3)))
      AND o.created_at >= coalesce($4::timestamptz, '-infinity')
    ORDER BY o.created_at DESC, o.operation_id DESC
    LIMIT $5
) p
JOIN operations_overview v ON v.operation_id = p.operation_id
ORDER BY p.created_at DESC, p.operation_id DESC;

-- name: console_operations_in_states
-- The same page for a set of states and nothing checked row by row ($1: one
-- state, or the states an outcome comes from, receiver/console/operations.py;
-- then cursor, age bounds, limit as console_operations). Each state walks
-- operations_by_state_created (state, created_at, operation_id) from the cursor down
-- and stops at a page; the pages are merged. So a rare state, or an outcome
-- that is two states, reads about a page per state, not the table.
SELECT v.operation_id, v.provider, v.kind, v.state, v.remote_state, v.outcome,
       v.requested_by, v.created_at, v.updated_at, v.message
FROM (
    SELECT m.operation_id, m.created_at
    FROM unnest($1::jw_state[]) AS s(state)
    CROSS JOIN LATERAL (
        SELECT o.operation_id, o.created_at
        FROM operations o
        WHERE o.state = s.state
          AND (o.created_at, o.operation_id)
              < ((SELECT jw_console_upper_at($2, $3)), (SELECT jw_console_upper_id($2, $3)))
          AND o.created_at >= coalesce($4::timestamptz, '-infinity')
        ORDER BY o.created_at DESC, o.operation_id DESC
        LIMIT $5
    ) m
    ORDER BY m.created_at DESC, m.operation_id DESC
    LIMIT $5
) p
JOIN operations_overview v ON v.operation_id = p.operation_id
ORDER BY p.created_at DESC, p.operation_id DESC;

-- name: console_window
-- A page with filters checked row by row (jw_console_matches: provider $5, kind
-- $6, outcome $7 for the two outcomes that share the state succeeded), which
-- may match rarely or never. The walk reads a window of at most $8 operations
-- from the cursor down, and the page is the first $9 that match. With one
-- state ($1 = {state}) the walk is that state's range of operations_by_state_created;
-- with several, or all ($1 NULL), it is operations_by_creation and the states
-- are checked row by row too (the branch not taken is a one-time false
-- filter). Every row also carries where the window ended (the oldest operation
-- read) when it was full, so the page can offer to search on from there; with
-- no match, one row of NULLs carries it. One statement, one snapshot: the
-- window and its end agree.
WITH walked AS MATERIALIZED (
    (SELECT o.operation_id, o.created_at, o.provider, o.kind, o.state, o.remote_state,
            o.result_id
     FROM operations o
     WHERE cardinality($1::jw_state[]) = 1
       AND o.state = ($1::jw_state[])[1]
       AND (o.created_at, o.operation_id)
           < ((SELECT jw_console_upper_at($2, $3)), (SELECT jw_console_upper_id($2, $3)))
       AND o.created_at >= coalesce($4::timestamptz, '-infinity')
     ORDER BY o.created_at DESC, o.operation_id DESC
     LIMIT $8)
    UNION ALL
    (SELECT o.operation_id, o.created_at, o.provider, o.kind, o.state, o.remote_state,
            o.result_id
     FROM operations o
     WHERE coalesce(cardinality($1::jw_state[]), 0) <> 1
       AND (o.created_at, o.operation_id)
           < ((SELECT jw_console_upper_at($2, $3)), (SELECT jw_console_upper_id($2, $3)))
       AND o.created_at >= coalesce($4::timestamptz, '-infinity')
     ORDER BY o.created_at DESC, o.operation_id DESC
     LIMIT $8)
),
hits AS (
    SELECT w.operation_id, w.created_at
    FROM walked w
    LEFT JOIN results r ON r.result_id = w.result_id
    WHERE ($1::jw_state[] IS NULL OR w.state = ANY ($1::jw_state[]))
      AND jw_console_matches(w.provider, w.kind, w.state, w.remote_state, r.items_failed,
                             $5, $6, $7)
    ORDER BY w.created_at DESC, w.operation_id DESC
    LIMIT $9
),
window_end AS (
    SELECT w.operation_id, w.created_at
    FROM walked w
    WHERE (SELECT count(*) FROM walked) = $8
    ORDER BY w.created_at, w.operation_id
    LIMIT 1
)
SELECT v.operation_id, v.provider, v.kind, v.state, v.remote_state, v.outcome,
       v.requested_by, v.created_at, v.updated_at, v.message,
       e.operation_id AS window_end_id, e.created_at AS window_end_at
FROM (SELECT 1) one
LEFT JOIN (hits h JOIN operations_overview v ON v.operation_id = h.operation_id) ON true
LEFT JOIN window_end e ON true
ORDER BY h.created_at DESC, h.operation_id DESC;

-- name: console_providers_seen
-- The providers that have operations, for the filter's choices: a skip scan of
-- an index led by provider, one index probe per provider, where
-- SELECT DISTINCT would read every row.
WITH RECURSIVE seen AS (
    (SELECT provider FROM operations ORDER BY provider LIMIT 1)
    UNION ALL
    SELECT (SELECT o.provider FROM operations o WHERE o.provider > seen.provider
            ORDER BY o.provider LIMIT 1)
    FROM seen WHERE seen.provider IS NOT NULL
)
SELECT provider FROM seen WHERE provider IS NOT NULL;

-- name: console_operation
SELECT o.operation_id, o.provider, o.kind, o.state::text AS state,
       o.remote_state::text AS remote_state, o.remote_job_id, o.requested_by,
       o.client_reference, o.trace_id, o.created_at, o.updated_at, o.result_deadline,
       o.cancel_deadline, o.cancel_reason, o.create_mode, o.last_error,
       v.message, v.outcome, v.items_total, v.items_failed, v.items_succeeded,
       v.result_ref, v.result, v.done, v.final, o.history_seq
FROM operations o
JOIN operations_overview v ON v.operation_id = o.operation_id
WHERE o.operation_id = $1;

-- name: console_history_seq
-- How many transitions the operation has made: an action taken on a page shown
-- at another count was decided on a state that is no longer the operation's.
SELECT history_seq FROM operations WHERE operation_id = $1;

-- name: console_webhook_deliveries
-- The newest $2 deliveries of one operation, newest first.
SELECT webhook_event_id, event_id, received_at, signature_scheme, id_signed,
       remote_state::text AS remote_state, remote_state_raw, attached_at,
       duplicate_deliveries
FROM webhook_events WHERE operation_id = $1
ORDER BY webhook_event_id DESC
LIMIT $2;

-- name: console_result
SELECT result_id, fetched_at, valid, sha256, storage_ref, items_total, items_succeeded,
       items_failed, reason, size_bytes, content_type
FROM results WHERE operation_id = $1
ORDER BY result_id DESC;

-- name: console_receipt_status
-- Whether each evidence row of the operation has a leaf below the newest signed
-- checkpoint ($2 = its tree size): covered vs not yet covered, by kind. Failed
-- items are left out (a batch can have millions; `audit proof` covers them).
SELECT kind, count(*) AS rows, count(leaf_index) AS covered
FROM (
    SELECT e.kind,
           (SELECT l.leaf_index FROM log_leaves l
            WHERE l.kind = e.kind AND l.row_id = e.row_id AND l.leaf_index < $2
              AND NOT l.deleted
            ORDER BY l.leaf_index DESC LIMIT 1) AS leaf_index
    FROM jw_operation_evidence($1, false) e
) covered
GROUP BY kind
ORDER BY kind;

-- name: console_webhook_totals
-- Per provider, what the database holds about deliveries: stored (verified,
-- first copy) events, duplicate copies folded into them, and how many were
-- matched to an operation. Refusals: console_webhook_refusals.
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
ORDER BY verification_id DESC
LIMIT 1;
