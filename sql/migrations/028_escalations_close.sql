-- 028: an escalation closes when its operation leaves the escalated states,
-- whoever moves it; and a stale cancel intent may be replaced.
--
-- Only an operator's decision closed an escalation (close_escalation). When
-- the reconciler itself settled one (a later read moving
-- cancellation_unconfirmed to cancelled, failed or result_collecting; a
-- result_timed_out job that ended after all), the row stayed open: show and
-- the console listed a stale open escalation beside a finished operation, and
-- the operation's next escalation rewrote that row in place (state, reason,
-- details), columns the evidence log treats as fixed, so `audit verify`
-- reported tampering nobody did. Now every transition out of the inbox
-- states closes the open escalation in the same transaction: resolved_at is
-- set, and decision_id names the decision when the transition cites one
-- (else it stays NULL, and the history row at that moment — actor, cause,
-- evidence — is who and why). A move between two inbox states leaves it to
-- the new escalation, which closes the old row and opens its own
-- (open_escalation), never rewriting it.
--
-- SECURITY DEFINER: a receiver's cancel (result_timed_out -> cancel_requested)
-- closes it too, and that role has no right on escalations; the function only
-- ever closes the open escalation of the operation its history row moved.
CREATE FUNCTION jw_history_close_escalation() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    UPDATE escalations SET
        resolved_at = jw_now(),
        decision_id = CASE WHEN NEW.evidence_kind = 'decision' THEN NEW.evidence_id END
    WHERE operation_id = NEW.operation_id AND resolved_at IS NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER history_close_escalation AFTER INSERT ON history
    FOR EACH ROW WHEN (NEW.from_state = ANY (jw_state_set('inbox'))
                       AND NOT (NEW.to_state = ANY (jw_state_set('inbox'))))
    EXECUTE FUNCTION jw_history_close_escalation();

-- Escalations closed before this migration by nobody: an operation that has
-- left the inbox states keeps no open escalation (the fix above, for the past).
UPDATE escalations e SET resolved_at = jw_now()
FROM operations o
WHERE e.operation_id = o.operation_id AND e.resolved_at IS NULL
  AND NOT (o.state = ANY (jw_state_set('inbox')));

-- A cancel intent recorded while the operation made no move (needs_attention,
-- result_collecting, ...) stayed on the row; once an operator resumed the
-- operation, every later cancel matched no row (record_cancel_intent wanted
-- no intent on record) and was dropped. Such an intent is stale once the
-- operation is back in a cancellable state: a new cancel replaces it
-- (record_cancel_intent). Migration 027 let a receiver's session record only
-- a first intent; it may now also replace a stale one, which is what any
-- first cancel of that operation would do, with the old intent's "cancel
-- sent" mark cleared (cancel_sent_at, now granted for that) so the new cancel
-- is sent anew. An intent a cancel acts on (the cancel states) or one waiting
-- for an operator is still never rewritten, and only the reconciler marks a
-- cancel as sent.
CREATE OR REPLACE FUNCTION jw_operations_receiver_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT jw_receiver_only() THEN
        RETURN NEW;
    END IF;
    IF NEW.next_poll_at IS DISTINCT FROM OLD.next_poll_at
       AND NOT coalesce(NEW.next_poll_at <= OLD.next_poll_at, false) THEN
        RAISE EXCEPTION 'jobwarden: the receiver brings a look nearer, never later (%)',
            OLD.operation_id USING ERRCODE = 'JW004';
    END IF;
    IF NEW.follow_up IS DISTINCT FROM OLD.follow_up
       OR NEW.finished_at IS DISTINCT FROM OLD.finished_at THEN
        RAISE EXCEPTION 'jobwarden: only the reconciler settles a recovery point or an end (%)',
            OLD.operation_id USING ERRCODE = 'JW004';
    END IF;
    IF NEW.cancel_sent_at IS NOT NULL AND NEW.cancel_sent_at IS DISTINCT FROM OLD.cancel_sent_at THEN
        RAISE EXCEPTION 'jobwarden: only the reconciler records a cancel as sent (%)',
            OLD.operation_id USING ERRCODE = 'JW004';
    END IF;
    IF OLD.cancel_requested_at IS NOT NULL
       AND NOT (OLD.state = ANY (jw_state_set('cancellable')))
       AND (NEW.cancel_requested_at, NEW.cancel_requested_by, NEW.cancel_reason,
            NEW.cancel_deadline, NEW.cancel_window, NEW.cancel_sent_at)
           IS DISTINCT FROM (OLD.cancel_requested_at, OLD.cancel_requested_by, OLD.cancel_reason,
                             OLD.cancel_deadline, OLD.cancel_window, OLD.cancel_sent_at) THEN
        RAISE EXCEPTION 'jobwarden: a cancel intent is recorded once; an operator renews it (%)',
            OLD.operation_id USING ERRCODE = 'JW004';
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER operations_receiver_schedule ON operations;
CREATE TRIGGER operations_receiver_schedule BEFORE UPDATE ON operations
    FOR EACH ROW WHEN (NEW.state = OLD.state AND (
        NEW.next_poll_at IS DISTINCT FROM OLD.next_poll_at
        OR NEW.follow_up IS DISTINCT FROM OLD.follow_up
        OR NEW.finished_at IS DISTINCT FROM OLD.finished_at
        OR NEW.cancel_sent_at IS DISTINCT FROM OLD.cancel_sent_at
        OR (OLD.cancel_requested_at IS NOT NULL
            AND (NEW.cancel_requested_at, NEW.cancel_requested_by, NEW.cancel_reason,
                 NEW.cancel_deadline, NEW.cancel_window)
                IS DISTINCT FROM (OLD.cancel_requested_at, OLD.cancel_requested_by,
                                  OLD.cancel_reason, OLD.cancel_deadline, OLD.cancel_window))))
    EXECUTE FUNCTION jw_operations_receiver_schedule();

GRANT UPDATE (cancel_sent_at) ON operations TO jobwarden_receiver;
