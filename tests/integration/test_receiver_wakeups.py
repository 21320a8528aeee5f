"""The receiver's batch wake-up (jw_request_wakes) follows jw_request_wake's rule exactly."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from shared.ledger.states import LocalState
from tests.support import drive, submit

Setup = Callable[[Any, str], Awaitable[None]]


async def _unleased_due(db: Any, op_id: str) -> None:
    await db.execute(
        "UPDATE operations SET next_poll_at = now() - interval '1 minute' WHERE operation_id = $1",
        op_id,
    )


async def _unleased_later(db: Any, op_id: str) -> None:
    await db.execute(
        "UPDATE operations SET next_poll_at = now() + interval '1 hour' WHERE operation_id = $1",
        op_id,
    )


async def _leased(db: Any, op_id: str) -> None:
    await db.execute(
        "UPDATE operations SET lease_owner = 'w1', lease_expires_at = now() + interval '1 minute',"
        " next_poll_at = now() + interval '1 minute' WHERE operation_id = $1",
        op_id,
    )


async def _lease_expired(db: Any, op_id: str) -> None:
    await db.execute(
        "UPDATE operations SET lease_owner = 'w1', lease_expires_at = now() - interval '1 second',"
        " next_poll_at = now() + interval '1 hour' WHERE operation_id = $1",
        op_id,
    )


async def _finished(db: Any, op_id: str) -> None:
    await drive(db, op_id, LocalState.FAILED)


async def _escalated(db: Any, op_id: str) -> None:
    await drive(db, op_id, LocalState.NEEDS_ATTENTION)
    await _unleased_later(db, op_id)


CASES: dict[str, Setup] = {
    "unleased_due": _unleased_due,
    "unleased_later": _unleased_later,
    "leased": _leased,
    "lease_expired": _lease_expired,
    "finished": _finished,
    "escalated": _escalated,
}


async def _effect(db: Any, op_id: str, before: Any) -> tuple[bool, bool, bool]:
    """(wake flag, next_poll_at unchanged, next_poll_at is now): what a wake can do."""
    row = await db.fetchrow(
        "SELECT wake_requested, next_poll_at IS NOT DISTINCT FROM $2 AS unchanged,"
        " coalesce(abs(extract(epoch FROM next_poll_at - clock_timestamp())) < 5, false) AS now"
        " FROM operations WHERE operation_id = $1",
        op_id,
        before,
    )
    return row["wake_requested"], row["unchanged"], row["now"]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_batch_wake_matches_the_single_wake(db: Any, case: str) -> None:
    single, batch = await submit(db), await submit(db)
    for op_id in (single, batch):
        await CASES[case](db, op_id)
    before = {
        op: await db.fetchval("SELECT next_poll_at FROM operations WHERE operation_id = $1", op)
        for op in (single, batch)
    }
    await db.execute("SELECT jw_request_wake($1)", single)
    notified = await db.fetchval("SELECT jw_request_wakes($1)", [batch, batch])
    assert notified == 1  # one NOTIFY per distinct operation, like one call per operation
    assert await _effect(db, single, before[single]) == await _effect(db, batch, before[batch])


async def test_batch_wake_notifies_each_operation(db: Any) -> None:
    ops = [await submit(db) for _ in range(3)]
    seen: asyncio.Queue[str] = asyncio.Queue()
    await db.add_listener("jobwarden_wakeup", lambda *args: seen.put_nowait(args[3]))
    assert await db.fetchval("SELECT jw_request_wakes($1)", [*ops, "op_unknown"]) == 4
    woken: set[str] = set()
    async with asyncio.timeout(5):
        while not woken >= set(ops):
            woken.add(await seen.get())
