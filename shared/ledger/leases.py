"""Leases: who may act on an operation right now, and the fence that proves it.

A worker claims due rows (`FOR NO KEY UPDATE SKIP LOCKED`), which bumps each row's
fencing counter; every later write of that worker carries the counter it
claimed with, so a worker whose lease lapsed or was taken over can no longer
write (sql/queries/leases.sql). The claim also marks each status read it
makes due (`Claimed.read_marked`), so a read that leaves and is never
recorded is put on record by whoever comes next.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.db.connect import Executor
from shared.db.queries import q
from shared.ledger.errors import LeaseLost
from shared.ledger.operations import Operation


def worker_name(worker_id: str) -> str:
    """The actor name of a reconciler worker in history and call rows."""
    return f"reconciler:{worker_id}"


@dataclass(frozen=True)
class Claimed:
    """One claimed operation.

    `read_marked`: the claim marked the status read it is for (polled states
    only). Recording the read clears the mark; a worker that knows the read
    never left says so when it releases; a mark nobody clears is recorded as
    a read whose outcome was lost.
    """

    op: Operation
    read_marked: bool
    db_now: datetime  # the database's clock when it claimed


async def claim(db: Executor, worker_id: str, limit: int, lease_seconds: float) -> list[Claimed]:
    rows = await db.fetch(q("claim_due"), worker_id, limit, lease_seconds)
    return [
        Claimed(Operation._from_record(r), r["read_fence"] == r["lease_fence"], r["db_now"])
        for r in rows
    ]


async def renew(db: Executor, operation_id: str, fence: int, lease_seconds: float) -> datetime:
    """Extend the lease; raises LeaseLost if it is no longer ours."""
    renewed: datetime | None = await db.fetchval(
        q("renew_lease"), operation_id, fence, lease_seconds
    )
    if renewed is None:
        raise LeaseLost(f"lease on {operation_id} (fence {fence}) is no longer held")
    return renewed


async def release(
    db: Executor,
    operation_id: str,
    fence: int,
    delay: float | None,
    *,
    read_not_sent: bool = False,
) -> bool:
    """Hand the lease back with the next appointment `delay` seconds away (None: none).

    The appointment is never before the operation's not_before.
    `read_not_sent`: the worker knows the read its claim marked never left,
    so the mark is dropped. False when the lease had already been taken over.
    """
    row = await db.fetchrow(q("release"), operation_id, fence, delay, read_not_sent)
    return row is not None


async def release_all(db: Executor, worker_id: str) -> int:
    """Graceful shutdown: every lease of this worker back; returns how many."""
    status = await db.execute(q("release_all_mine"), worker_id)
    return int(status.split()[-1])


def claim_sql() -> str:
    """The claim statement's text, for benchmarks that EXPLAIN it (they never run it outside
    a rolled-back transaction)."""
    return q("claim_due")
