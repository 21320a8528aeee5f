-- name: call_started
-- Recorded before the request leaves, so a crash mid-call still shows it was (maybe) sent.
INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, fence, trace_id, traceparent,
                            idempotency_token, method, url, request_headers)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING call_id;

-- name: call_finished
UPDATE provider_calls SET
    finished_at = clock_timestamp(),
    duration_ms = $2,
    status_code = $3,
    provider_request_id = $4,
    response_headers = $5,
    error_category = $6,
    response_sha256 = $7,
    response_size = $8,
    response_body = $9,
    remote_job_id = $10
WHERE call_id = $1 AND finished_at IS NULL
RETURNING call_id;

-- name: insert_observation
INSERT INTO observations (operation_id, source, call_id, webhook_event_id, remote_state,
                          remote_state_raw, provider_updated_at, progress_completed,
                          progress_total, progress_percent, poll_after_seconds, error,
                          result_url, errors_url, counts)
VALUES ($1, $2, $3, $4, $5::jw_remote_state, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
RETURNING observation_id;

-- name: insert_result
INSERT INTO results (operation_id, call_id, valid, reason, content_type, size_bytes, sha256,
                     storage_ref, inline, items_total, items_succeeded, items_failed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING result_id;

-- name: insert_item_failure
INSERT INTO result_item_failures (result_id, item_key, code, message)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING;
