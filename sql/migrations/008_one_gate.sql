-- 008: one gate for every write.
--
-- * jw_now(): the database's clock, in one function. Every timestamp the
--   schema writes or compares goes through it, so a test can shift time for
--   every connection at once (the test harness replaces its body; see
--   bench/harness.py) instead of sleeping. Its production body is
--   clock_timestamp(), which the planner inlines: it costs nothing.
-- * jw_state_set(name): every named set of states, once. Views, functions,
--   constraints, indexes and queries ask it instead of spelling states out;
--   shared/ledger/states.py mirrors it and a test proves the two agree.
-- * not_before, poll_not_before: back-pressure as durable, absolute times.
--   A Retry-After holds back every call for the operation (not_before); a
--   poll_after_seconds hint holds back status reads (poll_not_before), not a
--   cancel. No wake-up, webhook, operator reconcile or deadline moves a call
--   before them (jw_due_at); only an explicit, recorded operator override
--   clears them. A deadline's look is never put off past its grace.
-- * follow_up: a durable recovery point for an action that must follow a
--   committed transition (the lookup that cross-checks a same-token retry),
--   written in the transition's transaction and redone after any crash.
-- * status_request, read_fence: the status read a worker sends for the job,
--   recorded with the job id; a claim that makes a read due marks it in the
--   same UPDATE (read_fence = the claim's fence). The read's record clears
--   the mark. A mark left by a worker that vanished mid-read is turned into
--   a provider_calls row ("maybe sent, outcome lost") by the next claim, or
--   by the transition that takes the row out of the reconciler's hands — so
--   every read that may have left is on record, at no cost to a read that
--   completes.
-- * anomalies: provider facts that break our invariants are named and kept,
--   never refused (a refused fact used to erase the whole status read).

CREATE FUNCTION jw_now() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$ SELECT clock_timestamp() $$;

CREATE FUNCTION jw_state_set(p_name text) RETURNS jw_state[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $$
BEGIN
    -- IMMUTABLE: with a constant name the planner folds the call into a
    -- constant array, so it serves in CHECKs, index predicates and index scans.
    -- So a migration that changes a set must also REINDEX operations_escalated
    -- and re-validate the CHECKs that use it (PostgreSQL re-checks neither).
    CASE p_name
        -- no automatic move will ever change these again
        WHEN 'terminal' THEN
            RETURN '{succeeded,failed,cancelled,abandoned}';
        -- the operator inbox: a human should look
        WHEN 'inbox' THEN
            RETURN '{needs_attention,cancellation_unconfirmed,result_timed_out,'
                   'result_unavailable,result_validation_failed}';
        -- nothing is scheduled until a human decides (cancellation_unconfirmed
        -- is in the inbox but still read, slowly, in case it settles)
        WHEN 'waits_for_human' THEN
            RETURN '{needs_attention,result_timed_out,result_unavailable,'
                   'result_validation_failed}';
        -- the reconciler acts on these: every state neither terminal nor waiting
        WHEN 'scheduled' THEN
            RETURN '{create_pending,create_unknown,accepted,observing,result_collecting,'
                   'cancel_requested,cancelling,cancellation_unconfirmed}';
        -- a claim in these is a status read (recorded by the claim, before it leaves)
        WHEN 'polled' THEN
            RETURN '{accepted,observing,cancelling,cancellation_unconfirmed}';
        -- a remote job must be on record (or the create answered synchronously)
        WHEN 'has_job' THEN
            RETURN '{accepted,observing,result_collecting,succeeded,cancelling,cancelled,'
                   'result_timed_out,result_unavailable,result_validation_failed}';
        -- someone asked to stop: who, why and the cancel deadline are on record
        WHEN 'cancel_intent' THEN
            RETURN '{cancel_requested,cancelling,cancellation_unconfirmed}';
        -- a create request may still be sent
        WHEN 'wants_create' THEN
            RETURN '{create_pending,create_unknown,cancel_requested}';
        -- a cancel request moves these to cancel_requested (or abandoned)
        WHEN 'cancellable' THEN
            RETURN '{create_pending,create_unknown,accepted,observing,result_timed_out}';
        ELSE
            RAISE EXCEPTION 'jobwarden: no state set named %', p_name USING ERRCODE = 'JW011';
    END CASE;
END $$;

-- When a deadline that passed must be looked at, at the latest: the deadline
-- itself, or once it has passed, the end of its grace (how long the owner may
-- wait for the provider's back-pressure before escalating; the same 300 s as
-- DEADLINE_READ_GRACE_S in reconciler/steps/poll.py). NULL: no look pending.
CREATE FUNCTION jw_deadline_look(p_deadline timestamptz) RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_deadline > jw_now() THEN p_deadline
                WHEN p_deadline + interval '300 seconds' > jw_now()
                    THEN p_deadline + interval '300 seconds' END
$$;

-- ------------------------------------------------------------------ new columns

ALTER TABLE operations
    ADD COLUMN read_fence bigint,
    ADD COLUMN read_claimed_at timestamptz,
    ADD COLUMN not_before timestamptz,
    ADD COLUMN poll_not_before timestamptz,
    ADD COLUMN follow_up text CHECK (follow_up IN ('cross_check')),
    ADD COLUMN follow_up_attempts integer NOT NULL DEFAULT 0 CHECK (follow_up_attempts >= 0),
    -- how long a cancel may stay unconfirmed, counted from its first send
    ADD COLUMN cancel_window interval,
    ADD COLUMN status_request jsonb CHECK (status_request IS NULL OR (
        jsonb_typeof(status_request -> 'method') = 'string'
        AND jsonb_typeof(status_request -> 'url') = 'string'));

-- The back-pressure window this answer imposed (evidence of why we waited);
-- `marked`: the read a claim marked (one per claim: the unique index makes
-- the claim, the trigger and the read's own record agree on one row).
ALTER TABLE provider_calls
    ADD COLUMN not_before timestamptz,
    ADD COLUMN anomalies text[],
    ADD COLUMN marked boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX provider_calls_one_marked_read ON provider_calls (operation_id, fence)
    WHERE marked;
ALTER TABLE observations ADD COLUMN anomalies text[];

-- A status read a vanished worker may have sent: on record, its outcome lost.
-- The history trigger calls this when a transition takes a row out of the
-- reconciler's hands while such a read is marked (the claim, which records
-- the usual case, inserts the same row itself from the values it replaces).
-- A worker still reading completes this row when its answer comes (the one
-- marked row per claim, provider_calls_one_marked_read). SECURITY DEFINER
-- because receivers' and operators' transitions run the trigger too, and
-- they may not insert provider calls; it takes only an id and records only a
-- marked read, once, so calling it directly can forge nothing.
CREATE FUNCTION jw_record_lost_read(p_operation_id text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    INSERT INTO public.provider_calls (
        operation_id, call_kind, attempt, worker, fence, trace_id, method, url,
        request_headers, started_at, finished_at, error_category, marked)
    SELECT o.operation_id, 'status', o.poll_attempts + 1,
           coalesce('reconciler:' || o.lease_owner, 'unknown'), o.read_fence, o.trace_id,
           o.status_request ->> 'method', o.status_request ->> 'url',
           coalesce(o.status_request -> 'headers', '{}'::jsonb),
           coalesce(o.read_claimed_at, public.jw_now()), public.jw_now(), 'lost', true
    FROM public.operations o
    WHERE o.operation_id = p_operation_id AND o.read_fence IS NOT NULL
      AND o.status_request IS NOT NULL
    ON CONFLICT (operation_id, fence) WHERE marked DO NOTHING
$$;
REVOKE ALL ON FUNCTION jw_record_lost_read(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jw_record_lost_read(text) TO jobwarden_receiver,
    jobwarden_reconciler, jobwarden_operator;

-- When a row may next be acted on, asked for at p_at: never before the
-- provider's back-pressure (a poll hint counts where the next call is a status
-- read), never after a pending deadline's look. Every scheduler of a row —
-- release, wake-ups, the history trigger — goes through this.
CREATE FUNCTION jw_due_at(
    p_state jw_state, p_at timestamptz, p_not_before timestamptz,
    p_poll_not_before timestamptz, p_result_deadline timestamptz,
    p_cancel_deadline timestamptz
) RETURNS timestamptz LANGUAGE sql VOLATILE AS $$
    SELECT least(
        greatest(p_at, p_not_before,
                 CASE WHEN p_state = ANY (jw_state_set('polled')) THEN p_poll_not_before END),
        CASE WHEN p_state IN ('accepted', 'observing') THEN jw_deadline_look(p_result_deadline)
             WHEN p_state IN ('cancel_requested', 'cancelling')
                 THEN jw_deadline_look(p_cancel_deadline) END)
$$;

-- ------------------------------------------------------------------ time

ALTER TABLE operations ALTER COLUMN created_at SET DEFAULT jw_now(),
                       ALTER COLUMN updated_at SET DEFAULT jw_now();
ALTER TABLE provider_calls ALTER COLUMN started_at SET DEFAULT jw_now();
ALTER TABLE webhook_events ALTER COLUMN received_at SET DEFAULT jw_now();
ALTER TABLE observations ALTER COLUMN fetched_at SET DEFAULT jw_now();
ALTER TABLE results ALTER COLUMN fetched_at SET DEFAULT jw_now();
ALTER TABLE decisions ALTER COLUMN decided_at SET DEFAULT jw_now();
ALTER TABLE escalations ALTER COLUMN opened_at SET DEFAULT jw_now();
ALTER TABLE completion_claims ALTER COLUMN claimed_at SET DEFAULT jw_now();
ALTER TABLE api_tokens ALTER COLUMN created_at SET DEFAULT jw_now();

-- ------------------------------------------------------------------ named sets in constraints

ALTER TABLE operations
    DROP CONSTRAINT terminal_has_finished_at,
    ADD CONSTRAINT terminal_has_finished_at CHECK (
        (state = ANY (jw_state_set('terminal'))) = (finished_at IS NOT NULL)),
    DROP CONSTRAINT remote_states_have_job_id,
    ADD CONSTRAINT remote_states_have_job_id CHECK (
        -- IS NOT DISTINCT FROM: "= 'sync'" is NULL when create_mode is, and a
        -- NULL CHECK passes (the 001 version let an async row without a job in)
        NOT (state = ANY (jw_state_set('has_job')))
        OR remote_job_id IS NOT NULL OR create_mode IS NOT DISTINCT FROM 'sync'),
    DROP CONSTRAINT cancel_states_have_intent,
    ADD CONSTRAINT cancel_states_have_intent CHECK (
        NOT (state = ANY (jw_state_set('cancel_intent')))
        OR (cancel_requested_at IS NOT NULL AND cancel_deadline IS NOT NULL
            AND cancel_requested_by IS NOT NULL));

DROP INDEX operations_escalated;
CREATE INDEX operations_escalated ON operations (updated_at)
    WHERE state = ANY (jw_state_set('inbox'));

-- ------------------------------------------------------------------ one new edge

-- A cancel that arrives while the only create attempt is in flight makes the
-- row cancel_requested; when that attempt turns out never to have left (no
-- connection), no job can exist and the honest end is abandoned, as from
-- create_pending (abandoned_never_sent still requires create_attempts = 0).
ALTER TABLE state_edges DISABLE TRIGGER state_edges_fixed;
INSERT INTO state_edges (from_state, to_state, evidence)
VALUES ('cancel_requested', 'abandoned', '{}');
ALTER TABLE state_edges ENABLE TRIGGER state_edges_fixed;

-- ------------------------------------------------------------------ the history trigger

-- As in 002, plus: the database's clock is jw_now(); a move into a state the
-- reconciler acts on schedules the row (respecting not_before) whoever makes
-- it, so an operator's decision can never leave an operation unscheduled if
-- the wake-up that follows it is lost; a move out of the scheduled states
-- drops any pending follow-up.
CREATE OR REPLACE FUNCTION jw_history_before_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    op operations%ROWTYPE;
    edge state_edges%ROWTYPE;
    unscheduled boolean;
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
    NEW.updated_at := jw_now();
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION jw_attach_early_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH attached AS (
        UPDATE webhook_events SET operation_id = NEW.operation_id, attached_at = jw_now()
        WHERE provider = NEW.provider AND remote_job_id = NEW.remote_job_id AND operation_id IS NULL
        RETURNING *
    )
    INSERT INTO observations (operation_id, source, webhook_event_id, remote_state, remote_state_raw)
    SELECT NEW.operation_id, 'webhook', a.webhook_event_id, a.remote_state, a.remote_state_raw
    FROM attached a ORDER BY a.webhook_event_id;
    RETURN NULL;
END $$;

-- ------------------------------------------------------------------ wake-ups

-- As in 004/005, and never before not_before: a webhook or an agent makes the
-- row due as soon as the provider allows, not sooner.
CREATE OR REPLACE FUNCTION jw_request_wake(p_operation_id text) RETURNS void LANGUAGE sql AS $$
    UPDATE operations SET
        wake_requested = true,
        next_poll_at = CASE
            WHEN lease_expires_at IS NULL OR lease_expires_at < jw_now()
            THEN jw_due_at(state, jw_now(), not_before, poll_not_before, result_deadline,
                           cancel_deadline)
            ELSE next_poll_at END
    WHERE operation_id = p_operation_id AND state = ANY (jw_state_set('scheduled'));
    SELECT pg_notify('jobwarden_wakeup', p_operation_id);
$$;

CREATE OR REPLACE FUNCTION jw_request_wakes(p_operation_ids text[]) RETURNS integer
LANGUAGE sql AS $$
    UPDATE operations SET
        wake_requested = true,
        next_poll_at = CASE
            WHEN lease_expires_at IS NULL OR lease_expires_at < jw_now()
            THEN jw_due_at(state, jw_now(), not_before, poll_not_before, result_deadline,
                           cancel_deadline)
            ELSE next_poll_at END
    WHERE operation_id = ANY (p_operation_ids) AND state = ANY (jw_state_set('scheduled'));
    SELECT count(pg_notify('jobwarden_wakeup', woken.operation_id))::integer
    FROM (SELECT DISTINCT unnest(p_operation_ids) AS operation_id ORDER BY 1) AS woken;
$$;

CREATE OR REPLACE FUNCTION jw_purge_webhook_events(p_older_than interval, p_limit integer)
RETURNS integer
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    WITH doomed AS (
        SELECT webhook_event_id
        FROM public.webhook_events
        WHERE operation_id IS NULL
          AND received_at < public.jw_now() - greatest(p_older_than, interval '1 day')
        ORDER BY received_at
        LIMIT greatest(p_limit, 0)
        FOR UPDATE SKIP LOCKED
    ),
    gone AS (
        DELETE FROM public.webhook_events w
        USING doomed d
        WHERE w.webhook_event_id = d.webhook_event_id AND w.operation_id IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone;
$$;

-- ------------------------------------------------------------------ what agents read

CREATE OR REPLACE VIEW agent_operations AS
SELECT
    o.operation_id,
    o.provider,
    o.kind,
    o.client_reference,
    o.requested_by,
    o.state::text AS state,
    o.remote_state::text AS remote_state,
    o.remote_job_id,
    c.outcome IS NOT NULL AS done,
    o.finished_at IS NOT NULL AS final,
    c.outcome,
    m.message,
    p.poll_after_seconds,
    o.progress_completed,
    o.progress_total,
    c.progress_percent,
    CASE WHEN o.state = 'succeeded' THEN o.result_ref END AS result_ref,
    CASE WHEN o.state = 'succeeded' THEN r.inline END AS result,
    r.items_total,
    r.items_succeeded,
    r.items_failed,
    CASE WHEN c.has_failed_items
         THEN '/v1/operations/' || o.operation_id || '/failed-items' END AS errors_ref,
    CASE WHEN c.outcome IS NOT NULL AND c.outcome NOT IN ('succeeded', 'completed_with_errors')
         THEN jsonb_build_object('code', c.error_code,
                                 'message', coalesce(c.reason, c.outcome))
    END AS error,
    o.cancel_requested_at,
    o.result_deadline,
    o.created_at,
    o.updated_at,
    o.finished_at
FROM operations o
LEFT JOIN results r ON r.result_id = o.result_id
LEFT JOIN escalations e ON e.operation_id = o.operation_id AND e.resolved_at IS NULL
LEFT JOIN history h ON h.operation_id = o.operation_id AND h.seq = o.history_seq
CROSS JOIN LATERAL (
    SELECT nullif(CASE jsonb_typeof(o.last_error)
                      WHEN 'object'
                          THEN coalesce(o.last_error ->> 'message', o.last_error ->> 'code')
                      WHEN 'string' THEN o.last_error #>> '{}' END, '') AS error_message,
           CASE WHEN jsonb_typeof(o.last_error) = 'object'
                THEN o.last_error ->> 'code' END AS error_code
) x
CROSS JOIN LATERAL (
    SELECT
        CASE
            WHEN o.state = 'succeeded' AND (coalesce(r.items_failed, 0) > 0
                                            OR o.remote_state = 'partially_succeeded')
                THEN 'completed_with_errors'
            WHEN o.state = 'succeeded' THEN 'succeeded'
            WHEN o.state = 'failed' THEN 'failed'
            WHEN o.state = ANY (jw_state_set('terminal')) THEN 'cancelled'
            WHEN o.state = 'result_timed_out' THEN 'timed_out'
            WHEN o.state = ANY (jw_state_set('inbox')) THEN 'needs_attention'
        END AS outcome,
        -- a provider may report more done than the total: never above 100 %
        coalesce(o.progress_percent,
                 CASE WHEN o.progress_total > 0
                      THEN least(100, round(100.0 * o.progress_completed / o.progress_total, 2))
                 END) AS progress_percent,
        coalesce(r.items_failed, 0) > 0
            OR EXISTS (SELECT 1 FROM result_item_failures f WHERE f.result_id = o.result_id)
            AS has_failed_items,
        CASE WHEN o.state = 'failed' THEN coalesce(x.error_code, 'failed')
             ELSE o.state::text END AS error_code,
        CASE
            WHEN o.state = ANY (jw_state_set('inbox'))
                THEN coalesce(e.reason, x.error_message, h.cause)
            WHEN o.state IN ('cancelled', 'abandoned') THEN coalesce(o.cancel_reason, h.cause)
            ELSE coalesce(x.error_message, h.cause)
        END AS reason
) c
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN c.outcome IS NOT NULL THEN NULL
        WHEN o.next_poll_at IS NULL OR o.lease_expires_at > jw_now()
            THEN greatest(1, coalesce(o.poll_after_seconds, 5))
        ELSE greatest(1, least(3600,
                 ceil(extract(epoch FROM o.next_poll_at - jw_now()))::integer + 1))
    END AS poll_after_seconds
) p
CROSS JOIN LATERAL (
    SELECT p.poll_after_seconds
           || CASE WHEN p.poll_after_seconds = 1 THEN ' second' ELSE ' seconds' END AS wait_words
) pw
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN o.state = 'create_pending' THEN format(
            'STARTED and NOT complete: the request is recorded and is being sent to %s. '
            'Do not report success. Check again after %s.',
            o.provider, pw.wait_words)
        WHEN o.state = 'create_unknown' THEN format(
            'STARTED and NOT complete: it is not yet known whether %s created the job; '
            'jobwarden is finding out without creating a duplicate. Do not report success '
            'and do not resubmit. Check again after %s.',
            o.provider, pw.wait_words)
        WHEN o.state IN ('accepted', 'observing') THEN format(
            'STARTED and NOT complete: %s is running the job (job %s)%s. '
            'Do not report success. Check again after %s.',
            o.provider, coalesce(o.remote_job_id, 'id not given yet'),
            CASE WHEN c.progress_percent IS NOT NULL
                 THEN format(', %s%% done', round(c.progress_percent)) ELSE '' END,
            pw.wait_words)
        WHEN o.state = 'result_collecting' THEN format(
            'NOT complete yet: the provider reports the job finished and jobwarden is '
            'fetching and checking its result. Do not report success until done is true. '
            'Check again after %s.', pw.wait_words)
        WHEN o.state IN ('cancel_requested', 'cancelling') THEN format(
            'Cancellation requested, NOT yet confirmed by the provider: the job may still '
            'finish or fail. Do not report it as cancelled. Check again after %s.',
            pw.wait_words)
        WHEN c.outcome = 'completed_with_errors' AND r.items_failed IS NOT NULL THEN format(
            'Finished: %s of %s items failed and were not written. '
            'Review errors before reporting success.',
            r.items_failed, coalesce(r.items_total::text, 'an unknown number of'))
        WHEN c.outcome = 'completed_with_errors' THEN
            'Finished, but the provider reports only partial success: some items failed '
            'and were not written. Review errors before reporting success.'
        WHEN c.outcome = 'succeeded' THEN format(
            'Finished successfully%s. The result is verified and ready.',
            CASE WHEN r.items_total IS NOT NULL
                 THEN format(': all %s items succeeded', r.items_total) ELSE '' END)
        WHEN o.state = 'failed' THEN format(
            'FAILED: %s. Do not report success.', rtrim(c.reason, '. '))
        WHEN o.state = 'cancelled' THEN
            'Cancelled: the provider confirmed the job stopped. There is no result.'
        WHEN o.state = 'abandoned' THEN
            'Cancelled before it reached the provider: no job was created. There is no result.'
        WHEN o.state = 'result_timed_out' THEN format(
            'Stopped waiting after the deadline; the remote job may still be running (job %s). '
            'Do not report success and do not resubmit: an operator has been asked to decide.',
            coalesce(o.remote_job_id, 'id unknown'))
        WHEN o.state = 'cancellation_unconfirmed' THEN format(
            'Cancellation requested, NOT confirmed by the provider before the deadline: the job '
            'may still be running (job %s). Do not report it as cancelled; an operator has been '
            'asked to decide.', coalesce(o.remote_job_id, 'id unknown'))
        WHEN o.state = 'result_unavailable' THEN format(
            'NOT complete: the provider reports the job finished, but its result could not be '
            'fetched (%s). Do not report success and do not resubmit; an operator has been '
            'asked to decide.', c.reason)
        WHEN o.state = 'result_validation_failed' THEN format(
            'NOT complete: the job finished but its result failed our checks (%s) and was not '
            'accepted. Do not report success; an operator has been asked to decide.', c.reason)
        WHEN o.state = 'needs_attention' THEN format(
            'Needs a human decision: %s. Do not report success and do not resubmit; an '
            'operator has been asked to decide.', c.reason)
    END AS message
) m;

-- The receiver's agent API and the reconciler read the named sets.
GRANT EXECUTE ON FUNCTION jw_now(), jw_state_set(text), jw_deadline_look(timestamptz),
    jw_due_at(jw_state, timestamptz, timestamptz, timestamptz, timestamptz, timestamptz)
    TO jobwarden_agent, jobwarden_receiver, jobwarden_reconciler, jobwarden_operator;

-- The history trigger (run as the inserting role) now also clears follow_up;
-- the receiver's agent API appends transitions (cancel), so it needs that column.
GRANT UPDATE (follow_up, read_fence, cancel_window) ON operations TO jobwarden_receiver;
