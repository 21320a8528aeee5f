-- Queries of shared/ledger/leases.py: claims, renewals and releases, all fenced.

-- name: claim_due
-- Claim up to $2 due operations for worker $1 for $3 seconds. Claiming pushes
-- next_poll_at to the lease expiry, so a leased row is not "due" again until
-- its lease lapses: the claim is an index range scan on the schedule
-- (operation_schedule_due, migration 029), and
-- a crashed worker's rows come back by themselves (no separate rescuer). The
-- fence counter goes up on every claim; writes carry it, so the previous
-- holder can no longer write.
-- The cut-off is an uncorrelated subquery, evaluated once: an index
-- condition, so a claim that cannot fill its batch never walks every
-- scheduled row.
-- Woken rows (operation_wakes, migration 015) are due too, once unleased and
-- as far as the provider allows (jw_due_at), and go first: someone asked for
-- them now. Both sources lock with SKIP LOCKED, so concurrent workers take
-- different rows; a row both name is claimed once. The claim consumes the
-- wakes of the rows it claims, and drops those of rows no longer scheduled.
-- A claim in a polled state is a status read about to leave: the same UPDATE
-- marks it (read_fence). A mark the previous holder left (it vanished
-- mid-read) is first recorded as a call whose outcome was lost, and that row
-- is not claimed: it is held back for one more lease ($3 seconds), its wake
-- kept. The lost read left at most one lease before this claim and was
-- answered before its lease lapsed, so a Retry-After no longer than the lease
-- that died with the worker is still honoured. The fence moves on all the
-- same, so the vanished worker can no longer write.
-- Rows are locked FOR NO KEY UPDATE, what the UPDATE itself takes: claims
-- still exclude each other, and rows that only reference an operation (a
-- stored webhook, a call, a wake) are not kept waiting while a claim runs;
-- only a new wake for a row claimed through its wake waits, for the wake
-- this claim deletes (one statement, committed at once).
WITH woken AS (
    -- Each wake looks up its own row (a subquery that locks is never merged
    -- into a join), so the few wakes drive the lookup whatever the statistics
    -- say. As a join, a planner without them (autovacuum off, a table never
    -- analyzed) read every scheduled operation on every claim: 280-380 ms at
    -- 200,000 rows. A row locked by another claim is skipped, as before.
    SELECT o.operation_id, w.requested_at AS priority
    FROM (SELECT operation_id, requested_at FROM operation_wakes
          ORDER BY requested_at OFFSET 0) AS w  -- oldest first, one row at a time
    CROSS JOIN LATERAL (
        SELECT o.operation_id
        FROM operations o
        WHERE o.operation_id = w.operation_id
          AND o.state = ANY (jw_state_set('scheduled'))
          AND (o.lease_expires_at IS NULL OR o.lease_expires_at <= (SELECT jw_now()))
          AND jw_due_at(o.state, (SELECT jw_now()), o.not_before, o.poll_not_before,
                        o.result_deadline, o.cancel_deadline) <= (SELECT jw_now())
        FOR NO KEY UPDATE SKIP LOCKED
    ) o
    ORDER BY w.requested_at
    LIMIT $2
), scheduled AS (
    -- The schedule's rows in order (an index range scan on
    -- operation_schedule_due, migration 029), each one's operation locked by
    -- its key and skipped if another claim or writer holds it; the LIMIT
    -- counts rows locked, so concurrent claims take different rows. The
    -- schedule itself is not locked: only the holder of an operation's row
    -- writes its schedule (the trigger), so a claim never waits there. A row
    -- another claim moved meanwhile fails the cut-off on its new version.
    SELECT s.operation_id, s.next_poll_at AS priority
    FROM operation_schedule s
    CROSS JOIN LATERAL (
        SELECT o.operation_id
        FROM operations o
        WHERE o.operation_id = s.operation_id AND o.next_poll_at <= (SELECT jw_now())
        FOR NO KEY UPDATE SKIP LOCKED
    ) o
    WHERE s.next_poll_at <= (SELECT jw_now())
    ORDER BY s.next_poll_at
    LIMIT $2
), picked AS (
    SELECT operation_id, min(priority) AS priority
    FROM (SELECT * FROM woken UNION ALL SELECT * FROM scheduled) AS both_sources
    GROUP BY operation_id
    ORDER BY min(priority)
    LIMIT $2
), due AS (
    -- with what a mark left by the previous holder needs (the values this claim replaces);
    -- each picked row by its key (OFFSET 0 keeps the lookup per row): as a
    -- join, a planner without statistics hashed a scan of every operation
    SELECT o.*,
           (o.read_fence IS NOT NULL AND o.status_request IS NOT NULL) AS read_lost,
           jw_now() + make_interval(secs => $3) AS hold_until
    FROM picked p
    CROSS JOIN LATERAL (
        SELECT o.operation_id, o.read_fence, o.lease_owner, o.read_claimed_at, o.poll_attempts,
               o.trace_id, o.status_request
        FROM operations o WHERE o.operation_id = p.operation_id OFFSET 0
    ) o
), lost AS (
    -- as jw_record_lost_read (migration 008), from the values this claim replaces
    INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, fence, trace_id,
                                method, url, request_headers, started_at, finished_at,
                                error_category, not_before, marked)
    SELECT p.operation_id, 'status', p.poll_attempts + 1,
           coalesce('reconciler:' || p.lease_owner, 'unknown'), p.read_fence, p.trace_id,
           p.status_request ->> 'method', p.status_request ->> 'url',
           coalesce(p.status_request -> 'headers', '{}'::jsonb),
           coalesce(p.read_claimed_at, jw_now()), jw_now(), 'lost', p.hold_until, true
    FROM due p
    WHERE p.read_lost
    ON CONFLICT (operation_id, fence) WHERE marked DO NOTHING  -- on record already
    RETURNING call_id
), claimed AS (
    UPDATE operations o SET
        lease_owner = CASE WHEN due.read_lost THEN NULL ELSE $1 END,
        lease_expires_at = CASE WHEN due.read_lost THEN NULL
                                ELSE jw_now() + make_interval(secs => $3) END,
        lease_fence = o.lease_fence + 1,
        not_before = CASE WHEN due.read_lost
                          THEN greatest(o.not_before, due.hold_until)
                          ELSE o.not_before END,
        next_poll_at = CASE WHEN due.read_lost
                            THEN jw_due_at(o.state, due.hold_until,
                                           o.not_before, o.poll_not_before,
                                           o.result_deadline, o.cancel_deadline)
                            ELSE jw_now() + make_interval(secs => $3) END,
        read_fence = CASE WHEN NOT due.read_lost AND o.state = ANY (jw_state_set('polled'))
                               AND o.status_request IS NOT NULL AND o.follow_up IS NULL
                          THEN o.lease_fence + 1 END,
        read_claimed_at = CASE WHEN due.read_lost THEN NULL ELSE jw_now() END
    FROM due
    WHERE o.operation_id = due.operation_id
      -- the same rows as an index condition, whatever the statistics say
      AND o.operation_id = ANY (ARRAY(SELECT d.operation_id FROM due d))
    RETURNING o.*, due.read_lost
), consumed AS (
    DELETE FROM operation_wakes w
    USING claimed c
    WHERE w.operation_id = c.operation_id AND NOT c.read_lost
), stale AS (
    -- wakes of rows that left the scheduled states while leased, or since;
    -- SKIP LOCKED: concurrent claims share the sweep, never wait on each other
    -- The state is a subquery per wake, so the small wake table drives the
    -- sweep whatever the statistics say: as a join, a planner without them
    -- (autovacuum off, a fresh table) scanned every operation on every claim.
    DELETE FROM operation_wakes w
    WHERE w.operation_id IN (
        SELECT s.operation_id
        FROM operation_wakes s
        WHERE NOT (SELECT o.state = ANY (jw_state_set('scheduled'))
                   FROM operations o WHERE o.operation_id = s.operation_id)
        FOR UPDATE OF s SKIP LOCKED
    )
)
SELECT claimed.*, jw_now() AS db_now FROM claimed WHERE NOT claimed.read_lost;

