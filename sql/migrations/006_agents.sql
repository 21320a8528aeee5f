-- 006: what agents read (two views), and who may call the agent API (tokens).
--
-- The views are the agents' whole contract with the ledger: one row per
-- operation whose `done`, `outcome` and `message` cannot be misread, and the
-- failed items of a batch behind a paginated view instead of inline. They are
-- owned by the migration owner, so the agent role reads them without any right
-- on the tables underneath. Nothing sensitive is projected: no request body,
-- idempotency token, fingerprint, trace id, lease column or provider URL.

-- Bearer tokens of the HTTP API. Only the sha256 of a token is stored: a leaked
-- table cannot be replayed. A token names its caller, which becomes the
-- operation's `requested_by`, and its scope: an agent sees its own operations,
-- an operator token sees all of them.
CREATE TABLE api_tokens (
    token_id        text PRIMARY KEY CHECK (token_id ~ '^tok_[0-9a-f]{16}$'),
    caller          text NOT NULL CHECK (caller ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    scope           text NOT NULL DEFAULT 'agent' CHECK (scope IN ('agent', 'operator')),
    token_sha256    text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_by      text,
    revoked_at      timestamptz,
    last_used_at    timestamptz
);

CREATE VIEW agent_operations AS
SELECT
    o.operation_id,
    o.provider,
    o.kind,
    o.client_reference,
    o.requested_by,
    o.state::text AS state,
    o.remote_state::text AS remote_state,
    o.remote_job_id,
    -- done: jobwarden will not move this operation on its own any more: it has
    -- a final outcome, or it waits for a human (timed_out / needs_attention).
    -- An operator's decision can re-open an escalated one; `final` never reverts.
    c.outcome IS NOT NULL AS done,
    o.finished_at IS NOT NULL AS final,
    c.outcome,
    m.message,
    p.poll_after_seconds,
    o.progress_completed,
    o.progress_total,
    c.progress_percent,
    -- The result appears only once the operation succeeded: before that there
    -- is nothing an agent may act on.
    CASE WHEN o.state = 'succeeded' THEN o.result_ref END AS result_ref,
    CASE WHEN o.state = 'succeeded' THEN r.inline END AS result,
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
-- at most one open escalation per operation (escalations_one_open)
LEFT JOIN escalations e ON e.operation_id = o.operation_id AND e.resolved_at IS NULL
-- the transition that led to the current state, whose cause says why
LEFT JOIN history h ON h.operation_id = o.operation_id AND h.seq = o.history_seq
-- the provider's own words, when its last answer carried an error
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
            WHEN o.state IN ('cancelled', 'abandoned') THEN 'cancelled'
            WHEN o.state = 'result_timed_out' THEN 'timed_out'
            WHEN o.state IN ('needs_attention', 'cancellation_unconfirmed', 'result_unavailable',
                             'result_validation_failed') THEN 'needs_attention'
        END AS outcome,
        coalesce(o.progress_percent,
                 CASE WHEN o.progress_total > 0
                      THEN round(100.0 * o.progress_completed / o.progress_total, 2) END)
            AS progress_percent,
        coalesce(r.items_failed, 0) > 0
            OR EXISTS (SELECT 1 FROM result_item_failures f WHERE f.result_id = o.result_id)
            AS has_failed_items,
        CASE WHEN o.state = 'failed' THEN coalesce(x.error_code, 'failed')
             ELSE o.state::text END AS error_code,
        CASE
            WHEN o.state IN ('needs_attention', 'cancellation_unconfirmed', 'result_timed_out',
                             'result_unavailable', 'result_validation_failed')
                THEN coalesce(e.reason, x.error_message, h.cause)
            WHEN o.state IN ('cancelled', 'abandoned') THEN coalesce(o.cancel_reason, h.cause)
            ELSE coalesce(x.error_message, h.cause)
        END AS reason
) c
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN c.outcome IS NOT NULL THEN NULL
        -- nothing scheduled, or a worker is acting on it right now (a claimed
        -- row's next_poll_at is its lease expiry, not a poll): check back soon.
        -- 5 s: a provider call plus its bookkeeping; agents should prefer :wait.
        WHEN o.next_poll_at IS NULL OR o.lease_expires_at > now()
            THEN greatest(1, coalesce(o.poll_after_seconds, 5))
        -- one second after the reconciler's next read, so the answer is fresh;
        -- capped at an hour so a far-off backstop poll never reads as "forever"
        ELSE greatest(1, least(3600,
                 ceil(extract(epoch FROM o.next_poll_at - now()))::integer + 1))
    END AS poll_after_seconds
) p
CROSS JOIN LATERAL (
    SELECT p.poll_after_seconds
           || CASE WHEN p.poll_after_seconds = 1 THEN ' second' ELSE ' seconds' END AS wait_words
) pw
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN o.state = 'create_pending' THEN format(
            'STARTED and NOT complete: the request is recorded and is being sent to %s. '
            'Do not report success. Check again after %s.',
            o.provider, pw.wait_words)
        WHEN o.state = 'create_unknown' THEN format(
            'STARTED and NOT complete: it is not yet known whether %s created the job; '
            'jobwarden is finding out without creating a duplicate. Do not report success '
            'and do not resubmit. Check again after %s.',
            o.provider, pw.wait_words)
        WHEN o.state IN ('accepted', 'observing') THEN format(
            'STARTED and NOT complete: %s is running the job (job %s)%s. '
            'Do not report success. Check again after %s.',
            o.provider, coalesce(o.remote_job_id, 'id not given yet'),
            CASE WHEN c.progress_percent IS NOT NULL
                 THEN format(', %s%% done', round(c.progress_percent)) ELSE '' END,
            pw.wait_words)
        WHEN o.state = 'result_collecting' THEN format(
            'NOT complete yet: the provider reports the job finished and jobwarden is '
            'fetching and checking its result. Do not report success until done is true. '
            'Check again after %s.', pw.wait_words)
        WHEN o.state IN ('cancel_requested', 'cancelling') THEN format(
            'Cancellation requested, NOT yet confirmed by the provider: the job may still '
            'finish or fail. Do not report it as cancelled. Check again after %s.',
            pw.wait_words)
        WHEN c.outcome = 'completed_with_errors' AND r.items_failed IS NOT NULL THEN format(
            'Finished: %s of %s items failed and were not written. '
            'Review errors before reporting success.',
            r.items_failed, coalesce(r.items_total::text, 'an unknown number of'))
        WHEN c.outcome = 'completed_with_errors' THEN
            'Finished, but the provider reports only partial success: some items failed '
            'and were not written. Review errors before reporting success.'
        WHEN c.outcome = 'succeeded' THEN format(
            'Finished successfully%s. The result is verified and ready.',
            CASE WHEN r.items_total IS NOT NULL
                 THEN format(': all %s items succeeded', r.items_total) ELSE '' END)
        WHEN o.state = 'failed' THEN format(
            'FAILED: %s. Do not report success.', rtrim(c.reason, '. '))
        WHEN o.state = 'cancelled' THEN
            'Cancelled: the provider confirmed the job stopped. There is no result.'
        WHEN o.state = 'abandoned' THEN
            'Cancelled before it reached the provider: no job was created. There is no result.'
        WHEN o.state = 'result_timed_out' THEN format(
            'Stopped waiting after the deadline; the remote job may still be running (job %s). '
            'Do not report success and do not resubmit: an operator has been asked to decide.',
            coalesce(o.remote_job_id, 'id unknown'))
        WHEN o.state = 'cancellation_unconfirmed' THEN format(
            'Cancellation requested, NOT confirmed by the provider before the deadline: the job '
            'may still be running (job %s). Do not report it as cancelled; an operator has been '
            'asked to decide.', coalesce(o.remote_job_id, 'id unknown'))
        WHEN o.state = 'result_unavailable' THEN format(
            'NOT complete: the provider reports the job finished, but its result could not be '
            'fetched (%s). Do not report success and do not resubmit; an operator has been '
            'asked to decide.', c.reason)
        WHEN o.state = 'result_validation_failed' THEN format(
            'NOT complete: the job finished but its result failed our checks (%s) and was not '
            'accepted. Do not report success; an operator has been asked to decide.', c.reason)
        WHEN o.state = 'needs_attention' THEN format(
            'Needs a human decision: %s. Do not report success and do not resubmit; an '
            'operator has been asked to decide.', c.reason)
    END AS message
) m;

