-- 016: the claim's sweep of stale wakes locks them with FOR UPDATE SKIP LOCKED
-- (so concurrent claims never wait on, or deadlock over, each other's deletes),
-- and PostgreSQL asks UPDATE on at least one column of a table locked that way.
-- The reconciler never updates a wake; this column grant only lets it lock one.
GRANT UPDATE (requested_at) ON operation_wakes TO jobwarden_reconciler;
