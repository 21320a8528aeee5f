"""The console's operator actions: the CLI's moves, through the same ledger functions.

`resolve`, `reconcile` and `cancel` are `jobwarden resolve / reconcile / cancel`
(shared/cli/operator.py) for a signed-in operator: a recorded decision (or a
cancel request) whose actor is `operator:<token name>`, in the transaction of
the move it causes; the state machine's triggers judge every move. A refusal
is an `ActionRefused` with words for the operator, never a crash. `conn` is
the console's decision connection (base.Console.deciding): its own login in
jobwarden_operator, since the receiver's role may not record decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

import asyncpg

from receiver.console.render import when
from shared import ledger
from shared.db.queries import q
from shared.ledger import decisions
from shared.ledger.decisions import MIN_REASON, operator_targets
from shared.ledger.errors import LedgerError, UnknownOperation
from shared.ledger.states import CANCELLABLE, TERMINAL, LocalState
from shared.text import holds_exactly

S = LocalState
# The longest extension the form accepts (a typo of 1000 days is refused).
MAX_EXTENSION_SECONDS = 30 * 86400.0
MAX_REASON = 2000

# Where `reconcile` moves an escalated operation so the reconciler reads again
# (the same table as the CLI's).
RESUME_TO: dict[LocalState, LocalState] = {
    S.RESULT_TIMED_OUT: S.OBSERVING,
    S.NEEDS_ATTENTION: S.OBSERVING,
    S.RESULT_UNAVAILABLE: S.RESULT_COLLECTING,
    S.RESULT_VALIDATION_FAILED: S.RESULT_COLLECTING,
}


class ActionRefused(Exception):
    """The move was not made; the message says why, for the operator."""


@dataclass(frozen=True)
class Done:
    notice: str  # a key of the timeline's fixed notices
    decision_id: int | None = None


def reason_of(text: str | None) -> str:
    """The form's reason as recorded, or ActionRefused: too short, too long, or
    holding NUL (a form's %00), which PostgreSQL text cannot hold (the insert
    failed in the driver: an 'unexpected server error' page)."""
    reason = (text or "").strip()
    if not holds_exactly(reason):
        raise ActionRefused("The reason holds a NUL character, which cannot be recorded.")
    if len(reason) < MIN_REASON:
        raise ActionRefused(f"Give a reason of at least {MIN_REASON} characters; it is recorded.")
    if len(reason) > MAX_REASON:
        raise ActionRefused(f"The reason is longer than {MAX_REASON} characters.")
    return reason


def extension_of(hours: str | None) -> float | None:
    if not hours or not hours.strip():
        return None
    try:
        seconds = float(hours) * 3600.0
    except ValueError:
        raise ActionRefused(f"Not a number of hours: {hours[:20]!r}.") from None
    if not 0 < seconds <= MAX_EXTENSION_SECONDS:
        raise ActionRefused("The extension must be more than 0 and at most 720 hours.")
    return seconds


async def load(conn: Any, operation_id: str) -> ledger.Operation:
    try:
        return await ledger.load_operation(conn, operation_id)
    except UnknownOperation:
        raise ActionRefused(f"No operation {operation_id}.") from None


async def check_seen(conn: Any, operation_id: str, seen: str | None) -> None:
    """Refuse an action taken on a page shown before the operation's last move.

    A page open for minutes could otherwise resolve an escalation the operator
    never saw: the operation resumed by someone else and escalated again for
    another reason (A, B, then A again), the click then applied to it.
    `seen` is the page's `history_seq`, the count of the operation's moves.
    """
    now = await conn.fetchval(q("console_history_seq"), operation_id)
    if now is None:
        raise ActionRefused(f"No operation {operation_id}.")
    if seen is None or not seen.isdigit() or int(seen) != now:
        raise ActionRefused(
            f"{operation_id} has moved since this page was shown; nothing was done. "
            "Look at it again before you act."
        )


def _refused(exc: Exception) -> ActionRefused:
    constraint = getattr(exc, "constraint_name", None)
    detail = f"constraint {constraint}" if constraint else str(exc)
    return ActionRefused(f"The ledger refused the move ({detail}). Reload and look again.")


def resume_target(op: ledger.Operation) -> LocalState | None:
    """Where "reconcile now" moves `op` (None: it stays, and is read again)."""
    return RESUME_TO.get(op.state)


async def resolve(
    conn: Any,
    operation_id: str,
    target_name: str,
    *,
    actor: str,
    reason: str,
    cancel_deadline_s: float | None,
    extend_s: float | None = None,
) -> Done:
    """A resolution button. To observing, the deadline is extended as `reconcile`
    extends it (the extension typed beside the buttons was ignored, and none was
    given by default: a deadline long past timed the operation out again); with
    any other target a typed extension is refused, not dropped."""
    op = await load(conn, operation_id)
    allowed = operator_targets(op.state)
    try:
        target = LocalState(target_name)
    except ValueError:
        raise ActionRefused(f"Unknown state {target_name[:40]!r}.") from None
    if target not in allowed:
        names = ", ".join(s.value for s in allowed) or "none"
        raise ActionRefused(
            f"{op.state.value} → {target.value} is not an operator move (it may have changed "
            f"state meanwhile); allowed from {op.state.value}: {names}."
        )
    if decisions.needs_a_job_id(op, target):
        # Adopting a job id found at the provider is final (the id is never
        # replaced) and needs the provider's configuration: the CLI does it.
        raise ActionRefused(
            f"{operation_id} has no job on record to observe; nothing was done. If you found "
            "the job in the provider's console, adopt it from the command line: jobwarden "
            f'resolve {operation_id} --decision observing --job-id JOB --reason "...".'
        )
    if extend_s is not None and target is not S.OBSERVING:
        raise ActionRefused(
            "The deadline extension applies only when observation resumes (→ observing); "
            "nothing was done."
        )
    extension = (
        await decisions.resume_extension(conn, op, extend_s) if target is S.OBSERVING else None
    )
    try:
        decided = await decisions.decide(
            conn,
            op,
            target,
            actor=actor,
            reason=reason,
            extend_result_deadline_s=extension,
            cancel_deadline_s=cancel_deadline_s if target is S.CANCEL_REQUESTED else None,
        )
    except (LedgerError, asyncpg.IntegrityConstraintViolationError) as exc:
        raise _refused(exc) from None
    return Done("resolved", decided.decision_id)


async def reconcile(
    conn: Any, operation_id: str, *, actor: str, reason: str, extend_s: float | None
) -> Done:
    op = await load(conn, operation_id)
    if op.state in TERMINAL:
        raise ActionRefused(f"{operation_id} is already {op.state.value}: nothing to reconcile.")
    target = resume_target(op)
    if target is not None and decisions.needs_a_job_id(op, target):
        names = ", ".join(s.value for s in operator_targets(op.state))
        raise ActionRefused(
            f"{operation_id} has no remote job id to read; resolve it instead (allowed: {names}),"
            " or adopt a job found at the provider with jobwarden resolve --job-id."
        )
    try:
        if target is None:  # keep the state, read again (cancellation_unconfirmed, ...)
            decision_id = await decisions.request_read(conn, op, actor=actor, reason=reason)
            return Done("read", decision_id)
        extension = (
            await decisions.resume_extension(conn, op, extend_s) if target is S.OBSERVING else None
        )
        decided = await decisions.decide(
            conn, op, target, actor=actor, reason=reason, extend_result_deadline_s=extension
        )
    except (LedgerError, asyncpg.IntegrityConstraintViolationError) as exc:
        raise _refused(exc) from None
    return Done("reconciled", decided.decision_id)


async def cancel(
    conn: Any, operation_id: str, *, actor: str, reason: str, cancel_deadline_s: float | None
) -> Done:
    op = await load(conn, operation_id)
    if op.state not in CANCELLABLE:
        raise ActionRefused(
            f"{operation_id} is {op.state.value}: a cancel request does not apply "
            "(an escalated operation is cancelled by a resolution to cancel_requested)."
        )
    try:
        done = await ledger.cancel_intent(
            conn,
            op.operation_id,
            requested_by=actor,
            reason=reason,
            cancel_deadline_s=cancel_deadline_s,
        )
    except (LedgerError, asyncpg.IntegrityConstraintViolationError) as exc:
        raise _refused(exc) from None
    state = done.state
    if state in (S.CANCEL_REQUESTED, S.CANCELLING):
        return Done("cancel")
    if state is S.ABANDONED:
        return Done("abandoned")
    if state in TERMINAL:
        # finished between the check above and the request (the reconciler's
        # move): nothing was recorded, and "cancel intent recorded" would claim it
        raise ActionRefused(
            f"{operation_id} is already {state.value}: nothing to cancel; nothing was done."
        )
    if not done.recorded:
        await _intent_stands(conn, op, state)
    return Done("cancel_intent")


async def _intent_stands(conn: Any, op: ledger.Operation, state: LocalState) -> NoReturn:
    """ActionRefused naming the intent that stands in place of this operator's.

    Escalated between the check above and the request (the reconciler's move),
    an operation with an earlier intent keeps it (`ledger.cancel_intent` keeps
    an intent still waiting for an operator): this one was recorded nowhere, yet
    the page said "Cancel intent recorded". As `jobwarden cancel` says it.
    """
    after = await load(conn, op.operation_id)
    raise ActionRefused(
        f"Not recorded: the cancel intent of {after.cancel_requested_by} at "
        f"{when(after.cancel_requested_at)} stands; {op.operation_id} stays {state.value} "
        "and nothing was done. To cancel it now, resolve it to cancel_requested."
    )


def moves(op_state: LocalState) -> list[LocalState]:
    """The resolutions the console offers as buttons (the CLI's `operator_targets`)."""
    return operator_targets(op_state)
