-- 007: evidence from a provider call must be an answer that proves the edge:
-- a 2xx for accepted / result_collecting / cancelling, and a definitive 4xx
-- (not 408, 409, 425 or 429, which mean "not now") for a failed create.
-- Replaces the function of 002; the edge table is unchanged.

CREATE OR REPLACE FUNCTION jw_evidence_ok(
    p_operation_id text, p_to jw_state, p_kind text, p_id bigint
) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_kind = 'call' THEN
        RETURN EXISTS (
            SELECT 1 FROM provider_calls c
            WHERE c.call_id = p_id AND c.operation_id = p_operation_id AND c.status_code IS NOT NULL
              AND CASE p_to
                    WHEN 'accepted' THEN c.call_kind IN ('create', 'lookup') AND c.remote_job_id IS NOT NULL
                        AND c.status_code BETWEEN 200 AND 299
                    WHEN 'result_collecting' THEN c.call_kind IN ('create', 'lookup')
                        AND c.status_code BETWEEN 200 AND 299
                    -- a definitive contract error; 408/409/425/429 say "not now", not "never"
                    WHEN 'failed' THEN c.call_kind = 'create' AND c.status_code BETWEEN 400 AND 499
                        AND c.status_code NOT IN (408, 409, 425, 429)
                    WHEN 'cancelling' THEN c.call_kind = 'cancel' AND c.status_code BETWEEN 200 AND 299
                    ELSE false END);
    ELSIF p_kind = 'observation' THEN
        RETURN EXISTS (
            SELECT 1 FROM observations o
            WHERE o.observation_id = p_id AND o.operation_id = p_operation_id
              AND CASE p_to
                    -- success is declared only after our own status read
                    WHEN 'result_collecting' THEN o.source IN ('poll', 'lookup')
                        AND o.remote_state IN ('succeeded', 'partially_succeeded')
                    WHEN 'failed' THEN o.remote_state = 'failed'
                    WHEN 'cancelled' THEN o.remote_state = 'cancelled'
                    ELSE false END);
    ELSIF p_kind = 'result' THEN
        RETURN EXISTS (
            SELECT 1 FROM results r
            WHERE r.result_id = p_id AND r.operation_id = p_operation_id AND r.valid);
    ELSIF p_kind = 'decision' THEN
        RETURN EXISTS (
            SELECT 1 FROM decisions d WHERE d.decision_id = p_id AND d.operation_id = p_operation_id);
    END IF;
    RETURN false;
END $$;

