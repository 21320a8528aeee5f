-- 038: an accepted job is not said to be running; the agent's message is a
-- function of its own.
--
-- An operation now leaves `accepted` only on a status read that names the
-- job's state (reconciler/steps/poll.py, stop 47): until then no read of ours
-- has seen the job (a refused, throttled or unanswered read keeps it
-- accepted). The message (036) told the agent "<provider> is running the job"
-- for accepted as for observing; for accepted it now says the provider took
-- the job and no status read has seen it yet.
--
-- The message moves into jw_agent_message, so that a change of wording
-- replaces a function rather than the whole view again (008 and 036 each
-- copied the view for a few words of it). The view is 036's but for that:
-- the same columns, so the filtered agent_operations (011) over it stands.

CREATE FUNCTION jw_agent_message(
    p_state jw_state, p_provider text, p_remote_job_id text, p_has_result boolean,
    p_progress_percent numeric, p_wait_words text, p_outcome text,
    p_items_failed bigint, p_items_total bigint, p_reason text
) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_state = 'create_pending' THEN format(
            'STARTED and NOT complete: the request is recorded and is being sent to %s. '
            'Do not report success. Check again after %s.',
            p_provider, p_wait_words)
        WHEN p_state = 'create_unknown' THEN format(
            'STARTED and NOT complete: it is not yet known whether %s created the job; '
            'jobwarden is finding out without creating a duplicate. Do not report success '
            'and do not resubmit. Check again after %s.',
            p_provider, p_wait_words)
        WHEN p_state = 'accepted' THEN format(
            'STARTED and NOT complete: %s took the job (job %s); no status read has seen it '
            'yet. Do not report success. Check again after %s.',
            p_provider, coalesce(p_remote_job_id, 'id not given yet'), p_wait_words)
        WHEN p_state = 'observing' THEN format(
            'STARTED and NOT complete: %s is running the job (job %s)%s. '
            'Do not report success. Check again after %s.',
            p_provider, coalesce(p_remote_job_id, 'id not given yet'),
            CASE WHEN p_progress_percent IS NOT NULL
                 THEN format(', %s%% done', round(p_progress_percent)) ELSE '' END,
            p_wait_words)
        WHEN p_state = 'result_collecting' THEN format(
            'NOT complete yet: the provider reports the job finished and jobwarden is '
            'fetching and checking its result. Do not report success until done is true. '
            'Check again after %s.', p_wait_words)
        WHEN p_state IN ('cancel_requested', 'cancelling') THEN format(
            'Cancellation requested, NOT yet confirmed by the provider: the job may still '
            'finish or fail. Do not report it as cancelled. Check again after %s.',
            p_wait_words)
        WHEN p_outcome = 'completed_with_errors' AND p_items_failed IS NOT NULL THEN format(
            'Finished: %s of %s items failed and were not written. '
            'Review errors before reporting success.',
            p_items_failed, coalesce(p_items_total::text, 'an unknown number of'))
        WHEN p_outcome = 'completed_with_errors' THEN
            'Finished, but the provider reports only partial success: some items failed '
            'and were not written. Review errors before reporting success.'
        WHEN p_outcome = 'succeeded' THEN format(
            'Finished successfully%s. The result is verified and ready.',
            CASE WHEN p_items_total IS NOT NULL
                 THEN format(': all %s items succeeded', p_items_total) ELSE '' END)
        WHEN p_state = 'failed' THEN format(
            'FAILED: %s. Do not report success.', rtrim(p_reason, '. '))
        WHEN p_state = 'cancelled' AND p_has_result THEN format(
            'Cancelled: the provider confirmed the job stopped. What it had produced was '
            'kept (%s): result_ref and result hold that partial output, NOT a complete '
            'result.',
            CASE WHEN p_items_total IS NOT NULL THEN format('%s items', p_items_total)
                 ELSE 'its size unknown' END)
        WHEN p_state = 'cancelled' THEN
            'Cancelled: the provider confirmed the job stopped. There is no result.'
        WHEN p_state = 'abandoned' THEN
            'Cancelled before it reached the provider: no job was created. There is no result.'
        WHEN p_state = 'result_timed_out' THEN format(
            'Stopped waiting after the deadline; the remote job may still be running (job %s). '
            'Do not report success and do not resubmit: an operator has been asked to decide.',
            coalesce(p_remote_job_id, 'id unknown'))
        WHEN p_state = 'cancellation_unconfirmed' THEN format(
            'Cancellation requested, NOT confirmed by the provider before the deadline: the job '
            'may still be running (job %s). Do not report it as cancelled; an operator has been '
            'asked to decide.', coalesce(p_remote_job_id, 'id unknown'))
        WHEN p_state = 'result_unavailable' THEN format(
            'NOT complete: the provider reports the job finished, but its result could not be '
            'fetched (%s). Do not report success and do not resubmit; an operator has been '
            'asked to decide.', p_reason)
        WHEN p_state = 'result_validation_failed' THEN format(
            'NOT complete: the job finished but its result failed our checks (%s) and was not '
            'accepted. Do not report success; an operator has been asked to decide.', p_reason)
        WHEN p_state = 'needs_attention' THEN format(
            'Needs a human decision: %s. Do not report success and do not resubmit; an '
            'operator has been asked to decide.', p_reason)
    END
