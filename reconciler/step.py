"""The frame every step runs in: one claimed operation, its adapter and its lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.context import Context
from reconciler.recording import escalate, worker_name
from reconciler.transport import Sent, send
from shared import ledger
from shared.ledger import Operation
from shared.providers import HttpRequest, ProviderAdapter
from shared.states import ESCALATED, Evidence, LocalState

# A step returns how long until the operation should be looked at again
# (seconds), or None when nothing is scheduled (finished, or waiting for a human).
Delay = float | None
NOW = 0.0


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

    async def send(self, req: HttpRequest) -> Sent:
        async with self.ctx.semaphore(self.op.provider):
            return await send(self.ctx.client, req, self.op.trace_id)

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
