-- 025: an operation's result is one of its own valid results, attached while
-- the reconciler still acts on it; the rest of its recorded intent is fixed.
--
-- The guard of migration 008 kept the result of a succeeded operation only:
-- a login holding the reconciler's role could point any other operation (a
-- failed one, one in the inbox) at another operation's result, or rewrite
-- result_ref and result_summary of any operation, a succeeded one included.
-- Agents read those columns (agent_operations, agent_failed_items), so one
-- agent could be shown another's items. Now:
--   * result_id, result_ref and result_summary change together, only in an
--     update that attaches a new result: a valid `results` row of the same
--     operation, whose storage_ref is the result_ref written with it
--     (ledger.attach_result, reconciler/steps/collect.py);
--   * only while the operation is in a state the reconciler acts on
--     (jw_state_set('scheduled')): a finished or escalated operation's result
--     is settled;
--   * kind, approval_ref and idempotency_mode join the immutable intent (set
--     when the operation is recorded, never written since; `audit verify`
--     already reported a change, now the write itself is refused).
-- Everything else is migration 008's function unchanged.

CREATE OR REPLACE FUNCTION jw_operations_before_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.state IS DISTINCT FROM OLD.state
        OR NEW.history_seq IS DISTINCT FROM OLD.history_seq
        OR NEW.history_head IS DISTINCT FROM OLD.history_head
        OR NEW.finished_at IS DISTINCT FROM OLD.finished_at)
       AND pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'jobwarden: state changes only by appending a transition to history'
            USING ERRCODE = 'JW002';
    END IF;
    IF NEW.operation_id <> OLD.operation_id OR NEW.request <> OLD.request
       OR NEW.request_fingerprint <> OLD.request_fingerprint
       OR NEW.idempotency_token <> OLD.idempotency_token OR NEW.requested_by <> OLD.requested_by
       OR NEW.provider <> OLD.provider OR NEW.client_reference <> OLD.client_reference
       OR NEW.created_at <> OLD.created_at OR NEW.trace_id <> OLD.trace_id
       OR NEW.kind IS DISTINCT FROM OLD.kind OR NEW.approval_ref IS DISTINCT FROM OLD.approval_ref
       OR NEW.idempotency_mode IS DISTINCT FROM OLD.idempotency_mode THEN
        RAISE EXCEPTION 'jobwarden: the recorded intent of % is immutable', OLD.operation_id
            USING ERRCODE = 'JW005';
    END IF;
    IF OLD.remote_job_id IS NOT NULL AND NEW.remote_job_id IS DISTINCT FROM OLD.remote_job_id THEN
        RAISE EXCEPTION 'jobwarden: remote job id of % is already recorded', OLD.operation_id
            USING ERRCODE = 'JW006';
    END IF;
    IF NEW.result_id IS DISTINCT FROM OLD.result_id
       OR NEW.result_ref IS DISTINCT FROM OLD.result_ref
       OR NEW.result_summary IS DISTINCT FROM OLD.result_summary THEN
        IF NOT (OLD.state = ANY (jw_state_set('scheduled'))) THEN
            RAISE EXCEPTION 'jobwarden: the result of % is settled (state %)',
                OLD.operation_id, OLD.state USING ERRCODE = 'JW005';
        END IF;
        IF NEW.result_id IS NOT DISTINCT FROM OLD.result_id
           OR NOT EXISTS (SELECT 1 FROM results r
                          WHERE r.result_id = NEW.result_id
                            AND r.operation_id = NEW.operation_id AND r.valid
                            AND r.storage_ref IS NOT DISTINCT FROM NEW.result_ref) THEN
            RAISE EXCEPTION 'jobwarden: % may only attach a new valid result of its own',
                OLD.operation_id USING ERRCODE = 'JW005';
        END IF;
    END IF;
    NEW.updated_at := jw_now();
    RETURN NEW;
END $$;
