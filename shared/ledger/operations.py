"""The operation row: how operations come to exist, change state and gather facts.

Python here is a thin, typed front for rules the database enforces itself
(sql/migrations/002_state_machine.sql, 008_one_gate.sql): an operation is born
`create_pending` with its first history row; every state change is a history
insert whose trigger checks the edge and the cited evidence. This module knows
no HTTP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

import asyncpg

from shared.db.connect import Executor
from shared.db.queries import q
from shared.fingerprint import canonical_json, request_fingerprint
from shared.ids import new_idempotency_token, new_operation_id, new_trace_id
from shared.ledger.errors import (
    SQLSTATE_ERRORS,
    JobShared,
    LeaseLost,
    LedgerError,
    RequestMismatch,
    UnknownOperation,
)
from shared.ledger.evidence import bounded_wait
from shared.ledger.states import CANCELLABLE, Evidence, LocalState
from shared.text import scrub_text

# Defaults when neither the caller nor the provider config says otherwise.
DEFAULT_CREATE_DEADLINE_S = 120.0  # obtaining a job id is a matter of minutes
DEFAULT_RESULT_DEADLINE_S = 3600.0  # the business waits an hour for completion
# A provider's own default (Limits.cancel_deadline_seconds), for a cancel whose
# provider limits are unknown (no longer configured, or a config that cannot be
# read): one default, not two (tests/unit/test_default_cancel_deadline.py).
DEFAULT_CANCEL_DEADLINE_S = 900.0  # OpenAI batches may sit in "cancelling" ~10 min


@contextlib.contextmanager
def ledger_errors() -> Iterator[None]:
    """Turn the triggers' SQLSTATEs into typed ledger errors."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        kind = SQLSTATE_ERRORS.get(getattr(exc, "sqlstate", "") or "")
        if kind is None:
            raise
        raise kind(str(exc).removeprefix("jobwarden: ")) from exc


@dataclass(frozen=True)
class RequestSpec:
    """What the agent wants sent: method + target (a path on the provider) + body."""

    method: str
    target: str
    body: Any

    def as_json(self) -> dict[str, Any]:
        return {"method": self.method.upper(), "target": self.target, "body": self.body}

    @property
    def fingerprint(self) -> str:
        return request_fingerprint(self.method, self.target, self.body)


_LOADED = object()


@dataclass(frozen=True)
class Operation:
    """An operation as read from the database.

    Only `load_operation` builds one (the `_origin` check), so code that sends a
    create request can only be handed a row that exists durably, never a bare
    payload.
    """

    operation_id: str
    provider: str
    kind: str
    client_reference: str
    request: dict[str, Any]
    request_fingerprint: str
    idempotency_token: str
    idempotency_mode: str
    trace_id: str
    requested_by: str
    approval_ref: str | None
    state: LocalState
    remote_state: str | None
    remote_state_raw: str | None
    remote_job_id: str | None
    status_url: str | None
    create_mode: str | None
    created_at: datetime
    updated_at: datetime
    create_deadline: datetime
    result_deadline: datetime
    cancel_deadline: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None
    cancel_requested_by: str | None
    cancel_reason: str | None
    cancel_sent_at: datetime | None
    next_poll_at: datetime | None
    create_attempts: int
    poll_attempts: int
    result_attempts: int
    cancel_attempts: int
    lookup_attempts: int
    progress_completed: int | None
    progress_total: int | None
    progress_percent: Any
    # the forecast's baseline: the first share of progress above zero, and when
    progress_anchor: float | None
    progress_anchor_at: datetime | None
    poll_after_seconds: int | None
    last_error: Any
    webhook_seen_at: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    lease_fence: int
    result_id: int | None
    result_ref: str | None
    result_summary: Any
    history_seq: int
    history_head: str | None
    # Back-pressure: no call for this operation before this time (Retry-After,
    # poll_after_seconds), whatever wakes it.
    not_before: datetime | None
    # A poll hint (poll_after_seconds): no status read before this time.
    poll_not_before: datetime | None
    # A recovery point: an action that must follow the last committed
    # transition and is redone until it concludes (e.g. "cross_check").
    follow_up: str | None
    follow_up_attempts: int
    # The status read a worker sends for this job (method, url, headers;
    # sanitized), recorded with the job id so a claim can record each read.
    status_request: Any
    # The fence of a claim whose status read is marked but not yet on record.
    read_fence: int | None
    read_claimed_at: datetime | None
    # Did the create name our callback URL (`{webhook_url}` filled)? None: not
    # recorded (before migration 037), or the create names none of ours.
    callback_url_sent: bool | None
    _origin: object = None

    def __post_init__(self) -> None:
        if self._origin is not _LOADED:
            raise TypeError("an Operation is only obtained from the database (load_operation)")

    @classmethod
    def _from_record(cls, record: Mapping[str, Any]) -> Operation:
        """The row as an Operation, filled directly rather than through `__init__`.

        A claim builds one per claimed row, on the status-read hot path; the
        frozen dataclass's `__init__` sets its 60-odd fields one
        `object.__setattr__` at a time, at three times the cost. The result
        is the same object (equal, frozen, `replace()` works).
        """
        values = {name: record[name] for name in _COLUMNS}
        values["state"] = LocalState(values["state"])
        values["_origin"] = _LOADED
        op = object.__new__(cls)
        op.__dict__.update(values)
        return op


