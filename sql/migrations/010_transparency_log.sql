-- 010: one append-only Merkle log over all evidence (RFC 9162 tree, C2SP checkpoints).
--
-- Every write to an evidence table (operations as submitted, history, provider
-- calls, observations, webhook events, results, failed items, decisions,
-- escalations) enqueues "(kind, row id) changed" in log_queue, from a
-- statement-level trigger: one narrow INSERT per statement, whatever the number
-- of rows, and no lock any other writer waits on. The order of the log is
-- assigned later by the sequencer (shared/ledger/log.py), one process at a
-- time under an advisory lock: it takes a batch of queued keys, reads each
-- row as it now is, and appends one leaf per row version (a row gone by then
-- gets a deletion leaf). So the receiver's and reconciler's hot paths never
-- serialise on a counter; the log's total order is the order leaves were
-- appended, and every verifier recomputes it from log_leaves.
--
-- What a leaf covers is defined once, in Python (shared/ledger/leaves.py),
-- and recomputed from the rows by `jobwarden audit verify`: the database
-- holds leaf hashes and the tree's stored hashes (for proofs) but is never
-- trusted for them. Checkpoints are signed outside the database (the key
-- never enters it); log_checkpoints keeps copies for the API.

CREATE TABLE log_queue (
    queue_id    bigserial PRIMARY KEY,
    kind        text NOT NULL,
    row_id      text NOT NULL,
    queued_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- "is this row's change still waiting?" (verification)
CREATE INDEX log_queue_by_row ON log_queue (kind, row_id);

CREATE TABLE log_leaves (
    leaf_index      bigint PRIMARY KEY CHECK (leaf_index >= 0),
    kind            text NOT NULL,
    row_id          text NOT NULL,
    leaf_hash       bytea NOT NULL CHECK (length(leaf_hash) = 32),
    deleted         boolean NOT NULL DEFAULT false,
    -- what the leaf commits to (shared/ledger/leaves.py Digests): kept so that
    -- every leaf, old versions too, is recomputed by verify and bound by the tree
    row_sha256      bytea CHECK (length(row_sha256) = 32),
    fixed_sha256    bytea CHECK (length(fixed_sha256) = 32),
    settled_sha256  bytea CHECK (length(settled_sha256) = 32),
    sequenced_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (deleted = (row_sha256 IS NULL))
);
-- a row's newest leaf (verification, receipts)
CREATE INDEX log_leaves_by_row ON log_leaves (kind, row_id, leaf_index);

-- The hash of every complete subtree, at the index of Go's sumdb/tlog
-- "stored hashes" scheme: what inclusion and consistency proofs are built from.
CREATE TABLE log_hashes (
    hash_index  bigint PRIMARY KEY CHECK (hash_index >= 0),
    hash        bytea NOT NULL CHECK (length(hash) = 32)
);

CREATE TABLE log_checkpoints (
    tree_size   bigint PRIMARY KEY CHECK (tree_size >= 0),
    root_hash   bytea NOT NULL CHECK (length(root_hash) = 32),
    note        text NOT NULL,
    signed_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TRIGGER log_leaves_append_only BEFORE UPDATE OR DELETE ON log_leaves
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();
CREATE TRIGGER log_hashes_append_only BEFORE UPDATE OR DELETE ON log_hashes
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();
CREATE TRIGGER log_checkpoints_append_only BEFORE UPDATE OR DELETE ON log_checkpoints
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();

-- One enqueue function per key shape; SECURITY DEFINER so that no writer role
-- needs (or gets) any right on log_queue itself.
CREATE FUNCTION jw_log_enqueue() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    kind text := TG_ARGV[0];
    id_column text := TG_ARGV[1];
BEGIN
    IF TG_OP = 'DELETE' THEN
        EXECUTE format('INSERT INTO log_queue (kind, row_id) SELECT $1, (%I)::text FROM gone',
                       id_column) USING kind;
    ELSE
        EXECUTE format('INSERT INTO log_queue (kind, row_id) SELECT $1, (%I)::text FROM changed',
                       id_column) USING kind;
    END IF;
    RETURN NULL;
END $$;

-- result_item_failures has a two-column key: "<result_id>/<item_key>".
CREATE FUNCTION jw_log_enqueue_failures() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO log_queue (kind, row_id) SELECT 'failure', result_id || '/' || item_key FROM gone;
    ELSE
        INSERT INTO log_queue (kind, row_id)
        SELECT 'failure', result_id || '/' || item_key FROM changed;
    END IF;
    RETURN NULL;
END $$;

DO $$
DECLARE
    t record;
    op text;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('operations', 'operation', 'operation_id', false),
        ('history', 'history', 'history_id', false),
        ('provider_calls', 'call', 'call_id', true),
        ('observations', 'observation', 'observation_id', false),
        ('webhook_events', 'webhook', 'webhook_event_id', true),
        ('results', 'result', 'result_id', false),
        ('decisions', 'decision', 'decision_id', false),
        ('escalations', 'escalation', 'escalation_id', true)
    ) AS v (tbl, kind, id_column, updates)
    LOOP
        -- operations: only the submitted intent is logged (its later columns
        -- are the ledger's working state, whose every change is a history row)
        FOREACH op IN ARRAY CASE WHEN t.updates THEN ARRAY['INSERT', 'UPDATE', 'DELETE']
                                 ELSE ARRAY['INSERT', 'DELETE'] END
        LOOP
            EXECUTE format(
                'CREATE TRIGGER %I AFTER %s ON %I REFERENCING %s TABLE AS %s '
                'FOR EACH STATEMENT EXECUTE FUNCTION jw_log_enqueue(%L, %L)',
                t.tbl || '_log_' || lower(op), op, t.tbl,
                CASE WHEN op = 'DELETE' THEN 'OLD' ELSE 'NEW' END,
                CASE WHEN op = 'DELETE' THEN 'gone' ELSE 'changed' END,
                t.kind, t.id_column);
        END LOOP;
    END LOOP;
END $$;

CREATE TRIGGER result_item_failures_log_insert AFTER INSERT ON result_item_failures
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION jw_log_enqueue_failures();
CREATE TRIGGER result_item_failures_log_delete AFTER DELETE ON result_item_failures
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION jw_log_enqueue_failures();

-- Rows written before this migration enter the log in the first batches, in
-- table order, like any other queued change.
INSERT INTO log_queue (kind, row_id)
SELECT 'operation', operation_id FROM (SELECT operation_id FROM operations ORDER BY created_at, operation_id) o;
INSERT INTO log_queue (kind, row_id) SELECT 'history', history_id::text FROM history ORDER BY history_id;
INSERT INTO log_queue (kind, row_id) SELECT 'call', call_id::text FROM provider_calls ORDER BY call_id;
INSERT INTO log_queue (kind, row_id)
SELECT 'observation', observation_id::text FROM observations ORDER BY observation_id;
INSERT INTO log_queue (kind, row_id)
SELECT 'webhook', webhook_event_id::text FROM webhook_events ORDER BY webhook_event_id;
INSERT INTO log_queue (kind, row_id) SELECT 'result', result_id::text FROM results ORDER BY result_id;
INSERT INTO log_queue (kind, row_id)
SELECT 'failure', result_id || '/' || item_key FROM result_item_failures ORDER BY result_id, item_key;
INSERT INTO log_queue (kind, row_id) SELECT 'decision', decision_id::text FROM decisions ORDER BY decision_id;
INSERT INTO log_queue (kind, row_id)
SELECT 'escalation', escalation_id::text FROM escalations ORDER BY escalation_id;

-- The sequencer runs in the reconciler (and `jobwarden audit sequence`);
-- the receiver only reads checkpoints for GET /v1/audit/checkpoint.
GRANT SELECT, DELETE ON log_queue TO jobwarden_reconciler, jobwarden_operator;
GRANT SELECT, INSERT ON log_leaves, log_hashes, log_checkpoints
    TO jobwarden_reconciler, jobwarden_operator;
-- The receiver serves GET /v1/audit/checkpoint and agents' receipts: it reads
-- the log and the evidence a receipt recomputes, and writes none of it.
GRANT SELECT ON log_checkpoints, log_leaves, log_hashes, provider_calls, results,
    result_item_failures, decisions, escalations TO jobwarden_receiver;
