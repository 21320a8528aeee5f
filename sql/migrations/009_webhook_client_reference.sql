-- 009: webhooks matched by the agent's client reference too.
--
-- A provider that echoes the request's metadata in its webhooks hands back the
-- client reference the agent chose at submit, and often nothing else of ours.
-- The receiver matches such an event to the one operation of that provider
-- that carries the reference (receiver_store_events in sql/queries/webhooks.sql).
--
-- * webhook_events.client_reference: the reference the event carried, kept
--   beside operation_ref and remote_job_id so an operator can see what an
--   unattached event named.
-- * operations_client_reference: the receiver's probe is (provider,
--   client_reference) for every event that carries one, on its hot path; the
--   UNIQUE (requested_by, client_reference) index cannot serve it, since a
--   reference is unique per agent only. Two operations of one provider may
--   share a reference, so the index is not unique; the query then matches
--   neither.

ALTER TABLE webhook_events ADD COLUMN client_reference text;

CREATE INDEX operations_client_reference ON operations (provider, client_reference);
