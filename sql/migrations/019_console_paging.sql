-- 019: the console's operations list stays fast at a million rows (issue 15).
--
-- The list is newest first by creation time, paged by a keyset on
-- (created_at, operation_id). Ordering by the id alone (ULIDs: creation
-- order) made an age filter a walk: "older than 7 days" read every newer
-- operation first, and "newer than 1 hour" with a rare provider read the
-- whole table when it had no match. With the time in the index, an age filter
-- is a range of it.
--
-- A state, and an outcome (which is a set of states: sql/queries/console.sql),
-- walks operations_by_state once per state, each stopping at a page.
--
-- The cost: one more index entry when an operation is created and on each
-- update that is not HOT (a state change already is not: `state` is indexed);
-- created_at itself never changes. Building the indexes blocks writes to
-- operations while it runs (seconds per million rows here); on a large table,
-- build both with CREATE INDEX CONCURRENTLY under these names and definitions
-- beforehand: the migration then finds them and only drops the old index.

DROP INDEX operations_by_state;
CREATE INDEX IF NOT EXISTS operations_by_state_created
    ON operations (state, created_at, operation_id);
CREATE INDEX IF NOT EXISTS operations_by_creation ON operations (created_at, operation_id);

-- Where a page starts (exclusive, newest first): below the cursor operation
-- ($1, the last one shown) and at or before "older than" ($2: a time the
-- console computed once from jw_now()), whichever is lower, as one
-- (created_at, operation_id) bound. One bound, so the index scan starts
-- there: given a row bound and a separate created_at bound, PostgreSQL starts
-- from the row bound and reads every newer entry. "created_at <= t" is
-- "(created_at, operation_id) < (t + 1 us, '')" (a timestamptz is whole
-- microseconds, and '' sorts first in every collation). The queries call these
-- as scalar subqueries: evaluated once per page.
CREATE FUNCTION jw_console_upper_at(p_after text, p_older_at timestamptz)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN a.created_at < x.upper THEN a.created_at ELSE x.upper END
    FROM (SELECT coalesce(p_older_at + interval '1 microsecond', 'infinity') AS upper) x
    LEFT JOIN operations a ON a.operation_id = p_after
$$;
CREATE FUNCTION jw_console_upper_id(p_after text, p_older_at timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN a.created_at < x.upper THEN a.operation_id ELSE '' END
    FROM (SELECT coalesce(p_older_at + interval '1 microsecond', 'infinity') AS upper) x
    LEFT JOIN operations a ON a.operation_id = p_after
$$;
-- Does an operation pass the filters checked row by row (provider, kind, and
-- the two outcomes that share the state succeeded, told apart as the agent
-- views do: migration 008)? NULL filters pass everything.
CREATE FUNCTION jw_console_matches(
    p_provider text, p_kind text, p_state jw_state, p_remote_state jw_remote_state,
    p_items_failed bigint, f_provider text, f_kind text, f_outcome text
) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT (f_provider IS NULL OR p_provider = f_provider)
       AND (f_kind IS NULL OR p_kind = f_kind)
       AND (f_outcome IS NULL OR f_outcome NOT IN ('succeeded', 'completed_with_errors')
            OR (p_state = 'succeeded'
                AND (f_outcome = 'completed_with_errors')
                    = (coalesce(p_items_failed, 0) > 0
                       OR coalesce(p_remote_state = 'partially_succeeded', false))))
$$;
GRANT EXECUTE ON FUNCTION jw_console_upper_at(text, timestamptz),
    jw_console_upper_id(text, timestamptz),
    jw_console_matches(text, text, jw_state, jw_remote_state, bigint, text, text, text)
    TO jobwarden_receiver, jobwarden_operator;
