-- 014: the operator console's sessions (receiver/console).
--
-- A session is opened by signing in with an operator API token; the browser
-- holds a random session secret in an HttpOnly cookie, the database only its
-- sha256 (like api_tokens: a 256-bit secret needs no slow hash). A session is
-- bound to the token it was opened with, so revoking the token ends its
-- sessions at once. Sessions live here rather than in a process so that they
-- survive a restart and work across several receiver processes. Expiry is
-- judged in SQL against jw_now(): idle (last_seen_at) and absolute
-- (expires_at).

CREATE TABLE console_sessions (
    session_sha256  text PRIMARY KEY CHECK (session_sha256 ~ '^[0-9a-f]{64}$'),
    token_id        text NOT NULL REFERENCES api_tokens (token_id) ON DELETE CASCADE,
    created_at      timestamptz NOT NULL DEFAULT jw_now(),
    last_seen_at    timestamptz NOT NULL DEFAULT jw_now(),
    expires_at      timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);
-- The purge of expired sessions and the sessions of one token.
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
CREATE INDEX console_sessions_by_token ON console_sessions (token_id);

COMMENT ON TABLE console_sessions IS
    'Operator console sessions: the sha256 of the cookie''s secret, never the secret.';

-- The console's operations list filtered by state, newest first: a keyset
-- walk of this index reads only that state's rows, however rare the state
-- (the primary key alone would walk every newer operation of other states).
CREATE INDEX operations_by_state ON operations (state, operation_id);

-- The receiver opens, refreshes and ends sessions; operators may list and end them.
GRANT SELECT, INSERT, DELETE ON console_sessions TO jobwarden_receiver;
GRANT UPDATE (last_seen_at) ON console_sessions TO jobwarden_receiver;
GRANT SELECT, DELETE ON console_sessions TO jobwarden_operator;
-- The audit page shows how much evidence waits for the sequencer.
GRANT SELECT ON log_queue TO jobwarden_receiver;

-- The console's actions are operator decisions recorded through the ledger
-- (shared/ledger/decisions.py), like `jobwarden resolve` / `reconcile`. The
-- receiver's role gets no right to record them: a leaked receiver password
-- must not decide anything. The console records them on a login of its own in
-- jobwarden_operator (JW_CONSOLE_DATABASE_URL), which migration 003 already
-- lets decide; without one, resolve and reconcile are refused with a page
-- that says so (a cancel request is the agents' right too, migration 006).
