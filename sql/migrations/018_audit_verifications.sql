-- 018: the last verifications of the evidence log, as reported by whoever ran them.
--
-- `jobwarden audit verify` adds one row when it finishes (unless --no-record),
-- so the operator console can show when the log was last checked, by which
-- database login, against which checkpoint, and what it found. This is a
-- report, not a proof: a database superuser can write any row here. The
-- proof is re-running verify with a checkpoint kept off this host, which is
-- what the console page says next to it.

CREATE TABLE audit_verifications (
    verification_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    verified_at      timestamptz NOT NULL DEFAULT jw_now(),
    verified_by      text NOT NULL DEFAULT session_user,
    ok               boolean NOT NULL,
    tree_size        bigint NOT NULL CHECK (tree_size >= 0),
    root_hash        text NOT NULL CHECK (root_hash ~ '^([0-9a-f]{64})?$'),
    -- the checkpoint verified against (NULL: none given, so nothing proven
    -- against the database's owner)
    checkpoint_origin text CHECK (length(checkpoint_origin) <= 4096),
    checkpoint_size  bigint CHECK (checkpoint_size >= 0),
    chains_checked   bigint NOT NULL CHECK (chains_checked >= 0),
    chain_breaks     bigint NOT NULL CHECK (chain_breaks >= 0),
    rows_checked     bigint NOT NULL CHECK (rows_checked >= 0),
    problems         bigint NOT NULL CHECK (problems >= 0),
    pending          bigint NOT NULL CHECK (pending >= 0),
    seconds          double precision NOT NULL CHECK (seconds >= 0),
    CHECK ((checkpoint_origin IS NULL) = (checkpoint_size IS NULL))
);

COMMENT ON TABLE audit_verifications IS
    'Outcomes of `jobwarden audit verify` as reported by whoever ran it: a report, not a proof.';

-- Operators run verify; the console (on the receiver's pool) shows the newest
-- (by verification_id, so no row can date itself ahead of later ones). They
-- may insert what verify reports, never `verified_at` or `verified_by`: those
-- are always the database's clock and the login that wrote the row.
GRANT SELECT ON audit_verifications TO jobwarden_operator, jobwarden_receiver;
GRANT INSERT (ok, tree_size, root_hash, checkpoint_origin, checkpoint_size, chains_checked,
              chain_breaks, rows_checked, problems, pending, seconds)
    ON audit_verifications TO jobwarden_operator;