# The row's columns the dataclass holds, computed once: a claim builds one
# Operation per claimed row, on the status-read hot path.
_COLUMNS = tuple(f.name for f in fields(Operation) if f.name != "_origin")


@dataclass(frozen=True)
class Submitted:
    operation_id: str
    created: bool  # False: an identical earlier submission was returned
    trace_id: str | None = field(default=None, compare=False)  # the operation's


def _diff_paths(old: Any, new: Any, path: str = "") -> list[str]:
    """Where two canonical JSON documents differ (for a mismatch message)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}" if path else key
            if key not in old or key not in new:
                out.append(sub)
            else:
                out.extend(_diff_paths(old[key], new[key], sub))
        return out
    if canonical_json(old) != canonical_json(new):
        return [path or "$"]
    return []


async def submit_operation(
    db: Executor,
    *,
    provider: str,
    kind: str,
    request: RequestSpec,
    requested_by: str,
    client_reference: str | None = None,
    approval_ref: str | None = None,
    idempotency_mode: str = "header",
    create_deadline_s: float = DEFAULT_CREATE_DEADLINE_S,
    result_deadline_s: float = DEFAULT_RESULT_DEADLINE_S,
    trace_id: str | None = None,
    given_deadlines: Collection[str] = (),
) -> Submitted:
    """Record the intent durably; the only way an operation comes to exist.

    The same (requested_by, client_reference) with the same intent returns the
    existing operation; with a different request, kind or approval_ref, or a
    deadline named in `given_deadlines` ("create_deadline_seconds",
    "result_deadline_seconds": those the caller set, not defaults) that
    differs, it is refused, naming what differs — a changed intent is a new
    operation with a new token.
    """
    operation_id = new_operation_id()
    reference = client_reference or operation_id
    fingerprint = request.fingerprint
    trace_id = trace_id or new_trace_id()
    with ledger_errors():
        created = await db.fetchval(
            q("insert_operation"),
            operation_id,
            provider,
            kind,
            reference,
            request.as_json(),
            fingerprint,
            new_idempotency_token(),
            idempotency_mode,
            trace_id,
            requested_by,
            approval_ref,
            create_deadline_s,
            result_deadline_s,
        )
    if created is not None:
        return Submitted(created, True, trace_id)
    existing = await db.fetchrow(q("find_by_client_reference"), requested_by, reference)
    if existing is None:  # pragma: no cover - the conflicting row vanished; rows are never deleted
        raise LedgerError("submission conflicted with a row that no longer exists")
    new_deadlines = {
        "create_deadline_seconds": create_deadline_s,
        "result_deadline_seconds": result_deadline_s,
    }
    differs = _request_differs(existing, provider, request) + _intent_differs(
        existing, kind, approval_ref, {k: new_deadlines[k] for k in given_deadlines}
    )
    if differs:
        raise RequestMismatch(
            f"client_reference {reference!r} already names operation "
            f"{existing['operation_id']} with a different request (differs at: "
            f"{', '.join(differs)}). A changed request is a new operation: submit it with "
            "a new client_reference."
        )
    return Submitted(existing["operation_id"], False, existing["trace_id"])


# A recorded deadline is `created_at + seconds`, both from the clock at the
# insert (two reads of clock_timestamp() in one statement): a replay with the
# same seconds reads back within microseconds of them, a changed one does not.
DEADLINE_TOLERANCE_S = 0.01


def _request_differs(existing: Mapping[str, Any], provider: str, request: RequestSpec) -> list[str]:
    """Where the recorded provider + request and this one differ."""
    if existing["request_fingerprint"] == request.fingerprint and existing["provider"] == provider:
        return []
    old = {"provider": existing["provider"], **existing["request"]}
    new = {"provider": provider, **request.as_json()}
    return _diff_paths(old, new) or ["the canonical request"]


def _intent_differs(
    existing: Mapping[str, Any],
    kind: str,
    approval_ref: str | None,
    deadlines: Mapping[str, float],
) -> list[str]:
    """The rest of the recorded intent (kind, approval_ref; deadlines the caller set)
    that this submission contradicts: a replay must not answer 'same operation' for
    an intent that is not the one on record (migration 025 makes it immutable)."""
    differs = [
        name
        for name, old, new in (
            ("kind", existing["kind"], kind),
            ("approval_ref", existing["approval_ref"], approval_ref),
        )
        if old != new
    ]
    recorded = {
        "create_deadline_seconds": existing["create_deadline"],
        "result_deadline_seconds": existing["result_deadline"],
    }
    for name, seconds in sorted(deadlines.items()):
        held = (recorded[name] - existing["created_at"]).total_seconds()
        if abs(held - seconds) > DEADLINE_TOLERANCE_S:
            differs.append(name)
    return differs


async def load_operation(db: Executor, operation_id: str) -> Operation:
    record = await db.fetchrow(q("load_operation"), operation_id)
    if record is None:
        raise UnknownOperation(f"no operation {operation_id}")
    return Operation._from_record(record)


# history.actor / history.cause CHECKs: bounded, and free of the unit
# separator the hash chain joins fields with.
MAX_ACTOR, MAX_CAUSE = 200, 2000
_UNIT_SEPARATOR = "\x1f"


def history_text(text: str, limit: int) -> str:
    """`text` as a history row holds it: a cause often quotes a provider (a job
    id, a reason), and its odd characters must not make the transition fail."""
    clean = scrub_text(text).replace(_UNIT_SEPARATOR, " ")
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


async def transition(
    db: Executor,
    operation_id: str,
    src: LocalState,
    dst: LocalState,
    *,
    actor: str,
    cause: str,
    evidence: tuple[Evidence, int] | None = None,
    fence: int | None = None,
) -> int:
    """Append a transition (the trigger moves the state); returns its history seq.

    `fence` is the lease counter a worker claimed with: if its lease expired or
    was taken over, nothing is written and LeaseLost is raised.
    """
    kind, ident = (evidence[0].value, evidence[1]) if evidence else (None, None)
    with ledger_errors():
        seq = await db.fetchval(
            q("transition"),
            operation_id,
            src.value,
            dst.value,
            history_text(actor, MAX_ACTOR),
            history_text(cause, MAX_CAUSE),
            kind,
            ident,
            fence,
        )
    if seq is None:
        if fence is not None:
            raise LeaseLost(f"lease on {operation_id} (fence {fence}) is no longer held")
        raise UnknownOperation(f"no operation {operation_id}")
    return int(seq)


async def claim_completion(
    db: Executor, operation_id: str, consumer: str, claim_token: str | None = None
) -> bool:
    """True once per (operation, consumer), and only for a succeeded operation.

    A caller that sends the same `claim_token` again (its first answer was
    lost) is answered True again: it is the same claim, not a second one.
    """
    if await db.fetchval(q("claim_completion"), operation_id, consumer, claim_token) is not None:
        return True
    if claim_token is None:
        return False
    return bool(await db.fetchval(q("claim_repeated"), operation_id, consumer, claim_token))


async def state_edges_in_db(db: Executor) -> dict[tuple[str, str], frozenset[str]]:
    rows = await db.fetch(q("state_edges"))
    return {(r["from_state"], r["to_state"]): frozenset(r["evidence"]) for r in rows}


async def _fenced_update(db: Executor, query: str, operation_id: str, *args: Any) -> None:
    with ledger_errors():
        done = await db.fetchval(q(query), operation_id, *args)
    if done is None:
        raise LeaseLost(f"write to {operation_id} refused: lease lost or operation missing")


# operations.remote_job_id CHECK: a job id is 1 to 500 characters.
MAX_JOB_ID_LENGTH = 500


def unstorable_job_id(job_id: str) -> str | None:
    """Why PostgreSQL could not hold `job_id` exactly, or None.

    A job id stored altered would point every later call at the wrong job:
    whoever names one (a provider's answer, an operator) is refused instead.
    """
    if not 1 <= len(job_id) <= MAX_JOB_ID_LENGTH:
        return f"{len(job_id)} characters; 1 to {MAX_JOB_ID_LENGTH} are storable"
    if scrub_text(job_id) != job_id:
        return "it contains NUL or an unpaired surrogate"
    return None


# The unique index (migration 035) that keeps one operation per remote job.
ONE_OPERATION_PER_JOB = "operations_one_per_job"


async def holder_of_job(db: Executor, provider: str, remote_job_id: str, operation_id: str) -> str:
    """Whose `remote_job_id` is, for a message: "operation X's", the other
    operation of `provider` that has it on record, or "another operation's".

    Two operations sharing a job would both collect its result, and one's
    cancel would stop the other's work. The database refuses a second holder
    (record_remote_job raises JobShared); this only names the first, for the
    human told of the refusal. Ask it outside the aborted transaction: there
    the holder, committed (the index waited for it), is seen, and stays (a
    recorded job id is never rewritten).
    """
    found = await db.fetchval(q("operation_holding_job"), provider, remote_job_id, operation_id)
    return f"operation {found}'s" if found is not None else "another operation's"


async def record_remote_job(
    db: Executor,
    operation_id: str,
    remote_job_id: str,
    *,
    status_url: str | None = None,
    create_mode: str | None = None,
    fence: int | None = None,
    status_request: Mapping[str, Any] | None = None,
    follow_up: str | None = None,
    read_after_seconds: float | None = None,
) -> None:
    """Record the provider's job id; raises ImmutableFact if a different one is on record,
    JobShared if another operation of the provider holds this one.

    JobShared aborts the caller's transaction: a caller that must go on (to
    stop the operation for a human, say) records the job id in a savepoint of
    its own and handles JobShared outside it. A concurrent recording of the
    same job by another transaction is waited for: this one is refused if
    that one commits, and goes on if it rolls back.

    `status_request` is the (sanitized) status read a worker will send for
    this job; `follow_up` a recovery point to set in the same statement;
    `read_after_seconds` how long the accepting answer said to wait before
    reading the job (kept as its poll hint, capped like every provider wait).
    """
    try:
        await _fenced_update(
            db,
            "set_remote_job",
            operation_id,
            remote_job_id,
            status_url,
            create_mode,
            fence,
            dict(status_request) if status_request is not None else None,
            follow_up,
            bounded_wait(read_after_seconds),
        )
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name != ONE_OPERATION_PER_JOB:
            raise
        raise JobShared(
            f"job {remote_job_id} is already another operation's: {operation_id} did not record it"
        ) from exc


async def settle_follow_up(
    db: Executor,
    operation_id: str,
    follow_up: str,
    *,
    fence: int,
    note: Mapping[str, Any] | None = None,
) -> None:
    """The recovery point `follow_up` concluded (with `note` on record if it was given up)."""
    await _fenced_update(
        db, "settle_follow_up", operation_id, fence, follow_up, dict(note) if note else None
    )


async def retry_follow_up(db: Executor, operation_id: str, follow_up: str, *, fence: int) -> int:
    """The recovery point was inconclusive this time; returns how many times so far."""
    with ledger_errors():
        attempts = await db.fetchval(q("retry_follow_up"), operation_id, fence, follow_up)
    if attempts is None:
        raise LeaseLost(f"write to {operation_id} refused: lease lost or follow-up gone")
    return int(attempts)


async def set_last_error(
    db: Executor, operation_id: str, error: Mapping[str, Any], *, fence: int
) -> None:
    """The provider's last error in its own words (shown to agents when it matters)."""
    await _fenced_update(db, "set_last_error", operation_id, fence, dict(error))


