-- 031: an operator may adopt a job id found at the provider
-- (`jobwarden resolve ID --decision observing --job-id JOB`), for an operation
-- whose create answer was lost at a provider that cannot deduplicate or look
-- up. The webhook events stored for that job while nobody knew it must be
-- attached as they are when the reconciler records a job id: by the trigger
-- on operations.remote_job_id (jw_attach_early_events, migration 022).
--
-- That trigger ran with the privileges of whoever wrote the job id, until now
-- always the reconciler. An operator's session may neither update
-- webhook_events nor insert observations (an operator must not be able to
-- fabricate evidence), and PostgreSQL checks those privileges even when no
-- event waits: every adoption was refused. SECURITY DEFINER gives them to the
-- attachment, not to the operator: it writes only what it always wrote, the
-- stored, unattached events of this provider naming this job id, each as an
-- observation of its own stored state. (As migrations 028 and 029 do.)

ALTER FUNCTION jw_attach_early_events() SECURITY DEFINER SET search_path = pg_catalog, public;
