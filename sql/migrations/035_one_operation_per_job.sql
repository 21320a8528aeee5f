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
-- a synchronous create's job id was never checked. A recorded job id is never
-- rewritten (jw_operations_before_update), and which operation should hold
-- such a job is a person's call, not a migration's; refusing the upgrade
-- until a superuser repaired rows by hand would leave an operator no
-- supported way on. So the first holder of each shared job (the oldest
-- operation) keeps it under the index, the later ones are left as they are
-- and exempt from it, named in a WARNING (`jobwarden migrate` prints it): a
-- new recording of such a job is refused all the same (its first holder is
-- indexed). A clean database pays one grouped scan, no more.
--
-- Built in that transaction, so not CONCURRENTLY (which cannot run inside
-- one), under the lock DROP INDEX takes anyway, taken first (029: taken last,
-- behind weaker locks, it can deadlock with a daemon still running; the
-- migrator takes it before any pending file runs): reads and writes of
-- operations wait while the index is built (2.4 s for a million rows of the
-- two columns, measured once).
LOCK TABLE operations IN ACCESS EXCLUSIVE MODE;

DO $$
DECLARE
    later text[] := '{}';
    shared_jobs bigint;
    named text;
BEGIN
    IF EXISTS (SELECT 1 FROM operations WHERE remote_job_id IS NOT NULL
               GROUP BY provider, remote_job_id HAVING count(*) > 1) THEN
        SELECT array_agg(operation_id ORDER BY operation_id) INTO later
        FROM (SELECT operation_id,
                     row_number() OVER (PARTITION BY provider, remote_job_id
                                        ORDER BY created_at, operation_id) AS n
              FROM operations WHERE remote_job_id IS NOT NULL) held
        WHERE n > 1;
        SELECT count(*), string_agg(format('%s job %L: %s', provider, remote_job_id, holders),
                                    '; ' ORDER BY provider, remote_job_id)
                         FILTER (WHERE rank <= 20)
        INTO shared_jobs, named
        FROM (
            SELECT provider, remote_job_id,
                   array_to_string((array_agg(format('%s (%s)', operation_id, state)
                                              ORDER BY created_at, operation_id))[1:5], ', ')
                   || CASE WHEN count(*) > 5 THEN format(' and %s more', count(*) - 5)
                           ELSE '' END AS holders,
                   row_number() OVER (ORDER BY provider, remote_job_id) AS rank
            FROM operations
            WHERE remote_job_id IS NOT NULL
            GROUP BY provider, remote_job_id
            HAVING count(*) > 1
        ) d;
        RAISE WARNING '% remote job(s) are each recorded by more than one operation: the '
            'first (oldest) holder of each keeps it, the % others are exempt from the '
            'unique index operations_one_per_job', shared_jobs, cardinality(later)
            USING DETAIL = named || CASE WHEN shared_jobs > 20
                                         THEN format('; and %s more', shared_jobs - 20)
                                         ELSE '' END,
                  HINT = 'check them: operations sharing a job would both collect its '
                      'result, and one''s cancel would stop the other''s work; cancel or '
                      'resolve the later ones';
    END IF;
    IF cardinality(later) = 0 THEN
        CREATE UNIQUE INDEX operations_one_per_job ON operations (provider, remote_job_id)
            WHERE remote_job_id IS NOT NULL;
        DROP INDEX operations_remote_job;
    ELSE
        -- a lookup by job id does not imply the exemption: the plain index stays for it
        EXECUTE 'CREATE UNIQUE INDEX operations_one_per_job ON operations '
            || '(provider, remote_job_id) WHERE remote_job_id IS NOT NULL'
            || format(' AND operation_id <> ALL (%L::text[])', later);
    END IF;
END $$;

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
