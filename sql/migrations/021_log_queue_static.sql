-- 021: the evidence log's queue triggers without dynamic SQL (issue 12: the
-- cost of logging on the reconciler, target >= 0.9 of logging off).
--
-- Migration 010 queued every changed evidence row through one trigger
-- function, jw_log_enqueue(kind, id_column), which builds its INSERT with
-- format() and EXECUTEs it: parsed and planned again on every statement that
-- writes evidence (two or three per status read). Here each table gets its own
-- function whose INSERT is plain SQL, planned once per session and cached by
-- PL/pgSQL. What is queued is unchanged: the same kinds, ids, tables and
-- statements (the triggers keep their names). log_archives (one row per
-- archive run) keeps the general function.

DO $$
DECLARE
    t record;
    op text;
    fn text;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('operations', 'operation', 'operation_id', false),
        ('history', 'history', 'history_id', false),
        ('provider_calls', 'call', 'call_id', true),
        ('observations', 'observation', 'observation_id', false),
        ('webhook_events', 'webhook', 'webhook_event_id', true),
        ('results', 'result', 'result_id', false),
        ('decisions', 'decision', 'decision_id', false),
        ('escalations', 'escalation', 'escalation_id', true)
    ) AS v (tbl, kind, id_column, updates)
    LOOP
        FOREACH op IN ARRAY ARRAY['changed', 'gone'] LOOP
            fn := 'jw_log_enqueue_' || t.tbl || '_' || op;
            EXECUTE format(
                'CREATE FUNCTION %I() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER '
                'SET search_path = public, pg_temp AS $f$ BEGIN '
                'INSERT INTO log_queue (kind, row_id) SELECT %L, (%I)::text FROM %I; '
                'RETURN NULL; END $f$',
                fn, t.kind, t.id_column, op);
        END LOOP;
        FOREACH op IN ARRAY CASE WHEN t.updates THEN ARRAY['INSERT', 'UPDATE', 'DELETE']
                                 ELSE ARRAY['INSERT', 'DELETE'] END
        LOOP
            EXECUTE format('DROP TRIGGER %I ON %I', t.tbl || '_log_' || lower(op), t.tbl);
            EXECUTE format(
                'CREATE TRIGGER %I AFTER %s ON %I REFERENCING %s TABLE AS %s '
                'FOR EACH STATEMENT EXECUTE FUNCTION %I()',
                t.tbl || '_log_' || lower(op), op, t.tbl,
                CASE WHEN op = 'DELETE' THEN 'OLD' ELSE 'NEW' END,
                CASE WHEN op = 'DELETE' THEN 'gone' ELSE 'changed' END,
                'jw_log_enqueue_' || t.tbl || '_'
                    || CASE WHEN op = 'DELETE' THEN 'gone' ELSE 'changed' END);
        END LOOP;
    END LOOP;
END $$;
