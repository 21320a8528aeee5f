-- 040: the deadlines an operation was submitted with are logged evidence.
--
-- The operation's leaf covers its intent as submitted (leaf encoding v1), not
-- the two deadlines the submission set, and `audit verify` could not judge
-- them: a superuser who moved a result deadline changed when the reconciler
-- gives up on a job, and verify passed (README, *The evidence log*). The
-- first history row, which the log covers, now names both, as inserted:
-- 'submitted; create deadline <UTC>; result deadline <UTC>' (microseconds,
-- the text timestamptz reads back exactly). An operator's decision that
-- extends the result deadline names the deadline it set in its own text
-- (shared/ledger/decisions.py), so the deadline on the row is always the one
-- the newest of them, or the submission, logged (sql/queries/audit.sql,
-- audit_deadlines). Operations submitted before this migration keep their
-- plain 'submitted' row and are judged only from a logged extension on.

CREATE OR REPLACE FUNCTION jw_operations_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history (operation_id, actor, from_state, to_state, cause, prev_hash, row_hash, seq, at)
    VALUES (NEW.operation_id, NEW.requested_by, NULL, 'create_pending',
            'submitted; create deadline '
                || to_char(NEW.create_deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
                || '; result deadline '
                || to_char(NEW.result_deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            '', '', 1, now());
    PERFORM pg_notify('jobwarden_wakeup', NEW.operation_id);
    RETURN NULL;
END $$;
