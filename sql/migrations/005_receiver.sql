-- 005: retention of webhook dedupe rows.
-- Dedupe rows must outlive every provider retry (days), then unattached ones
-- can go: they never became evidence of any operation. Attached events are
-- evidence (observations point at them) and are kept.
--
-- No role gets DELETE on webhook_events: the purge is this one function,
-- SECURITY DEFINER, which can only remove unattached rows older than the
-- retention, a bounded slice per call so a large backlog never holds one long
-- transaction.

CREATE FUNCTION jw_purge_webhook_events(p_older_than interval, p_limit integer)
RETURNS integer
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
    WITH doomed AS (
        SELECT webhook_event_id
        FROM public.webhook_events
        WHERE operation_id IS NULL
          AND received_at < clock_timestamp() - greatest(p_older_than, interval '1 day')
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

REVOKE ALL ON FUNCTION jw_purge_webhook_events(interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jw_purge_webhook_events(interval, integer)
    TO jobwarden_reconciler, jobwarden_operator;
