-- 026: what the receiver's role may append to history, and what it may mark.
--
-- The receiver appends transitions for the agent API only: the first row of
-- a submission (written by the operations insert trigger) and a cancel
-- (cancel_requested, or abandoned when no create ever left). Its INSERT on
-- history (migration 006) let it append any edge the state machine allows
-- without evidence (create_pending -> needs_attention, result_collecting ->
-- result_timed_out, ...), under any actor name: the history triggers judge
-- the edge, not who appends it. And its UPDATE of read_fence (migration
-- 008, for the history trigger that clears a mark) let it set a mark, then
-- have jw_record_lost_read record a provider call nobody made.
--
-- Both checks bind a session that is the receiver's and neither the
-- reconciler's nor an operator's (an owner or superuser, a member of every
-- role, is not bound: the triggers are not its fence, the log is).

CREATE FUNCTION jw_receiver_only() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT pg_has_role(current_user, 'jobwarden_receiver', 'MEMBER')
       AND NOT pg_has_role(current_user, 'jobwarden_reconciler', 'MEMBER')
       AND NOT pg_has_role(current_user, 'jobwarden_operator', 'MEMBER')
$$;

CREATE FUNCTION jw_history_receiver_edges() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.from_state IS NULL  -- a submission's first row
       OR NEW.to_state = 'cancel_requested'
       OR (NEW.to_state = 'abandoned' AND NEW.from_state IN ('create_pending', 'cancel_requested'))
       OR NOT jw_receiver_only() THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'jobwarden: the receiver appends submissions and cancels only, not % -> %',
        NEW.from_state, NEW.to_state USING ERRCODE = 'JW004';
END $$;

CREATE TRIGGER history_receiver_edges BEFORE INSERT ON history
    FOR EACH ROW EXECUTE FUNCTION jw_history_receiver_edges();

CREATE FUNCTION jw_operations_receiver_marks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF jw_receiver_only() THEN
        RAISE EXCEPTION 'jobwarden: only a claim marks a status read (%)', OLD.operation_id
            USING ERRCODE = 'JW005';
    END IF;
    RETURN NEW;
END $$;

-- Only a mark being set runs it: clearing one (the history trigger) costs nothing.
CREATE TRIGGER operations_receiver_marks BEFORE UPDATE OF read_fence ON operations
    FOR EACH ROW WHEN (NEW.read_fence IS NOT NULL
                       AND NEW.read_fence IS DISTINCT FROM OLD.read_fence)
    EXECUTE FUNCTION jw_operations_receiver_marks();

GRANT EXECUTE ON FUNCTION jw_receiver_only() TO jobwarden_receiver, jobwarden_reconciler,
    jobwarden_operator;
