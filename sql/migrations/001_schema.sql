-- 001: tables of the durable operation ledger.
-- The state machine, history chain and its triggers live in 002; roles in 003.

CREATE TYPE jw_state AS ENUM (
    'create_pending', 'create_unknown', 'accepted', 'observing', 'result_collecting',
    'succeeded', 'failed', 'cancel_requested', 'cancelling', 'cancelled',
    'cancellation_unconfirmed', 'result_timed_out', 'result_unavailable',
    'result_validation_failed', 'needs_attention', 'abandoned'
);

CREATE TYPE jw_remote_state AS ENUM (
    'pending', 'running', 'succeeded', 'partially_succeeded', 'failed', 'cancelled'
);

-- One row per logical operation: the agent's intent and everything we learned since.
CREATE TABLE operations (
    operation_id        text PRIMARY KEY CHECK (operation_id ~ '^op_[0-9A-HJKMNP-TV-Z]{26}$'),
    provider            text NOT NULL CHECK (provider ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    kind                text NOT NULL CHECK (length(kind) BETWEEN 1 AND 100),
    client_reference    text NOT NULL CHECK (length(client_reference) BETWEEN 1 AND 200),
    request             jsonb NOT NULL CHECK (jsonb_typeof(request) = 'object'),
    request_fingerprint text NOT NULL CHECK (request_fingerprint ~ '^sha256:[0-9a-f]{64}$'),
    idempotency_token   text NOT NULL UNIQUE CHECK (idempotency_token ~ '^idem_[0-9a-f]{32}$'),
    -- how the token travels; 'none' = the provider cannot dedupe creates, so an
    -- uncertain create is never retried automatically.
    idempotency_mode    text NOT NULL DEFAULT 'header'
                        CHECK (idempotency_mode IN ('header', 'body', 'client_job_id', 'none')),
    trace_id            text NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
    requested_by        text NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
    approval_ref        text,

    state               jw_state NOT NULL DEFAULT 'create_pending',
    remote_state        jw_remote_state,
    remote_state_raw    text,
    remote_job_id       text CHECK (length(remote_job_id) BETWEEN 1 AND 500),
    status_url          text,
    create_mode         text CHECK (create_mode IN ('async', 'sync')),

    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    create_deadline     timestamptz NOT NULL,
    result_deadline     timestamptz NOT NULL,
    cancel_deadline     timestamptz,
    finished_at         timestamptz,

    cancel_requested_at timestamptz,
    cancel_requested_by text,
    cancel_reason       text,
    cancel_sent_at      timestamptz,

    -- When the reconciler should next act on this row; NULL = nothing scheduled.
    next_poll_at        timestamptz,
    create_attempts     integer NOT NULL DEFAULT 0 CHECK (create_attempts >= 0),
    poll_attempts       integer NOT NULL DEFAULT 0 CHECK (poll_attempts >= 0),
    result_attempts     integer NOT NULL DEFAULT 0 CHECK (result_attempts >= 0),
    cancel_attempts     integer NOT NULL DEFAULT 0 CHECK (cancel_attempts >= 0),
    lookup_attempts     integer NOT NULL DEFAULT 0 CHECK (lookup_attempts >= 0),

    progress_completed  bigint,
    progress_total      bigint,
    progress_percent    numeric(5, 2) CHECK (progress_percent BETWEEN 0 AND 100),
    poll_after_seconds  integer,
    last_error          jsonb,
    webhook_seen_at     timestamptz,

    lease_owner         text,
    lease_expires_at    timestamptz,
    -- Fencing counter: bumped on every claim; writes carry the value they
    -- claimed with, so a worker whose lease expired cannot write.
    lease_fence         bigint NOT NULL DEFAULT 0,

    result_id           bigint,
    result_ref          text,
    result_summary      jsonb,

    -- Head of the per-operation hash chain, kept by the history trigger so that
    -- removing the newest history row is detectable too.
    history_seq         integer NOT NULL DEFAULT 0,
    history_head        text,

    CONSTRAINT terminal_has_finished_at CHECK (
        (state IN ('succeeded', 'failed', 'cancelled', 'abandoned')) = (finished_at IS NOT NULL)
    ),
    CONSTRAINT remote_states_have_job_id CHECK (
        state NOT IN ('accepted', 'observing', 'result_collecting', 'succeeded', 'cancelling',
                      'cancelled', 'result_timed_out',
                      'result_unavailable', 'result_validation_failed')
        OR remote_job_id IS NOT NULL OR create_mode = 'sync'
    ),
    CONSTRAINT cancel_states_have_intent CHECK (
        state NOT IN ('cancel_requested', 'cancelling', 'cancellation_unconfirmed')
        OR (cancel_requested_at IS NOT NULL AND cancel_deadline IS NOT NULL
            AND cancel_requested_by IS NOT NULL)
    ),
    CONSTRAINT cancelling_was_sent CHECK (state <> 'cancelling' OR cancel_sent_at IS NOT NULL),
    CONSTRAINT abandoned_never_sent CHECK (state <> 'abandoned' OR create_attempts = 0),
    CONSTRAINT succeeded_has_result CHECK (state <> 'succeeded' OR result_id IS NOT NULL),
    CONSTRAINT lease_is_whole CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT deadlines_after_creation CHECK (
        create_deadline > created_at AND result_deadline > created_at
    ),
    CONSTRAINT progress_sane CHECK (
        progress_completed IS NULL OR progress_total IS NULL
        OR (progress_completed >= 0 AND progress_total >= 0)
    ),
    UNIQUE (requested_by, client_reference)
);

-- "What is due now": the partial index holds only rows the reconciler may act on,
-- so the claim query is an index range scan whatever the size of finished history.
CREATE INDEX operations_due ON operations (next_poll_at)
    WHERE next_poll_at IS NOT NULL;
CREATE INDEX operations_remote_job ON operations (provider, remote_job_id)
    WHERE remote_job_id IS NOT NULL;
CREATE INDEX operations_escalated ON operations (updated_at)
    WHERE state IN ('needs_attention', 'cancellation_unconfirmed', 'result_timed_out',
                    'result_unavailable', 'result_validation_failed');
CREATE INDEX operations_unfinished_by_caller ON operations (requested_by, created_at)
    WHERE finished_at IS NULL;

-- Every outbound request, recorded before it is sent and completed after.
CREATE TABLE provider_calls (
    call_id             bigserial PRIMARY KEY,
    operation_id        text NOT NULL REFERENCES operations (operation_id),
    call_kind           text NOT NULL
                        CHECK (call_kind IN ('create', 'status', 'cancel', 'result', 'lookup', 'errors')),
    attempt             integer NOT NULL CHECK (attempt >= 1),
    worker              text NOT NULL,
    fence               bigint,
    trace_id            text NOT NULL,
    traceparent         text,
    idempotency_token   text,
    method              text NOT NULL,
    url                 text NOT NULL,
    request_headers     jsonb NOT NULL DEFAULT '{}',
    started_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at         timestamptz,
    duration_ms         integer,
    status_code         integer CHECK (status_code BETWEEN 100 AND 599),
    provider_request_id text,
    response_headers    jsonb,
    -- timeout | connect | reset | protocol | other | http_4xx | http_5xx | back_pressure
    error_category      text,
    response_sha256     text,
    response_size       integer,
    -- bounded excerpt; large bodies are referenced by hash, not copied
    response_body       text CHECK (length(response_body) <= 65536),
    remote_job_id       text
);
CREATE INDEX provider_calls_by_operation ON provider_calls (operation_id, call_id);

-- Webhook deliveries, deduplicated by the id the signature covers.
CREATE TABLE webhook_events (
    webhook_event_id    bigserial PRIMARY KEY,
    provider            text NOT NULL,
    event_id            text NOT NULL CHECK (length(event_id) BETWEEN 1 AND 500),
    received_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    signature_scheme    text NOT NULL,
    id_signed           boolean NOT NULL,
    remote_job_id       text,
    operation_ref       text,
    remote_state        jw_remote_state,
    remote_state_raw    text,
    payload             jsonb NOT NULL,
    operation_id        text REFERENCES operations (operation_id),
    attached_at         timestamptz,
    duplicate_deliveries integer NOT NULL DEFAULT 0,
    UNIQUE (provider, event_id)
);
CREATE INDEX webhook_events_unattached ON webhook_events (provider, remote_job_id)
    WHERE operation_id IS NULL;
CREATE INDEX webhook_events_received ON webhook_events (received_at);

-- Status facts, from our own reads or from webhooks.
CREATE TABLE observations (
    observation_id      bigserial PRIMARY KEY,
    operation_id        text NOT NULL REFERENCES operations (operation_id),
    source              text NOT NULL CHECK (source IN ('poll', 'webhook', 'create', 'lookup')),
    call_id             bigint REFERENCES provider_calls (call_id),
    webhook_event_id    bigint REFERENCES webhook_events (webhook_event_id),
    remote_state        jw_remote_state,
    remote_state_raw    text,
    provider_updated_at timestamptz,
    fetched_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    progress_completed  bigint,
    progress_total      bigint,
    progress_percent    numeric(5, 2),
    poll_after_seconds  integer,
    error               jsonb,
    result_url          text,
    errors_url          text,
    counts              jsonb,
    CONSTRAINT observation_has_origin CHECK (
        (source IN ('poll', 'create', 'lookup') AND call_id IS NOT NULL)
        OR (source = 'webhook' AND webhook_event_id IS NOT NULL)
    )
);
CREATE INDEX observations_by_operation ON observations (operation_id, observation_id);

-- Collected results, content-addressed; small JSON is kept inline.
CREATE TABLE results (
    result_id           bigserial PRIMARY KEY,
    operation_id        text NOT NULL REFERENCES operations (operation_id),
    call_id             bigint REFERENCES provider_calls (call_id),
    fetched_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    valid               boolean NOT NULL,
    reason              text,
    content_type        text,
    size_bytes          bigint,
    sha256              text CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    storage_ref         text,
    inline              jsonb,
    items_total         bigint,
    items_succeeded     bigint,
    items_failed        bigint,
    CONSTRAINT valid_result_is_stored CHECK (
        NOT valid OR (sha256 IS NOT NULL AND (storage_ref IS NOT NULL OR inline IS NOT NULL))
    )
);
CREATE INDEX results_by_operation ON results (operation_id);

ALTER TABLE operations ADD CONSTRAINT operations_result_fk
    FOREIGN KEY (result_id) REFERENCES results (result_id);

-- Per-item failures of a batch, read page by page (never inline in the agent row).
CREATE TABLE result_item_failures (
    result_id           bigint NOT NULL REFERENCES results (result_id),
    item_key            text NOT NULL,
    code                text,
    message             text,
    PRIMARY KEY (result_id, item_key)
);

-- Recorded operator decisions: the only evidence that can move needs_attention.
CREATE TABLE decisions (
    decision_id         bigserial PRIMARY KEY,
    operation_id        text NOT NULL REFERENCES operations (operation_id),
    actor               text NOT NULL CHECK (actor LIKE 'operator:%'),
    decided_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    decision            text NOT NULL,
    reason              text NOT NULL CHECK (length(reason) >= 3)
);

-- Escalations to humans; opened by the reconciler, closed by a decision.
CREATE TABLE escalations (
    escalation_id       bigserial PRIMARY KEY,
    operation_id        text NOT NULL REFERENCES operations (operation_id),
    opened_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    state               jw_state NOT NULL,
    reason              text NOT NULL,
    details             jsonb NOT NULL DEFAULT '{}',
    resolved_at         timestamptz,
    decision_id         bigint REFERENCES decisions (decision_id)
);
CREATE UNIQUE INDEX escalations_one_open ON escalations (operation_id) WHERE resolved_at IS NULL;

-- Exactly-once completion claims by consumers.
CREATE TABLE completion_claims (
    operation_id        text NOT NULL REFERENCES operations (operation_id),
    consumer            text NOT NULL CHECK (length(consumer) BETWEEN 1 AND 200),
    claimed_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (operation_id, consumer)
);
