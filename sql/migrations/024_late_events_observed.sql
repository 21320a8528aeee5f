-- 024: what attaching a stored webhook event late records, in one place.
--
-- The reconciler attaches events whose job id became known after they were
-- stored (an event committed while its job id's write was in flight escapes
-- the trigger of migration 022). It now does so two ways: every unattached
-- event (before a purge, and after a start), or only recent ones each minute
-- (sql/queries/webhooks.sql, shared/ledger/webhooks.py StragglerSweep). Both
-- statements hand what they attached to this function, as parallel arrays in
-- any order: each event becomes one webhook observation, in event order, and
-- its operation is woken (as jw_request_wake did per event; jw_request_wakes
-- is the same rule for a set, in operation order). Called in the statement
-- that attached them, so in the same commit. Returns how many events were
-- handed over (0 for none).

CREATE FUNCTION jw_observe_late_events(p_events bigint[], p_operations text[],
                                       p_states jw_remote_state[], p_raw_states text[])
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(cardinality(p_events), 0) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO observations (operation_id, source, webhook_event_id, remote_state,
                              remote_state_raw)
    SELECT e.operation_id, 'webhook', e.event_id, e.state, e.raw_state
    FROM unnest(p_events, p_operations, p_states, p_raw_states)
         AS e (event_id, operation_id, state, raw_state)
    ORDER BY e.event_id;
    PERFORM jw_request_wakes(p_operations);
    RETURN cardinality(p_events);
END $$;

REVOKE ALL ON FUNCTION jw_observe_late_events(bigint[], text[], jw_remote_state[], text[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jw_observe_late_events(bigint[], text[], jw_remote_state[], text[])
    TO jobwarden_reconciler;