async def bump_attempt(db: Executor, kind: str, operation_id: str, *, fence: int) -> int | None:
    """Count one more `kind` attempt (lookup | result) under the lease; None when
    the write was refused. A create's is `bump_create_attempt`."""
    query = "bump_lookup_attempt" if kind == "lookup" else "bump_result_attempt"
    value = await db.fetchval(q(query), operation_id, fence)
    return int(value) if value is not None else None


async def bump_create_attempt(
    db: Executor, operation_id: str, *, fence: int, callback_url_sent: bool | None
) -> int | None:
    """Count one more create attempt under the lease, with whether its request
    names our callback URL (None: the create names none of ours).

    One statement, so no create is on record without what it asked for: the
    next reads' schedule (the webhook backstop or the plain backoff) follows
    it. None when the write was refused: the lease is lost, or the operation
    no longer wants a create (an agent abandoned it meanwhile); the caller
    tells apart.
    """
    value = await db.fetchval(q("bump_create_attempt"), operation_id, fence, callback_url_sent)
    return int(value) if value is not None else None


async def state_entered_at(db: Executor, operation_id: str, state: LocalState) -> datetime | None:
    """When the operation last moved into `state` (None: never), by the database's clock."""
    at: datetime | None = await db.fetchval(q("state_entered_at"), operation_id, state.value)
    return at


