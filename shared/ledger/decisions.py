"""Operator decisions and escalations: how humans enter the record.

An escalation is opened by the reconciler when it stops for a human, and
closed when the operation leaves the escalated states: by a decision, or by
whatever else moved it (a later observation; the history trigger of migration
028 closes it, so no writer leaves one open). A decision is the only evidence
that moves an operation out of `needs_attention` (the trigger checks it), and
every operator action — a resolution, a resumed observation, a fresh read, a
back-pressure override — is a recorded decision first, in the same
transaction as what it causes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.db.connect import Executor
from shared.db.queries import q
from shared.ledger.errors import AdoptionRefused, JobShared, StaleTransition
from shared.ledger.operations import (
    DEFAULT_CANCEL_DEADLINE_S,
    Operation,
    clock_now,
    holder_of_job,
    ledger_errors,
    record_remote_job,
    request_wake,
    transition,
    unstorable_job_id,
)
from shared.ledger.states import EDGES, ESCALATED, Evidence, LocalState
from shared.text import scrub_text

S = LocalState
# The shortest reason a decision records, counted without the blanks around it:
# the decisions.reason CHECK (length >= 3) let three spaces through, a decision
# with no reason. The CLI and the console refuse shorter in words.
MIN_REASON = 3
# How long past a result or cancel deadline the reconciler keeps trying to read
# before it escalates (reconciler/steps/poll.py): long enough to wait out a
# provider's Retry-After of a few minutes or a short outage, short enough that
# the escalation still means "on time". Here too: it is the margin a resumed
# observation needs (`resume_extension`).
DEADLINE_READ_GRACE_S = 300.0
# What resuming observation (→ observing: `jobwarden reconcile` / `resolve`,
# the console's "Reconcile now" / "Resolve → observing") adds to a result
# deadline that is passed or about to pass, unless the operator says how long:
# one more realistic round of observation.
DEFAULT_RESUME_EXTENSION_SECONDS = 3600.0


async def resume_extension(conn: Any, op: Operation, requested: float | None) -> float | None:
    """How far a move to observing pushes the result deadline (None: not at all).

    As asked (0: not at all); else DEFAULT_RESUME_EXTENSION_SECONDS when less
    than DEADLINE_READ_GRACE_S remains before the deadline, else not at all.
    Before, the default applied only once the deadline had passed: an operation
    resumed with seconds left was read once at most and timed out again, as the
    reconciler escalates at the first read after the deadline that shows no end
    (waiting only out a Retry-After within its grace). One rule, for the CLI and
    the console alike.
    """
    if requested is not None:
        return requested or None
    left = op.result_deadline - await clock_now(conn)
    if left < timedelta(seconds=DEADLINE_READ_GRACE_S):
        return DEFAULT_RESUME_EXTENSION_SECONDS
    return None


async def record_decision(
    db: Executor, operation_id: str, *, actor: str, decision: str, reason: str
) -> int:
    """Record an operator decision (evidence for operator-only edges)."""
    with ledger_errors():
        return int(await db.fetchval(q("insert_decision"), operation_id, actor, decision, reason))


async def escalate(
    db: Executor, op: Operation, state: LocalState, reason: str, **details: Any
) -> None:
    """Open a new escalation with what a human needs to act.

    Called after a move into an escalated state. An escalation still open (the
    move came from another escalated state) is closed, never rewritten: the
    evidence log keeps an escalation's state, reason and details as written.
    The reason often quotes a provider (a job id a lookup listed): a NUL there
    is scrubbed as in a history cause, else PostgreSQL refuses the row and the
    step fails on every lease, the human never told.
    """
    calls = await db.fetch(q("escalation_context"), op.operation_id)
    context = {
        "remote_job_id": op.remote_job_id,
        "trace_id": op.trace_id,
        "provider": op.provider,
        "recent_calls": [
            {
                "kind": c["call_kind"],
                "method": c["method"],
                "url": c["url"],
                "status": c["status_code"],
                "provider_request_id": c["provider_request_id"],
                "error": c["error_category"],
                "at": c["started_at"].isoformat(),
            }
            for c in calls
        ],
        **details,
    }
    await db.fetchval(
        q("open_escalation"), op.operation_id, state.value, scrub_text(reason), context
    )


@dataclass(frozen=True)
class Decided:
    decision_id: int
    result_deadline: datetime | None = None


async def decide(
    conn: Any,  # a connection: decision, move, deadline and wake-up share one transaction
    op: Operation,
    target: LocalState,
    *,
    actor: str,
    reason: str,
    extend_result_deadline_s: float | None = None,
    cancel_deadline_s: float | None = None,
) -> Decided:
    """Record an operator's decision and make the move it decides, atomically.

    The escalation closes, naming this decision, when the operation leaves
    the escalated states; the row is due for the reconciler at once (the history trigger schedules
    it, respecting not_before; the wake-up only hurries it).
    """
    async with conn.transaction():
        await _lock_as_seen(conn, op)
        if target is S.CANCEL_REQUESTED:
            # A new intent, whatever an earlier one left (its deadline may be long
            # gone, its cancel sent and refused): this decision's cancel is sent anew.
            await conn.fetchval(
                q("renew_cancel_intent"),
                op.operation_id,
                actor,
                reason,
                cancel_deadline_s or DEFAULT_CANCEL_DEADLINE_S,
            )
        decision_id, deadline = await _decided(
            conn,
            op,
            f"{op.state.value} -> {target.value}",
            actor=actor,
            reason=reason,
            extend_result_deadline_s=extend_result_deadline_s,
        )
        kinds = EDGES[(op.state, target)]
        evidence = (Evidence.DECISION, decision_id) if Evidence.DECISION in kinds else None
        if target not in ESCALATED:
            # Closed by this decision before the move: the move out of the
            # escalated states would close it too (migration 028), but as
            # resolved by nobody when the edge cites no decision.
            await conn.fetchval(q("close_escalation"), op.operation_id, decision_id)
        await transition(
            conn,
            op.operation_id,
            op.state,
            target,
            actor=actor,
            cause=f"operator decision #{decision_id}: {reason}",
            evidence=evidence,
        )
        await request_wake(conn, op.operation_id)
    return Decided(decision_id, deadline)


async def _decided(
    conn: Any,
    op: Operation,
    move: str,
    *,
    actor: str,
    reason: str,
    extend_result_deadline_s: float | None,
    tail: str = "",
) -> tuple[int, datetime | None]:
    """The decision row, and the result deadline it pushed on (None: not asked to).

    The decision's text is the move, then the deadline it set when it extended
    one (`deadline_note`), then `tail`: the log binds the row's result deadline
    to the newest such text (migration 040; audit_deadlines), and an adoption's
    text must still end with its job (migration 035's trigger reads the end)."""
    deadline = None
    if extend_result_deadline_s:
        deadline = await conn.fetchval(
            q("extend_result_deadline"), op.operation_id, extend_result_deadline_s
        )
    decision = move + (deadline_note(deadline) if deadline is not None else "") + tail
    decision_id = await record_decision(
        conn, op.operation_id, actor=actor, decision=decision, reason=reason
    )
    return decision_id, deadline


def deadline_note(deadline: datetime) -> str:
    """` (result deadline <UTC, microseconds>)`: the text audit_deadlines reads back
    as exactly this timestamptz (it anchors at the decision's leading move, so a
    job id in the tail cannot pose as one)."""
    return f" (result deadline {deadline.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')})"


# Where an operator may adopt a job id found at the provider: an operation
# stopped for a human with no job on record (a create whose answer was lost at
# a provider that cannot deduplicate or look up), or one whose create is still
# uncertain (the adoption stops its create retries and lookups first).
ADOPTABLE = (S.NEEDS_ATTENTION, S.CREATE_UNKNOWN)


def job_id_problem(job_id: str) -> str | None:
    """Why an operator's `job_id` cannot be adopted as typed, or None.

    Besides what the column cannot hold exactly, an id with leading or
    trailing whitespace is refused rather than trimmed: it is what a paste
    picks up, and a job id is recorded exactly as given, for good.
    """
    problem = unstorable_job_id(job_id)
    if problem is None and job_id != job_id.strip():
        problem = "it begins or ends with whitespace; give the id exactly as the provider shows it"
    return problem


def adoption_refusal(op: Operation, job_id: str) -> str | None:
    """Why `op` cannot adopt `job_id` (before anything is written), or None."""
    problem = job_id_problem(job_id)
    if problem is not None:
        return f"job id {job_id!r} refused: {problem}"
    if op.remote_job_id is not None:
        return (
            f"{op.operation_id} already has remote job id {op.remote_job_id!r} on record, "
            "and a recorded job id is never replaced"
        )
    if op.state not in ADOPTABLE:
        return (
            f"{op.operation_id} is {op.state.value}: a job id is adopted only by an operation "
            f"stopped with no job on record ({', '.join(s.value for s in ADOPTABLE)})"
        )
    return None


async def adopt_job(
    conn: Any,  # a connection: decision, job id, moves and wake-up share one transaction
    op: Operation,
    job_id: str,
    *,
    status_request: Mapping[str, Any] | None,
    actor: str,
    reason: str,
    extend_result_deadline_s: float | None = None,
) -> Decided:
    """An operator's decision that `job_id`, found at the provider, is this operation's job.

    In one transaction: the decision (naming the job id), the job id recorded
    as the reconciler records one from a create answer (with the status read
    a worker will send, and the webhook events already stored for that job
    attached by the same trigger), and the move to `observing` citing the
    decision, so the history row carries the job id. From `create_unknown`
    the operation first stops (`needs_attention`), which ends its create
    retries and lookups. The reconciler reads the job next: its answer
    decides (running, finished, or not found: a human again, told that the
    adopted id was not found). Raises AdoptionRefused, with nothing written,
    for an id that cannot be adopted, one another operation holds included
    (the unique index of migration 035 refuses it at the recording: JobShared).
    """
    refusal = adoption_refusal(op, job_id)
    if refusal is not None:
        raise AdoptionRefused(refusal)
    try:
        async with conn.transaction():
            row = await conn.fetchrow(q("lock_for_adoption"), op.operation_id)
            if row["state"] != op.state.value:
                raise StaleTransition(
                    f"operation {op.operation_id} is {row['state']}, not {op.state.value} "
                    "(concurrent or stale decision)"
                )
            if row["remote_job_id"] is not None:
                raise AdoptionRefused(
                    f"{op.operation_id} already has remote job id {row['remote_job_id']!r} on "
                    "record, and a recorded job id is never replaced"
                )
            if op.state is S.CREATE_UNKNOWN and row["leased"]:
                raise AdoptionRefused(
                    f"a reconciler is working on {op.operation_id}'s uncertain create right now "
                    "(a retry or a lookup whose answer could name another job); try again in a "
                    "moment, or stop it first with --decision needs_attention"
                )
            decision_id, deadline = await _decided(
                conn,
                op,
                f"{op.state.value} -> {S.OBSERVING.value}",
                actor=actor,
                reason=reason,
                extend_result_deadline_s=extend_result_deadline_s,
                tail=f", adopting job {job_id}",
            )
            cause = f"operator decision #{decision_id}: adopting job {job_id} found at the provider"
            if op.state is S.CREATE_UNKNOWN:
                await transition(
                    conn,
                    op.operation_id,
                    S.CREATE_UNKNOWN,
                    S.NEEDS_ATTENTION,
                    actor=actor,
                    cause=f"{cause}; the uncertain create is settled by hand: {reason}",
                )
            await record_remote_job(
                conn, op.operation_id, job_id, create_mode="async", status_request=status_request
            )
            await conn.fetchval(q("close_escalation"), op.operation_id, decision_id)
            await transition(
                conn,
                op.operation_id,
                S.NEEDS_ATTENTION,
                S.OBSERVING,
                actor=actor,
                cause=f"{cause}: {reason}",
                evidence=(Evidence.DECISION, decision_id),
            )
            await request_wake(conn, op.operation_id)
    except JobShared:
        # the index refused the job id: the whole adoption is rolled back (the
        # decision and any move with it), and the holder is named from outside it
        whose = await holder_of_job(conn, op.provider, job_id, op.operation_id)
        raise AdoptionRefused(
            f"job {job_id!r} is already {whose}: two operations must not share a job"
        ) from None
    return Decided(decision_id, deadline)


def needs_a_job_id(op: Operation, target: LocalState) -> bool:
    """A move to `target` that would observe a job `op` does not have on record."""
    return target is S.OBSERVING and op.remote_job_id is None and op.create_mode != "sync"


async def request_read(
    conn: Any,  # a connection: the decision and the wake-up share one transaction
    op: Operation,
    *,
    actor: str,
    reason: str,
    override_back_pressure: bool = False,
) -> int | None:
    """Ask for a fresh status read without moving the state; returns the decision id.

    For an escalated operation (cancellation_unconfirmed) or an override the
    request is a recorded decision. Without `override_back_pressure` the read
    waits for the provider's not-before time like every other wake-up.
    """
    decision_id = None
    async with conn.transaction():
        await _lock_as_seen(conn, op)
        if op.state in ESCALATED or override_back_pressure:
            what = "status read, overriding back-pressure" if override_back_pressure else None
            decision_id = await record_decision(
                conn,
                op.operation_id,
                actor=actor,
                decision=what or "status read",
                reason=reason,
            )
        if override_back_pressure and decision_id is not None:
            overridden = await conn.fetchval(
                q("override_back_pressure"), op.operation_id, decision_id
            )
            if overridden is None:
                raise StaleTransition(
                    f"{op.operation_id} is {op.state.value}: nothing is scheduled to override"
                )
        await request_wake(conn, op.operation_id)
    return decision_id


async def _lock_as_seen(conn: Any, op: Operation) -> None:
    """Lock `op`'s row for this decision, and refuse if it moved since it was read."""
    now = await conn.fetchval(q("lock_for_decision"), op.operation_id)
    if now != op.state.value:
        raise StaleTransition(
            f"operation {op.operation_id} is {now}, not {op.state.value} "
            "(concurrent or stale decision)"
        )


def operator_targets(state: LocalState) -> list[LocalState]:
    """States an operator may move `state` to: edges needing no evidence, or a decision.

    Edges that claim a remote fact (a call, an observation, a result) are not
    offered: an operator cannot fabricate evidence, only the reconciler records it.
    """
    return [
        dst
        for (src, dst), kinds in EDGES.items()
        if src is state and (not kinds or Evidence.DECISION in kinds)
    ]
