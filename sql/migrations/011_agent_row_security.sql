-- 011: an agent's SQL session sees only its own operations, and cannot call
-- pg_notify (so not the reconciler's wake-up channel through it).
--
-- Who an agent is. An agent's login role IS its name: a session whose
-- session_user is `reporting-bot` owns the operations whose requested_by is
-- `agent:reporting-bot`, which is also what the agent API records for a token
-- named `reporting-bot` (`jobwarden tokens create reporting-bot`). So the SQL
-- views and the API show an agent the same rows, with nothing to keep in sync
-- (a token name and a role name have the same shape: lower case, at most 63
-- characters). session_user, not current_user: SET ROLE cannot change it, so
-- a session cannot borrow another role's name to read that role's rows.
--
-- Who sees everything: a session that may read the `operations` table itself
-- (the receiver, reconciler and operator groups, the schema owner, a
-- superuser, any role granted SELECT on it) would gain nothing from a filter
-- on a view of it, so it is not filtered. Any other session, the agent
-- group's among them, sees the rows of its own operations.
--
-- How: a filter in the agent views, which are security_barrier views. Ways
-- weighed and refused:
--
-- * Row-level security on the tables under the owner-run views. The views
--   read the tables with their owner's rights, and the owner bypasses row
--   security (unless FORCEd) -- and a superuser always does: wherever the
--   migrations run as a superuser (the embedded server, `make run`, the
--   tests, many installs) the views' owner is one, and no policy would apply.
-- * security_invoker views (PostgreSQL 15+) over row-level security: the
--   agent would then need SELECT on every table underneath, and could read
--   those tables directly -- e.g. results.inline of a result that failed
--   validation, which the view shows only once the operation succeeded. It
--   widens what an agent may read in order to narrow which rows.
--
-- The filter alone is not enough: in a plain view the planner may run a
-- condition of the agent's own (`WHERE client_reference::int = 0`) on other
-- agents' rows before the view's filter, and the error quotes their values.
-- security_barrier runs the view's filter first; only leakproof operators
-- (=, <, ... on text, numbers, times) may go ahead of it, which keeps
-- `WHERE operation_id = $1` an index lookup.
--
-- A security_barrier view is planned on its own, though: `ORDER BY
-- operation_id DESC LIMIT 50` over it computes every row it may show, then
-- sorts. For an agent that is its own operations; for the daemons and
-- operators it would be all of them. So the unfiltered views stay, renamed,
-- for those (and are not granted to agents): operations_overview and
-- failed_items_overview. Their rows and columns are the agent views' own, and
-- they are where the definitions now live (a column added there must be added
-- to agent_operations too, which lists its columns).

-- The requested_by of the session's own operations (see "Who an agent is").
CREATE FUNCTION jw_session_agent() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT 'agent:' || session_user
$$;

-- Whether the current role may read every operation (see "Who sees everything").
CREATE FUNCTION jw_sees_all_operations() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT has_table_privilege('public.operations', 'SELECT')
$$;

GRANT EXECUTE ON FUNCTION jw_session_agent(), jw_sees_all_operations()
    TO jobwarden_agent, jobwarden_receiver, jobwarden_reconciler, jobwarden_operator;

-- The unfiltered views keep their definitions, comments and grants, less the
-- agent's.
ALTER VIEW agent_operations RENAME TO operations_overview;
ALTER VIEW agent_failed_items RENAME TO failed_items_overview;
REVOKE ALL ON operations_overview, failed_items_overview FROM jobwarden_agent;

-- In each view the two functions sit in scalar subqueries: evaluated once
-- per query, not once per row.
CREATE VIEW agent_operations WITH (security_barrier) AS
SELECT *
FROM operations_overview
WHERE (SELECT jw_sees_all_operations()) OR requested_by = (SELECT jw_session_agent());

CREATE VIEW agent_failed_items WITH (security_barrier) AS
SELECT o.operation_id, f.item_key, f.code, f.message
FROM operations o
JOIN result_item_failures f ON f.result_id = o.result_id
WHERE (SELECT jw_sees_all_operations()) OR o.requested_by = (SELECT jw_session_agent());

-- The agent views' documentation (psql \d+, README "Agent views") moves with
-- their names: copied from the renamed views, column by column.
DO $$
DECLARE
    v_pair record;
    v_column record;
BEGIN
    FOR v_pair IN SELECT * FROM (VALUES
        ('operations_overview'::regclass, 'agent_operations'::regclass),
        ('failed_items_overview'::regclass, 'agent_failed_items'::regclass)) AS p(src, dst)
    LOOP
        EXECUTE format('COMMENT ON VIEW %s IS %L', v_pair.dst,
                       obj_description(v_pair.src, 'pg_class'));
        FOR v_column IN
            SELECT a.attname, col_description(v_pair.src, a.attnum) AS description
            FROM pg_attribute a
            WHERE a.attrelid = v_pair.src AND a.attnum > 0 AND NOT a.attisdropped
              AND col_description(v_pair.src, a.attnum) IS NOT NULL
        LOOP
            EXECUTE format('COMMENT ON COLUMN %s.%I IS %L', v_pair.dst, v_column.attname,
                           v_column.description);
        END LOOP;
    END LOOP;
END $$;

COMMENT ON VIEW operations_overview IS
    'Every operation, as agent_operations shows an agent its own; for the daemons and operators (not granted to agents).';
COMMENT ON VIEW failed_items_overview IS
    'Failed items of every operation, as agent_failed_items shows an agent its own; not granted to agents.';

-- Agents: these two views and nothing else, as before. The receiver (agent
-- API) and operators keep reading them too.
GRANT SELECT ON agent_operations, agent_failed_items
    TO jobwarden_agent, jobwarden_receiver, jobwarden_operator;

-- Wake-ups. The reconciler LISTENs on `jobwarden_wakeup`; the wake functions
-- and the history trigger send it with pg_notify, as the role that runs them.
-- The wake functions are the daemons' and operators' (granted in 004 and
-- 005); PUBLIC loses the right every function is created with.
REVOKE EXECUTE ON FUNCTION jw_request_wake(text), jw_request_wakes(text[]) FROM PUBLIC;

-- pg_notify is executable by PUBLIC out of the box; here it becomes the
-- daemons' and operators' only. It belongs to the bootstrap superuser, so
-- only a superuser can change that: run by the (unprivileged) schema owner,
-- this leaves it alone and says so.
--
-- The NOTIFY *statement* has no privilege at all in PostgreSQL: any session
-- may send it on any channel, an agent's too. What that can do is bounded: a
-- wake-up carries no authority (the reconciler then sweeps the rows that are
-- due, which an agent cannot change), so a forged one brings a sweep forward
-- and nothing else. Refusing it takes a listener that checks the sender (each
-- notification carries the sending backend's pid).
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        REVOKE EXECUTE ON FUNCTION pg_catalog.pg_notify(text, text) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION pg_catalog.pg_notify(text, text)
            TO jobwarden_receiver, jobwarden_reconciler, jobwarden_operator;
    ELSIF has_function_privilege('jobwarden_agent', 'pg_catalog.pg_notify(text, text)',
                                 'EXECUTE') THEN
        RAISE WARNING 'pg_notify() stays executable by every role, agents included: only a '
            'superuser can revoke it. As a superuser, in this database: REVOKE EXECUTE ON '
            'FUNCTION pg_notify(text, text) FROM PUBLIC; GRANT EXECUTE ON FUNCTION '
            'pg_notify(text, text) TO jobwarden_receiver, jobwarden_reconciler, '
            'jobwarden_operator;';
    END IF;
END $$;
