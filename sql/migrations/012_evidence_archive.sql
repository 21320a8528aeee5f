-- 012: retention without losing proof — the evidence of old finished operations
-- moves to an archive (files an operator ships off the host), and the log
-- records the move.
--
-- `jobwarden audit archive` (shared/ledger/archive.py) writes the archive
-- first — every row as the log covers it, with its leaf index, and each
-- operation's receipt against a signed checkpoint — then, in one transaction,
-- lists the archived rows here and calls jw_archive_evidence, which deletes
-- them. The deletions are logged like any other (a deletion leaf per row), and
-- the archive's own row is a leaf whose manifest digest binds the list of rows
-- in log_archived: nobody can later add a row to that list without breaking
-- the signed tree. `audit verify --archive DIR` recomputes every archived row
-- from the archive's files against its leaf.
--
-- What moves: the bulk of an operation's evidence — its provider calls (but
-- the one that fetched its result, which results.call_id references), its
-- observations, the webhook deliveries attached to it and its failed items.
-- What stays hot: the operation's row and its history (the timeline agents
-- and operators read, the chain `audit verify` checks, the last transition's
-- cause the agent view shows), its result, its decisions and escalations: a
-- resubmission with the same client_reference still finds the operation, so a
-- job never runs twice because its evidence was archived.

CREATE TABLE log_archives (
    archive_id          bigserial PRIMARY KEY,
    -- the archive's directory name under the operator's archive root
    name                text NOT NULL UNIQUE CHECK (name ~ '^archive-[0-9TZ]{16}-[0-9a-f]{8}$'),
    -- operations finished before this were eligible
    cutoff              timestamptz NOT NULL,
    -- the signed checkpoint the archive's receipts and leaf indexes refer to
    checkpoint_size     bigint NOT NULL CHECK (checkpoint_size > 0),
    operations          integer NOT NULL CHECK (operations > 0),
    rows                bigint NOT NULL CHECK (rows > 0),
    -- sha256 of the manifest (shared/ledger/archive.py): every archived row
    -- with its operation and leaf index, in a fixed order
    manifest_sha256     text NOT NULL CHECK (manifest_sha256 ~ '^[0-9a-f]{64}$'),
    archived_at         timestamptz NOT NULL DEFAULT jw_now()
);

