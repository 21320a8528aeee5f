-- 039: a webhook event's references are checked by the audit, not by a
-- foreign key on every insert (issue 13: the receiver's write).
--
-- Three foreign keys are dropped:
--   webhook_events.operation_id   -> operations
--   observations.operation_id     -> operations
--   observations.webhook_event_id -> webhook_events
--
-- What they cost: every row inserted fired a check (a statement per row that
-- also locks the referenced row FOR KEY SHARE, writing to its page), even for
-- an event that matched nothing (its NULL skips only the lookup). Timed alone
-- (`python -m bench.receiver_write`'s statement, batches of 16, one-off A/B in
-- one database, least of 4 rounds): PostgreSQL's CPU for a batch of matched
-- events 1,371 µs with them, 949 without; new events 895 and 765.
--
-- What they guarded, and what guards it now:
-- - A database superuser was never bound by them: a session in replica mode
--   (session_replication_role) fires no foreign-key check. Against such a
--   hand the evidence log binds every row's content and every deletion.
-- - The ledger's own writes cannot name a missing row: each of these ids is
--   read from its table in the statement that writes it (the receiver's
--   match, the straggler sweep's join, the attach trigger's NEW row, the
--   reconciler's claimed operation), operations are never deleted
--   (operations_no_delete), and only two functions delete these rows:
--   jw_purge_webhook_events (unattached events only, which no observation
--   cites: an event is observed only as it is attached) and
--   jw_archive_evidence (an archived operation's observations, events and
--   calls together).
-- - A bug in either that left a reference to nothing would have been refused
--   by the keys; it is now a problem `jobwarden audit verify` reports
--   (audit_dangling_references: every reference these keys covered, read in
--   the audit's snapshot). The keys from observations.call_id and
--   provider_calls.operation_id stay: the reconciler's reads showed no cost
--   from them beyond the spread between runs.

ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_operation_id_fkey;
ALTER TABLE observations DROP CONSTRAINT observations_operation_id_fkey;
ALTER TABLE observations DROP CONSTRAINT observations_webhook_event_id_fkey;
