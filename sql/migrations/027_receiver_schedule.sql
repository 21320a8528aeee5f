-- 027: what the receiver's role may change of an operation's schedule.
--
-- The receiver needs column UPDATE on operations for three things: a cancel
-- intent (record_cancel_intent sets the cancel_* columns, once), the history
-- trigger's bookkeeping when it appends a submission or a cancel (state,
-- history head, schedule, marks cleared), and wake-ups, which only ever bring
-- a row's next look nearer. The grants are per column, not per purpose, so a
-- leaked receiver login could push any operation's next look a month away
-- (an operator saw a create_unknown row's lookup stall until its deadline),
-- clear its recovery point (follow_up), or rewrite a cancel's deadline.
--
-- For a receiver's session (jw_receiver_only, migration 026), an update
-- that leaves the state as it was may now only: bring next_poll_at nearer,
-- record a first cancel intent, and touch what no schedule depends on
-- (webhook_seen_at, the history head the one gate checks). A state change
-- comes with a history row, whose edges migration 026 already limits.
CREATE FUNCTION jw_operations_receiver_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
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
    IF OLD.cancel_requested_at IS NOT NULL
       AND (NEW.cancel_requested_at, NEW.cancel_requested_by, NEW.cancel_reason,
            NEW.cancel_deadline, NEW.cancel_window)
           IS DISTINCT FROM (OLD.cancel_requested_at, OLD.cancel_requested_by, OLD.cancel_reason,
                             OLD.cancel_deadline, OLD.cancel_window) THEN
        RAISE EXCEPTION 'jobwarden: a cancel intent is recorded once; an operator renews it (%)',
            OLD.operation_id USING ERRCODE = 'JW004';
    END IF;
    RETURN NEW;
END $$;
-- Only updates that keep the state and change a guarded column run it: the
-- reconciler's claims (next_poll_at later) pay one role check per row.
CREATE TRIGGER operations_receiver_schedule BEFORE UPDATE ON operations
    FOR EACH ROW WHEN (NEW.state = OLD.state AND (
        NEW.next_poll_at IS DISTINCT FROM OLD.next_poll_at
        OR NEW.follow_up IS DISTINCT FROM OLD.follow_up
        OR NEW.finished_at IS DISTINCT FROM OLD.finished_at
        OR (OLD.cancel_requested_at IS NOT NULL
            AND (NEW.cancel_requested_at, NEW.cancel_requested_by, NEW.cancel_reason,
                 NEW.cancel_deadline, NEW.cancel_window)
                IS DISTINCT FROM (OLD.cancel_requested_at, OLD.cancel_requested_by,
                                  OLD.cancel_reason, OLD.cancel_deadline, OLD.cancel_window))))
    EXECUTE FUNCTION jw_operations_receiver_schedule();
