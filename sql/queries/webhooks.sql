-- Queries of shared/ledger/webhooks.py: verified webhook events.

-- name: receiver_store_events
-- One group-commit batch of verified webhook events, as parallel arrays with one
-- element per distinct (provider, event_id). The caller sorts the keys so that
-- concurrent receivers take the unique-index locks in the same order.
--
-- Each event is matched to an operation of its provider by the references it
-- carries, most trusted first, the first that matches winning:
--   1. our operation id (operation_ref);
--   2. the agent's client reference, only when exactly one operation of the
--      provider has it (a reference is unique per agent, not per provider: two
--      agents may both have used it, and then it names neither);
--   3. the provider's job id.
-- A reference never matches an operation whose recorded job id contradicts
-- the job id the event carries. `matched_by` says which reference matched.
-- An event matched by none is stored unattached, and attached when its job id
-- is recorded (jw_attach_early_events, webhook_attach_stragglers).
--
-- New events are inserted, attached when matched, and matched ones become an
-- observation in the same statement. An event already on record is never
-- re-created: its duplicate_deliveries grows by one per delivery, `extra`
-- counting the copies folded into this batch by the caller.
--
-- `inserted` compares the resulting counter with `extra`: a fresh row holds
-- exactly `extra`, an existing one at least `extra + 1`.
--
-- Operations that got an observation are woken (jw_request_wakes: the
-- lease-safe rule of jw_request_wake for a set; NOTIFY at commit), unless the
-- event only says the job is pending or running and the operation already
-- holds its job id: such news decides nothing, and a provider that reports
-- progress (a page of a crawl, a log line) would get a status read per event.
-- An event naming no state we map may be an end: it wakes. So does any event
-- for an operation without its job id (a create whose answer was lost): the
-- wake makes the create step look for the job now. The `woken`
-- CTE is volatile, hence never inlined; the scalar subquery makes it run
-- exactly once. One statement is one round trip and one implicit transaction:
-- the whole batch commits or none of it.
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::boolean[], $5::text[], $6::text[],
                $7::text[], $8::text[], $9::text[], $10::text[], $11::integer[])
         WITH ORDINALITY AS i (provider, event_id, scheme, id_signed, remote_job_id,
                               operation_ref, client_reference, remote_state, remote_state_raw,
                               payload, extra, ord)
),
matched AS (
    SELECT i.*,
           coalesce(by_op.operation_id, by_ref.operation_id, by_job.operation_id) AS operation_id,
           coalesce(by_op.trace_id, by_ref.trace_id, by_job.trace_id) AS trace_id,
           coalesce(by_op.job_known, by_ref.job_known, by_job.operation_id IS NOT NULL)
               AS job_known,
           CASE WHEN by_op.operation_id IS NOT NULL THEN 'operation_id'
                WHEN by_ref.operation_id IS NOT NULL THEN 'client_reference'
                WHEN by_job.operation_id IS NOT NULL THEN 'job_id' END AS matched_by
    FROM input i
    -- Every lookup is LATERAL ... LIMIT so that each is an index probe per
    -- event, never a join strategy that scans the whole operations table.
    -- The writers keep one plan (plan_cache_mode), made with whatever the
    -- statistics said then, perhaps of an empty table: where another index
    -- could serve, the probe is fenced (OFFSET 0) so it can only use its own
    -- index, and a plan made on an empty table never walks a provider's
    -- operations later.
    LEFT JOIN LATERAL (
        SELECT op_key.operation_id, op_key.trace_id, op_key.remote_job_id IS NOT NULL AS job_known
        FROM (  -- by primary key only
            SELECT o.operation_id, o.trace_id, o.provider, o.remote_job_id
            FROM operations o
            WHERE i.operation_ref IS NOT NULL AND o.operation_id = i.operation_ref
            OFFSET 0
        ) op_key
        WHERE op_key.provider = i.provider
          AND (op_key.remote_job_id IS NULL OR i.remote_job_id IS NULL
               OR op_key.remote_job_id = i.remote_job_id)
        LIMIT 1
    ) by_op ON true
    -- Two candidates are enough to tell "exactly one" from "ambiguous"; the
    -- job id is checked after counting, so an ambiguous reference stays
    -- ambiguous whatever the candidates' job ids say.
    LEFT JOIN LATERAL (
        SELECT min(c.operation_id) AS operation_id, min(c.trace_id) AS trace_id,
               bool_and(c.remote_job_id IS NOT NULL) AS job_known
        FROM (
            SELECT o.operation_id, o.trace_id, o.remote_job_id FROM operations o
            WHERE by_op.operation_id IS NULL
              AND i.client_reference IS NOT NULL
              AND o.provider = i.provider
              AND o.client_reference = i.client_reference
            LIMIT 2
        ) c
        HAVING count(*) = 1
           AND bool_and(c.remote_job_id IS NULL OR i.remote_job_id IS NULL
                        OR c.remote_job_id = i.remote_job_id)
    ) by_ref ON true
    LEFT JOIN LATERAL (
        SELECT job.operation_id, job.trace_id
        FROM (  -- by (provider, job id) only, never the primary key's order
            SELECT o.operation_id, o.trace_id FROM operations o
            WHERE by_op.operation_id IS NULL
              AND by_ref.operation_id IS NULL
              AND i.remote_job_id IS NOT NULL
              AND o.provider = i.provider
              AND o.remote_job_id = i.remote_job_id
            OFFSET 0
        ) job
        ORDER BY job.operation_id
        LIMIT 1
    ) by_job ON true
),
upserted AS (
    INSERT INTO webhook_events AS w (
        provider, event_id, signature_scheme, id_signed, remote_job_id, operation_ref,
        client_reference, remote_state, remote_state_raw, payload, operation_id, attached_at,
        duplicate_deliveries
    )
    SELECT provider, event_id, scheme, id_signed, remote_job_id, operation_ref,
           client_reference, remote_state::jw_remote_state, remote_state_raw, payload::jsonb,
           operation_id, CASE WHEN operation_id IS NOT NULL THEN jw_now() END, extra
    FROM matched
    ORDER BY ord
    ON CONFLICT (provider, event_id) DO UPDATE
        SET duplicate_deliveries = w.duplicate_deliveries + EXCLUDED.duplicate_deliveries + 1
    RETURNING w.webhook_event_id, w.provider, w.event_id, w.operation_id, w.remote_state,
              w.remote_state_raw, w.duplicate_deliveries
),
outcome AS (
    SELECT u.*, m.ord, m.trace_id, m.matched_by, u.duplicate_deliveries = m.extra AS inserted,
           u.remote_state IS NULL OR u.remote_state NOT IN ('pending', 'running')
               OR NOT m.job_known AS wakes
    FROM upserted u
    JOIN matched m ON m.provider = u.provider AND m.event_id = u.event_id
),
observed AS (
    INSERT INTO observations (operation_id, source, webhook_event_id, remote_state,
                              remote_state_raw)
    SELECT operation_id, 'webhook', webhook_event_id, remote_state, remote_state_raw
    FROM outcome
    WHERE inserted AND operation_id IS NOT NULL
    ORDER BY ord
),
woken AS (  -- of the events `observed` records (it runs whether read or not)
    SELECT jw_request_wakes(array_agg(DISTINCT operation_id)) AS notified
    FROM outcome
    WHERE inserted AND operation_id IS NOT NULL AND wakes
    HAVING count(*) > 0
)
SELECT ord, webhook_event_id, operation_id, trace_id, matched_by, inserted,
       (SELECT notified FROM woken) AS woken