CREATE TABLE log_archived (
    kind            text NOT NULL,
    row_id          text NOT NULL,
    archive_id      bigint NOT NULL REFERENCES log_archives (archive_id),
    -- the operation whose evidence it is (a failed item's: its result's)
    operation_id    text NOT NULL REFERENCES operations (operation_id),
    -- the leaf of the version archived (the row's newest, never a deletion)
    leaf_index      bigint NOT NULL CHECK (leaf_index >= 0),
    PRIMARY KEY (kind, row_id)
);
CREATE INDEX log_archived_by_archive ON log_archived (archive_id);
CREATE INDEX log_archived_by_operation ON log_archived (operation_id);

CREATE TRIGGER log_archives_append_only BEFORE UPDATE OR DELETE ON log_archives
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();
CREATE TRIGGER log_archived_append_only BEFORE UPDATE OR DELETE ON log_archived
    FOR EACH ROW EXECUTE FUNCTION jw_refuse_change();

-- An archive is recorded when it is made, for a cutoff in its past: whoever
-- inserts the row cannot choose either time to make fresh evidence eligible.
CREATE FUNCTION jw_log_archives_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.archived_at := jw_now();
    IF NEW.cutoff > NEW.archived_at THEN
        RAISE EXCEPTION 'jobwarden: an archive''s cutoff (%) is in the future', NEW.cutoff
            USING ERRCODE = 'JW030';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER log_archives_stamp BEFORE INSERT ON log_archives
    FOR EACH ROW EXECUTE FUNCTION jw_log_archives_stamp();

-- The archive's row is evidence too: one leaf (kind "archive").
CREATE TRIGGER log_archives_log_insert AFTER INSERT ON log_archives
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION jw_log_enqueue('archive', 'archive_id');

-- Delete what archive p_archive_id lists, or nothing (row ids are matched
-- as the tables' keys, so each row is an index lookup): every listed row must
-- belong to an operation of the archive finished before its cutoff, must
-- still be the version archived (no change queued since, no newer leaf),
-- and every listed row must be found. Returns the number of rows deleted.
CREATE FUNCTION jw_archive_evidence(p_archive_id bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    a public.log_archives;
    deleted bigint := 0;
    n bigint;
BEGIN
    SELECT * INTO a FROM public.log_archives WHERE archive_id = p_archive_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'jobwarden: no archive %', p_archive_id USING ERRCODE = 'JW030';
    END IF;
    IF EXISTS (
        SELECT 1 FROM public.log_archived x
        JOIN public.operations o USING (operation_id)
        WHERE x.archive_id = p_archive_id
          AND (o.finished_at IS NULL OR o.finished_at >= a.cutoff)
    ) THEN
        RAISE EXCEPTION 'jobwarden: archive % lists an operation not finished before its cutoff',
            a.name USING ERRCODE = 'JW030';
    END IF;
    -- lock every listed row first: a change committed before the locks is
    -- visible below (its queued entry or its newer leaf), one after them
    -- finds the row gone
    PERFORM 1 FROM public.result_item_failures f JOIN public.log_archived x
        ON x.kind = 'failure' AND x.row_id = f.result_id || '/' || f.item_key
        WHERE x.archive_id = p_archive_id FOR UPDATE OF f;
    PERFORM 1 FROM public.observations t JOIN public.log_archived x
        ON x.kind = 'observation' AND t.observation_id = (CASE WHEN x.kind = 'observation' THEN x.row_id::bigint END)
        WHERE x.archive_id = p_archive_id FOR UPDATE OF t;
    PERFORM 1 FROM public.webhook_events t JOIN public.log_archived x
        ON x.kind = 'webhook' AND t.webhook_event_id = (CASE WHEN x.kind = 'webhook' THEN x.row_id::bigint END)
        WHERE x.archive_id = p_archive_id FOR UPDATE OF t;
    PERFORM 1 FROM public.provider_calls t JOIN public.log_archived x
        ON x.kind = 'call' AND t.call_id = (CASE WHEN x.kind = 'call' THEN x.row_id::bigint END)
        WHERE x.archive_id = p_archive_id FOR UPDATE OF t;
    IF EXISTS (
        SELECT 1 FROM public.log_archived x
        WHERE x.archive_id = p_archive_id AND (
            EXISTS (SELECT 1 FROM public.log_queue q
                    WHERE q.kind = x.kind AND q.row_id = x.row_id)
            OR EXISTS (SELECT 1 FROM public.log_leaves l
                       WHERE l.kind = x.kind AND l.row_id = x.row_id
                         AND l.leaf_index > x.leaf_index)
            OR NOT EXISTS (SELECT 1 FROM public.log_leaves l
                           WHERE l.leaf_index = x.leaf_index AND l.kind = x.kind
                             AND l.row_id = x.row_id AND NOT l.deleted))
    ) THEN
        RAISE EXCEPTION 'jobwarden: archive % lists a row changed since it was archived',
            a.name USING ERRCODE = 'JW031';
    END IF;

    WITH mine AS (
        SELECT x.row_id, x.operation_id FROM public.log_archived x
        WHERE x.archive_id = p_archive_id AND x.kind = 'failure'
    )
    DELETE FROM public.result_item_failures f
    USING mine m, public.results r
    WHERE m.row_id = f.result_id || '/' || f.item_key AND r.result_id = f.result_id
      AND r.operation_id = m.operation_id;
    GET DIAGNOSTICS n = ROW_COUNT; deleted := deleted + n;

    DELETE FROM public.observations t USING public.log_archived x
    WHERE x.archive_id = p_archive_id AND x.kind = 'observation'
      AND t.observation_id = (CASE WHEN x.kind = 'observation' THEN x.row_id::bigint END)
      AND x.operation_id = t.operation_id;
    GET DIAGNOSTICS n = ROW_COUNT; deleted := deleted + n;

    DELETE FROM public.webhook_events t
    USING public.log_archived x
    WHERE x.archive_id = p_archive_id AND x.kind = 'webhook'
      AND t.webhook_event_id = (CASE WHEN x.kind = 'webhook' THEN x.row_id::bigint END)
      AND x.operation_id = t.operation_id;
    GET DIAGNOSTICS n = ROW_COUNT; deleted := deleted + n;

    DELETE FROM public.provider_calls t
    USING public.log_archived x
    WHERE x.archive_id = p_archive_id AND x.kind = 'call'
      AND t.call_id = (CASE WHEN x.kind = 'call' THEN x.row_id::bigint END)
      AND x.operation_id = t.operation_id;
    GET DIAGNOSTICS n = ROW_COUNT; deleted := deleted + n;

    IF deleted <> a.rows THEN
        RAISE EXCEPTION 'jobwarden: archive % lists % rows, % of them are evidence of its operations',
            a.name, a.rows, deleted USING ERRCODE = 'JW030';
    END IF;
    RETURN deleted;
END $$;

REVOKE ALL ON FUNCTION jw_archive_evidence(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jw_archive_evidence(bigint) TO jobwarden_operator;
GRANT SELECT, INSERT ON log_archives, log_archived TO jobwarden_operator;
GRANT USAGE ON SEQUENCE log_archives_archive_id_seq TO jobwarden_operator;
GRANT SELECT ON log_archives, log_archived TO jobwarden_reconciler, jobwarden_receiver;
