-- Queries of shared/ledger/operations.py: the operation row, its transitions
-- and the facts recorded on it. Times come from jw_now() (migration 008).

-- name: insert_operation
INSERT INTO operations (
    operation_id, provider, kind, client_reference, request, request_fingerprint,
    idempotency_token, idempotency_mode, trace_id, requested_by, approval_ref,
    create_deadline, result_deadline, next_poll_at
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
    jw_now() + make_interval(secs => $12),
    jw_now() + make_interval(secs => $13),
    jw_now()
)
ON CONFLICT (requested_by, client_reference) DO NOTHING
RETURNING operation_id;

-- name: find_by_client_reference
-- The whole row: a replay compares its intent (request, kind, approval_ref,
-- deadlines) with this one.
SELECT * FROM operations WHERE requested_by = $1 AND client_reference = $2;

-- name: load_operation
SELECT * FROM operations WHERE operation_id = $1;

-- name: operation_state
SELECT state::text FROM operations WHERE operation_id = $1;

-- name: operation_history_mark
-- Where an operation's history stands, and its trace (spans of moves made
-- outside the reconciler: receiver/moves.py).
SELECT trace_id, history_seq FROM operations WHERE operation_id = $1;

-- name: history_after
-- The transitions $3 added after seq $2 (another actor's, such as the
-- reconciler's move the commit woke, are not theirs to report).
SELECT from_state::text AS from_state, to_state::text AS to_state, cause
FROM history WHERE operation_id = $1 AND seq > $2 AND actor = $3
ORDER BY seq;

-- name: transition
-- A transition is an INSERT into history; the trigger checks edge + evidence,
-- chains the hash and moves operations.state. The fence, when given, must still
-- be the current lease of a lease that has not expired.
INSERT INTO history (operation_id, actor, from_state, to_state, cause, evidence_kind, evidence_id,
                     seq, at, prev_hash, row_hash)
SELECT o.operation_id, $4, $2::jw_state, $3::jw_state, $5, $6, $7, 0, jw_now(), '', ''
FROM operations o
WHERE o.operation_id = $1
  AND ($8::bigint IS NULL
       OR (o.lease_fence = $8 AND o.lease_expires_at > jw_now()))
FOR UPDATE OF o  -- a claim committed meanwhile makes the fence check fail on re-read
RETURNING seq;

-- name: record_cancel_intent
-- The first intent; or a new one replacing a stale intent, recorded while the
-- operation made no move (needs_attention, ...) and left behind when it was
-- resumed into a cancellable state: that later cancel is sent anew (as an
-- operator's renew_cancel_intent), never dropped. An intent the cancel states
-- act on, or one still waiting for an operator, stays as recorded.
UPDATE operations SET
    cancel_requested_at = jw_now(),
    cancel_requested_by = $2,
    cancel_reason = $3,
    cancel_deadline = jw_now() + make_interval(secs => $4),
    cancel_window = make_interval(secs => $4),
    cancel_sent_at = NULL
WHERE operation_id = $1 AND finished_at IS NULL
  AND (cancel_requested_at IS NULL OR state = ANY (jw_state_set('cancellable')))
RETURNING state, create_attempts;

-- name: request_wake
SELECT jw_request_wake($1);

-- name: claim_completion
-- The claim, when nobody made one for ($1, $2) yet; $3: its token, or NULL.
INSERT INTO completion_claims (operation_id, consumer, claim_token)
SELECT operation_id, $2, $3 FROM operations
WHERE operation_id = $1 AND state = 'succeeded'
ON CONFLICT DO NOTHING
RETURNING claimed_at;

-- name: claim_repeated
-- Whether the claim on record for ($1, $2) is the one token $3 names: a resend
-- of the call that won (its answer lost). A statement of its own, after
-- claim_completion: its snapshot sees a claim that committed while that
-- INSERT waited for it, which the INSERT's own statement could not.
SELECT true FROM completion_claims
WHERE operation_id = $1 AND consumer = $2 AND claim_token = $3;

-- name: state_edges
SELECT from_state::text, to_state::text, evidence FROM state_edges;

-- name: state_set
SELECT array_agg(s::text ORDER BY s) FROM unnest(jw_state_set($1)) AS s;

-- name: set_remote_job
-- Record the job id the provider gave us (never overwrites: the trigger
-- refuses), the status read a worker will send for it, and, when the answer
-- came from a same-token retry, the cross-check that must follow (a durable
-- recovery point, in the same statement as the job id). $8: seconds the
-- accepting answer said to wait before reading the job (an Azure-style 202's
-- Retry-After), kept as the row's poll hint, so no status read comes sooner,
-- whatever wakes the operation (jw_due_at). The first recording writes the
-- status URL it is given, none included: a URL on the row before any job id
-- is no writer's (a superuser's, which no trigger refuses while no job id is on
-- record), and kept it would be read at and logged as the answer's (041).
UPDATE operations SET remote_job_id = $2,
                      status_url = CASE WHEN remote_job_id IS NULL THEN $3
                                        ELSE coalesce($3, status_url) END,
                      create_mode = coalesce($4, create_mode),
                      status_request = coalesce($6::jsonb, status_request),
                      follow_up = coalesce($7, follow_up),
                      follow_up_attempts = CASE WHEN $7::text IS NULL THEN follow_up_attempts
                                                ELSE 0 END,
                      poll_not_before = CASE WHEN $8::double precision IS NULL
                                             THEN poll_not_before
                                             ELSE jw_now() + make_interval(secs => $8) END
WHERE operation_id = $1
  AND ($5::bigint IS NULL OR (lease_fence = $5 AND lease_expires_at > jw_now()))
RETURNING operation_id;

-- name: operation_holding_job
-- Another operation of provider $1 that has job $2 on record ($3: the asking
-- operation), if any: named when the unique index operations_one_per_job
-- (migration 035) refuses a second holder.
SELECT operation_id FROM operations
WHERE provider = $1 AND remote_job_id = $2 AND operation_id <> $3
LIMIT 1;

-- name: settle_follow_up
-- The follow-up ran to a conclusion: clear it (and say why, when it was
-- given up rather than concluded). Fenced: only the lease holder concludes.
UPDATE operations SET follow_up = NULL, follow_up_attempts = 0,
                      last_error = coalesce($4::jsonb, last_error)
WHERE operation_id = $1 AND follow_up = $3
  AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING operation_id;

-- name: retry_follow_up
-- The follow-up was inconclusive this time: count it; it runs again later.
UPDATE operations SET follow_up_attempts = follow_up_attempts + 1
WHERE operation_id = $1 AND follow_up = $3
  AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING follow_up_attempts;

-- name: set_create_mode
UPDATE operations SET create_mode = $2
WHERE operation_id = $1
  AND ($3::bigint IS NULL OR (lease_fence = $3 AND lease_expires_at > jw_now()))
RETURNING operation_id;

-- name: set_cancel_sent
-- The recovery point before a cancel leaves. The cancel deadline counts from
-- the first send: a cancel held back by the provider's back-pressure (or an
-- outage) still gets its whole deadline for the provider to confirm.
UPDATE operations SET cancel_sent_at = coalesce(cancel_sent_at, jw_now()),
                      -- the window as requested, once: resends after a cancel that
                      -- never left do not add it up again
                      cancel_deadline = CASE WHEN cancel_sent_at IS NULL
                          THEN greatest(cancel_deadline, jw_now() + coalesce(
                               cancel_window, cancel_deadline - cancel_requested_at))
                          ELSE cancel_deadline END,
                      cancel_attempts = cancel_attempts + 1
