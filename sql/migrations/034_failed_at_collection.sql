-- 034: a job may turn out to have failed only when its result is fetched.
--
-- Some APIs answer "done" on every status read, a failure included, and tell
-- the failure only in the result's answer: fal.ai's queue reads COMPLETED,
-- then its response URL answers the runner's 422 or 500 with the error. Such
-- a job went from result_collecting to result_unavailable, at once for a 4xx
-- and after six tries of a 500: escalated to a human, and the agent was told
-- "the result is unavailable" of a job that simply failed, without its error.
--
-- A provider description's `[result.failed]` now names the result answers
-- that are the provider's verdict. The reconciler records what such an answer
-- shows as an observation of its own, source 'result', citing the result
-- fetch's call (which stays on record, answer and all), and moves
-- result_collecting -> failed citing that observation, as a status read's
-- failure moves observing -> failed: the same evidence rule
-- (jw_evidence_ok: an observation whose remote_state is failed).

ALTER TABLE observations DROP CONSTRAINT observations_source_check;
ALTER TABLE observations ADD CONSTRAINT observations_source_check
    CHECK (source IN ('poll', 'webhook', 'create', 'lookup', 'result'));
ALTER TABLE observations DROP CONSTRAINT observation_has_origin;
ALTER TABLE observations ADD CONSTRAINT observation_has_origin CHECK (
    (source IN ('poll', 'create', 'lookup', 'result') AND call_id IS NOT NULL)
    OR (source = 'webhook' AND webhook_event_id IS NOT NULL)
);

ALTER TABLE state_edges DISABLE TRIGGER state_edges_fixed;
INSERT INTO state_edges (from_state, to_state, evidence)
VALUES ('result_collecting', 'failed', '{observation}');
ALTER TABLE state_edges ENABLE TRIGGER state_edges_fixed;
