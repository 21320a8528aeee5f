-- 004: wake-ups from webhooks and agents without breaking leases.
-- A webhook (or an agent's cancel) must make the reconciler act now. If the row
-- is leased, moving next_poll_at would let a second worker claim it while the
-- owner is mid-call; instead the wake is recorded and the owner's release
-- honours it. Unleased rows are simply made due.

ALTER TABLE operations ADD COLUMN wake_requested boolean NOT NULL DEFAULT false;

-- The receiver may touch only these columns of an operation.
GRANT UPDATE (next_poll_at, wake_requested, webhook_seen_at) ON operations TO jobwarden_receiver;

CREATE FUNCTION jw_request_wake(p_operation_id text) RETURNS void LANGUAGE sql AS $$
    UPDATE operations SET
        wake_requested = true,
        next_poll_at = CASE
            WHEN lease_expires_at IS NULL OR lease_expires_at < clock_timestamp()
            THEN clock_timestamp() ELSE next_poll_at END
    WHERE operation_id = p_operation_id AND finished_at IS NULL
      -- escalated operations wait for an operator, not for the next event
      AND state NOT IN ('needs_attention', 'result_timed_out', 'result_unavailable',
                        'result_validation_failed');
    SELECT pg_notify('jobwarden_wakeup', p_operation_id);
$$;
GRANT EXECUTE ON FUNCTION jw_request_wake(text) TO jobwarden_receiver, jobwarden_reconciler,
    jobwarden_operator;
