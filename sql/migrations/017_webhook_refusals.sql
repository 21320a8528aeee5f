-- 017: refused webhook deliveries, counted in the database (issue 15).
--
-- A refused delivery (unknown provider, bad signature, stale timestamp, a body
-- too large, the queue full...) stores no event. Counting refusals only in each
-- receiver process's metrics left the console showing one process's share,
-- lost at every restart. Each receiver process now tallies its refusals in
-- memory and adds them here every few seconds (receiver/webhooks/refusals.py):
-- one small transaction per flush, never one per request, so a flood of forged
-- deliveries cannot turn into a flood of writes.
--
-- Nothing a sender controls is stored: `provider` is a configured name or
-- 'unknown' (never the raw path segment), `reason` is the receiver's fixed
-- vocabulary, `status` the answer sent. Counts have at most one row per
-- (provider, reason, UTC day): a few thousand a year; only the newest
-- refusals are kept (about KEEP_LATEST plus one flush's).

CREATE TABLE webhook_refusal_counts (
    provider   text NOT NULL CHECK (provider ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    reason     text NOT NULL CHECK (reason ~ '^[a-z_]{1,40}$'),
    day        date NOT NULL,
    refusals   bigint NOT NULL CHECK (refusals > 0),
    last_at    timestamptz NOT NULL,
    PRIMARY KEY (provider, reason, day)
);

CREATE TABLE webhook_refusals_latest (
    refusal_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider   text NOT NULL CHECK (provider ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    reason     text NOT NULL CHECK (reason ~ '^[a-z_]{1,40}$'),
    status     smallint NOT NULL CHECK (status BETWEEN 400 AND 599),
    at         timestamptz NOT NULL
);
CREATE INDEX webhook_refusals_latest_at ON webhook_refusals_latest (at DESC, refusal_id DESC);

COMMENT ON TABLE webhook_refusal_counts IS
    'Refused webhook deliveries per provider, reason and UTC day (added by each receiver process).';
COMMENT ON TABLE webhook_refusals_latest IS
    'The newest refused deliveries (provider, reason, status, time); trimmed on every flush.';

-- The receiver adds and trims; operators (and the console's pages, on the
-- receiver's pool) read.
GRANT SELECT, INSERT ON webhook_refusal_counts TO jobwarden_receiver;
GRANT UPDATE (refusals, last_at) ON webhook_refusal_counts TO jobwarden_receiver;
GRANT SELECT, INSERT, DELETE ON webhook_refusals_latest TO jobwarden_receiver;
GRANT SELECT ON webhook_refusal_counts, webhook_refusals_latest TO jobwarden_operator;
