-- 022: an early webhook event wakes its operation when it is attached (issue 13:
-- at most 4 provider calls per job with webhooks).
--
-- With webhooks the reconciler no longer reads a job the moment it is
-- accepted: its first read is the backstop's, or sooner when a delivery wakes
-- the operation. An event that arrived before the create response (a fast job,
-- a slow create answer) is attached by this trigger when the job id is
-- written, and became an observation but woke nobody: the immediate read used
-- to pick it up. Now the attachment wakes the operation (jw_request_wakes, as
-- a matched event does, webhook_attach_stragglers too); the writer holds the
-- lease at that moment, so the wake waits in operation_wakes and the next
-- claim takes the row as soon as the lease is handed back.

CREATE OR REPLACE FUNCTION jw_attach_early_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    attached_count integer;
BEGIN
    WITH attached AS (
        UPDATE webhook_events SET operation_id = NEW.operation_id, attached_at = jw_now()
        WHERE provider = NEW.provider AND remote_job_id = NEW.remote_job_id AND operation_id IS NULL
        RETURNING *
    ), observed AS (
        INSERT INTO observations (operation_id, source, webhook_event_id, remote_state,
                                  remote_state_raw)
        SELECT NEW.operation_id, 'webhook', a.webhook_event_id, a.remote_state, a.remote_state_raw
        FROM attached a ORDER BY a.webhook_event_id
        RETURNING 1
    )
    SELECT count(*) INTO attached_count FROM observed;
    IF attached_count > 0 THEN
        PERFORM jw_request_wakes(ARRAY[NEW.operation_id]);
    END IF;
    RETURN NULL;
END $$;
