-- 002: the state machine (the one place the allowed edges live), the append-only
-- hash-chained history, and the triggers that make the database enforce both
-- whoever writes: the reconciler, an agent or an operator in psql.

CREATE TABLE state_edges (
    from_state  jw_state NOT NULL,
    to_state    jw_state NOT NULL,
    -- evidence kinds that may justify the edge; empty = none needed
    evidence    text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (from_state, to_state),
    CHECK (evidence <@ ARRAY['call', 'observation', 'result', 'decision'])
);

INSERT INTO state_edges (from_state, to_state, evidence) VALUES
    ('create_pending', 'accepted', '{call}'),
    ('create_pending', 'result_collecting', '{call}'),
    ('create_pending', 'failed', '{call}'),
    ('create_pending', 'create_unknown', '{}'),
    ('create_pending', 'cancel_requested', '{}'),
    ('create_pending', 'abandoned', '{}'),
    ('create_pending', 'needs_attention', '{}'),
    ('create_unknown', 'accepted', '{call}'),
    ('create_unknown', 'result_collecting', '{call}'),
    ('create_unknown', 'failed', '{call}'),
    ('create_unknown', 'cancel_requested', '{}'),
    ('create_unknown', 'needs_attention', '{}'),
    ('accepted', 'observing', '{}'),
    ('accepted', 'cancel_requested', '{}'),
    ('accepted', 'result_timed_out', '{}'),
    ('accepted', 'needs_attention', '{}'),
    ('observing', 'result_collecting', '{observation}'),
    ('observing', 'failed', '{observation}'),
    ('observing', 'cancelled', '{observation}'),
    ('observing', 'result_timed_out', '{}'),
    ('observing', 'cancel_requested', '{}'),
    ('observing', 'needs_attention', '{}'),
    ('result_collecting', 'succeeded', '{result}'),
    ('result_collecting', 'result_unavailable', '{}'),
    ('result_collecting', 'result_validation_failed', '{}'),
    ('result_collecting', 'needs_attention', '{}'),
    ('cancel_requested', 'cancelling', '{call}'),
    ('cancel_requested', 'result_collecting', '{observation,call}'),
    ('cancel_requested', 'failed', '{observation,call}'),
    ('cancel_requested', 'cancelled', '{observation}'),
    ('cancel_requested', 'cancellation_unconfirmed', '{}'),
    ('cancel_requested', 'needs_attention', '{}'),
    ('cancelling', 'cancelled', '{observation}'),
    ('cancelling', 'result_collecting', '{observation}'),
    ('cancelling', 'failed', '{observation}'),
    ('cancelling', 'cancellation_unconfirmed', '{}'),
    ('cancelling', 'needs_attention', '{}'),
    ('cancellation_unconfirmed', 'cancelled', '{observation}'),
    ('cancellation_unconfirmed', 'result_collecting', '{observation}'),
    ('cancellation_unconfirmed', 'failed', '{observation}'),
    ('cancellation_unconfirmed', 'needs_attention', '{}'),
    ('result_timed_out', 'observing', '{decision}'),
    ('result_timed_out', 'result_collecting', '{observation}'),
    ('result_timed_out', 'failed', '{observation}'),
    ('result_timed_out', 'cancelled', '{observation}'),
    ('result_timed_out', 'cancel_requested', '{}'),
    ('result_timed_out', 'needs_attention', '{}'),
    ('result_unavailable', 'result_collecting', '{decision}'),
    ('result_unavailable', 'failed', '{decision}'),
    ('result_unavailable', 'needs_attention', '{}'),
    ('result_validation_failed', 'result_collecting', '{decision}'),
    ('result_validation_failed', 'failed', '{decision}'),
    ('result_validation_failed', 'needs_attention', '{}'),
    ('needs_attention', 'observing', '{decision}'),
    ('needs_attention', 'result_collecting', '{decision}'),
    ('needs_attention', 'failed', '{decision}'),
    ('needs_attention', 'cancelled', '{decision}'),
    ('needs_attention', 'cancel_requested', '{decision}'),
    ('needs_attention', 'abandoned', '{decision}');

-- The edge table is part of the schema, not data: nobody edits it at run time.
CREATE FUNCTION jw_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'jobwarden: % on % is not allowed (append-only / fixed by migration)',
        TG_OP, TG_TABLE_NAME USING ERRCODE = 'JW010';
END $$;

CREATE TRIGGER state_edges_fixed BEFORE INSERT OR UPDATE OR DELETE ON state_edges
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();

