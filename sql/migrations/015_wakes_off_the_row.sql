-- 015: wake-ups live in a narrow table of their own, not on the operation row.
--
-- A webhook that matches an operation asks the reconciler to read it now.
-- Until now that was an UPDATE of the operation (wake_requested, and
-- next_poll_at when unleased): next_poll_at is indexed (operations_due), so
-- every matched event rewrote a wide row with a non-HOT update, index
-- entries included, and concurrent events for one operation queued on its
-- row lock. Now a wake is one row here: inserted once (a second wake of the
-- same operation does nothing), consumed by the claim that acts on it.
--
-- The rules stay those of jw_request_wake (004, 008): a wake never breaks a
-- lease (a leased operation keeps its wake until the holder lets go; the
-- next claim after that takes it), never makes a row due before the
-- provider allows (not_before, poll_not_before: jw_due_at), and means
-- nothing to an operation outside the scheduled states (escalated ones wait
-- for an operator). A claim deletes the wakes of the rows it claims, and
-- those of rows no longer scheduled.
--
-- Working state, not evidence: the observation the event became is what the
-- log keeps.

CREATE TABLE operation_wakes (
    operation_id text PRIMARY KEY REFERENCES operations (operation_id),
    requested_at timestamptz NOT NULL DEFAULT jw_now()
);
COMMENT ON TABLE operation_wakes IS
    'Pending wake-ups: read this operation as soon as its lease and the provider allow (migration 015).';

-- The leased case used to be carried by this flag; the table carries both.
INSERT INTO operation_wakes (operation_id)
SELECT operation_id FROM operations WHERE wake_requested;
ALTER TABLE operations DROP COLUMN wake_requested;

-- Receivers insert (webhooks, an agent's cancel); the reconciler consumes;
-- operators wake (reconcile now, a back-pressure override).
GRANT SELECT, INSERT ON operation_wakes TO jobwarden_receiver, jobwarden_operator;
GRANT SELECT, INSERT, DELETE ON operation_wakes TO jobwarden_reconciler;

-- Rows are inserted in operation_id order, so concurrent receivers waking
-- overlapping sets take the key locks in the same order and cannot deadlock.
CREATE OR REPLACE FUNCTION jw_request_wakes(p_operation_ids text[]) RETURNS integer
LANGUAGE sql AS $$
    INSERT INTO operation_wakes (operation_id, requested_at)
    SELECT o.operation_id, jw_now()
    FROM operations o
    WHERE o.operation_id = ANY (p_operation_ids) AND o.state = ANY (jw_state_set('scheduled'))
    ORDER BY o.operation_id
    ON CONFLICT (operation_id) DO NOTHING;
    SELECT count(pg_notify('jobwarden_wakeup', woken.operation_id))::integer
    FROM (SELECT DISTINCT unnest(p_operation_ids) AS operation_id ORDER BY 1) AS woken;
$$;

CREATE OR REPLACE FUNCTION jw_request_wake(p_operation_id text) RETURNS void LANGUAGE sql AS $$
    SELECT jw_request_wakes(ARRAY[p_operation_id]);
$$;
