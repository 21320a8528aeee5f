-- 023: jw_request_wakes keeps its statements' plans (issue 13: the receiver's
-- cost per matched event).
--
-- Every group-commit batch of matched webhook events calls jw_request_wakes
-- once. As a LANGUAGE sql function of two statements it could not be inlined,
-- and PostgreSQL parsed and planned both statements again on every call
-- (EXPLAIN ANALYZE, 32 operations: 0.80 against 0.59 ms a call, median of 180
-- calls, one-off; a second try: 0.46 against 0.39 ms). PL/pgSQL keeps them
-- for the session, as the receiver's own prepared statement is kept, and like
-- it they are planned again when `operations` is analyzed (which is why the
-- README asks for autovacuum). Same statements, same rules (015: a wake never
-- breaks a lease, never touches an operation outside the scheduled states;
-- rows in operation_id order so that concurrent receivers cannot deadlock; one
-- NOTIFY per distinct operation), same signature, so grants and callers stay.

CREATE OR REPLACE FUNCTION jw_request_wakes(p_operation_ids text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    notified integer;
BEGIN
    INSERT INTO operation_wakes (operation_id, requested_at)
    SELECT o.operation_id, jw_now()
    FROM operations o
    WHERE o.operation_id = ANY (p_operation_ids) AND o.state = ANY (jw_state_set('scheduled'))
    ORDER BY o.operation_id
    ON CONFLICT (operation_id) DO NOTHING;
    SELECT count(pg_notify('jobwarden_wakeup', woken.operation_id))::integer INTO notified
    FROM (SELECT DISTINCT unnest(p_operation_ids) AS operation_id ORDER BY 1) AS woken;
    RETURN notified;
END $$;
