-- Queries of the evidence archive (shared/ledger/archive.py writes, archive_audit.py reads).
-- Layout and rules: sql/migrations/012_evidence_archive.sql.

-- name: archive_cutoff
SELECT jw_now() - $1::interval AS cutoff, jw_now() AS now;

-- name: archive_candidates
-- Finished operations older than the cutoff with bulk evidence still in the
-- database (a late delivery after an earlier archive makes one eligible again).
SELECT o.operation_id FROM operations o
WHERE o.finished_at < $1
  AND (EXISTS (SELECT 1 FROM observations b WHERE b.operation_id = o.operation_id)
       OR EXISTS (SELECT 1 FROM webhook_events w WHERE w.operation_id = o.operation_id)
       OR EXISTS (SELECT 1 FROM result_item_failures f JOIN results r USING (result_id)
                  WHERE r.operation_id = o.operation_id)
       OR EXISTS (SELECT 1 FROM provider_calls c WHERE c.operation_id = o.operation_id
                  AND NOT EXISTS (SELECT 1 FROM results r WHERE r.call_id = c.call_id)))
ORDER BY o.finished_at, o.operation_id
LIMIT $2;

-- name: archive_rows_of_operation
-- One operation's archivable evidence with each row's newest leaf (at most $2
-- rows: the caller skips an operation with more), in manifest order (kind,
-- row id, bytewise). Its calls, but those that fetched a result (results.
-- call_id references them), its observations, deliveries and failed items;
-- its history, decisions and escalations stay (migration 012).
WITH evidence AS (
    SELECT 'call' AS kind, call_id::text AS row_id FROM provider_calls c
    WHERE operation_id = $1 AND NOT EXISTS (SELECT 1 FROM results r WHERE r.call_id = c.call_id)
    UNION ALL
    SELECT 'observation', observation_id::text FROM observations WHERE operation_id = $1
    UNION ALL
    SELECT 'webhook', webhook_event_id::text FROM webhook_events WHERE operation_id = $1
    UNION ALL
    SELECT 'failure', f.result_id || '/' || f.item_key
    FROM result_item_failures f JOIN results r ON r.result_id = f.result_id
    WHERE r.operation_id = $1
)
SELECT e.kind, e.row_id, l.leaf_index, l.leaf_hash,
       EXISTS (SELECT 1 FROM log_queue q WHERE q.kind = e.kind AND q.row_id = e.row_id)
           AS queued
FROM (SELECT * FROM evidence LIMIT $2) e
LEFT JOIN LATERAL (
    SELECT leaf_index, leaf_hash FROM log_leaves
    WHERE kind = e.kind AND row_id = e.row_id
    ORDER BY leaf_index DESC LIMIT 1
) l ON true
ORDER BY e.kind COLLATE "C", e.row_id COLLATE "C";

-- name: archive_insert
INSERT INTO log_archives (name, cutoff, checkpoint_size, operations, rows, manifest_sha256)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING archive_id;

-- name: archive_insert_rows
INSERT INTO log_archived (archive_id, operation_id, kind, row_id, leaf_index)
SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[]);

-- name: archive_delete
SELECT jw_archive_evidence($1);

-- name: archive_list
SELECT archive_id, name, cutoff, checkpoint_size, operations, rows, manifest_sha256, archived_at
FROM log_archives ORDER BY archive_id;

-- name: archive_manifest_rows
-- One archive's rows in manifest order, each beside the leaf it names and
-- whether its operation was finished before the archive's cutoff.
SELECT x.operation_id, x.kind, x.row_id, x.leaf_index, l.leaf_hash,
       coalesce(l.kind = x.kind AND l.row_id = x.row_id AND NOT l.deleted, false) AS leaf_matches,
       coalesce(o.finished_at < a.cutoff, false) AS eligible,
       x.leaf_index < a.checkpoint_size AS signed_before,
       -- a row may leave only after its archive's own record entered the log
       NOT EXISTS (SELECT 1 FROM log_leaves d
                   WHERE d.kind = x.kind AND d.row_id = x.row_id AND d.deleted
                     AND d.leaf_index < coalesce(r.leaf_index, -1)) AS deleted_after
FROM log_archived x
JOIN log_archives a ON a.archive_id = x.archive_id
LEFT JOIN log_leaves l ON l.leaf_index = x.leaf_index
LEFT JOIN operations o ON o.operation_id = x.operation_id
LEFT JOIN LATERAL (
    SELECT leaf_index FROM log_leaves
    WHERE kind = 'archive' AND row_id = a.archive_id::text AND NOT deleted
    ORDER BY leaf_index LIMIT 1
) r ON true
WHERE x.archive_id = $1
ORDER BY x.operation_id COLLATE "C", x.kind COLLATE "C", x.row_id COLLATE "C";

-- name: archive_of_operation
-- The archives holding evidence of one operation (newest first).
SELECT a.name, a.archived_at, count(*) AS rows
FROM log_archived x JOIN log_archives a ON a.archive_id = x.archive_id
WHERE x.operation_id = $1
GROUP BY a.archive_id, a.name, a.archived_at
ORDER BY a.archive_id DESC;

-- name: archive_names_recorded
-- Which of these archive directory names the log records (an archive set
-- aside as unrecorded whose commit took effect after all is given its name back).
SELECT name FROM log_archives WHERE name = ANY ($1::text[]);