FROM outcome
ORDER BY ord;

-- name: webhook_attach_stragglers
-- Attach unattached events whose job id is now on record. The trigger on
-- operations attaches early events when the job id is written, but an event
-- committed by a receiver while that very write was in flight is invisible to
-- both sides (each ran before the other committed); this catches it.
-- `WHERE w.operation_id IS NULL` is re-checked on the locked row, so a
-- concurrent trigger or sweep attaches each event exactly once. Each attached
-- event becomes an observation and wakes its operation, in the same statement
-- (hence the same commit): jw_observe_late_events (migration 024).
-- Every unattached event is read: the purge's sweep, and the first sweeps
-- after a start (webhook_attach_recent_stragglers reads only recent ones).
WITH attached AS (
    UPDATE webhook_events w
    SET operation_id = o.operation_id, attached_at = jw_now()
    FROM operations o
    WHERE w.operation_id IS NULL
      AND w.remote_job_id IS NOT NULL
      AND o.provider = w.provider
      AND o.remote_job_id = w.remote_job_id
    RETURNING w.webhook_event_id, w.operation_id, w.remote_state, w.remote_state_raw
)
SELECT jw_observe_late_events(array_agg(webhook_event_id), array_agg(operation_id),
                              array_agg(remote_state), array_agg(remote_state_raw))
FROM attached;

