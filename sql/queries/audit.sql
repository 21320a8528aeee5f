-- Queries of shared/ledger/audit.py: reading the history chain back (read-only).

-- name: history_of
SELECT * FROM history WHERE operation_id = $1 ORDER BY seq;

-- name: history_all_ordered
-- Byte order (COLLATE "C"), the order Python compares strings in, so the
-- verifier can merge this stream with chain_heads_ordered one operation at a time.
SELECT * FROM history ORDER BY operation_id COLLATE "C", seq;

-- name: chain_heads
-- Each operation's chain head ($1, or every operation when NULL, in the order
-- history_all_ordered streams), with its result: `result_owned` is false when
-- result_id/result_ref name anything but a valid result of its own (migration
-- 025 refuses that write; only an owner bypassing the triggers can make it).
SELECT o.operation_id, o.state, o.history_seq, o.history_head, o.result_id,
       (o.result_id IS NULL AND o.result_ref IS NULL) OR EXISTS (
           SELECT 1 FROM results r
           WHERE r.result_id = o.result_id AND r.operation_id = o.operation_id AND r.valid
             AND r.storage_ref IS NOT DISTINCT FROM o.result_ref) AS result_owned
FROM operations o
WHERE ($1::text IS NULL OR o.operation_id = $1)
ORDER BY o.operation_id COLLATE "C";

-- name: audit_verification_record
-- One finished `audit verify` (migration 018), as its runner reports it.
INSERT INTO audit_verifications (ok, tree_size, root_hash, checkpoint_origin, checkpoint_size,
                                 chains_checked, chain_breaks, rows_checked, problems, pending,
                                 seconds)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING verification_id, verified_at, verified_by;

-- name: audit_pin_search_path
-- `audit verify` reads the schema the daemons write, whatever search_path its
-- login was given: a per-role setting (ALTER ROLE ... SET search_path) naming
-- a schema of pristine copies first would otherwise show the verifier those.
SELECT set_config('search_path', 'public', false);

-- The working state the operation row keeps beside its chain, against the
-- evidence it was written with (shared/ledger/working_state_audit.py). Each
-- query returns only the operations that disagree; one pass over the
-- evidence table it reads, in the snapshot of the log's own checks.

-- name: audit_job_ids
-- The job id, against the transitions that carry it. The history trigger
-- copies operations.remote_job_id into every row it inserts (migration 002),
-- and a recorded job id is never replaced or cleared (jw_operations_before_update):
-- from the first row that carries one, every later row carries that same id,
-- and so must the operation. An id recorded with no transition since (a job
-- found while cancel_requested) came from a call's answer or an operator's
-- adoption, both on record: one neither names was written by hand. An
-- operation whose calls were archived is not judged by that second rule.
WITH carried AS (
    SELECT operation_id,
           min(remote_job_id) AS least_job,
           max(remote_job_id) AS greatest_job,
           min(seq) FILTER (WHERE remote_job_id IS NOT NULL) AS first_seq,
           max(seq) FILTER (WHERE remote_job_id IS NOT NULL) AS last_seq,
           max(seq) FILTER (WHERE remote_job_id IS NULL) AS last_without
    FROM history
    GROUP BY operation_id
)
SELECT o.operation_id, o.remote_job_id, c.greatest_job AS carried_job, c.first_seq,
       c.last_seq, c.least_job <> c.greatest_job AS carries_two,
       CASE WHEN c.last_without > c.first_seq THEN c.last_without END AS dropped_at
FROM operations o
LEFT JOIN carried c USING (operation_id)
WHERE CASE
    WHEN c.first_seq IS NOT NULL THEN
        o.remote_job_id IS DISTINCT FROM c.greatest_job
        OR c.least_job <> c.greatest_job
        OR c.last_without > c.first_seq
    ELSE
        o.remote_job_id IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM provider_calls p
                        WHERE p.operation_id = o.operation_id
                          AND p.remote_job_id = o.remote_job_id)
        AND NOT EXISTS (SELECT 1 FROM decisions d
                        WHERE d.operation_id = o.operation_id
                          AND right(d.decision, length(o.remote_job_id) + 15)
                              = ', adopting job ' || o.remote_job_id)
        AND NOT EXISTS (SELECT 1 FROM log_archived x
                        WHERE x.operation_id = o.operation_id AND x.kind = 'call')
    END
