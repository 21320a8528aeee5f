-- 037: whether a job can call back is its create's, not the reading reconciler's.
--
-- With webhooks, status reads are a backstop for a lost delivery (the first
-- after webhook_backstop_poll_seconds, 300 s by default). Whether a callback
-- can come was the reading reconciler's configuration's say: a `[webhooks]`
-- table, and a public_webhook_url known to it (or a create that names no
-- `{webhook_url}`). A job created while no public URL was set (its create
-- left `{webhook_url}` out) and read by a reconciler that has one since was
-- read at the backstop's pace, though no callback would ever come.
--
-- The reconciler now records, with the create attempt's count (the recovery
-- point before the create leaves: one statement, so the attempt is never on
-- record without it), whether the request named our callback URL. Over
-- several attempts (the same token resent) it stays true only while every
-- attempt named it: the job may be any attempt's, and reading on the backoff
-- a job that also calls back costs reads, while waiting for a callback that
-- never comes costs the backstop's delay. Working state, not evidence: each
-- create's request is on record as sent (provider_calls), and nothing is
-- logged from this column. The reconciler's UPDATE on operations covers it.
ALTER TABLE operations ADD COLUMN callback_url_sent boolean;

COMMENT ON COLUMN operations.callback_url_sent IS
    'Did the create name our callback URL ({webhook_url} filled)? true: a callback may come '
    '(reads are a backstop); false: it was left out (no public_webhook_url), none will; '
    'NULL: created before migration 037, or a create naming no callback URL of ours: '
    'the reading reconciler''s configuration decides.';