async def unbump_create_attempt(db: Executor, operation_id: str, *, fence: int) -> None:
    """The create just recorded never left this host: it does not count as an attempt."""
    await _fenced_update(db, "unbump_create_attempt", operation_id, fence)


async def lease_held(db: Executor, operation_id: str, fence: int) -> bool:
    return bool(await db.fetchval(q("lease_held"), operation_id, fence))


async def record_cancel_sent(db: Executor, operation_id: str, *, fence: int | None) -> int:
    """The recovery point before a cancel leaves; returns its attempt number."""
    with ledger_errors():
        attempts = await db.fetchval(q("set_cancel_sent"), operation_id, fence)
    if attempts is None:
        raise LeaseLost(f"write to {operation_id} refused: lease lost or operation missing")
    return int(attempts)


async def record_cancel_not_sent(db: Executor, operation_id: str, *, fence: int | None) -> None:
    """Undo record_cancel_sent for a first cancel that provably never left."""
    await _fenced_update(db, "clear_cancel_sent", operation_id, fence)


async def attach_result(
    db: Executor,
    operation_id: str,
    result_id: int,
    *,
    result_ref: str | None,
    summary: Mapping[str, Any] | None,
    fence: int | None,
) -> None:
    await _fenced_update(
        db,
        "set_result",
        operation_id,
        result_id,
        result_ref,
        dict(summary) if summary is not None else None,
        fence,
    )


