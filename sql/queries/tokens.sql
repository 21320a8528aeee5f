-- Queries of shared/ledger/tokens.py: API bearer tokens (only their digests).

-- name: api_authenticate
-- A live token by its digest; last_used_at is refreshed at most once a minute
-- so a busy agent does not turn every read into a write.
WITH token AS (
    SELECT token_id, caller, scope FROM api_tokens
    WHERE token_sha256 = $1 AND revoked_at IS NULL
), touched AS (
    UPDATE api_tokens t SET last_used_at = jw_now()
    FROM token
    WHERE t.token_id = token.token_id
      AND (t.last_used_at IS NULL OR t.last_used_at < jw_now() - interval '60 seconds')
    RETURNING t.token_id
)
SELECT token_id, caller, scope FROM token;

-- name: token_live
-- Whether a token authenticated earlier is still live: a long-poll or an event
-- stream asks again at every re-read, so a revocation ends it.
SELECT true FROM api_tokens WHERE token_id = $1 AND revoked_at IS NULL;

-- name: token_insert
INSERT INTO api_tokens (token_id, caller, scope, token_sha256, created_by)
VALUES ($1, $2, $3, $4, $5)
RETURNING token_id, caller, scope, created_at;

-- name: token_revoke
-- Idempotent: revoking a revoked token keeps its first revocation time.
UPDATE api_tokens SET revoked_at = coalesce(revoked_at, jw_now())
WHERE token_id = $1
RETURNING token_id, caller, revoked_at;
