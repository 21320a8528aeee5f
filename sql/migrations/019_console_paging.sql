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
-- created_at itself never changes.

DROP INDEX operations_by_state;
CREATE INDEX operations_by_state ON operations (state, created_at, operation_id);
CREATE INDEX operations_by_creation ON operations (created_at, operation_id);

-- Where a page starts (exclusive, newest first): below the cursor operation
-- ($1, the last one shown) and at or before "older than" ($2 seconds ago),
-- whichever is lower, as one (created_at, operation_id) bound. One bound, so
-- the index scan starts there: given a row bound and a separate created_at
-- bound, PostgreSQL starts from the row bound and reads every newer entry.
-- "created_at <= t" is "(created_at, operation_id) < (t + 1 us, '')" (a
-- timestamptz is whole microseconds, and '' sorts first in every collation).
-- Each is evaluated once per page: the queries call them as scalar subqueries.
CREATE FUNCTION jw_console_upper_at(p_after text, p_older double precision)
RETURNS timestamptz LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN a.created_at < x.upper THEN a.created_at ELSE x.upper END
    FROM (SELECT coalesce(jw_now() - make_interval(secs => p_older) + interval '1 microsecond',
                          'infinity') AS upper) x
    LEFT JOIN operations a ON a.operation_id = p_after
$$;
CREATE FUNCTION jw_console_upper_id(p_after text, p_older double precision)
RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN a.created_at < x.upper THEN a.operation_id ELSE '' END
    FROM (SELECT coalesce(jw_now() - make_interval(secs => p_older) + interval '1 microsecond',
                          'infinity') AS upper) x
    LEFT JOIN operations a ON a.operation_id = p_after
$$;
-- Where a page stops: created at most $1 seconds ago ("newer than").
CREATE FUNCTION jw_console_lower_at(p_newer double precision)
RETURNS timestamptz LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(jw_now() - make_interval(secs => p_newer), '-infinity')
$$;
GRANT EXECUTE ON FUNCTION jw_console_upper_at(text, double precision),
    jw_console_upper_id(text, double precision), jw_console_lower_at(double precision)
    TO jobwarden_receiver, jobwarden_operator;
