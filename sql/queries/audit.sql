-- Queries of shared/ledger/audit.py: reading the history chain back (read-only).

-- name: history_of
SELECT * FROM history WHERE operation_id = $1 ORDER BY seq;

-- name: history_all_ordered
-- Byte order (COLLATE "C"), the order Python compares strings in, so the
-- verifier can merge this stream with chain_heads_ordered one operation at a time.
SELECT * FROM history ORDER BY operation_id COLLATE "C", seq;

-- name: chain_heads
SELECT operation_id, state, history_seq, history_head FROM operations
WHERE ($1::text IS NULL OR operation_id = $1);

-- name: chain_heads_ordered
SELECT operation_id, state, history_seq, history_head FROM operations
ORDER BY operation_id COLLATE "C";

-- name: audit_verification_record
-- One finished `audit verify` (migration 018), as its runner reports it.
INSERT INTO audit_verifications (ok, tree_size, root_hash, checkpoint_origin, checkpoint_size,
                                 chains_checked, chain_breaks, rows_checked, problems, pending,
                                 seconds)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING verification_id, verified_at, verified_by;
