-- Queries of shared/ledger/audit.py: reading the history chain back (read-only).

-- name: history_of
SELECT * FROM history WHERE operation_id = $1 ORDER BY seq;

-- name: history_all_ordered
SELECT * FROM history ORDER BY operation_id, seq;

-- name: chain_heads
SELECT operation_id, state, history_seq, history_head FROM operations
WHERE ($1::text IS NULL OR operation_id = $1);
