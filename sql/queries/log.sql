-- Queries of the evidence log (shared/ledger/log.py writes, shared/ledger/audit.py reads).
-- Layout and order: sql/migrations/010_transparency_log.sql.

-- name: log_try_lock
-- One sequencer at a time, for the length of its transaction.
--
-- The batch's statements are planned for the ids at hand (custom plans, for
-- this transaction only). A batch looks up to 2000 rows of a kind with
-- `= ANY($1)`; a generic plan cached while the table was small is a
-- sequential scan that tests every row against the whole array, and it stays
-- cached until the table is analyzed again (never, with autovacuum off): each
-- batch then cost rows x ids (290 ms a batch at 57,000 observations, measured
-- once, not kept). Planned
-- with the array in hand, the scan hashes it, or probes the primary key; and
-- since the rows a batch reads were written moments ago (in shared buffers),
-- a probe is priced as one of cached data (random_page_cost 1.1, the value
-- usual for SSDs), so the primary key is probed long before a scan of the
-- table would pay. Planning costs a fraction of a millisecond per statement
-- (EXPLAIN: 0.3 ms with 2,000 ids, one-off).
SELECT pg_try_advisory_xact_lock(7390142061120410001),
       set_config('plan_cache_mode', 'force_custom_plan', true),
       set_config('random_page_cost', '1.1', true);

-- name: log_take_queue
-- A batch of changed rows, oldest first; taken out of the queue in the
-- transaction that appends their leaves, so a crash loses nothing. Every
-- entry of a row taken goes with it (log_queue_by_row): its version is read
-- after this, so it covers them, and an entry left for the next batch would
-- log the same version twice (a reviewer's run: a call's insert and its
-- completion, split by a batch boundary, made two identical leaves).
WITH taken AS (
    SELECT DISTINCT kind, row_id
    FROM (SELECT kind, row_id FROM log_queue ORDER BY queue_id LIMIT $1) AS oldest
)
DELETE FROM log_queue q USING taken t
WHERE q.kind = t.kind AND q.row_id = t.row_id
RETURNING q.queue_id, q.kind, q.row_id;

-- name: log_size
SELECT coalesce(max(leaf_index) + 1, 0) FROM log_leaves;

-- name: log_read_hashes
SELECT hash_index, hash FROM log_hashes WHERE hash_index = ANY($1::bigint[]);

-- name: log_append_leaves
INSERT INTO log_leaves (leaf_index, kind, row_id, leaf_hash, deleted, row_sha256,
                        fixed_sha256, settled_sha256)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::boolean[],
                     $6::bytea[], $7::bytea[], $8::bytea[]);

-- name: log_append_hashes
INSERT INTO log_hashes (hash_index, hash)
SELECT * FROM unnest($1::bigint[], $2::bytea[]);

-- name: log_record_checkpoint
-- The row for this size: the one inserted, or the one already there (the
-- caller refuses a different tree of the same size).
WITH inserted AS (
    INSERT INTO log_checkpoints (tree_size, root_hash, note) VALUES ($1, $2, $3)
    ON CONFLICT (tree_size) DO NOTHING
    RETURNING root_hash
)
SELECT root_hash FROM inserted
UNION ALL
SELECT root_hash FROM log_checkpoints WHERE tree_size = $1
LIMIT 1;

