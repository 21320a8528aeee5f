-- Queries of shared/ledger/decisions.py: operator decisions and escalations.

-- name: insert_decision
INSERT INTO decisions (operation_id, actor, decision, reason)
VALUES ($1, $2, $3, $4)
RETURNING decision_id;

-- name: open_escalation
-- A new escalation row, never a rewrite of an older one (its state, reason and
-- details are fixed columns of the evidence log): an escalation still open
-- (a move from one inbox state to another) is closed first, by no decision.
-- The insert reads `closed`, so the close has run before the row is inserted.
WITH closed AS (
    UPDATE escalations SET resolved_at = jw_now()
    WHERE operation_id = $1 AND resolved_at IS NULL
    RETURNING escalation_id
)
INSERT INTO escalations (operation_id, state, reason, details)
SELECT $1, $2::jw_state, $3, $4 FROM (SELECT count(*) FROM closed) AS c
RETURNING escalation_id;

-- name: close_escalation
UPDATE escalations SET resolved_at = jw_now(), decision_id = $2
WHERE operation_id = $1 AND resolved_at IS NULL
RETURNING escalation_id;

-- name: escalation_context
SELECT call_kind, method, url, status_code, provider_request_id, error_category, started_at
FROM provider_calls WHERE operation_id = $1 ORDER BY call_id DESC LIMIT 20;

-- name: extend_result_deadline
-- An operator who resumes observation gives the business more time.
UPDATE operations SET
    result_deadline = greatest(result_deadline, jw_now()) + make_interval(secs => $2)
WHERE operation_id = $1
RETURNING result_deadline;

-- name: override_back_pressure
-- An operator's explicit, recorded override of the provider's back-pressure
-- (decision $2): the not-before time is dropped and the row woken (a holder's
-- lease is kept; the next claim after it takes the row).
WITH overridden AS (
    UPDATE operations SET
        not_before = NULL,
        poll_not_before = NULL,
        next_poll_at = CASE WHEN lease_expires_at IS NULL OR lease_expires_at < jw_now()
                            THEN jw_now() ELSE next_poll_at END
    WHERE operation_id = $1 AND state = ANY (jw_state_set('scheduled'))
      AND EXISTS (SELECT 1 FROM decisions d WHERE d.decision_id = $2 AND d.operation_id = $1)
    RETURNING operation_id
), woken AS (
    INSERT INTO operation_wakes (operation_id)
    SELECT operation_id FROM overridden
    ON CONFLICT (operation_id) DO NOTHING
)
SELECT operation_id FROM overridden;

-- name: renew_cancel_intent
-- An operator decides to cancel again: a new intent (who, why, a fresh
-- deadline), and the earlier cancel counts as not sent, so it is sent anew.
UPDATE operations SET
    cancel_requested_at = jw_now(),
    cancel_requested_by = $2,
    cancel_reason = $3,
    cancel_deadline = jw_now() + make_interval(secs => $4),
    cancel_window = make_interval(secs => $4),
    cancel_sent_at = NULL
WHERE operation_id = $1 AND finished_at IS NULL
RETURNING operation_id;

-- name: lock_for_decision
-- The operation's row, locked as the move will lock it, before a decision is
-- recorded: the decision's foreign key takes a KEY SHARE lock, and two
-- operators deciding at once each held one and waited to upgrade it (a
-- deadlock, a traceback). The second now waits here, then reads the state the
-- first left.
SELECT state FROM operations WHERE operation_id = $1 FOR UPDATE;

-- name: lock_for_adoption
-- As lock_for_decision, for an operator adopting a job id found at the
-- provider: also the job id on record (one is never replaced) and whether a
-- reconciler holds the row's lease now (in create_unknown it may be sending
-- a same-token retry or a lookup whose answer would contradict the adoption).
SELECT state, remote_job_id, coalesce(lease_expires_at > jw_now(), false) AS leased
FROM operations WHERE operation_id = $1 FOR UPDATE;