ORDER BY o.operation_id COLLATE "C";

-- name: audit_remote_states
-- The remote state agents are shown (succeeded, completed_with_errors, ...),
-- against the newest status read that showed one, or a newer result verdict.
-- Only those two statements write it (record_polls, observe_result_answer),
-- each with its observation in the same statement, numbered after the row
-- lock that orders them: a read that showed no state keeps the one before
-- (coalesce), a verdict sets its own, even none. So an emptied state is judged
-- too (agents shown `succeeded` for a partially_succeeded job). An operation
-- whose observations were archived is not judged. Per operation,
-- observations_by_operation read backwards to the first such observation
-- (usually its newest): a DISTINCT ON over every observation was planned as a
-- sort of all of them (test_audit_working_state.py checks the plan has none).
SELECT o.operation_id, o.remote_state::text AS remote_state,
       n.remote_state::text AS observed, n.observation_id
FROM operations o
LEFT JOIN LATERAL (
    SELECT ob.observation_id, ob.remote_state
    FROM observations ob
    WHERE ob.operation_id = o.operation_id
      AND (ob.source = 'result' OR (ob.source = 'poll' AND ob.remote_state IS NOT NULL))
    ORDER BY ob.observation_id DESC
    LIMIT 1
) n ON true
WHERE o.remote_state IS DISTINCT FROM n.remote_state
  AND NOT EXISTS (SELECT 1 FROM log_archived x
                  WHERE x.operation_id = o.operation_id AND x.kind = 'observation')
ORDER BY o.operation_id COLLATE "C";

-- name: audit_progress
-- The progress agents are shown (progress_completed, progress_total,
-- progress_percent), against the status reads that showed it. Only
-- record_polls writes those columns, in the statement that inserts the read's
-- observation, numbered after the row lock that orders them; each column keeps
-- its value until a read gives a new one (coalesce), so each must be the one the
-- newest status read giving that column logged, or empty when none gave it. An
-- operation whose observations were archived is not judged. One grouped pass
-- over the status reads (a hash aggregate: the newest id giving each column),
-- then at most three lookups by primary key per operation with progress.
WITH newest AS (
    SELECT operation_id,
           max(observation_id) FILTER (WHERE progress_completed IS NOT NULL) AS completed_id,
           max(observation_id) FILTER (WHERE progress_total IS NOT NULL) AS total_id,
           max(observation_id) FILTER (WHERE progress_percent IS NOT NULL) AS percent_id
    FROM observations
    WHERE source = 'poll'
    GROUP BY operation_id
), shown AS (
    SELECT n.operation_id,
           (SELECT progress_completed FROM observations WHERE observation_id = n.completed_id)
               AS completed,
           (SELECT progress_total FROM observations WHERE observation_id = n.total_id) AS total,
           (SELECT progress_percent FROM observations WHERE observation_id = n.percent_id)
               AS percent,
           greatest(n.completed_id, n.total_id, n.percent_id) AS observation_id
    FROM newest n
)
SELECT o.operation_id, o.progress_completed, o.progress_total, o.progress_percent,
       s.completed, s.total, s.percent, s.observation_id
FROM operations o
LEFT JOIN shown s USING (operation_id)
WHERE (o.progress_completed IS DISTINCT FROM s.completed
       OR o.progress_total IS DISTINCT FROM s.total
       OR o.progress_percent IS DISTINCT FROM s.percent)
  AND NOT EXISTS (SELECT 1 FROM log_archived x
                  WHERE x.operation_id = o.operation_id AND x.kind = 'observation')
ORDER BY o.operation_id COLLATE "C";

