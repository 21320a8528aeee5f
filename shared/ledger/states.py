"""The operation state machine, mirrored from SQL.

The database is the authority: `sql/migrations/002_state_machine.sql` holds the
edge table and the trigger that enforces it, `008_one_gate.sql` the named sets
of states. This module mirrors both so Python code can reason about states
without a round trip; `tests/integration/test_state_machine.py` proves the two
agree, so the mirror cannot drift.
"""

from __future__ import annotations

from enum import StrEnum


class LocalState(StrEnum):
    """What jobwarden believes about an operation (the `operations.state` column)."""

    CREATE_PENDING = "create_pending"
    CREATE_UNKNOWN = "create_unknown"
    ACCEPTED = "accepted"
    OBSERVING = "observing"
    RESULT_COLLECTING = "result_collecting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCEL_REQUESTED = "cancel_requested"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    CANCELLATION_UNCONFIRMED = "cancellation_unconfirmed"
    RESULT_TIMED_OUT = "result_timed_out"
    RESULT_UNAVAILABLE = "result_unavailable"
    RESULT_VALIDATION_FAILED = "result_validation_failed"
    NEEDS_ATTENTION = "needs_attention"
    # Not in the seed: the intent was withdrawn before any create request left
    # this process, so no remote job can exist. Without it a cancel that beats
    # the first create attempt would have no honest end state.
    ABANDONED = "abandoned"