-- Append-only history: one row per transition, hash-chained per operation.
CREATE TABLE history (
    history_id      bigserial PRIMARY KEY,
    operation_id    text NOT NULL REFERENCES operations (operation_id),
    seq             integer NOT NULL CHECK (seq >= 1),
    at              timestamptz NOT NULL,
    actor           text NOT NULL CHECK (length(actor) BETWEEN 1 AND 200 AND strpos(actor, chr(31)) = 0),
    from_state      jw_state,
    to_state        jw_state NOT NULL,
    cause           text NOT NULL CHECK (length(cause) BETWEEN 1 AND 2000 AND strpos(cause, chr(31)) = 0),
    evidence_kind   text CHECK (evidence_kind IN ('call', 'observation', 'result', 'decision')),
    evidence_id     bigint,
    remote_job_id   text,
    prev_hash       text NOT NULL,
    row_hash        text NOT NULL,
    UNIQUE (operation_id, seq),
    CHECK ((evidence_kind IS NULL) = (evidence_id IS NULL))
);

-- The hashed content of a history row. `jobwarden audit verify` recomputes the
-- same thing in Python (shared/ledger/audit.py), independently of this function.
CREATE FUNCTION jw_history_hash(
    p_prev text, p_operation_id text, p_seq integer, p_at timestamptz, p_actor text,
    p_from jw_state, p_to jw_state, p_cause text, p_evidence_kind text,
    p_evidence_id bigint, p_remote_job_id text
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(concat_ws(chr(31),
        p_prev, p_operation_id, p_seq::text,
        to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        p_actor, coalesce(p_from::text, ''), p_to::text, p_cause,
        coalesce(p_evidence_kind, ''), coalesce(p_evidence_id::text, ''),
        coalesce(p_remote_job_id, '')), 'UTF8')), 'hex')
$$;

CREATE FUNCTION jw_genesis_hash(p_operation_id text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to('jobwarden-genesis' || chr(31) || p_operation_id, 'UTF8')), 'hex')
$$;

-- Does the cited evidence exist for this operation and say what the edge claims?
CREATE FUNCTION jw_evidence_ok(
    p_operation_id text, p_to jw_state, p_kind text, p_id bigint
) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_kind = 'call' THEN
        RETURN EXISTS (
            SELECT 1 FROM provider_calls c
            WHERE c.call_id = p_id AND c.operation_id = p_operation_id AND c.status_code IS NOT NULL
              AND CASE p_to
                    WHEN 'accepted' THEN c.call_kind IN ('create', 'lookup') AND c.remote_job_id IS NOT NULL
                    WHEN 'result_collecting' THEN c.call_kind IN ('create', 'lookup')
                    WHEN 'failed' THEN c.call_kind = 'create' AND c.status_code BETWEEN 400 AND 499
                    WHEN 'cancelling' THEN c.call_kind = 'cancel'
                    ELSE false END);
    ELSIF p_kind = 'observation' THEN
        RETURN EXISTS (
            SELECT 1 FROM observations o
            WHERE o.observation_id = p_id AND o.operation_id = p_operation_id
              AND CASE p_to
                    -- success is declared only after our own status read
                    WHEN 'result_collecting' THEN o.source IN ('poll', 'lookup')
                        AND o.remote_state IN ('succeeded', 'partially_succeeded')
                    WHEN 'failed' THEN o.remote_state = 'failed'
                    WHEN 'cancelled' THEN o.remote_state = 'cancelled'
                    ELSE false END);
    ELSIF p_kind = 'result' THEN
        RETURN EXISTS (
            SELECT 1 FROM results r
            WHERE r.result_id = p_id AND r.operation_id = p_operation_id AND r.valid);
    ELSIF p_kind = 'decision' THEN
        RETURN EXISTS (
            SELECT 1 FROM decisions d WHERE d.decision_id = p_id AND d.operation_id = p_operation_id);
    END IF;
    RETURN false;
END $$;

-- A transition is an INSERT into history. This trigger checks the edge and its
-- evidence, chains the hash and moves operations.state in the same statement,
-- so no state change can exist without its history row.
CREATE FUNCTION jw_history_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    op operations%ROWTYPE;
    edge state_edges%ROWTYPE;
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
    NEW.at := clock_timestamp();
    NEW.remote_job_id := op.remote_job_id;
    NEW.prev_hash := coalesce(op.history_head, jw_genesis_hash(NEW.operation_id));
    NEW.row_hash := jw_history_hash(NEW.prev_hash, NEW.operation_id, NEW.seq, NEW.at, NEW.actor,
        NEW.from_state, NEW.to_state, NEW.cause, NEW.evidence_kind, NEW.evidence_id,
        NEW.remote_job_id);

    UPDATE operations SET
        state = NEW.to_state,
        history_seq = NEW.seq,
        history_head = NEW.row_hash,
        finished_at = CASE WHEN NEW.to_state IN ('succeeded', 'failed', 'cancelled', 'abandoned')
                           THEN NEW.at END,
        -- nothing is scheduled for a finished or escalated operation
        next_poll_at = CASE WHEN NEW.to_state IN ('succeeded', 'failed', 'cancelled', 'abandoned',
                                'needs_attention', 'result_timed_out', 'result_unavailable',
                                'result_validation_failed')
                           THEN NULL ELSE next_poll_at END
    WHERE operation_id = NEW.operation_id;
    RETURN NEW;
