"""The frame every step runs in: one claimed operation, its adapter, its lease and its clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from reconciler.calls import (
    TRANSFERS,
    Sent,
    answer_of,
    answer_reading,
    call_start,
    not_sent,
    paced,
    send,
)
from reconciler.context import Context
from reconciler.lanes import Lane, Reading, download
from shared import ledger
from shared.db.connect import connect
from shared.db.errors import DATABASE_DOWN
from shared.ledger import Operation, decisions, evidence, leases
from shared.ledger.errors import LeaseLost
from shared.ledger.states import ESCALATED, POLLED, SCHEDULED, Evidence, LocalState
from shared.providers import HttpRequest, ProviderAdapter
from shared.providers.requests import signed_as_it_leaves, status_is_the_result
from shared.telemetry import spans

log = logging.getLogger("jobwarden.reconciler")

# A step returns how long until the operation should be looked at again
# (seconds), or None when nothing is scheduled (finished, or waiting for a human).
Delay = float | None
NOW = 0.0
# A call starts only if our lease outlives its timeout by this much, so its
# answer can still be written under the lease (less when the lease is short:
# half of what the lease leaves beyond the timeout).
LEASE_MARGIN_S = 5.0
# Times a step gives its provider slot back to renew its lease before it
# stops trying; the call is then recorded as never sent.
MAX_SLOT_ROUNDS = 3
# How long a step whose connection died during a call may take to keep the
# call's answer on another one (connecting and writing).
KEEP_ANSWER_S = 10.0


@dataclass
class Step:
    ctx: Context
    op: Operation
    adapter: ProviderAdapter
    fence: int
    # Set when the step's last statement already handed the lease back.
    released: bool = False
    # When our lease ends on the clock's monotonic reading, measured from
    # before the statement that set it (so never later than the database's
    # expiry, whatever the clocks say). None: derived from the row.
    lease_until: float | None = None
    # The claim marked this row's status read (polled states): the first read
    # of this step is recorded against the mark; if the step ends without
    # sending it, the release drops the mark.
    read_marked: bool = False
    # No call before this (the provider's Retry-After), as far as this step knows;
    # no status read before `poll_not_before` (its poll hint). Database times.
    not_before: datetime | None = None
    poll_not_before: datetime | None = None
    # The database's clock minus ours, measured at the claim: every time this
    # step compares with a stored time (deadlines, back-pressure) is read in
    # the database's frame, so a host clock running ahead never calls early.
    db_offset: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        if self.lease_until is None:
            expires = self.op.lease_expires_at
            left = (expires - self.now()).total_seconds() if expires is not None else 0.0
            self.lease_until = self.ctx.clock.monotonic() + left
        self.not_before = self.op.not_before
        self.poll_not_before = self.op.poll_not_before

    # ------------------------------------------------------------ clock and back-pressure

    def now(self) -> datetime:
        """Now, in the database's frame (see db_offset)."""
        return self.ctx.clock.now() + self.db_offset

    @property
    def worker(self) -> str:
        return leases.worker_name(self.ctx.settings.worker_id)

    def held_back(self, *, read: bool = False) -> float | None:
        """Seconds the provider still asks us to wait before a call, or None.

        A poll hint counts for a status read (`read`) while the operation is
        being observed, as in SQL's jw_due_at: the final read of a finished
        job or a cancel does not wait for it.
        """
        hint = self.poll_not_before if read and self.op.state in POLLED else None
        until = [t for t in (self.not_before, hint) if t]
        if not until:
            return None
        left = (max(until) - self.now()).total_seconds()
        return left if left > 0 else None

    def note_wait(self, seconds: float | None) -> None:
        """An answer imposed back-pressure: no call before `seconds` from now."""
        if seconds is None or not seconds > 0:
            return
        until = self.now() + timedelta(seconds=min(seconds, evidence.MAX_WAIT_SECONDS))
        if self.not_before is None or until > self.not_before:
            self.not_before = until

    # ------------------------------------------------------------ sending

    async def send(self, req: HttpRequest, conn: Any = None) -> Sent:
        """Send under the provider's concurrency limit, never past our lease or not-before.

        The lease is renewed (fenced) before queueing for a slot if it would
        not outlast the call with margin; if it was lost, nothing is sent. A
        slot holder never waits for a pool connection: steps holding pool
        connections may be queueing for slots, so that wait could deadlock
        the process. A slot comes with its lane (reconciler/lanes.py), which may
        wait for the process-wide bound on calls in flight (max_in_flight). If
        those waits left too little lease, both are given back and the lease
        renewed again; after MAX_SLOT_ROUNDS the call
        is given up as never sent (the caller records it and backs off).
        `conn` is the connection the caller already holds, used for renewals:
        taking a second one from the pool while holding one could exhaust it.
        An answer is read up to `answer_reading`'s size; a download as `_transfer` says.
        """
        if self.held_back(read=req.action == "status") is not None:  # the last guard
            return not_sent(self.op.trace_id)
        db = conn if conn is not None else self.ctx.pool
        need = req.timeout + self._margin(req.timeout)
        for _ in range(MAX_SLOT_ROUNDS):
            if self._lease_left() <= need:
                await self._renew(db)
            async with (
                self.ctx.semaphore(self.op.provider),
                self.ctx.lanes.lane(self.op.provider) as lane,
            ):
                # checked after every wait (the slot, the process-wide bound)
                if self._lease_left() > need:
                    desc, lease = self.adapter.desc, self.ctx.settings.lease_seconds
                    req = signed_as_it_leaves(desc, req)  # SigV4: dated now, not at build
                    if req.action in TRANSFERS:
                        reading = download(desc.result.fetched_max_bytes, req.timeout, lease)
                        return await self._transfer(lane, req, db, reading)
                    reading = answer_reading(desc, req.action)
                    if req.action == "status" and status_is_the_result(desc):
                        paced_reading = paced(reading, req.timeout, lease)
                        return await self._transfer(lane, req, db, paced_reading)
                    return await send(lane, req, self.op.trace_id, reading)
        log.warning(
            "no provider slot within the lease; call not sent",
            extra={"ctx": {"operation_id": self.op.operation_id, "provider": self.op.provider}},
        )
        return not_sent(self.op.trace_id)

    async def begin_call(
        self, conn: Any, req: HttpRequest, kind: str, attempt: int, *, token: str | None = None
    ) -> int:
        """Record a call before it leaves (so a crash mid-call shows it as maybe sent)."""
        start = call_start(self.op, req, kind, attempt, self.worker, self.fence, token=token)
        return await evidence.start_call(conn, start)

    async def end_call(
        self,
        conn: Any,
        call_id: int,
        sent: Sent,
        *,
        provider_request_id: str | None = None,
        remote_job_id: str | None = None,
        wait: float | None = None,
    ) -> None:
        """Record a call's outcome; `wait` is the back-pressure its answer imposed.

        The step holds `conn` across the call (a slot holder never waits for
        the pool), so a connection dropped meanwhile would lose an answer the
        provider gave: a job created at a provider that cannot deduplicate
        would be left for a human. The answer is then kept on another
        connection, and the step fails as before: the next claim acts on the
        answer on record (the create's recovery point).
        """
        self.note_wait(wait)
        answer = answer_of(sent, provider_request_id)
        try:
            await evidence.finish_call(
                conn, call_id, answer, remote_job_id=remote_job_id, not_before_seconds=wait
            )
        except DATABASE_DOWN:
            await self._keep_answer(call_id, answer, remote_job_id, wait)
            raise

    async def _keep_answer(
        self,
        call_id: int,
        answer: evidence.CallAnswer,
        remote_job_id: str | None,
        wait: float | None,
    ) -> None:
        """The answer of `call_id` on a connection of its own (a no-op if the first
        write did commit: a finished call is never written again).

        A new connection, outside the pool: a failover kills every pooled
        connection at once, and steps holding theirs across a call would all
        wait for a free one; an idle pooled one may be half-open too.
        """
        where = {"operation_id": self.op.operation_id, "call_id": call_id}
        try:
            async with asyncio.timeout(KEEP_ANSWER_S), self._other_connection() as other:
                await evidence.finish_call(
                    other, call_id, answer, remote_job_id=remote_job_id, not_before_seconds=wait
                )
        except Exception as exc:
            log.warning(
                "a call's answer is lost with its connection; the next claim treats the "
                "call as unanswered",
                extra={"ctx": {**where, "error": type(exc).__name__}},
            )
            return
        log.info(
            "a call's answer kept on another connection after its own was lost",
            extra={"ctx": where},
        )

    @contextlib.asynccontextmanager
    async def _other_connection(self) -> AsyncIterator[Any]:
        url = self.ctx.database_url
        if url is None:  # in-process users without a URL: a spare pooled connection
            async with self.ctx.pool.acquire() as pooled:
                yield pooled
            return
        conn = await connect(url)
        try:
            yield conn
        finally:
            conn.terminate()  # one write, then gone: no goodbye to wait for

    async def _transfer(self, lane: Lane, req: HttpRequest, db: Any, reading: Reading) -> Sent:
        """A download, which may outlast a lease: the lease is renewed while it runs.

        Without this, a result larger than a lease's worth of transfer could
        never be stored: each worker's writes would be refused, and the next
        would download it again. If the lease is lost, the download stops.

        The renewals last only as long as the download keeps its pace
        (`reconciler.lanes.download`): request_timeout and one lease, plus a
        second per MIN_TRANSFER_RATE (64 KiB) bytes received, so at most
        request_timeout + lease_seconds + max_bytes / 64 KiB in all. A
        provider trickling bytes (or
        `100 Continue` heads) fails as a timeout within that, like any call
        that got no answer, instead of holding this step, and the sweep that
        waits for it, for ever. At most max_bytes + 1 bytes are read: past
        max_bytes the validation refuses the result.
        """
        transfer = asyncio.ensure_future(send(lane, req, self.op.trace_id, reading))
        try:
            while True:
                done, _ = await asyncio.wait({transfer}, timeout=self._lease_left() / 2)
                if done:
                    return transfer.result()
                await self._renew(db)
        finally:
            if not transfer.done():
                transfer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await transfer

    def _margin(self, timeout: float) -> float:
        return min(LEASE_MARGIN_S, (self.ctx.settings.lease_seconds - timeout) / 2)

    def _lease_left(self) -> float:
        assert self.lease_until is not None
        return self.lease_until - self.ctx.clock.monotonic()

    async def _renew(self, db: Any) -> None:
        started = self.ctx.clock.monotonic()
        renewed = await leases.renew(
            db, self.op.operation_id, self.fence, self.ctx.settings.lease_seconds
        )
        self.op = replace(self.op, lease_expires_at=renewed)
        self.lease_until = started + self.ctx.settings.lease_seconds

    # ------------------------------------------------------------ moving

    async def move(
        self,
        conn: Any,
        dst: LocalState,
        cause: str,
        evidence_ref: tuple[Evidence, int] | None = None,
        *,
        escalation: str | None = None,
        **details: Any,
    ) -> None:
        """Transition (fenced) and, for escalated states, open the escalation."""
        await ledger.transition(
            conn,
            self.op.operation_id,
            self.op.state,
            dst,
            actor=self.worker,
            cause=cause,
            evidence=evidence_ref,
            fence=self.fence,
        )
        spans.transition(self.op.state.value, dst.value, cause)  # a no-op unless tracing is on
        if dst in ESCALATED:
            await decisions.escalate(conn, self.op, dst, escalation or cause, **details)
        await self.reload(conn)

    async def cannot_build(self, conn: Any, reason: str, **details: Any) -> Delay:
        """A request this step needs cannot be built from what is on record.

        Building it again gives the same refusal on every claim (a stored body
        that cannot carry our token, a job id or URL from the provider that no
        request can hold), so retrying would stall the operation forever: it
        stops for a human (needs_attention) with `reason`, in plain words.
        Nothing was recorded as sent: the caller builds before it records.
        """
        log.warning(
            "request cannot be built; escalated",
            extra={
                "ctx": {
                    "operation_id": self.op.operation_id,
                    "provider": self.op.provider,
                    "reason": reason,
                }
            },
        )
        async with conn.transaction():
            await self.reload(conn)
            if self.op.state in SCHEDULED:  # else someone else already ended our part
                await self.move(conn, LocalState.NEEDS_ATTENTION, reason, **details)
        return None

    async def reload(self, conn: Any) -> None:
        self.op = await ledger.load_operation(conn, self.op.operation_id)
        if self.op.not_before is not None and (
            self.not_before is None or self.op.not_before > self.not_before
        ):
            self.not_before = self.op.not_before
        self.poll_not_before = self.op.poll_not_before

    def note_poll_hint(self, seconds: float | None) -> None:
        """A status answer's poll hint: the next read waits for it (a cancel does not)."""
        if seconds is None or not seconds > 0:
            self.poll_not_before = None
            return
        self.poll_not_before = self.now() + timedelta(
            seconds=min(seconds, evidence.MAX_WAIT_SECONDS)
        )

    async def release(self, delay: Delay) -> None:
        """Hand the lease back; a marked read this step never sent has its mark dropped."""
        unsent, self.read_marked = self.read_marked, False
        await leases.release(
            self.ctx.pool, self.op.operation_id, self.fence, delay, read_not_sent=unsent
        )
        self.released = True

    @property
    def callbacks(self) -> bool:
        """Can this job call back, so that reads are a backstop? Its create's say
        (did it name our callback URL?), whatever this reconciler's configuration
        now; for an operation with no such record, the configuration's
        (`Context.callbacks`, which the adapter holds)."""
        return self.adapter.callbacks_for(self.op.callback_url_sent)

    def backoff(
        self, attempt: int, retry_after: float | None = None, poll_after: float | None = None
    ) -> float:
        """When to read the job's status again (the backstop's at least when this job
        can call back: `callbacks`; a plugin's schedule asks the same)."""
        with self.adapter.for_job(self.callbacks):
            return self.adapter.next_poll_delay(attempt, retry_after, poll_after, self.ctx.rng)

    def confirming(
        self, attempt: int, retry_after: float | None, poll_after: float | None
    ) -> float:
        """When to read again while confirming an end a delivery announced (the
        adapter's `confirming_poll_delay`, for this job)."""
        with self.adapter.for_job(self.callbacks):
            return self.adapter.confirming_poll_delay(
                attempt, retry_after, poll_after, self.ctx.rng
            )

    def retry(self, attempt: int, retry_after: float | None = None) -> float:
        """When to make a failed or uncertain call again (a create, cancel, lookup,
        result fetch): the backoff alone, whatever webhooks would announce."""
        return self.adapter.retry_delay(attempt, retry_after, self.ctx.rng)

    def until_allowed(self, delay: float, *, read: bool = False) -> float:
        """`delay`, or longer if the provider's back-pressure window ends later."""
        held = self.held_back(read=read)
        return max(delay, held) if held is not None else delay


def lease_lost(operation_id: str) -> LeaseLost:
    return LeaseLost(f"lease on {operation_id} lost")
