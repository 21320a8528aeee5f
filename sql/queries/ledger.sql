-- name: insert_operation
INSERT INTO operations (
    operation_id, provider, kind, client_reference, request, request_fingerprint,
    idempotency_token, idempotency_mode, trace_id, requested_by, approval_ref,
    create_deadline, result_deadline, next_poll_at
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
    clock_timestamp() + make_interval(secs => $12),
    clock_timestamp() + make_interval(secs => $13),
    clock_timestamp()
)
ON CONFLICT (requested_by, client_reference) DO NOTHING
RETURNING operation_id;

-- name: find_by_client_reference
SELECT operation_id, provider, kind, request, request_fingerprint
FROM operations WHERE requested_by = $1 AND client_reference = $2;

-- name: load_operation
SELECT * FROM operations WHERE operation_id = $1;

-- name: operation_state
SELECT state::text FROM operations WHERE operation_id = $1;

-- name: transition
-- A transition is an INSERT into history; the trigger checks edge + evidence,
-- chains the hash and moves operations.state. The fence, when given, must still
-- be the current lease of a lease that has not expired.
INSERT INTO history (operation_id, actor, from_state, to_state, cause, evidence_kind, evidence_id,
                     seq, at, prev_hash, row_hash)
SELECT o.operation_id, $4, $2::jw_state, $3::jw_state, $5, $6, $7, 0, now(), '', ''
FROM operations o
WHERE o.operation_id = $1
  AND ($8::bigint IS NULL
       OR (o.lease_fence = $8 AND o.lease_expires_at > clock_timestamp()))
FOR UPDATE OF o  -- a claim committed meanwhile makes the fence check fail on re-read
RETURNING seq;

-- name: record_cancel_intent
UPDATE operations SET
    cancel_requested_at = clock_timestamp(),
    cancel_requested_by = $2,
    cancel_reason = $3,
    cancel_deadline = clock_timestamp() + make_interval(secs => $4)
WHERE operation_id = $1 AND cancel_requested_at IS NULL AND finished_at IS NULL
RETURNING state, create_attempts;

-- name: insert_decision
INSERT INTO decisions (operation_id, actor, decision, reason)
VALUES ($1, $2, $3, $4)
RETURNING decision_id;

-- name: history_of
SELECT * FROM history WHERE operation_id = $1 ORDER BY seq;

-- name: history_all_ordered
SELECT * FROM history ORDER BY operation_id, seq;

-- name: chain_heads
SELECT operation_id, state, history_seq, history_head FROM operations
WHERE ($1::text IS NULL OR operation_id = $1);

-- name: state_edges
SELECT from_state::text, to_state::text, evidence FROM state_edges;

-- name: claim_completion
INSERT INTO completion_claims (operation_id, consumer)
SELECT operation_id, $2 FROM operations
WHERE operation_id = $1 AND state = 'succeeded'
ON CONFLICT DO NOTHING
RETURNING claimed_at;

-- name: set_remote_job
-- Record the job id the provider gave us (never overwrites: the trigger refuses).
UPDATE operations SET remote_job_id = $2, status_url = coalesce($3, status_url),
                      create_mode = coalesce($4, create_mode)
WHERE operation_id = $1
  AND ($5::bigint IS NULL OR (lease_fence = $5 AND lease_expires_at > clock_timestamp()))
RETURNING operation_id;

-- name: set_cancel_sent
UPDATE operations SET cancel_sent_at = coalesce(cancel_sent_at, clock_timestamp()),
                      cancel_attempts = cancel_attempts + 1
WHERE operation_id = $1
  AND ($2::bigint IS NULL OR (lease_fence = $2 AND lease_expires_at > clock_timestamp()))
RETURNING operation_id;

-- name: clear_cancel_sent
-- The only cancel request so far provably never left this host (no
-- connection): it may be sent again, even to a provider where repeating a
-- delivered cancel would not be safe.
UPDATE operations SET cancel_sent_at = NULL
WHERE operation_id = $1 AND state = 'cancel_requested'
  AND ($2::bigint IS NULL OR (lease_fence = $2 AND lease_expires_at > clock_timestamp()))
RETURNING operation_id;

-- name: set_result
UPDATE operations SET result_id = $2, result_ref = $3, result_summary = $4
WHERE operation_id = $1
  AND ($5::bigint IS NULL OR (lease_fence = $5 AND lease_expires_at > clock_timestamp()))
RETURNING operation_id;

-- name: set_create_mode
UPDATE operations SET create_mode = $2
WHERE operation_id = $1
  AND ($3::bigint IS NULL OR (lease_fence = $3 AND lease_expires_at > clock_timestamp()))
RETURNING operation_id;
