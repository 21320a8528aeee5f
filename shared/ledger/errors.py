"""Errors of the ledger, each naming what went wrong in words a caller can act on."""

from __future__ import annotations


class LedgerError(Exception):
    """Base class for refusals by the ledger (database-enforced or checked in Python)."""


class UnknownOperation(LedgerError):
    pass


class StaleTransition(LedgerError):
    """The operation is no longer in the state the caller believed (a concurrent writer won)."""


class ForbiddenTransition(LedgerError):
    """The state machine has no such edge."""


class MissingEvidence(LedgerError):
    """The edge asserts a remote fact and the cited evidence does not prove it."""


class OperatorOnly(LedgerError):
    """Only a recorded operator decision may make this move."""


class LeaseLost(LedgerError):
    """The caller's lease expired or was taken over: its write was refused (fencing)."""


class ImmutableFact(LedgerError):
    """A recorded fact (intent, remote job id, result) cannot be rewritten."""


class JobShared(LedgerError):
    """The job id is another operation's already: the unique index of migration 035
    (operations_one_per_job) refused it. The transaction (or savepoint) that tried
    is aborted: the caller handles this outside it, where nothing of it was written."""


class AdoptionRefused(LedgerError):
    """An operator's job id was not adopted (nothing was written); the message says why."""


class RequestMismatch(LedgerError):
    """A resubmission reused a client reference for a different request."""


# SQLSTATEs raised by the triggers in sql/migrations/002_state_machine.sql.
SQLSTATE_ERRORS: dict[str, type[LedgerError]] = {
    "JW001": StaleTransition,
    "JW002": ForbiddenTransition,
    "JW003": MissingEvidence,
    "JW004": OperatorOnly,
    "JW005": ImmutableFact,
    "JW006": ImmutableFact,
    "JW010": ImmutableFact,
}