-- name: audit_deadlines
-- The deadlines, against the texts that logged them (migration 040): the
-- first history row names both as the submission set them, and an operator's
-- decision that extended the result deadline names the one it set, right
-- after its move ("<from> -> <to> (result deadline <UTC>)": anchored there, a
-- job id an adoption names after it cannot pose as one). Nothing else writes
-- either column (insert_operation, extend_result_deadline), so the create
-- deadline must be the submission's and the result deadline the newest such
-- decision's (one a transition cites), else the submission's. An operation
-- submitted before 040 names neither and is judged from its first logged
-- extension on.
WITH born AS (
    SELECT operation_id,
           substring(cause FROM '^submitted; create deadline ([0-9T:.Z-]{1,40});')::timestamptz
               AS create_deadline,
           substring(cause FROM '; result deadline ([0-9T:.Z-]{1,40})$')::timestamptz
               AS result_deadline
    FROM history
    WHERE seq = 1 AND cause LIKE 'submitted; create deadline %'
), extended AS (
    SELECT DISTINCT ON (operation_id) operation_id, decision_id,
           substring(decision FROM '^[a-z_]+ -> [a-z_]+ \(result deadline ([0-9T:.Z-]{1,40})\)')
               ::timestamptz AS result_deadline
    FROM decisions d
    WHERE decision ~ '^[a-z_]+ -> [a-z_]+ \(result deadline [0-9T:.Z-]{1,40}\)'
      -- as every real one is, cited by the transition it decided: a decision row
      -- inserted alone (logged, but deciding nothing) extends nothing
      AND EXISTS (SELECT 1 FROM history h
                  WHERE h.operation_id = d.operation_id
                    AND h.cause LIKE 'operator decision #' || d.decision_id || ': %')
    ORDER BY operation_id, decision_id DESC
)
SELECT o.operation_id, o.create_deadline, o.result_deadline,
       b.create_deadline AS logged_create, coalesce(e.result_deadline, b.result_deadline)
           AS logged_result, e.decision_id,
       b.operation_id IS NOT NULL AND o.create_deadline IS DISTINCT FROM b.create_deadline
           AS create_differs
FROM operations o
LEFT JOIN born b USING (operation_id)
LEFT JOIN extended e USING (operation_id)
WHERE (b.operation_id IS NOT NULL AND o.create_deadline IS DISTINCT FROM b.create_deadline)
   OR (coalesce(e.result_deadline, b.result_deadline) IS NOT NULL
       AND o.result_deadline IS DISTINCT FROM coalesce(e.result_deadline, b.result_deadline))
ORDER BY o.operation_id COLLATE "C";

-- name: audit_status_urls
-- The status URL every read of the job (and a cancel sent there) goes to,
-- against the digest the first transition to carry the job id logged at its
-- cause's end (migration 041): set_remote_job writes the URL with the job id,
-- in the transaction of that move (or before it, for a job found while
-- cancel_requested), and a trigger refuses any change after. A first carrying
-- row that logged none was written before 041: not judged. One grouped pass
-- over the rows carrying a job (a hash aggregate), then a lookup by key each.
-- The digest is computed here, as jw_status_url_logged does, not by calling
-- it: a superuser replaces a function of the schema with one statement (one
-- answering NULL hid every rewritten URL), the built-ins named by schema.
WITH first AS (
    SELECT operation_id, min(seq) AS seq
    FROM history
    WHERE remote_job_id IS NOT NULL AND from_state IS NOT NULL
    GROUP BY operation_id
), logged AS (
    SELECT f.operation_id, f.seq,
           substring(h.cause FROM '; status URL (none|sha256:[0-9a-f]{64})$') AS status_url
    FROM first f
    JOIN history h ON h.operation_id = f.operation_id AND h.seq = f.seq
)
SELECT o.operation_id, o.status_url IS NULL AS empty, l.status_url AS logged, l.seq
FROM logged l
JOIN operations o USING (operation_id)
WHERE l.status_url IS NOT NULL
  AND l.status_url <> CASE WHEN o.status_url IS NULL THEN 'none'
                           ELSE 'sha256:' || pg_catalog.encode(pg_catalog.sha256(
                                pg_catalog.convert_to(o.status_url, 'UTF8')), 'hex') END
ORDER BY o.operation_id COLLATE "C";

