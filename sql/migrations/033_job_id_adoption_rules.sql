-- 033: the rules of 032's guard, made those of an adoption.
--
-- 032 let an operator's session record a job id only with a decision of the
-- same transaction naming it; but the operator role writes decisions itself,
-- so a bare UPDATE behind a decision written for the purpose skipped what
-- `jobwarden resolve --job-id` checks: an operation stopped for a human, no
-- other operation holding the job. And a decision written inside a savepoint
-- has the subtransaction's xmin, so 032 refused an adoption wrapped in one.
-- Now, for such a session: the operation must be in needs_attention (adopt_job
-- stops a create_unknown there first), the session's latest decision must be
-- for it and name this job id, and no other operation of the provider may
-- hold the job, checked under the lock the reconciler takes to record one
-- (shared/ledger/operations.py holder_of_job), so neither can race the other.
CREATE OR REPLACE FUNCTION jw_job_id_needs_a_decision() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    latest bigint;
    holder text;
BEGIN
    IF OLD.state <> 'needs_attention' THEN
        RAISE EXCEPTION 'operation %: a job id is adopted only by an operation stopped in '
            'needs_attention with none on record', NEW.operation_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    BEGIN
        latest := currval(pg_get_serial_sequence('decisions', 'decision_id'));
    EXCEPTION WHEN object_not_in_prerequisite_state THEN
        latest := NULL;  -- no decision written in this session
    END;
    IF latest IS NULL OR NOT EXISTS (
        SELECT 1 FROM decisions d
        WHERE d.decision_id = latest AND d.operation_id = NEW.operation_id
          AND right(d.decision, length(NEW.remote_job_id) + 15)
              = ', adopting job ' || NEW.remote_job_id
    ) THEN
        RAISE EXCEPTION 'operation %: a job id is recorded by the reconciler, or by the '
            'operator decision that adopts it (jobwarden resolve --job-id)', NEW.operation_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(NEW.provider || chr(31) || NEW.remote_job_id, 0));
    SELECT o.operation_id INTO holder FROM operations o
    WHERE o.provider = NEW.provider AND o.remote_job_id = NEW.remote_job_id
      AND o.operation_id <> NEW.operation_id
    LIMIT 1;
    IF holder IS NOT NULL THEN
        RAISE EXCEPTION 'operation %: job % is already operation %''s', NEW.operation_id,
            NEW.remote_job_id, holder USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
