-- Login roles for a jobwarden deployment: one per daemon (and per agent fleet,
-- per operator), each a member of the group role that the migrations grant
-- privileges to (sql/migrations/003_roles.sql, 006_agents.sql). A daemon that
-- logs in as its own role can do only what its group allows, and the database
-- log says which daemon did what.
--
-- Order of a fresh install (README.md, "Roles (least privilege)"):
--   1. As a superuser, once: the database and the role that owns its schema
--      and runs `jobwarden migrate` (PostgreSQL 15+; on older servers also
--      ALTER SCHEMA public OWNER TO jobwarden_owner):
--          CREATE ROLE jobwarden_owner LOGIN;
--          CREATE DATABASE jobwarden OWNER jobwarden_owner;
--   2. This file, as a superuser, connected to that database:
--          psql -d jobwarden -v ON_ERROR_STOP=1 -f create_login_roles.sql
--      It creates the group roles too, so the owner needs no CREATEROLE.
--   3. A password per login role, from psql, which hashes it on the client so
--      it never reaches the server log or the shell history:
--          \password jw_receiver
--      (or certificate / peer authentication in pg_hba.conf and no password).
--   4. DATABASE_URL=postgresql://jobwarden_owner@.../jobwarden jobwarden migrate
--
-- Safe to run again: existing roles are kept (passwords included) and their
-- memberships granted again. Plain SQL, no psql meta-commands, so any client
-- can run it. Rename or add login roles in the list below; an agent fleet or
-- an operator of its own gets its own line.

-- The group roles (NOLOGIN), as migration 003 creates them.
DO $$
DECLARE
    v_group text;
BEGIN
    FOREACH v_group IN ARRAY ARRAY['jobwarden_agent', 'jobwarden_receiver',
                                   'jobwarden_reconciler', 'jobwarden_operator'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_group) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_group);
        END IF;
    END LOOP;
END $$;

-- One login role per line: (login role, group role it belongs to).
DO $$
DECLARE
    v_login text;
    v_group text;
BEGIN
    FOR v_login, v_group IN
        SELECT w.login_role, w.group_role FROM (VALUES
            ('jw_receiver',   'jobwarden_receiver'),
            ('jw_reconciler', 'jobwarden_reconciler'),
            ('jw_agent',      'jobwarden_agent'),
            ('jw_console',    'jobwarden_operator'),  -- the console's, JW_CONSOLE_DATABASE_URL
            ('jw_operator',   'jobwarden_operator')
        ) AS w(login_role, group_role)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_login) THEN
            -- INHERIT (the default): the group's privileges apply without SET ROLE.
            EXECUTE format('CREATE ROLE %I LOGIN INHERIT', v_login);
        ELSIF EXISTS (SELECT 1 FROM pg_roles
                      WHERE rolname = v_login AND (rolsuper OR rolbypassrls)) THEN
            RAISE WARNING '% is a superuser or bypasses row security: % limits nothing',
                v_login, v_group;
        END IF;
        EXECUTE format('GRANT %I TO %I', v_group, v_login);
        IF v_group = 'jobwarden_agent' THEN
            -- Agents only read their views: make a stray write fail fast and a
            -- runaway query stop before it loads the database.
            EXECUTE format('ALTER ROLE %I SET default_transaction_read_only = on', v_login);
            EXECUTE format('ALTER ROLE %I SET statement_timeout = %L', v_login, '10s');
        END IF;
    END LOOP;
END $$;

-- Only jobwarden's roles (and the owner, and superusers) may connect; PUBLIC
-- loses CONNECT and TEMPORARY on this database.
DO $$
BEGIN
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO jobwarden_agent, jobwarden_receiver, '
                   'jobwarden_reconciler, jobwarden_operator', current_database());
END $$;

-- Wake-ups (migration 011): only the daemons and operators may call pg_notify,
-- so an agent's session cannot send the reconciler's wake-up through it.
-- Revoking it from PUBLIC needs a superuser, which is why it is here as well
-- as in the migration (which does it only when run as one).
REVOKE EXECUTE ON FUNCTION pg_notify(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_notify(text, text)
    TO jobwarden_receiver, jobwarden_reconciler, jobwarden_operator;
-- And the database owner: the SECURITY DEFINER functions run as it, and one
-- of them wakes the operation it touches (migration 031's
-- jw_attach_early_events, when a job id is recorded for which webhook events
-- arrived first). Without this grant an owner that is not a superuser made
-- that recording fail with "permission denied for function pg_notify", on
-- every retry: the operation stayed in create_unknown.
DO $$
BEGIN
    EXECUTE format('GRANT EXECUTE ON FUNCTION pg_notify(text, text) TO %I',
                   (SELECT pg_get_userbyid(datdba) FROM pg_database
                    WHERE datname = current_database()));
END $$;