class RemoteState(StrEnum):
    """The canonical remote states every provider's vocabulary is mapped onto."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIALLY_SUCCEEDED = "partially_succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _REMOTE_TERMINAL


_REMOTE_TERMINAL = frozenset(
    {
        RemoteState.SUCCEEDED,
        RemoteState.PARTIALLY_SUCCEEDED,
        RemoteState.FAILED,
        RemoteState.CANCELLED,
    }
)


class Evidence(StrEnum):
    """Kinds of recorded fact a transition may cite (the `evidence_kind` column)."""

    CALL = "call"  # a row of provider_calls
    OBSERVATION = "observation"  # a row of observations
    RESULT = "result"  # a validated row of results
    DECISION = "decision"  # a recorded operator decision


S = LocalState
E = Evidence

# The named sets of states, mirrored from SQL's jw_state_set() (migration
# 008), where every query, view, constraint and index reads them;
# tests/integration/test_state_machine.py proves each mirror equal to its twin.
STATE_SETS: dict[str, frozenset[LocalState]] = {
    # no automatic move will ever change these again
    "terminal": frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.ABANDONED}),
    # the operator inbox: a human should look
    "inbox": frozenset(
        {
            S.NEEDS_ATTENTION,
            S.CANCELLATION_UNCONFIRMED,
            S.RESULT_TIMED_OUT,
            S.RESULT_UNAVAILABLE,
            S.RESULT_VALIDATION_FAILED,
        }
    ),
    # nothing is scheduled until a human decides (cancellation_unconfirmed is
    # in the inbox but still read, slowly, in case it settles)
    "waits_for_human": frozenset(
        {
            S.NEEDS_ATTENTION,
            S.RESULT_TIMED_OUT,
            S.RESULT_UNAVAILABLE,
            S.RESULT_VALIDATION_FAILED,
        }
    ),
    # the reconciler acts on these
    "scheduled": frozenset(
        {
            S.CREATE_PENDING,
            S.CREATE_UNKNOWN,
            S.ACCEPTED,
            S.OBSERVING,
            S.RESULT_COLLECTING,
            S.CANCEL_REQUESTED,
            S.CANCELLING,
            S.CANCELLATION_UNCONFIRMED,
        }
    ),
    # a claim in these is a status read
    "polled": frozenset({S.ACCEPTED, S.OBSERVING, S.CANCELLING, S.CANCELLATION_UNCONFIRMED}),
    # a remote job is on record (or the create answered synchronously)
    "has_job": frozenset(
        {
            S.ACCEPTED,
            S.OBSERVING,
            S.RESULT_COLLECTING,
            S.SUCCEEDED,
            S.CANCELLING,
            S.CANCELLED,
            S.RESULT_TIMED_OUT,
            S.RESULT_UNAVAILABLE,
            S.RESULT_VALIDATION_FAILED,
        }
    ),
    # someone asked to stop: who, why and the cancel deadline are on record
    "cancel_intent": frozenset({S.CANCEL_REQUESTED, S.CANCELLING, S.CANCELLATION_UNCONFIRMED}),
    # a create request may still be sent
    "wants_create": frozenset({S.CREATE_PENDING, S.CREATE_UNKNOWN, S.CANCEL_REQUESTED}),
    # a cancel request moves these to cancel_requested (or abandoned)
    "cancellable": frozenset(
        {S.CREATE_PENDING, S.CREATE_UNKNOWN, S.ACCEPTED, S.OBSERVING, S.RESULT_TIMED_OUT}
    ),
}

TERMINAL = STATE_SETS["terminal"]
INBOX = STATE_SETS["inbox"]
ESCALATED = INBOX  # the states an escalation row is opened for
WAITS_FOR_HUMAN = STATE_SETS["waits_for_human"]
SCHEDULED = STATE_SETS["scheduled"]
POLLED = STATE_SETS["polled"]
CANCELLABLE = STATE_SETS["cancellable"]

_NONE: frozenset[Evidence] = frozenset()
_CALL = frozenset({E.CALL})
_OBS = frozenset({E.OBSERVATION})
_OBS_OR_CALL = frozenset({E.OBSERVATION, E.CALL})
_DECISION = frozenset({E.DECISION})

# (from, to) -> evidence kinds that may justify the edge; empty = none needed.
EDGES: dict[tuple[LocalState, LocalState], frozenset[Evidence]] = {
    (S.CREATE_PENDING, S.ACCEPTED): _CALL,
    (S.CREATE_PENDING, S.RESULT_COLLECTING): _CALL,  # synchronous 200/201 result
    (S.CREATE_PENDING, S.FAILED): _CALL,  # definitive 4xx contract error
    (S.CREATE_PENDING, S.CREATE_UNKNOWN): _NONE,
    (S.CREATE_PENDING, S.CANCEL_REQUESTED): _NONE,
    (S.CREATE_PENDING, S.ABANDONED): _NONE,  # only while create_attempts = 0
    (S.CREATE_PENDING, S.NEEDS_ATTENTION): _NONE,
    (S.CREATE_UNKNOWN, S.ACCEPTED): _CALL,
    (S.CREATE_UNKNOWN, S.RESULT_COLLECTING): _CALL,
    (S.CREATE_UNKNOWN, S.FAILED): _CALL,
    (S.CREATE_UNKNOWN, S.CANCEL_REQUESTED): _NONE,
    (S.CREATE_UNKNOWN, S.NEEDS_ATTENTION): _NONE,
    (S.ACCEPTED, S.OBSERVING): _NONE,
    (S.ACCEPTED, S.CANCEL_REQUESTED): _NONE,
    (S.ACCEPTED, S.RESULT_TIMED_OUT): _NONE,
    (S.ACCEPTED, S.NEEDS_ATTENTION): _NONE,
    (S.OBSERVING, S.RESULT_COLLECTING): _OBS,
    (S.OBSERVING, S.FAILED): _OBS,
    (S.OBSERVING, S.CANCELLED): _OBS,  # the provider cancelled on its own
    (S.OBSERVING, S.RESULT_TIMED_OUT): _NONE,
    (S.OBSERVING, S.CANCEL_REQUESTED): _NONE,
    (S.OBSERVING, S.NEEDS_ATTENTION): _NONE,
    (S.RESULT_COLLECTING, S.SUCCEEDED): frozenset({E.RESULT}),
    # the result fetch's answer is the verdict (result.failed, migration 034)
    (S.RESULT_COLLECTING, S.FAILED): _OBS,
    (S.RESULT_COLLECTING, S.RESULT_UNAVAILABLE): _NONE,
    (S.RESULT_COLLECTING, S.RESULT_VALIDATION_FAILED): _NONE,
    (S.RESULT_COLLECTING, S.NEEDS_ATTENTION): _NONE,
    (S.CANCEL_REQUESTED, S.CANCELLING): _CALL,  # the cancel request we sent
    (S.CANCEL_REQUESTED, S.RESULT_COLLECTING): _OBS_OR_CALL,
    (S.CANCEL_REQUESTED, S.FAILED): _OBS_OR_CALL,
    (S.CANCEL_REQUESTED, S.CANCELLED): _OBS,
    (S.CANCEL_REQUESTED, S.CANCELLATION_UNCONFIRMED): _NONE,
    (S.CANCEL_REQUESTED, S.NEEDS_ATTENTION): _NONE,
    # only while create_attempts = 0: the create in flight when the cancel came never left
    (S.CANCEL_REQUESTED, S.ABANDONED): _NONE,
    (S.CANCELLING, S.CANCELLED): _OBS,
    (S.CANCELLING, S.RESULT_COLLECTING): _OBS,
    (S.CANCELLING, S.FAILED): _OBS,
    (S.CANCELLING, S.CANCELLATION_UNCONFIRMED): _NONE,
    (S.CANCELLING, S.NEEDS_ATTENTION): _NONE,
    (S.CANCELLATION_UNCONFIRMED, S.CANCELLED): _OBS,
    (S.CANCELLATION_UNCONFIRMED, S.RESULT_COLLECTING): _OBS,
    (S.CANCELLATION_UNCONFIRMED, S.FAILED): _OBS,
    (S.CANCELLATION_UNCONFIRMED, S.NEEDS_ATTENTION): _NONE,
    (S.RESULT_TIMED_OUT, S.OBSERVING): _DECISION,  # operator resumes observation
    (S.RESULT_TIMED_OUT, S.RESULT_COLLECTING): _OBS,
    (S.RESULT_TIMED_OUT, S.FAILED): _OBS,
    (S.RESULT_TIMED_OUT, S.CANCELLED): _OBS,
    (S.RESULT_TIMED_OUT, S.CANCEL_REQUESTED): _NONE,
    (S.RESULT_TIMED_OUT, S.NEEDS_ATTENTION): _NONE,
    (S.RESULT_UNAVAILABLE, S.RESULT_COLLECTING): _DECISION,
    (S.RESULT_UNAVAILABLE, S.FAILED): _DECISION,
    (S.RESULT_UNAVAILABLE, S.NEEDS_ATTENTION): _NONE,
    (S.RESULT_VALIDATION_FAILED, S.RESULT_COLLECTING): _DECISION,
    (S.RESULT_VALIDATION_FAILED, S.FAILED): _DECISION,
    (S.RESULT_VALIDATION_FAILED, S.NEEDS_ATTENTION): _NONE,
    (S.NEEDS_ATTENTION, S.OBSERVING): _DECISION,
    (S.NEEDS_ATTENTION, S.RESULT_COLLECTING): _DECISION,
    (S.NEEDS_ATTENTION, S.FAILED): _DECISION,
    (S.NEEDS_ATTENTION, S.CANCELLED): _DECISION,
    (S.NEEDS_ATTENTION, S.CANCEL_REQUESTED): _DECISION,
    (S.NEEDS_ATTENTION, S.ABANDONED): _DECISION,
}


def allowed(src: LocalState, dst: LocalState) -> bool:
    return (src, dst) in EDGES