COMMENT ON VIEW agent_operations IS
    'One row per operation for agents: done/outcome/message cannot be misread (README, "Agent views").';

COMMENT ON COLUMN agent_operations.operation_id IS
    'Our id of the operation (op_ + ULID); the handle for every later call.';
COMMENT ON COLUMN agent_operations.provider IS
    'Configured provider the job runs at.';
COMMENT ON COLUMN agent_operations.kind IS
    'What the job is, as named by the submitter (export, import, ...).';
COMMENT ON COLUMN agent_operations.client_reference IS
    'The submitter''s idempotency key: same reference + same request = same operation.';
COMMENT ON COLUMN agent_operations.requested_by IS
    'Authenticated caller that submitted it (agent:NAME or operator:NAME).';
COMMENT ON COLUMN agent_operations.state IS
    'jobwarden''s local state (the state machine); cancel_requested is local, cancelled is remote.';
COMMENT ON COLUMN agent_operations.remote_state IS
    'Last state the provider reported, mapped to pending/running/succeeded/partially_succeeded/failed/cancelled.';
COMMENT ON COLUMN agent_operations.remote_job_id IS
    'The provider''s job id, once it gave one.';
COMMENT ON COLUMN agent_operations.done IS
    'true when jobwarden will not move it on its own: a final outcome, or waiting for a human. false = NOT complete.';