-- name: renew_lease
-- Just before a provider call: the lease must outlast the call, or the call is not made.
UPDATE operations SET
    lease_expires_at = jw_now() + make_interval(secs => $3),
    next_poll_at = jw_now() + make_interval(secs => $3)
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING lease_expires_at;

-- name: release
-- Give the row back with its next appointment, $3 seconds away (NULL: none),
-- never before not_before. A wake that arrived while we held the lease stays
-- in operation_wakes, so the next claim takes the row as soon as the provider
-- allows, whatever the appointment. $4: the worker knows
-- the read its claim marked never left (the mark is dropped); false when it
-- cannot know (the mark stays, and the next claim records the read as lost).
UPDATE operations SET
    lease_owner = NULL, lease_expires_at = NULL,
    read_fence = CASE WHEN $4::boolean THEN NULL ELSE read_fence END,
    next_poll_at = CASE
        WHEN NOT (state = ANY (jw_state_set('scheduled'))) THEN NULL
        WHEN $3::double precision IS NULL THEN NULL
        ELSE jw_due_at(state, jw_now() + make_interval(secs => $3),
                       not_before, poll_not_before, result_deadline, cancel_deadline) END
WHERE operation_id = $1 AND lease_fence = $2
RETURNING operation_id;

-- name: release_all_mine
-- Graceful shutdown: hand every lease back so another worker can go on at once
-- (as far as the provider allows).
UPDATE operations SET
    lease_owner = NULL, lease_expires_at = NULL,
    next_poll_at = CASE WHEN state = ANY (jw_state_set('scheduled'))
                        THEN jw_due_at(state, jw_now(), not_before, poll_not_before,
                                       result_deadline, cancel_deadline) END
WHERE lease_owner = $1;

-- name: lease_held
SELECT lease_fence = $2 AND lease_expires_at > jw_now()
FROM operations WHERE operation_id = $1;

-- name: listener_ping
-- The reconciler's LISTEN connection still answers (reconciler/daemon.py): a
-- cut that sends no FIN or RST fires no termination callback.
SELECT 1;
