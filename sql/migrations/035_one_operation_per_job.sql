-- 035: two operations never share a remote job, by a unique index.
--
-- Until now the callers kept the rule: the reconciler (a create's or a
-- lookup's answer) and `jobwarden resolve --job-id` took an advisory lock on
-- (provider, job id) and looked for another holder before recording one
-- (shared/ledger/operations.py holder_of_job), and 033's trigger did the same
-- for an operator's bare UPDATE. Every other writer went unchecked: a
-- synchronous create's job id, a session of the owner or of the reconciler
-- role. Now the index refuses a second holder whoever writes it; the ledger
-- names the refusal (JobShared): the reconciler stops the operation for a
-- human, an adoption is refused, and a bare UPDATE fails with unique_violation.
-- It replaces operations_remote_job (001), which had the same key and
-- predicate but was not unique.
--
-- Rows may already share a job: before the check (7828793), a simulator that
-- handed out job ids again after a restart had two operations record one, and
-- a synchronous create's job id was never checked. Which operation holds such
-- a job is not a migration's to decide, and a recorded job id is never
-- rewritten (jw_operations_before_update): the migration refuses, naming them
-- (20 jobs, 5 operations each, at most; how many in all), and, every pending
-- migration being applied in one transaction (shared/db/migrate.py), leaves
-- the database as it was.
--
-- Built in that transaction, so not CONCURRENTLY (which cannot run inside
-- one), under the lock DROP INDEX takes anyway, taken first (029: taken last,
-- behind weaker locks, it can deadlock with a daemon still running): reads
-- and writes of operations wait while the duplicates are looked for and the
-- index is built (2.4 s for a million rows of the two columns, measured once).
LOCK TABLE operations IN ACCESS EXCLUSIVE MODE;

DO $$
DECLARE
    shared_jobs bigint;
    named text;
BEGIN
    SELECT count(*), string_agg(format('%s job %L: %s', provider, remote_job_id, holders),
                                '; ' ORDER BY provider, remote_job_id)
                     FILTER (WHERE rank <= 20)
    INTO shared_jobs, named
    FROM (
        SELECT provider, remote_job_id,
               array_to_string((array_agg(format('%s (%s)', operation_id, state)
                                          ORDER BY created_at, operation_id))[1:5], ', ')
               || CASE WHEN count(*) > 5 THEN format(' and %s more', count(*) - 5) ELSE '' END
                   AS holders,
               row_number() OVER (ORDER BY provider, remote_job_id) AS rank
        FROM operations
        WHERE remote_job_id IS NOT NULL
        GROUP BY provider, remote_job_id
        HAVING count(*) > 1
    ) d;
    IF shared_jobs > 0 THEN
        RAISE EXCEPTION '% remote job(s) are each recorded by more than one operation, which '
            'the unique index operations_one_per_job would forbid', shared_jobs
            USING DETAIL = named || CASE WHEN shared_jobs > 20
                                         THEN format('; and %s more', shared_jobs - 20)
                                         ELSE '' END,
                  HINT = 'nothing was migrated, and the previous jobwarden still runs on this '
                      'database; decide which operation holds each job (a recorded job id is '
                      'never rewritten by jobwarden: the others'' rows need a repair by the '
                      'schema owner), then run jobwarden migrate again';
    END IF;
END $$;

CREATE UNIQUE INDEX operations_one_per_job ON operations (provider, remote_job_id)
    WHERE remote_job_id IS NOT NULL;
DROP INDEX operations_remote_job;

-- 033's guard of an operator's bare UPDATE, without its holder check (and the
-- lock it took for it): the index refuses a second holder for every session.
CREATE OR REPLACE FUNCTION jw_job_id_needs_a_decision() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    latest bigint;
BEGIN
    IF OLD.state <> 'needs_attention' THEN
        RAISE EXCEPTION 'operation %: a job id is adopted only by an operation stopped in '
            'needs_attention with none on record', NEW.operation_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    BEGIN
        latest := currval(pg_get_serial_sequence('decisions', 'decision_id'));
    EXCEPTION WHEN object_not_in_prerequisite_state THEN
        latest := NULL;  -- no decision written in this session
    END;
    IF latest IS NULL OR NOT EXISTS (
        SELECT 1 FROM decisions d
        WHERE d.decision_id = latest AND d.operation_id = NEW.operation_id
          AND right(d.decision, length(NEW.remote_job_id) + 15)
              = ', adopting job ' || NEW.remote_job_id
    ) THEN
        RAISE EXCEPTION 'operation %: a job id is recorded by the reconciler, or by the '
            'operator decision that adopts it (jobwarden resolve --job-id)', NEW.operation_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
