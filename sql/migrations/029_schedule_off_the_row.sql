-- 029: the schedule's index leaves the operation row, so claims and status
-- reads rewrite that row in place.
--
-- Every claim moves next_poll_at (to the lease's end) and every recorded
-- read moves it again (to the next appointment). next_poll_at was indexed on
-- the row (operations_due), and updated_at (set by every update) was the key
-- of operations_escalated, so neither update could be HOT: each claimed row
-- and each read wrote a new entry into all ten indexes of operations. At a
-- million operations the indexes on random keys (the idempotency token, the
-- caller's reference) no longer stay in memory, and a claim of 200 rows took
-- 1.2-1.5x its time at 10,000 (bench.million, bench.claim).
--
-- Now the due index is on a narrow table of its own, kept by a trigger from
-- whatever writes next_poll_at (the column stays on the row: every reader,
-- the agents' view included, reads it there as before), and the inbox index
-- is keyed by the operation id. No index of operations has a column that a
-- claim or a read changes, and pages keep room for the new version: those
-- updates are HOT (no index entry written), and the schedule's own update
-- touches two small indexes.
--
-- Working state, not evidence: the schedule is derived from the row, and
-- nothing is logged from it.

-- First the lock the index changes below take anyway: taken last, after the
-- backfill's weaker locks, it deadlocked with a transition of a daemon still
-- running (a second reader's experiment); taken first, daemons wait for it.
LOCK TABLE operations IN ACCESS EXCLUSIVE MODE;

CREATE TABLE operation_schedule (
    operation_id text PRIMARY KEY,
    next_poll_at timestamptz NOT NULL
);
COMMENT ON TABLE operation_schedule IS
    'operations.next_poll_at where it is set, indexed for the claim (migration 029); '
    'kept by the trigger jw_schedule_follows, never written directly.';
CREATE INDEX operation_schedule_due ON operation_schedule (next_poll_at);

INSERT INTO operation_schedule (operation_id, next_poll_at)
SELECT operation_id, next_poll_at FROM operations WHERE next_poll_at IS NOT NULL;
-- After the backfill: one check of all rows instead of one per row.
ALTER TABLE operation_schedule ADD FOREIGN KEY (operation_id)
    REFERENCES operations (operation_id) ON DELETE CASCADE;

-- SECURITY DEFINER: every role that may move next_poll_at (the reconciler,
-- the receiver bringing a look nearer, an operator) keeps the schedule
-- without a grant to write it directly.
CREATE FUNCTION jw_schedule_follows() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF NEW.next_poll_at IS NULL THEN
        DELETE FROM operation_schedule WHERE operation_id = NEW.operation_id;
        RETURN NULL;
    END IF;
    -- An existing row is the common case (a claim, a read). A missing one is
    -- inserted; the operation's row lock, held by this transaction, keeps any
    -- other writer of this operation out until it commits.
    UPDATE operation_schedule SET next_poll_at = NEW.next_poll_at
    WHERE operation_id = NEW.operation_id;
    IF NOT FOUND THEN
        INSERT INTO operation_schedule (operation_id, next_poll_at)
        VALUES (NEW.operation_id, NEW.next_poll_at)
        ON CONFLICT (operation_id) DO UPDATE SET next_poll_at = EXCLUDED.next_poll_at;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER operations_schedule_insert AFTER INSERT ON operations
    FOR EACH ROW WHEN (NEW.next_poll_at IS NOT NULL)
    EXECUTE FUNCTION jw_schedule_follows();
-- Not `UPDATE OF next_poll_at`: that fires only when the statement's SET
-- names the column, and would miss a BEFORE trigger that changed it.
CREATE TRIGGER operations_schedule_update AFTER UPDATE ON operations
    FOR EACH ROW WHEN (NEW.next_poll_at IS DISTINCT FROM OLD.next_poll_at)
    EXECUTE FUNCTION jw_schedule_follows();
-- Derived data: kept even by a session that turns ordinary triggers off
-- (session_replication_role = replica, as bulk loads and tests do).
ALTER TABLE operations ENABLE ALWAYS TRIGGER operations_schedule_insert;
ALTER TABLE operations ENABLE ALWAYS TRIGGER operations_schedule_update;

-- The claim reads the schedule; nobody writes it but the trigger.
GRANT SELECT ON operation_schedule TO jobwarden_reconciler, jobwarden_operator;

DROP INDEX operations_due;

-- The inbox's rows by a key no update changes (the state, its predicate,
-- changes only with a transition, which writes index entries anyway).
-- The name stays: 008's note on REINDEX after a change of jw_state_set holds.
DROP INDEX operations_escalated;
CREATE INDEX operations_escalated ON operations (operation_id)
    WHERE state = ANY (jw_state_set('inbox'));

-- Room on each page for the updated version of its rows (HOT needs the new
-- version on the same page). Pages written from now on; rows already stored
-- move to such pages with their next update.
ALTER TABLE operations SET (fillfactor = 70);
