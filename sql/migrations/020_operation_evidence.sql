-- 020: the evidence rows of one operation, enumerated once.
--
-- A receipt (log_leaves_of_operation) and the console's receipt status
-- (console_receipt_status) both ask "which rows are this operation's
-- evidence?"; each spelled out the same eight-table union, and a ninth kind
-- added to one would have been missed by the other. Failed items can be
-- millions for one batch: a caller that only counts kinds for a page leaves
-- them out (p_with_failures). A plain SQL function: the planner inlines it,
-- so each branch still reads its table's index on operation_id.

CREATE FUNCTION jw_operation_evidence(p_operation_id text, p_with_failures boolean)
RETURNS TABLE (kind text, row_id text) LANGUAGE sql STABLE AS $$
    SELECT 'operation', operation_id FROM operations WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'history', history_id::text FROM history WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'call', call_id::text FROM provider_calls WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'observation', observation_id::text FROM observations
    WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'webhook', webhook_event_id::text FROM webhook_events
    WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'result', result_id::text FROM results WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'failure', f.result_id || '/' || f.item_key
    FROM result_item_failures f JOIN results r ON r.result_id = f.result_id
    WHERE p_with_failures AND r.operation_id = p_operation_id
    UNION ALL
    SELECT 'decision', decision_id::text FROM decisions WHERE operation_id = p_operation_id
    UNION ALL
    SELECT 'escalation', escalation_id::text FROM escalations
    WHERE operation_id = p_operation_id
$$;
GRANT EXECUTE ON FUNCTION jw_operation_evidence(text, boolean)
    TO jobwarden_receiver, jobwarden_operator, jobwarden_reconciler;
