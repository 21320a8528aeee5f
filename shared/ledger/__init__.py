"""The ledger: the only writer of operations, evidence, decisions and escalations.

Everything jobwarden knows about an operation is written through this package:
the intent (`operations`), leases and fencing (`leases`), provider calls,
status reads and results (`evidence`), webhook events (`webhooks`), operator
decisions and escalations (`decisions`), API tokens (`tokens`). It knows no
HTTP: callers hand it plain values. `tests/unit/test_write_gate.py` proves that
no named write query is used anywhere else.
"""

from shared.ledger.decisions import record_decision
from shared.ledger.errors import (
    ImmutableFact,
    JobShared,
    LeaseLost,
    LedgerError,
    RequestMismatch,
    StaleTransition,
    UnknownOperation,
)
from shared.ledger.operations import (
    DEFAULT_CANCEL_DEADLINE_S,
    DEFAULT_CREATE_DEADLINE_S,
    DEFAULT_RESULT_DEADLINE_S,
    Operation,
    RequestSpec,
    Submitted,
    attach_result,
    bump_attempt,
    bump_create_attempt,
    claim_completion,
    clock_now,
    holder_of_job,
    lease_held,
    load_operation,
    record_cancel_not_sent,
    record_cancel_sent,
    record_remote_job,
    record_sync_mode,
    request_cancel,
    request_wake,
    retry_follow_up,
    set_last_error,
    settle_follow_up,
    state_edges_in_db,
    state_entered_at,
    submit_operation,
    transition,
    unbump_create_attempt,
)

__all__ = [
    "DEFAULT_CANCEL_DEADLINE_S",
    "DEFAULT_CREATE_DEADLINE_S",
    "DEFAULT_RESULT_DEADLINE_S",
    "ImmutableFact",
    "JobShared",
    "LeaseLost",
    "LedgerError",
    "Operation",
    "RequestMismatch",
    "RequestSpec",
    "StaleTransition",
    "Submitted",
    "UnknownOperation",
    "attach_result",
    "bump_attempt",
    "bump_create_attempt",
    "claim_completion",
    "clock_now",
    "holder_of_job",
    "lease_held",
    "load_operation",
    "record_cancel_not_sent",
    "record_cancel_sent",
    "record_decision",
    "record_remote_job",
    "record_sync_mode",
    "request_cancel",
    "request_wake",
    "retry_follow_up",
    "set_last_error",
    "settle_follow_up",
    "state_edges_in_db",
    "state_entered_at",
    "submit_operation",
    "transition",
    "unbump_create_attempt",
]