$$;

COMMENT ON FUNCTION jw_agent_message(jw_state, text, text, boolean, numeric, text, text,
                                     bigint, bigint, text) IS
    'The message agents read in operations_overview: what the operation''s state means '
    'for them and what not to do (report success, resubmit).';
-- Functions a view calls are checked against the view's user: every role reading it.
GRANT EXECUTE ON FUNCTION jw_agent_message(jw_state, text, text, boolean, numeric, text, text,
                                           bigint, bigint, text)
    TO jobwarden_agent, jobwarden_receiver, jobwarden_reconciler, jobwarden_operator;

CREATE OR REPLACE VIEW operations_overview AS
SELECT
    o.operation_id,
    o.provider,
    o.kind,
    o.client_reference,
    o.requested_by,
    o.state::text AS state,
    o.remote_state::text AS remote_state,
    o.remote_job_id,
    c.outcome IS NOT NULL AS done,
    o.finished_at IS NOT NULL AS final,
    c.outcome,
    m.message,
    p.poll_after_seconds,
    o.progress_completed,
    o.progress_total,
    c.progress_percent,
    CASE WHEN o.state = 'succeeded' OR (o.state = 'cancelled' AND o.result_id IS NOT NULL)
         THEN o.result_ref END AS result_ref,
    CASE WHEN o.state = 'succeeded' OR (o.state = 'cancelled' AND o.result_id IS NOT NULL)
         THEN r.inline END AS result,
    r.items_total,
    r.items_succeeded,
    r.items_failed,
    CASE WHEN c.has_failed_items
         THEN '/v1/operations/' || o.operation_id || '/failed-items' END AS errors_ref,
    CASE WHEN c.outcome IS NOT NULL AND c.outcome NOT IN ('succeeded', 'completed_with_errors')
         THEN jsonb_build_object('code', c.error_code,
                                 'message', coalesce(c.reason, c.outcome))
    END AS error,
    o.cancel_requested_at,
    o.result_deadline,
    o.created_at,
    o.updated_at,
    o.finished_at
FROM operations o
LEFT JOIN results r ON r.result_id = o.result_id
LEFT JOIN escalations e ON e.operation_id = o.operation_id AND e.resolved_at IS NULL
LEFT JOIN history h ON h.operation_id = o.operation_id AND h.seq = o.history_seq
CROSS JOIN LATERAL (
    SELECT nullif(CASE jsonb_typeof(o.last_error)
                      WHEN 'object'
                          THEN coalesce(o.last_error ->> 'message', o.last_error ->> 'code')
                      WHEN 'string' THEN o.last_error #>> '{}' END, '') AS error_message,
           CASE WHEN jsonb_typeof(o.last_error) = 'object'
                THEN o.last_error ->> 'code' END AS error_code
) x
CROSS JOIN LATERAL (
    SELECT
        CASE
            WHEN o.state = 'succeeded' AND (coalesce(r.items_failed, 0) > 0
                                            OR o.remote_state = 'partially_succeeded')
                THEN 'completed_with_errors'
            WHEN o.state = 'succeeded' THEN 'succeeded'
            WHEN o.state = 'failed' THEN 'failed'
            WHEN o.state = ANY (jw_state_set('terminal')) THEN 'cancelled'
            WHEN o.state = 'result_timed_out' THEN 'timed_out'
            WHEN o.state = ANY (jw_state_set('inbox')) THEN 'needs_attention'
        END AS outcome,
        -- a provider may report more done than the total: never above 100 %
        coalesce(o.progress_percent,
                 CASE WHEN o.progress_total > 0
                      THEN least(100, round(100.0 * o.progress_completed / o.progress_total, 2))
                 END) AS progress_percent,
        coalesce(r.items_failed, 0) > 0
            OR EXISTS (SELECT 1 FROM result_item_failures f WHERE f.result_id = o.result_id)
            AS has_failed_items,
        CASE WHEN o.state = 'failed' THEN coalesce(x.error_code, 'failed')
             ELSE o.state::text END AS error_code,
        CASE
            WHEN o.state = ANY (jw_state_set('inbox'))
                THEN coalesce(e.reason, x.error_message, h.cause)
            WHEN o.state IN ('cancelled', 'abandoned') THEN coalesce(o.cancel_reason, h.cause)
            ELSE coalesce(x.error_message, h.cause)
        END AS reason
) c
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN c.outcome IS NOT NULL THEN NULL
        WHEN o.next_poll_at IS NULL OR o.lease_expires_at > jw_now()
            THEN greatest(1, coalesce(o.poll_after_seconds, 5))
        ELSE greatest(1, least(3600,
                 ceil(extract(epoch FROM o.next_poll_at - jw_now()))::integer + 1))
    END AS poll_after_seconds
) p
CROSS JOIN LATERAL (
    SELECT p.poll_after_seconds
           || CASE WHEN p.poll_after_seconds = 1 THEN ' second' ELSE ' seconds' END AS wait_words
) pw
CROSS JOIN LATERAL (
    SELECT jw_agent_message(o.state, o.provider, o.remote_job_id, o.result_id IS NOT NULL,
                            c.progress_percent, pw.wait_words, c.outcome, r.items_failed,
                            r.items_total, c.reason) AS message
) m;
