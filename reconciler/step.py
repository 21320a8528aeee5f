"""The frame every step runs in: one claimed operation, its adapter and its lease."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.context import Context
from reconciler.recording import escalate, worker_name
from reconciler.transport import Sent, send
from shared import ledger
from shared.errors import LeaseLost
from shared.ledger import Operation
from shared.providers import ConfigError, HttpRequest, ProviderAdapter
from shared.queries import q
from shared.states import ESCALATED, Evidence, LocalState

# A step returns how long until the operation should be looked at again
# (seconds), or None when nothing is scheduled (finished, or waiting for a human).
Delay = float | None
NOW = 0.0
# A call starts only if our lease outlives its timeout by this much (DB writes after it).
LEASE_MARGIN_S = 5.0


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

    @property
    def worker(self) -> str:
        return worker_name(self.ctx.settings.worker_id)

    @property
    def state(self) -> LocalState:
        return self.op.state

    async def send(self, req: HttpRequest, conn: Any = None) -> Sent:
        """Send under the provider's concurrency limit, never past our lease.

        The lease is renewed (fenced) before queueing for a slot if it would
        not outlast the call with margin; if it was lost, nothing is sent. A
        slot holder never waits for a pool connection: steps holding pool
        connections may be queueing for slots, so that wait could deadlock
        the process. If the wait for a slot left less lease than the call may
        take, the slot is given back and the lease renewed again.
        `conn` is the connection the caller already holds, used for renewals:
        taking a second one from the pool while holding one could exhaust it.
        """
        db = conn if conn is not None else self.ctx.pool
        while True:
            await self._lease_for(req.timeout, db)
            async with self.ctx.semaphore(self.op.provider):
                if self._lease_left() > req.timeout:
                    return await send(self.ctx.client, req, self.op.trace_id)

    def _lease_left(self) -> float:
        expires = self.op.lease_expires_at
        return (expires - utcnow()).total_seconds() if expires is not None else 0.0

    async def _lease_for(self, seconds: float, db: Any) -> None:
        if self._lease_left() > seconds + LEASE_MARGIN_S:
            return
        renewed = await db.fetchval(
            q("renew_lease"), self.op.operation_id, self.fence, self.ctx.settings.lease_seconds
        )
        if renewed is None:
            raise LeaseLost(f"lease on {self.op.operation_id} lost before a provider call")
        self.op = replace(self.op, lease_expires_at=renewed)
        if self._lease_left() <= seconds:
            # Renewing can never make room for this call (load_settings refuses
            # such a configuration; this guards a hand-built one from spinning).
            raise ConfigError(
                f"lease_seconds ({self.ctx.settings.lease_seconds:g}) must exceed the "
                f"request timeout of provider {self.op.provider!r} ({seconds:g} s)"
            )

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