END $$;

CREATE TRIGGER history_transition BEFORE INSERT ON history
    FOR EACH ROW EXECUTE FUNCTION jw_history_before_insert();
CREATE TRIGGER history_append_only BEFORE UPDATE OR DELETE ON history
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();
CREATE TRIGGER history_no_truncate BEFORE TRUNCATE ON history
    FOR EACH STATEMENT EXECUTE FUNCTION jw_refuse_change();

-- Guard the operations row: state and chain head change only through a history
-- insert (trigger depth > 1), recorded facts are immutable, a recorded remote
-- job id is never overwritten (a conflict is kept beside it, never in place).
CREATE FUNCTION jw_operations_before_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
       OR NEW.created_at <> OLD.created_at OR NEW.trace_id <> OLD.trace_id THEN
        RAISE EXCEPTION 'jobwarden: the recorded intent of % is immutable', OLD.operation_id
            USING ERRCODE = 'JW005';
    END IF;
    IF OLD.remote_job_id IS NOT NULL AND NEW.remote_job_id IS DISTINCT FROM OLD.remote_job_id THEN
        RAISE EXCEPTION 'jobwarden: remote job id of % is already recorded', OLD.operation_id
            USING ERRCODE = 'JW006';
    END IF;
    IF OLD.result_id IS NOT NULL AND NEW.result_id IS DISTINCT FROM OLD.result_id
       AND OLD.state = 'succeeded' THEN
        RAISE EXCEPTION 'jobwarden: the result of a succeeded operation is immutable'
            USING ERRCODE = 'JW005';
    END IF;
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END $$;

CREATE TRIGGER operations_guard BEFORE UPDATE ON operations
    FOR EACH ROW EXECUTE FUNCTION jw_operations_before_update();
CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();

CREATE FUNCTION jw_operations_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state <> 'create_pending' OR NEW.history_seq <> 0 OR NEW.history_head IS NOT NULL
       OR NEW.remote_job_id IS NOT NULL OR NEW.finished_at IS NOT NULL THEN
        RAISE EXCEPTION 'jobwarden: an operation is born create_pending with no remote facts'
            USING ERRCODE = 'JW002';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER operations_birth BEFORE INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION jw_operations_before_insert();

-- The intent itself is the first history row.
CREATE FUNCTION jw_operations_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO history (operation_id, actor, from_state, to_state, cause, prev_hash, row_hash, seq, at)
    VALUES (NEW.operation_id, NEW.requested_by, NULL, 'create_pending', 'submitted', '', '', 1, now());
    PERFORM pg_notify('jobwarden_wakeup', NEW.operation_id);
    RETURN NULL;
END $$;

CREATE TRIGGER operations_genesis AFTER INSERT ON operations
    FOR EACH ROW EXECUTE FUNCTION jw_operations_after_insert();

-- Every transition wakes listeners (reconcilers, API waiters, SSE streams).
CREATE FUNCTION jw_history_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('jobwarden_transition',
        NEW.operation_id || ' ' || NEW.seq || ' ' || NEW.to_state);
    RETURN NULL;
END $$;

CREATE TRIGGER history_notify AFTER INSERT ON history
    FOR EACH ROW EXECUTE FUNCTION jw_history_after_insert();

-- Webhook events that beat the create response are attached, as observations,
-- the moment the remote job id is recorded — whichever code path records it.
CREATE FUNCTION jw_attach_early_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH attached AS (
        UPDATE webhook_events SET operation_id = NEW.operation_id, attached_at = clock_timestamp()
        WHERE provider = NEW.provider AND remote_job_id = NEW.remote_job_id AND operation_id IS NULL
        RETURNING *
    )
    INSERT INTO observations (operation_id, source, webhook_event_id, remote_state, remote_state_raw)
    SELECT NEW.operation_id, 'webhook', a.webhook_event_id, a.remote_state, a.remote_state_raw
    FROM attached a ORDER BY a.webhook_event_id;
    RETURN NULL;
END $$;

CREATE TRIGGER operations_attach_events AFTER UPDATE OF remote_job_id ON operations
    FOR EACH ROW WHEN (OLD.remote_job_id IS NULL AND NEW.remote_job_id IS NOT NULL)
    EXECUTE FUNCTION jw_attach_early_events();