-- name: log_newest_checkpoints
-- The newest checkpoint rows: the signer's own among them must be extended by
-- what it signs next (shared/ledger/log.py checks each note's signature).
SELECT tree_size, note FROM log_checkpoints ORDER BY tree_size DESC LIMIT $1;

-- name: log_leaf_hashes_from
-- Every leaf from index $1 on, in log order, with what it records: streamed
-- by the verifier (from 0; then from where its first pass stopped).
SELECT leaf_index, kind, row_id, deleted, row_sha256, fixed_sha256, settled_sha256, leaf_hash
FROM log_leaves WHERE leaf_index >= $1 ORDER BY leaf_index;

-- name: log_pending
SELECT count(*) AS rows, min(queued_at) AS oldest,
       coalesce(extract(epoch FROM jw_now() - min(queued_at)), 0)::float8 AS age
FROM log_queue;

-- name: log_rows_operation
SELECT * FROM operations WHERE operation_id = ANY($1::text[]);

-- name: log_rows_history
SELECT * FROM history WHERE history_id = ANY($1::bigint[]);

-- name: log_rows_call
SELECT * FROM provider_calls WHERE call_id = ANY($1::bigint[]);

-- name: log_rows_observation
SELECT * FROM observations WHERE observation_id = ANY($1::bigint[]);

-- name: log_rows_webhook
SELECT * FROM webhook_events WHERE webhook_event_id = ANY($1::bigint[]);

-- name: log_rows_result
SELECT * FROM results WHERE result_id = ANY($1::bigint[]);

-- name: log_rows_decision
SELECT * FROM decisions WHERE decision_id = ANY($1::bigint[]);

-- name: log_rows_escalation
SELECT * FROM escalations WHERE escalation_id = ANY($1::bigint[]);

-- name: log_rows_failure
SELECT f.* FROM result_item_failures f
JOIN unnest($1::bigint[], $2::text[]) AS k (result_id, item_key)
  ON f.result_id = k.result_id AND f.item_key = k.item_key;

-- name: log_rows_archive
SELECT * FROM log_archives WHERE archive_id = ANY($1::bigint[]);

-- name: log_check_operation
-- Each operations row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.operation_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.operation_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'operation'
               AND q.row_id = coalesce(t.operation_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'operation'
               AND a.row_id = coalesce(t.operation_id::text, l.row_id)) AS log_archived,
       t.*
FROM operations t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'operation' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.operation_id::text;

-- name: log_check_history
-- Each history row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.history_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.history_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'history'
               AND q.row_id = coalesce(t.history_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'history'
               AND a.row_id = coalesce(t.history_id::text, l.row_id)) AS log_archived,
       t.*
FROM history t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'history' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.history_id::text;

-- name: log_check_call
-- Each provider_calls row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.call_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.call_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'call'
               AND q.row_id = coalesce(t.call_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'call'
               AND a.row_id = coalesce(t.call_id::text, l.row_id)) AS log_archived,
       t.*
FROM provider_calls t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'call' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.call_id::text;

-- name: log_check_observation
-- Each observations row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.observation_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.observation_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'observation'
               AND q.row_id = coalesce(t.observation_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'observation'
               AND a.row_id = coalesce(t.observation_id::text, l.row_id)) AS log_archived,
       t.*
FROM observations t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'observation' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.observation_id::text;

-- name: log_check_webhook
-- Each webhook_events row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.webhook_event_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.webhook_event_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'webhook'
               AND q.row_id = coalesce(t.webhook_event_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'webhook'
               AND a.row_id = coalesce(t.webhook_event_id::text, l.row_id)) AS log_archived,
       t.*
FROM webhook_events t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'webhook' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.webhook_event_id::text;

-- name: log_check_result
-- Each results row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.result_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.result_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'result'
               AND q.row_id = coalesce(t.result_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'result'
               AND a.row_id = coalesce(t.result_id::text, l.row_id)) AS log_archived,
       t.*
FROM results t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'result' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.result_id::text;

-- name: log_check_decision
-- Each decisions row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.decision_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.decision_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'decision'
               AND q.row_id = coalesce(t.decision_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'decision'
               AND a.row_id = coalesce(t.decision_id::text, l.row_id)) AS log_archived,
       t.*
FROM decisions t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'decision' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.decision_id::text;

-- name: log_check_escalation
-- Each escalations row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.escalation_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.escalation_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'escalation'
               AND q.row_id = coalesce(t.escalation_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'escalation'
               AND a.row_id = coalesce(t.escalation_id::text, l.row_id)) AS log_archived,
       t.*
FROM escalations t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'escalation' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.escalation_id::text;

-- name: log_check_archive
-- Each log_archives row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.archive_id::text, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.archive_id::text) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'archive'
               AND q.row_id = coalesce(t.archive_id::text, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'archive'
               AND a.row_id = coalesce(t.archive_id::text, l.row_id)) AS log_archived,
       t.*
FROM log_archives t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'archive' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.archive_id::text;

-- name: log_check_failure
-- Each result_item_failures row beside its newest leaf, and each newest leaf whose row is
-- gone; `queued` when a change is still waiting for the sequencer.
SELECT l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       coalesce(t.result_id || '/' || t.item_key, l.row_id) AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted, (t.result_id || '/' || t.item_key) IS NOT NULL AS log_row_exists,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = 'failure'
               AND q.row_id = coalesce(t.result_id || '/' || t.item_key, l.row_id)) AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = 'failure'
               AND a.row_id = coalesce(t.result_id || '/' || t.item_key, l.row_id)) AS log_archived,
       t.*
FROM result_item_failures t
FULL JOIN (
    SELECT DISTINCT ON (row_id) row_id, leaf_hash, deleted, row_sha256, fixed_sha256,
           settled_sha256 FROM log_leaves
    WHERE kind = 'failure' ORDER BY row_id, leaf_index DESC
) l ON l.row_id = t.result_id || '/' || t.item_key;