-- name: webhook_attach_recent_stragglers
-- webhook_attach_stragglers for the events with an id above $1, up to $2
-- (the newest on record when the sweep began; later ones are the next
-- sweep's): the minute's sweep (shared/ledger/webhooks.py StragglerSweep),
-- since a race leaves a recent event. The events that never match (jobs started
-- elsewhere, kept for the whole retention) are then not read again every
-- minute: each id in the range is looked up by itself (a subquery that cannot
-- be merged), and the ids found are an index condition of the update, so
-- what is read does not depend on the statistics. As a range condition, a
-- planner without them read every unattached event. The coalesce re-checks
-- on the locked row what `IS NULL` would (an operation id is never empty),
-- in a form that keeps a planner without statistics from reading the whole
-- partial index of unattached events beside the ids.
WITH attached AS (
    UPDATE webhook_events w
    SET operation_id = o.operation_id, attached_at = jw_now()
    FROM operations o
    WHERE w.webhook_event_id = ANY (ARRAY(
            SELECT r.webhook_event_id
            FROM generate_series($1::bigint + 1, $2::bigint) AS g (id)
            CROSS JOIN LATERAL (
                SELECT r.webhook_event_id FROM webhook_events r
                WHERE r.webhook_event_id = g.id
                  AND r.operation_id IS NULL AND r.remote_job_id IS NOT NULL
                OFFSET 0) AS r))
      AND coalesce(w.operation_id, '') = ''
      AND o.provider = w.provider
      AND o.remote_job_id = w.remote_job_id
    RETURNING w.webhook_event_id, w.operation_id, w.remote_state, w.remote_state_raw
)
SELECT jw_observe_late_events(array_agg(webhook_event_id), array_agg(operation_id),
                              array_agg(remote_state), array_agg(remote_state_raw))
FROM attached;

-- name: webhook_newest_event
-- The newest event's id (0: none yet), read backwards off the primary key.
SELECT coalesce(max(webhook_event_id), 0) FROM webhook_events;

-- name: webhook_purge_unattached
-- One bounded slice of the retention purge (see migration 005).
SELECT jw_purge_webhook_events(make_interval(days => $1), $2);

-- name: webhook_refusals_count
-- Add one receiver process's tally of refused deliveries (migration 017): one
-- element per (provider, reason, UTC day) with its count and newest time.
INSERT INTO webhook_refusal_counts (provider, reason, day, refusals, last_at)
SELECT t.provider, t.reason, t.day, t.refusals, t.last_at
FROM unnest($1::text[], $2::text[], $3::date[], $4::bigint[], $5::timestamptz[])
     AS t(provider, reason, day, refusals, last_at)
ON CONFLICT (provider, reason, day) DO UPDATE
SET refusals = webhook_refusal_counts.refusals + excluded.refusals,
    last_at = greatest(webhook_refusal_counts.last_at, excluded.last_at);

-- name: webhook_refusals_note_latest
-- Keep the newest refused deliveries: add this flush's, then drop those more
-- than $5 identities older than the newest (the DELETE sees the table as it
-- was before this INSERT, so it never removes what it just added).
WITH added AS (
    INSERT INTO webhook_refusals_latest (provider, reason, status, at)
    SELECT * FROM unnest($1::text[], $2::text[], $3::smallint[], $4::timestamptz[])
    RETURNING refusal_id
)
DELETE FROM webhook_refusals_latest
WHERE refusal_id <= (SELECT max(refusal_id) FROM added) - $5;

-- name: webhook_end_announced
-- Whether a webhook observation of the operation reports one of the remote
-- states $2 (the terminal ones, from Python) and fewer than $3 of our status
-- reads came after it: asked while the operation is still observed, an end our
-- reads have not confirmed yet, and not yet given up on (counted in reads, not
-- time: no clock to agree on).
SELECT EXISTS (
    SELECT 1 FROM observations w
    WHERE w.operation_id = $1 AND w.source = 'webhook'
      AND w.remote_state = ANY ($2::jw_remote_state[])
      AND (SELECT count(*) FROM observations r
           WHERE r.operation_id = $1 AND r.source = 'poll'
             AND r.observation_id > w.observation_id) < $3
);

-- name: receiver_writer_ping
-- Readiness: the group-commit writers' own connections answer.
SELECT 1;

-- name: webhook_delivered_for
-- Has a delivery for operation $1 been stored and matched to it (by its id or
-- reference, or by the job id just recorded: jw_attach_early_events)?
SELECT EXISTS (
    SELECT 1 FROM observations WHERE operation_id = $1 AND source = 'webhook'
);

-- name: delivered_payloads
-- The deliveries attached to operation $1, newest first (read by a cursor, a
-- few at a time, until one holds the result): where a result that comes in a
-- delivery alone (result.source = webhook) is read.
-- Found through their observations (observations_by_operation): webhook_events
-- has no index on operation_id, and one would cost every delivery's write.
-- Not one naming another job than $2, the operation's: a delivery matched by
-- our reference before the job id was recorded may be another job's (an
-- earlier attempt's), its output never this job's.
SELECT e.webhook_event_id, e.payload
FROM observations o
JOIN webhook_events e ON e.webhook_event_id = o.webhook_event_id
WHERE o.operation_id = $1 AND o.source = 'webhook' AND e.operation_id = $1
  AND (e.remote_job_id IS NULL OR e.remote_job_id = $2)
ORDER BY e.received_at DESC, e.webhook_event_id DESC;
