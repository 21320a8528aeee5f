-- 041: the status URL a job is read at is logged evidence.
--
-- Every status read (and a cancel sent to the status URL) goes to the row's
-- `status_url`, which the create's (or a lookup's) answer named; the log did
-- not cover it, and `audit verify` could not judge it: a superuser who pointed
-- it at a server of their own had every later read, and the result it names,
-- come from there, and verify passed (README, *The evidence log*). The first
-- history row to carry the job id (the move the answer that named the job
-- decided, or the operator's adoption) now ends with the status URL it will
-- be read at, as a digest: '; status URL sha256:<hex of the URL's UTF-8>', or
-- '; status URL none' when the job is read at a path built from its id (a
-- digest, not the URL: a presigned URL's query must not reach agents, who
-- read history). The URL is set with the job id and never after
-- (operations_status_url_fixed refuses a change once a job id is on record),
-- so the row's URL is always the one that row logged
-- (sql/queries/audit.sql, audit_status_urls). Operations whose job was first
-- carried before this migration log none and are not judged.

-- The text the history logs for a status URL.
CREATE FUNCTION jw_status_url_logged(p_url text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
    SELECT CASE WHEN p_url IS NULL THEN 'none'
                ELSE 'sha256:' || encode(sha256(convert_to(p_url, 'UTF8')), 'hex') END
$$;

-- Whether no history row before seq p_previous + 1 carries a job id (only the
-- newest can matter: a recorded job id is never cleared). SECURITY DEFINER
-- because the receiver's transitions (an agent's cancel) run the trigger too,
-- and it may not read history; it answers one yes or no about one row.
CREATE FUNCTION jw_first_to_carry_job(p_operation_id text, p_previous integer) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT NOT EXISTS (SELECT 1 FROM public.history h
                       WHERE h.operation_id = p_operation_id AND h.seq = p_previous
                         AND h.remote_job_id IS NOT NULL)
$$;
REVOKE ALL ON FUNCTION jw_first_to_carry_job(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jw_first_to_carry_job(text, integer) TO jobwarden_receiver,
    jobwarden_reconciler, jobwarden_operator;

-- As in 008, plus: the first move to carry the job id logs its status URL.
CREATE OR REPLACE FUNCTION jw_history_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    op operations%ROWTYPE;
    edge state_edges%ROWTYPE;
    unscheduled boolean;
    logged text;
BEGIN
    SELECT * INTO op FROM operations WHERE operation_id = NEW.operation_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobwarden: unknown operation %', NEW.operation_id USING ERRCODE = 'JW001';
    END IF;

    IF NEW.from_state IS NULL THEN
        -- the genesis row, written by the operations insert trigger
        IF op.history_seq <> 0 OR NEW.to_state <> 'create_pending' THEN
            RAISE EXCEPTION 'jobwarden: only the first history row may start from nothing'
                USING ERRCODE = 'JW002';
        END IF;
    ELSE
        IF op.state <> NEW.from_state THEN
            RAISE EXCEPTION 'jobwarden: operation % is %, not % (concurrent or stale transition)',
                NEW.operation_id, op.state, NEW.from_state USING ERRCODE = 'JW001';
        END IF;
        SELECT * INTO edge FROM state_edges
            WHERE from_state = NEW.from_state AND to_state = NEW.to_state;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'jobwarden: transition % -> % is not allowed', NEW.from_state, NEW.to_state
                USING ERRCODE = 'JW002';
        END IF;
        IF cardinality(edge.evidence) > 0 THEN
            IF NEW.evidence_kind IS NULL OR NOT (NEW.evidence_kind = ANY (edge.evidence)) THEN
                RAISE EXCEPTION 'jobwarden: transition % -> % needs evidence of kind %',
                    NEW.from_state, NEW.to_state, edge.evidence USING ERRCODE = 'JW003';
            END IF;
            IF NOT jw_evidence_ok(NEW.operation_id, NEW.to_state, NEW.evidence_kind, NEW.evidence_id) THEN
                RAISE EXCEPTION 'jobwarden: % #% does not prove % -> % for %', NEW.evidence_kind,
                    NEW.evidence_id, NEW.from_state, NEW.to_state, NEW.operation_id
                    USING ERRCODE = 'JW003';
            END IF;
        END IF;
        IF NEW.from_state = 'needs_attention' AND NEW.actor NOT LIKE 'operator:%' THEN
            RAISE EXCEPTION 'jobwarden: only an operator decision moves an operation out of needs_attention'
                USING ERRCODE = 'JW004';
        END IF;
    END IF;

    NEW.seq := op.history_seq + 1;
    NEW.at := jw_now();
    NEW.remote_job_id := op.remote_job_id;
    -- The first move to carry the job logs the status URL it is read at (041).
    IF NEW.from_state IS NOT NULL AND op.remote_job_id IS NOT NULL
       AND jw_first_to_carry_job(NEW.operation_id, op.history_seq) THEN
        logged := '; status URL ' || jw_status_url_logged(op.status_url);
        NEW.cause := left(NEW.cause, 2000 - length(logged)) || logged;
    END IF;
    NEW.prev_hash := coalesce(op.history_head, jw_genesis_hash(NEW.operation_id));
    NEW.row_hash := jw_history_hash(NEW.prev_hash, NEW.operation_id, NEW.seq, NEW.at, NEW.actor,
        NEW.from_state, NEW.to_state, NEW.cause, NEW.evidence_kind, NEW.evidence_id,
        NEW.remote_job_id);
    unscheduled := NOT (NEW.to_state = ANY (jw_state_set('scheduled')));
    -- Out of the reconciler's hands while a read is marked: no claim will come
    -- to record it, so it is recorded now (its worker, if alive, completes it).
    IF unscheduled AND op.read_fence IS NOT NULL THEN
        PERFORM jw_record_lost_read(op.operation_id);
    END IF;

    UPDATE operations SET
        state = NEW.to_state,
        history_seq = NEW.seq,
        history_head = NEW.row_hash,
        finished_at = CASE WHEN NEW.to_state = ANY (jw_state_set('terminal')) THEN NEW.at END,
        -- nothing is scheduled for a finished or escalated operation; anything
        -- else is due now, or when the provider allows, unless already scheduled
        next_poll_at = CASE WHEN unscheduled THEN NULL
                            ELSE coalesce(next_poll_at, jw_due_at(NEW.to_state, NEW.at,
                                 not_before, poll_not_before, result_deadline,
                                 cancel_deadline)) END,
        follow_up = CASE WHEN unscheduled THEN NULL ELSE follow_up END,
        read_fence = CASE WHEN unscheduled THEN NULL ELSE read_fence END
    WHERE operation_id = NEW.operation_id;
    RETURN NEW;
END $$;

-- The status URL is written with the job id (set_remote_job) and never after:
-- a later change would be one the history never logged.
CREATE FUNCTION jw_status_url_fixed() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF OLD.remote_job_id IS NOT NULL AND NEW.status_url IS DISTINCT FROM OLD.status_url THEN
        RAISE EXCEPTION 'jobwarden: the status URL of % is recorded with its job id and '
            'never changed after', OLD.operation_id USING ERRCODE = 'JW006';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER operations_status_url_fixed BEFORE UPDATE OF status_url ON operations
    FOR EACH ROW EXECUTE FUNCTION jw_status_url_fixed();