@dataclass(frozen=True)
class CancelRequest:
    """What a cancel request did: the state it left, and whether its intent (who,
    why) is now the one on record. Not recorded: the operation had ended, or an
    earlier intent still waiting for an operator stands (`request_cancel`)."""

    state: LocalState
    recorded: bool


async def request_cancel(
    conn: Any,
    operation_id: str,
    *,
    requested_by: str,
    reason: str,
    cancel_deadline_s: float | None = None,
) -> LocalState:
    """`cancel_intent`'s state alone."""
    done = await cancel_intent(
        conn,
        operation_id,
        requested_by=requested_by,
        reason=reason,
        cancel_deadline_s=cancel_deadline_s,
    )
    return done.state


async def cancel_intent(
    conn: Any,  # a connection: the intent, the move and the wake-up share one transaction
    operation_id: str,
    *,
    requested_by: str,
    reason: str,
    cancel_deadline_s: float | None = None,
) -> CancelRequest:
    """Record the intent to stop (who, why) and move to cancel_requested.

    Never answers `cancelled`: that is a remote fact only an observation proves.
    An operation whose create was never sent is `abandoned` instead, since no
    remote job can exist. Idempotent: a second request changes nothing while
    the first is acted on or waits for an operator; but an intent left behind
    by an operation an operator then resumed (needs_attention -> observing) is
    stale, and a new request replaces it and moves the operation on.
    `conn` must be a connection (the steps share one transaction).
    `cancel_deadline_s` comes from the provider's limits (None: the default).
    `recorded` is the statement's own answer (the intent's UPDATE took the row
    or not), never a reading of the row after the commit, where another
    operator's request of the same moment would be mistaken for this one.
    """
    if cancel_deadline_s is None:
        cancel_deadline_s = DEFAULT_CANCEL_DEADLINE_S
    async with conn.transaction():
        intent = await conn.fetchrow(
            q("record_cancel_intent"), operation_id, requested_by, reason, cancel_deadline_s
        )
        if intent is None:
            current = await conn.fetchval(q("operation_state"), operation_id)
            if current is None:
                raise UnknownOperation(f"no operation {operation_id}")
            return CancelRequest(LocalState(current), recorded=False)
        state = LocalState(intent["state"])
        if state not in CANCELLABLE:
            return CancelRequest(state, recorded=True)
        target = (
            LocalState.ABANDONED
            if state is LocalState.CREATE_PENDING and intent["create_attempts"] == 0
            else LocalState.CANCEL_REQUESTED
        )
        await transition(
            conn, operation_id, state, target, actor=requested_by, cause=f"cancel: {reason}"
        )
        await request_wake(conn, operation_id)  # the lease owner sends the cancel now
        return CancelRequest(target, recorded=True)