WHERE operation_id = $1
  AND ($2::bigint IS NULL OR (lease_fence = $2 AND lease_expires_at > jw_now()))
RETURNING cancel_attempts;

-- name: clear_cancel_sent
-- The only cancel request so far provably never left this host (no
-- connection): it may be sent again, even to a provider where repeating a
-- delivered cancel would not be safe.
UPDATE operations SET cancel_sent_at = NULL
WHERE operation_id = $1 AND state = 'cancel_requested'
  AND ($2::bigint IS NULL OR (lease_fence = $2 AND lease_expires_at > jw_now()))
RETURNING operation_id;

-- name: set_result
UPDATE operations SET result_id = $2, result_ref = $3, result_summary = $4
WHERE operation_id = $1
  AND ($5::bigint IS NULL OR (lease_fence = $5 AND lease_expires_at > jw_now()))
RETURNING operation_id;

-- name: set_last_error
UPDATE operations SET last_error = $3
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING operation_id;

-- name: unbump_create_attempt
-- The create just recorded provably never left this host: it is not an
-- attempt (a cancel now may still abandon the operation). Fenced, like the bump.
UPDATE operations SET create_attempts = create_attempts - 1
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
  AND create_attempts > 0
RETURNING create_attempts;

-- name: bump_create_attempt
-- The recovery point before a create leaves: only while the lease is held and
-- the operation still wants a create (an agent may have abandoned it meanwhile).
-- With it, whether this request names our callback URL ($3; NULL: the create
-- names none): true only while every attempt named it (the job may be any one's).
UPDATE operations SET create_attempts = create_attempts + 1,
    callback_url_sent = CASE WHEN create_attempts = 0 THEN $3::boolean
                             ELSE callback_url_sent AND $3::boolean END
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
  AND state = ANY (jw_state_set('wants_create'))
  AND remote_job_id IS NULL AND finished_at IS NULL
RETURNING create_attempts;

-- name: bump_lookup_attempt
UPDATE operations SET lookup_attempts = lookup_attempts + 1
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING lookup_attempts;

-- name: state_entered_at
-- When operation $1 last moved into state $2 (the database's clock; NULL: never).
SELECT max(at) FROM history WHERE operation_id = $1 AND to_state = $2::jw_state;

-- name: bump_result_attempt
UPDATE operations SET result_attempts = result_attempts + 1
WHERE operation_id = $1 AND lease_fence = $2 AND lease_expires_at > jw_now()
RETURNING result_attempts;

-- name: known_remote_job_ids
-- Every job id the provider ever named for this operation (create and lookup answers).
SELECT DISTINCT remote_job_id FROM provider_calls
WHERE operation_id = $1 AND call_kind IN ('create', 'lookup') AND remote_job_id IS NOT NULL;

-- name: cancel_calls
-- This operation's cancel requests, newest first.
SELECT call_id, status_code, error_category, finished_at FROM provider_calls
WHERE operation_id = $1 AND call_kind = 'cancel'
ORDER BY call_id DESC;

-- name: latest_create_call
-- With acted_on: a reconciler already moved the operation on from this
-- answer (a transition out of the create states after it), so it is no
-- recovery point any more; an agent's or an operator's move is not that.
SELECT c.*, EXISTS (
    SELECT 1 FROM history h
    WHERE h.operation_id = c.operation_id AND h.at >= c.finished_at
      AND h.actor LIKE 'reconciler:%'
      AND h.from_state IN ('create_pending', 'create_unknown')
) AS acted_on
FROM provider_calls c
WHERE c.operation_id = $1 AND c.call_kind = 'create'
ORDER BY c.call_id DESC LIMIT 1;

-- name: first_create_call
-- The operation's first create request: when its token was first used.
SELECT started_at FROM provider_calls
WHERE operation_id = $1 AND call_kind = 'create'
ORDER BY call_id LIMIT 1;

-- name: create_conflicts_in_a_row
-- How many of operation $1's create calls in a row, newest first, were
-- answered 409 (those since its newest create answered otherwise; calls with
-- no answer neither count nor break the run), and the seconds since the first
-- of them left.
SELECT count(*) AS conflicts,
       coalesce(extract(epoch FROM jw_now() - min(c.started_at)), 0)::float8 AS seconds
FROM provider_calls c
WHERE c.operation_id = $1 AND c.call_kind = 'create' AND c.status_code = 409
  AND c.call_id > coalesce((
      SELECT max(s.call_id) FROM provider_calls s
      WHERE s.operation_id = $1 AND s.call_kind = 'create' AND s.status_code <> 409), 0);

-- name: create_calls_not_refused
-- Operation $1's create calls (before call $2; any when $2 is NULL) that could
-- have made a job: not one that never reached the provider ($3: those error
-- categories), nor one answered with a status it documents as creating nothing
-- ($4: create.not_created_statuses). Their recorded answers are read again for
-- an error code that creates nothing (create.not_created_codes) or a 4xx's
-- Retry-After (refused for now).
SELECT * FROM provider_calls
WHERE operation_id = $1 AND call_kind = 'create'
  AND ($2::bigint IS NULL OR call_id < $2)
  AND NOT coalesce(error_category = ANY ($3::text[]), false)
  AND NOT (finished_at IS NOT NULL AND coalesce(status_code = ANY ($4::integer[]), false))
ORDER BY call_id;

-- name: latest_poll_call
-- The newest status read that said where the job is: a 2xx, or one of the
-- codes $2 the provider's description maps to a state (a 303 at completion)
-- or reads the body of for one (status.state_in_error_statuses).
SELECT c.status_code, c.response_headers, c.response_body, c.response_sha256, c.url
FROM provider_calls c
WHERE c.operation_id = $1 AND c.call_kind = 'status'
  AND (c.status_code BETWEEN 200 AND 299 OR c.status_code = ANY ($2::integer[]))
ORDER BY c.call_id DESC LIMIT 1;

-- name: result_fetch_may_have_arrived
-- Did any earlier result fetch possibly reach the provider (anything but a
-- failure to connect, a call never sent, or a throttle's refusal: a 429, or
-- a 4xx a throttle code marked as back-pressure, which served nothing)? For a
-- fetch with side effects, that one may have consumed the result.
SELECT EXISTS (
    SELECT 1 FROM provider_calls
    WHERE operation_id = $1 AND call_kind = 'result'
      AND error_category IS DISTINCT FROM 'connect'
      AND error_category IS DISTINCT FROM 'not_sent'
      AND NOT coalesce(error_category = 'back_pressure' AND status_code < 500, false)
);

-- name: clock_now
SELECT jw_now();

-- name: cancel_call_and_read_after
-- A cancel call ($2) of operation $1 as recorded, with the remote state of our
-- newest status read that answered after it (NULL: none yet): a refused cancel
-- is judged on a read that followed the refusal, never on an older one.
SELECT c.*, (
    SELECT o.remote_state::text FROM observations o
    WHERE o.operation_id = $1 AND o.source = 'poll' AND o.fetched_at >= c.finished_at
    ORDER BY o.observation_id DESC LIMIT 1
) AS state_read_after
FROM provider_calls c
WHERE c.call_id = $2 AND c.operation_id = $1;
