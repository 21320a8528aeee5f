-- 003: least-privilege roles. Group roles only (NOLOGIN): deployments create a
-- login role per daemon and GRANT the group to it (see README, "Roles").
-- Roles are cluster-wide, so creation tolerates an existing role.

DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['jobwarden_agent', 'jobwarden_receiver', 'jobwarden_reconciler',
                             'jobwarden_operator'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END $$;

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO jobwarden_agent, jobwarden_receiver, jobwarden_reconciler,
    jobwarden_operator;

-- The receiver stores verified events and turns them into observations; it
-- cannot move an operation's state (no INSERT on history).
GRANT SELECT ON operations, schema_migrations TO jobwarden_receiver;
GRANT SELECT, INSERT, UPDATE ON webhook_events TO jobwarden_receiver;
GRANT SELECT, INSERT ON observations TO jobwarden_receiver;
GRANT USAGE ON SEQUENCE webhook_events_webhook_event_id_seq, observations_observation_id_seq
    TO jobwarden_receiver;

-- The reconciler drives operations: claims, provider calls, observations,
-- results, transitions (history inserts) and escalations. It never deletes.
GRANT SELECT, UPDATE ON operations TO jobwarden_reconciler;
GRANT SELECT, INSERT ON history, observations, results, result_item_failures, escalations
    TO jobwarden_reconciler;
GRANT SELECT, INSERT, UPDATE ON provider_calls, webhook_events TO jobwarden_reconciler;
GRANT UPDATE ON escalations TO jobwarden_reconciler;
GRANT SELECT ON state_edges, decisions, schema_migrations TO jobwarden_reconciler;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO jobwarden_reconciler;

-- Operators (CLI): submit, cancel, decide; still only through the ledger's
-- guarded paths — triggers apply to them like everyone else.
GRANT SELECT ON ALL TABLES IN SCHEMA public TO jobwarden_operator;
GRANT INSERT, UPDATE ON operations TO jobwarden_operator;
GRANT INSERT ON history, decisions TO jobwarden_operator;
GRANT UPDATE ON escalations TO jobwarden_operator;
GRANT INSERT ON completion_claims TO jobwarden_operator;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO jobwarden_operator;

-- jobwarden_agent gets SELECT on the agent views only, granted where the views
-- are created (a later migration); it has nothing on the tables.
