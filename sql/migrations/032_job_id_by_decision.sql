-- 032: an operator's session records a job id only with the decision that
-- adopts it; and every SECURITY DEFINER function searches pg_temp last.
--
-- jobwarden_operator may UPDATE operations (003), and until 031 any write of
-- remote_job_id from its session failed by accident: the trigger that
-- attaches stored webhook events ran with the session's privileges, which
-- include no write to webhook_events or observations. 031 made that trigger
-- SECURITY DEFINER so that `jobwarden resolve --job-id` (an operator adopting
-- a job found at the provider) works, and with it a bare UPDATE of
-- remote_job_id, with no decision, had the database attach events to the
-- operation as observations on the operator's behalf. Now such a write from
-- a session of the operator role (and not of the reconciler's) is refused
-- unless a decision of the same transaction, for this operation, adopts this
-- very job id (shared/ledger/decisions.py adopt_job writes it first).
CREATE FUNCTION jw_job_id_needs_a_decision() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM decisions d
        WHERE d.operation_id = NEW.operation_id
          AND d.xmin = pg_current_xact_id()::xid
          AND right(d.decision, length(NEW.remote_job_id) + 15)
              = ', adopting job ' || NEW.remote_job_id
    ) THEN
        RAISE EXCEPTION 'operation %: a job id is recorded by the reconciler, or by the '
            'operator decision that adopts it (jobwarden resolve --job-id)', NEW.operation_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER operations_job_id_by_decision BEFORE UPDATE OF remote_job_id ON operations
    FOR EACH ROW
    WHEN (NEW.remote_job_id IS DISTINCT FROM OLD.remote_job_id
          AND pg_has_role(current_user, 'jobwarden_operator', 'MEMBER')
          AND NOT pg_has_role(current_user, 'jobwarden_reconciler', 'MEMBER'))
    EXECUTE FUNCTION jw_job_id_needs_a_decision();

-- A SECURITY DEFINER function that does not name pg_temp searches it first
-- for tables: a session able to create temporary tables could shadow one the
-- function writes. PostgreSQL's advice (CREATE FUNCTION, "Writing SECURITY
-- DEFINER Functions Safely"): name it last. 010 and 021 did; these did not.
ALTER FUNCTION jw_attach_early_events() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION jw_purge_webhook_events(interval, integer)
    SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION jw_record_lost_read(text) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION jw_archive_evidence(bigint) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION jw_history_close_escalation() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION jw_schedule_follows() SET search_path = pg_catalog, public, pg_temp;
