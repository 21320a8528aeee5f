-- 005: webhook receiver: batch wake-ups, retention of dedupe rows.
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

-- jw_request_wake (004) for a whole group-commit batch at once. The rule is
-- the same, row for row (a test runs both on the same cases); calling the
-- SQL function once per operation costs about twice the UPDATE itself, and a
-- busy receiver wakes hundreds of operations per second. Rows are locked in
-- operation_id order (an index scan over the sorted array), so concurrent
-- receivers cannot deadlock on them.
CREATE FUNCTION jw_request_wakes(p_operation_ids text[]) RETURNS integer
LANGUAGE sql AS $$
    UPDATE operations SET
        wake_requested = true,
        next_poll_at = CASE
            WHEN lease_expires_at IS NULL OR lease_expires_at < clock_timestamp()
            THEN clock_timestamp() ELSE next_poll_at END
    WHERE operation_id = ANY (p_operation_ids) AND finished_at IS NULL
      AND state NOT IN ('needs_attention', 'result_timed_out', 'result_unavailable',
                        'result_validation_failed');
    SELECT count(pg_notify('jobwarden_wakeup', woken.operation_id))::integer
    FROM (SELECT DISTINCT unnest(p_operation_ids) AS operation_id ORDER BY 1) AS woken;
$$;

GRANT EXECUTE ON FUNCTION jw_request_wakes(text[]) TO jobwarden_receiver, jobwarden_reconciler,
    jobwarden_operator;