async def request_wake(db: Executor, operation_id: str) -> None:
    """Make the operation due now (never before its not_before; lease-safe: see migration 004)."""
    await db.execute(q("request_wake"), operation_id)


async def clock_now(db: Executor) -> datetime:
    """The database's idea of now (jw_now()), for callers comparing with stored times."""
    now: datetime = await db.fetchval(q("clock_now"))
    return now


async def record_sync_mode(db: Executor, operation_id: str, *, fence: int | None) -> None:
    """The provider answered synchronously, with no job id: the result is the proof."""
    await _fenced_update(db, "set_create_mode", operation_id, "sync", fence)


@dataclass(frozen=True)
class HistoryMark:
    """Where an operation's history stood: its trace id and newest seq."""

    operation_id: str
    trace_id: str
    seq: int


async def history_mark(db: Executor, operation_id: str) -> HistoryMark | None:
    row = await db.fetchrow(q("operation_history_mark"), operation_id)
    return None if row is None else HistoryMark(operation_id, row["trace_id"], row["history_seq"])


async def transitions_after(
    db: Executor, mark: HistoryMark, actor: str
) -> list[tuple[str | None, str, str]]:
    """The (from, to, cause) of each history row `actor` added since `mark`, in order."""
    rows = await db.fetch(q("history_after"), mark.operation_id, mark.seq, actor)
    return [(r["from_state"], r["to_state"], r["cause"]) for r in rows]
