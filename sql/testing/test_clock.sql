-- A shiftable clock for tests and the crash-point harness, never for production.
--
-- Installed over a migrated database (bench/harness.py, install_test_clock):
-- jw_now() becomes the real clock plus the one shift stored here, so every
-- connection of every process — the test, in-process daemons, SIGKILLed
-- subprocesses — sees the same "now" the moment a test moves it. Tests move
-- time forward instead of sleeping; nothing else changes.

CREATE TABLE jw_test_clock (
    one_row boolean PRIMARY KEY DEFAULT true CHECK (one_row),
    shift interval NOT NULL DEFAULT interval '0'
);
INSERT INTO jw_test_clock DEFAULT VALUES;
GRANT SELECT ON jw_test_clock TO jobwarden_agent, jobwarden_receiver, jobwarden_reconciler,
    jobwarden_operator;

CREATE OR REPLACE FUNCTION jw_now() RETURNS timestamptz
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT clock_timestamp() + (SELECT shift FROM jw_test_clock)
$$;