-- name: log_versions
-- Every leaf of a row logged more than once or deleted, in order per row:
-- what the version rules of shared/ledger/log_audit.py are checked on.
WITH multi AS (
    SELECT kind, row_id FROM log_leaves GROUP BY kind, row_id
    HAVING count(*) > 1 OR bool_or(deleted)
)
SELECT l.kind, l.row_id, l.leaf_index, l.deleted, l.fixed_sha256, l.settled_sha256,
       a.leaf_index AS archived_leaf
FROM log_leaves l JOIN multi m ON m.kind = l.kind AND m.row_id = l.row_id
LEFT JOIN log_archived a ON a.kind = l.kind AND a.row_id = l.row_id
ORDER BY l.kind, l.row_id, l.leaf_index;

-- name: log_logged_since
-- Which of the rows named by ($2 kind, $3 row id) have a leaf at index $1 or
-- beyond: logged by the sequencer since a check saw the log at that size.
SELECT DISTINCT l.kind, l.row_id
FROM unnest($2::text[], $3::text[]) AS k (kind, row_id)
JOIN log_leaves l ON l.kind = k.kind AND l.row_id = k.row_id AND l.leaf_index >= $1;

-- name: log_newest_of
-- The rows named by ($1 kind, $2 row id) beside their newest leaf, shaped as
-- the log_check_* queries shape them (the row's own columns aside): the
-- verifier judges again the rows the sequencer logged while it waited.
SELECT k.kind AS log_kind, k.row_id AS log_row_id, l.leaf_hash AS log_leaf_hash,
       l.deleted AS log_deleted,
       l.row_sha256 AS log_row_sha256, l.fixed_sha256 AS log_fixed_sha256,
       l.settled_sha256 AS log_settled_sha256,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = k.kind AND q.row_id = k.row_id)
           AS log_queued,
       EXISTS (SELECT 1 FROM log_archived a WHERE a.kind = k.kind AND a.row_id = k.row_id)
           AS log_archived
FROM unnest($1::text[], $2::text[]) AS k (kind, row_id)
LEFT JOIN LATERAL (
    SELECT leaf_hash, deleted, row_sha256, fixed_sha256, settled_sha256 FROM log_leaves
    WHERE kind = k.kind AND row_id = k.row_id ORDER BY leaf_index DESC LIMIT 1
) l ON true;

-- name: log_versions_of
-- Every leaf of the rows named by ($1 kind, $2 row id), in order per row: the
-- version rules of shared/ledger/log_audit.py, for rows logged during a check.
SELECT l.kind, l.row_id, l.leaf_index, l.deleted, l.fixed_sha256, l.settled_sha256,
       a.leaf_index AS archived_leaf
FROM unnest($1::text[], $2::text[]) AS k (kind, row_id)
JOIN log_leaves l ON l.kind = k.kind AND l.row_id = k.row_id
LEFT JOIN log_archived a ON a.kind = l.kind AND a.row_id = l.row_id
ORDER BY l.kind, l.row_id, l.leaf_index;

-- name: log_leaves_of_operation
-- The newest leaf below a tree size of every evidence row of one operation
-- (NULL leaf_index: none yet), in log order: what a receipt proves.
SELECT e.kind, e.row_id, l.leaf_index, l.leaf_hash, l.row_sha256, l.fixed_sha256,
       l.settled_sha256
FROM jw_operation_evidence($1, true) e
LEFT JOIN LATERAL (
    SELECT leaf_index, leaf_hash, row_sha256, fixed_sha256, settled_sha256 FROM log_leaves
    WHERE kind = e.kind AND row_id = e.row_id AND leaf_index < $2 AND NOT deleted
    ORDER BY leaf_index DESC LIMIT 1
) l ON true
ORDER BY l.leaf_index NULLS LAST, e.kind, e.row_id;

-- name: log_receipt_checkpoints
-- The newest checkpoint rows ($2 at most) that claim no more leaves than the
-- log's $1: what a receipt may be built on (shared/ledger/receipts.py checks
-- each). A row beyond the log's size was not signed over this log; the
-- primary key's range skips such rows however many there are.
SELECT tree_size, root_hash, note, signed_at FROM log_checkpoints
WHERE tree_size <= $1
ORDER BY tree_size DESC LIMIT $2;

-- name: log_checkpoints_beyond
-- How many checkpoint rows claim more leaves than the log's $1, counted up to
-- $2 only: a receipt reports them, and a table of forged rows must not make
-- every receipt count all of them.
SELECT count(*) FROM (
    SELECT 1 FROM log_checkpoints WHERE tree_size > $1 LIMIT $2
) beyond;
