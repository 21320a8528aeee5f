"""The frame every step runs in: one claimed operation, its adapter and its lease."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.calls import TRANSFERS, Sent, not_sent, send
from reconciler.context import Context
from reconciler.recording import escalate, worker_name
from shared import ledger
from shared.db.queries import q
from shared.ledger import Operation
from shared.ledger.errors import LeaseLost
from shared.ledger.states import ESCALATED, Evidence, LocalState
from shared.providers import HttpRequest, ProviderAdapter

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


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Step:
    ctx: Context
    op: Operation
    adapter: ProviderAdapter
    fence: int
    # Set when the step's last statement already handed the lease back.
    released: bool = False
    # When our lease ends on this process's monotonic clock, measured from
    # before the statement that set it (so never later than the database's
    # expiry, whatever the clocks say). None: derived from the row.
    lease_until: float | None = None

    def __post_init__(self) -> None:
        if self.lease_until is None:
            expires = self.op.lease_expires_at
            left = (expires - utcnow()).total_seconds() if expires is not None else 0.0
            self.lease_until = time.monotonic() + left

    @property
    def worker(self) -> str:
        return worker_name(self.ctx.settings.worker_id)

    async def send(self, req: HttpRequest, conn: Any = None) -> Sent:
        """Send under the provider's concurrency limit, never past our lease.

        The lease is renewed (fenced) before queueing for a slot if it would
        not outlast the call with margin; if it was lost, nothing is sent. A
        slot holder never waits for a pool connection: steps holding pool
        connections may be queueing for slots, so that wait could deadlock
        the process. If the wait for a slot left too little lease, the slot is
        given back and the lease renewed again; after MAX_SLOT_ROUNDS the call
        is given up as never sent (the caller records it and backs off).
        `conn` is the connection the caller already holds, used for renewals:
        taking a second one from the pool while holding one could exhaust it.
        """
        db = conn if conn is not None else self.ctx.pool
        need = req.timeout + self._margin(req.timeout)
        for _ in range(MAX_SLOT_ROUNDS):
            if self._lease_left() <= need:
                await self._renew(db)
            async with self.ctx.semaphore(self.op.provider):
                if self._lease_left() > need:
                    if req.action in TRANSFERS:
                        return await self._transfer(req, db)
                    return await send(self.ctx.client, req, self.op.trace_id)
        log.warning(
            "no provider slot within the lease; call not sent",
            extra={"ctx": {"operation_id": self.op.operation_id, "provider": self.op.provider}},
        )
        return not_sent(self.op.trace_id)

    async def _transfer(self, req: HttpRequest, db: Any) -> Sent:
        """A download, which may outlast a lease: the lease is renewed while it runs.

        Without this, a result larger than a lease's worth of transfer could
        never be stored: each worker's writes would be refused, and the next
        would download it again. If the lease is lost, the download stops.
        """
        transfer = asyncio.ensure_future(send(self.ctx.client, req, self.op.trace_id))
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
        return self.lease_until - time.monotonic()

    async def _renew(self, db: Any) -> None:
        started = time.monotonic()
        renewed = await db.fetchval(
            q("renew_lease"), self.op.operation_id, self.fence, self.ctx.settings.lease_seconds
        )
        if renewed is None:
            raise LeaseLost(f"lease on {self.op.operation_id} lost before a provider call")
        self.op = replace(self.op, lease_expires_at=renewed)
        self.lease_until = started + self.ctx.settings.lease_seconds

    async def move(
        self,
        conn: Any,
        dst: LocalState,
        cause: str,
        evidence: tuple[Evidence, int] | None = None,
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
            evidence=evidence,
            fence=self.fence,
        )
        if dst in ESCALATED:
            await escalate(conn, self.op, dst, escalation or cause, **details)
        self.op = await ledger.load_operation(conn, self.op.operation_id)

    async def reload(self, conn: Any) -> None:
        self.op = await ledger.load_operation(conn, self.op.operation_id)

    def backoff(
        self, attempt: int, retry_after: float | None = None, poll_after: float | None = None
    ) -> float:
        return self.adapter.next_poll_delay(attempt, retry_after, poll_after, self.ctx.rng)
