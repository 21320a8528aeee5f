-- Queries of the agent-facing layer: the HTTP API (receiver/api), API tokens,
-- and the operator commands' reads (shared/cli/operator.py). Agents' reads go through
-- the agent_* views (sql/migrations/006_agents.sql), never the tables.

-- name: api_operation
-- One operation as agents see it; $2 = the caller's requested_by, or NULL for
-- an operator token (sees everything).
SELECT * FROM operations_overview
WHERE operation_id = $1 AND ($2::text IS NULL OR requested_by = $2);

-- name: api_list_operations
-- Newest first; operation ids are ULIDs, so the id is also the keyset cursor.
SELECT * FROM operations_overview
WHERE ($1::text IS NULL OR requested_by = $1)
  AND ($2::text[] IS NULL OR state = ANY ($2))
  AND ($3::text IS NULL OR provider = $3)
  AND ($4::boolean IS NULL OR done = $4)
  AND ($5::boolean IS NULL OR final = $5)
  AND ($6::text IS NULL OR operation_id < $6)
ORDER BY operation_id DESC
LIMIT $7;

-- name: api_history_after
-- Transitions of one operation after a given seq, in order (SSE).
SELECT seq, at, actor, from_state::text, to_state::text, cause, evidence_kind, remote_job_id
FROM history
WHERE operation_id = $1 AND seq > $2::bigint
ORDER BY seq;

-- name: api_latest_state
SELECT to_state::text FROM history
WHERE operation_id = $1
ORDER BY seq DESC
LIMIT 1;

-- name: api_failed_items
-- One page of failed items, keyset-paginated on item_key.
SELECT item_key, code, message FROM failed_items_overview
WHERE operation_id = $1 AND ($2::text IS NULL OR item_key > $2)
ORDER BY item_key
LIMIT $3;

-- name: api_failures_archive
-- The archive an operation's failed items were moved to, if they were.
SELECT a.name FROM log_archived x JOIN log_archives a ON a.archive_id = x.archive_id
WHERE x.operation_id = $1 AND x.kind = 'failure'
ORDER BY a.archive_id DESC LIMIT 1;

-- name: tokens_list
SELECT token_id, caller, scope, created_at, created_by, last_used_at, revoked_at
FROM api_tokens
ORDER BY created_at, token_id;

-- name: operator_list
SELECT * FROM operations_overview
WHERE ($1::text[] IS NULL OR state = ANY ($1))
  AND ($2::text IS NULL OR provider = $2)
  AND ($3::double precision IS NULL
       OR created_at <= jw_now() - make_interval(secs => $3))
  AND ($4::double precision IS NULL
       OR created_at >= jw_now() - make_interval(secs => $4))
  AND ($5::boolean IS NULL OR done = $5)
ORDER BY created_at DESC, operation_id DESC
LIMIT $6;

-- name: operator_timeline
-- Everything recorded about one operation, merged in time order: transitions,
-- provider calls (with trace and provider request ids), observations (polls
-- and webhooks), decisions and escalations. $2: only the newest this many
-- entries (NULL: all; the console bounds its page, `jobwarden show` does not).
SELECT at, kind, ref, details FROM (
SELECT at, kind, ref, details, tiebreak FROM (
    SELECT h.at, 'transition' AS kind, h.seq::bigint AS ref,
           jsonb_build_object('from', h.from_state, 'to', h.to_state, 'actor', h.actor,
                              'cause', h.cause, 'evidence_kind', h.evidence_kind,
                              'evidence_id', h.evidence_id) AS details,
           0 AS tiebreak
    FROM history h WHERE h.operation_id = $1
    UNION ALL
    SELECT c.started_at, 'call', c.call_id,
           jsonb_build_object('call_kind', c.call_kind, 'attempt', c.attempt,
                              'method', c.method, 'url', c.url,
                              'status_code', c.status_code, 'duration_ms', c.duration_ms,
                              'error_category', c.error_category,
                              'trace_id', c.trace_id, 'traceparent', c.traceparent,
                              'provider_request_id', c.provider_request_id,
                              'idempotency_token_sent', c.idempotency_token IS NOT NULL,
                              'remote_job_id', c.remote_job_id, 'worker', c.worker,
                              'finished', c.finished_at IS NOT NULL,
                              'not_before', c.not_before, 'anomalies', c.anomalies),
           1
    FROM provider_calls c WHERE c.operation_id = $1
    UNION ALL
    SELECT o.fetched_at, 'observation', o.observation_id,
           jsonb_build_object('source', o.source, 'remote_state', o.remote_state,
                              'remote_state_raw', o.remote_state_raw, 'call_id', o.call_id,
                              'webhook_event_id', w.event_id,
                              'progress_completed', o.progress_completed,
                              'progress_total', o.progress_total, 'error', o.error,
                              'counts', o.counts, 'anomalies', o.anomalies),
           2
    FROM observations o
    LEFT JOIN webhook_events w ON w.webhook_event_id = o.webhook_event_id
    WHERE o.operation_id = $1
    UNION ALL
    SELECT d.decided_at, 'decision', d.decision_id,
           jsonb_build_object('actor', d.actor, 'decision', d.decision, 'reason', d.reason),
           3
    FROM decisions d WHERE d.operation_id = $1
    UNION ALL
    SELECT e.opened_at, 'escalation', e.escalation_id,
           jsonb_build_object('state', e.state, 'reason', e.reason, 'details', e.details,
                              'resolved_at', e.resolved_at, 'decision_id', e.decision_id),
           4
    FROM escalations e WHERE e.operation_id = $1
) timeline
ORDER BY at DESC, tiebreak DESC, ref DESC
LIMIT $2
) newest
ORDER BY at, tiebreak, ref;

-- name: operator_inbox
-- Operations waiting for a human, oldest first, with what is known about them.
SELECT a.operation_id, a.provider, a.kind, a.state, a.remote_state, a.remote_job_id,
       a.requested_by, a.client_reference, a.message, a.error, a.created_at, a.updated_at,
       o.cancel_reason, o.cancel_requested_by, o.result_deadline, o.cancel_deadline,
       o.last_error, e.escalation_id, e.opened_at, e.reason AS escalation_reason,
       e.details AS escalation_details,
       (SELECT max(h.at) FROM history h WHERE h.operation_id = o.operation_id) AS since,
       o.history_seq,
       -- for an operation with no job on record (a create whose answer was
       -- lost), the job id the newest signed webhook attached to it names:
       -- what an operator checks at the provider, then adopts
       (SELECT w.remote_job_id FROM webhook_events w
        WHERE o.remote_job_id IS NULL AND w.operation_id = o.operation_id
          AND w.remote_job_id IS NOT NULL
        ORDER BY w.webhook_event_id DESC LIMIT 1) AS webhook_job_id
FROM operations_overview a
JOIN operations o ON o.operation_id = a.operation_id
LEFT JOIN escalations e ON e.operation_id = o.operation_id AND e.resolved_at IS NULL
WHERE o.state = ANY (jw_state_set('inbox'))
ORDER BY coalesce(e.opened_at, o.updated_at), o.operation_id;

-- name: api_result_file
-- The file an operation's result (or its kept partial output) is stored as:
-- its digest (the file's name under results_dir), size and media type. No
-- row: nothing stored as a file (no result yet, or a result kept inline only).
SELECT r.sha256, r.size_bytes, r.content_type
FROM operations o JOIN results r ON r.result_id = o.result_id
WHERE o.operation_id = $1 AND r.valid AND r.storage_ref IS NOT NULL;
