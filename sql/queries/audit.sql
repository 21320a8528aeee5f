-- Queries of shared/ledger/audit.py: reading the history chain back (read-only).

-- name: history_of
SELECT * FROM history WHERE operation_id = $1 ORDER BY seq;

-- name: history_all_ordered
-- Byte order (COLLATE "C"), the order Python compares strings in, so the
-- verifier can merge this stream with chain_heads_ordered one operation at a time.
SELECT * FROM history ORDER BY operation_id COLLATE "C", seq;

-- name: chain_heads
-- Each operation's chain head ($1, or every operation when NULL, in the order
-- history_all_ordered streams), with its result: `result_owned` is false when
-- result_id/result_ref name anything but a valid result of its own (migration
-- 025 refuses that write; only an owner bypassing the triggers can make it).
SELECT o.operation_id, o.state, o.history_seq, o.history_head, o.result_id,
       (o.result_id IS NULL AND o.result_ref IS NULL) OR EXISTS (
           SELECT 1 FROM results r
           WHERE r.result_id = o.result_id AND r.operation_id = o.operation_id AND r.valid
             AND r.storage_ref IS NOT DISTINCT FROM o.result_ref) AS result_owned
FROM operations o
WHERE ($1::text IS NULL OR o.operation_id = $1)
ORDER BY o.operation_id COLLATE "C";

-- name: audit_verification_record
-- One finished `audit verify` (migration 018), as its runner reports it.
INSERT INTO audit_verifications (ok, tree_size, root_hash, checkpoint_origin, checkpoint_size,
                                 chains_checked, chain_breaks, rows_checked, problems, pending,
                                 seconds)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING verification_id, verified_at, verified_by;

-- name: audit_pin_search_path
-- `audit verify` reads the schema the daemons write, whatever search_path its
-- login was given: a per-role setting (ALTER ROLE ... SET search_path) naming
-- a schema of pristine copies first would otherwise show the verifier those.
SELECT set_config('search_path', 'public', false);