COMMENT ON COLUMN agent_operations.final IS
    'true once the outcome can never change (succeeded, failed, cancelled, abandoned).';
COMMENT ON COLUMN agent_operations.outcome IS
    'succeeded | completed_with_errors | failed | cancelled | timed_out | needs_attention; NULL while running.';
COMMENT ON COLUMN agent_operations.message IS
    'Plain words for the agent: what happened and what to do next. Read it.';
COMMENT ON COLUMN agent_operations.poll_after_seconds IS
    'When to look again if not using the API wait; NULL when done.';
COMMENT ON COLUMN agent_operations.progress_completed IS
    'Items done so far, as the provider reported (never evidence of success).';
COMMENT ON COLUMN agent_operations.progress_total IS
    'Items in total, as the provider reported.';
COMMENT ON COLUMN agent_operations.progress_percent IS
    'Progress in percent, reported or computed from the counts.';
COMMENT ON COLUMN agent_operations.result_ref IS
    'Where the verified result is stored; only once succeeded.';
COMMENT ON COLUMN agent_operations.result IS
    'The verified result inline when small (JSON); only once succeeded.';
COMMENT ON COLUMN agent_operations.items_total IS
    'Items in the batch according to the verified result.';
COMMENT ON COLUMN agent_operations.items_succeeded IS
    'Items written successfully.';
COMMENT ON COLUMN agent_operations.items_failed IS
    'Items that failed and were not written (see errors_ref).';
COMMENT ON COLUMN agent_operations.errors_ref IS
    'Paginated list of failed items (API path; rows in agent_failed_items).';
COMMENT ON COLUMN agent_operations.error IS
    '{code, message} when done and not a success.';
COMMENT ON COLUMN agent_operations.cancel_requested_at IS
    'When someone asked to cancel (a request, not a confirmation).';
COMMENT ON COLUMN agent_operations.result_deadline IS
    'When jobwarden stops waiting for the result and escalates (timed_out).';
COMMENT ON COLUMN agent_operations.created_at IS
    'When the intent was recorded.';
COMMENT ON COLUMN agent_operations.updated_at IS
    'Last change to the record.';
COMMENT ON COLUMN agent_operations.finished_at IS
    'When it reached a final state.';

-- Failed items of a batch, read page by page (keyset on item_key), never inline.
CREATE VIEW agent_failed_items AS
SELECT o.operation_id, f.item_key, f.code, f.message
FROM operations o
JOIN result_item_failures f ON f.result_id = o.result_id;

-- Agents: the two views and nothing else.
GRANT SELECT ON agent_operations, agent_failed_items TO jobwarden_agent;

-- The agent API runs inside the receiver. Submitting inserts an operation (and,
-- through the trigger, its first history row); cancelling records the intent
-- and appends a transition. The state machine triggers still judge every
-- write, so these rights let the receiver ask, never force.
GRANT SELECT ON agent_operations, agent_failed_items, api_tokens, history, state_edges
    TO jobwarden_receiver;
GRANT UPDATE (last_used_at) ON api_tokens TO jobwarden_receiver;
GRANT INSERT ON operations, history TO jobwarden_receiver;
GRANT UPDATE (cancel_requested_at, cancel_requested_by, cancel_reason, cancel_deadline,
              state, history_seq, history_head, finished_at)
    ON operations TO jobwarden_receiver;
GRANT SELECT, INSERT ON completion_claims TO jobwarden_receiver;
GRANT USAGE ON SEQUENCE history_history_id_seq TO jobwarden_receiver;

-- Operators (CLI): read everything agents read, and manage tokens.
GRANT SELECT ON agent_operations, agent_failed_items TO jobwarden_operator;
GRANT SELECT, INSERT ON api_tokens TO jobwarden_operator;
GRANT UPDATE (revoked_at) ON api_tokens TO jobwarden_operator;
