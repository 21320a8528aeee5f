-- 019: the console's operations list stays fast at a million rows (issue 15).
--
-- The list is newest first by creation time, paged by a keyset on
-- (created_at, operation_id). Ordering by the id alone (ULIDs: creation
-- order) made an age filter a walk: "older than 7 days" read every newer
-- operation first, and "newer than 1 hour" with a rare provider read the
-- whole table when it had no match. With the time in the index, an age filter
-- is a range of it.
--
-- A state, and an outcome (which is a set of states: sql/queries/console.sql),
-- walks operations_by_state once per state, each stopping at a page.
--
-- The cost: one more index entry when an operation is created and on each
-- update that is not HOT (a state change already is not: `state` is indexed);
-- created_at itself never changes.

DROP INDEX operations_by_state;
CREATE INDEX operations_by_state ON operations (state, created_at, operation_id);
CREATE INDEX operations_by_creation ON operations (created_at, operation_id);
