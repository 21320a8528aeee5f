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