-- name: audit_failed_errors
-- A failed operation's error (code and message agents are shown), when its
-- failing transition cites a status read or a result verdict that is still
-- its newest: both statements set last_error to the error they observe, and
-- nothing writes it after a move to failed. (A failure a create's answer
-- proved, or one a webhook showed, carries an error the reconciler parsed
-- from a call or kept from an earlier read: not judged.)
SELECT o.operation_id, o.last_error, ob.error AS observed, ob.observation_id, h.seq
FROM operations o
JOIN history h ON h.operation_id = o.operation_id AND h.seq = o.history_seq
JOIN observations ob ON ob.observation_id = h.evidence_id AND ob.operation_id = o.operation_id
WHERE o.state = 'failed' AND h.to_state = 'failed' AND h.evidence_kind = 'observation'
  AND ob.source IN ('poll', 'result')
  AND NOT EXISTS (SELECT 1 FROM observations later
                  WHERE later.operation_id = o.operation_id
                    AND later.source IN ('poll', 'result')
                    AND later.observation_id > ob.observation_id)
  AND o.last_error IS DISTINCT FROM ob.error
ORDER BY o.operation_id COLLATE "C";

-- name: audit_cancel_intents
-- Who asked to cancel and why, against the newest transition that recorded
-- an intent with it: an agent's or operator's request (request_cancel: the
-- transition's actor is who asked, its cause "cancel: " and the reason) or an
-- operator's decision to cancel (decide: its cause names the decision, whose
-- actor and reason the intent copies). Both write the intent and the move in
-- one transaction, and nothing else writes one once any was recorded (an
-- intent recorded while stopped for a human, with no move, needs none before
-- it: cancel_requested_at is never cleared). The first set of rows returned
-- may still agree once the cause is written as a transition writes it
-- (history_text: scrubbed, cut to length): shared/ledger/working_state_audit.py
-- decides.
WITH asked AS (
    SELECT DISTINCT ON (h.operation_id) h.operation_id, h.seq, h.actor, h.cause,
           substring(h.cause FROM '^operator decision #([0-9]{1,18}): ')::bigint AS decision_id
    FROM history h
    WHERE (h.to_state IN ('cancel_requested', 'abandoned') AND h.cause LIKE 'cancel: %'
           AND h.actor NOT LIKE 'reconciler:%')
       OR (h.to_state = 'cancel_requested' AND h.actor LIKE 'operator:%'
           AND h.cause ~ '^operator decision #[0-9]{1,18}: ')
    ORDER BY h.operation_id, h.seq DESC
)
SELECT o.operation_id, o.cancel_requested_by, o.cancel_reason, a.seq, a.actor, a.cause,
       a.decision_id, d.decision_id IS NOT NULL AS decided
FROM asked a
JOIN operations o USING (operation_id)
LEFT JOIN decisions d ON d.decision_id = a.decision_id AND d.operation_id = a.operation_id
WHERE CASE WHEN a.decision_id IS NULL
           THEN o.cancel_requested_by IS DISTINCT FROM a.actor
                OR 'cancel: ' || o.cancel_reason IS DISTINCT FROM a.cause
           ELSE o.cancel_requested_by IS DISTINCT FROM d.actor
                OR o.cancel_reason IS DISTINCT FROM d.reason
      END
ORDER BY o.operation_id COLLATE "C";

-- name: audit_dangling_references
-- References to a row that is not there: what the foreign keys migration 039
-- dropped had refused (an event's operation, an observation's operation and
-- webhook event). No writer of the ledger makes one (039 says why); one found
-- is a deletion that left its row cited (a purge or an archive gone wrong),
-- or a superuser's hand, which no key bound. Anti-joins on each referenced
-- table's primary key, in the audit's snapshot.
SELECT 'webhook_events' AS tbl, w.webhook_event_id AS row_id,
       'operation_id' AS col, w.operation_id AS ref, 'operations' AS ref_tbl
FROM webhook_events w
WHERE w.operation_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.operation_id = w.operation_id)
UNION ALL
SELECT 'observations', b.observation_id, 'operation_id', b.operation_id, 'operations'
FROM observations b
WHERE NOT EXISTS (SELECT 1 FROM operations o WHERE o.operation_id = b.operation_id)
UNION ALL
SELECT 'observations', b.observation_id, 'webhook_event_id', b.webhook_event_id::text,
       'webhook_events'
FROM observations b
WHERE b.webhook_event_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM webhook_events w
                  WHERE w.webhook_event_id = b.webhook_event_id)
ORDER BY 1, 2;
