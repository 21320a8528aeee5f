"""Wake-ups (migration 015): a narrow row per woken operation, never an UPDATE of the operation.

A wake makes the next claim take the operation as soon as its lease and the
provider allow, and means nothing to an operation outside the scheduled
states. The single and the batch wake are one function; what is checked here
is what a claim does with a wake, case by case, and that waking leaves the
operation row untouched (no new row version: the point of the narrow table).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bench.harness import FILL_SQL, TestClock
from shared.db.connect import connect
from shared.db.queries import q
from shared.ledger import leases
from shared.ledger.states import LocalState
from tests.support import drive, submit

Setup = Callable[[Any, str], Awaitable[None]]
LEASE_SECONDS = 60.0


async def _set(db: Any, op_id: str, assignments: str) -> None:
    await db.execute(f"UPDATE operations SET {assignments} WHERE operation_id = $1", op_id)


async def _unleased_due(db: Any, op_id: str) -> None:
    await _set(db, op_id, "next_poll_at = jw_now() - interval '1 minute'")


async def _unleased_later(db: Any, op_id: str) -> None:
    await _set(db, op_id, "next_poll_at = jw_now() + interval '1 hour'")


async def _leased(db: Any, op_id: str) -> None:
    await _set(
        db,
        op_id,
        "lease_owner = 'w1', lease_expires_at = jw_now() + interval '1 minute',"
        " next_poll_at = jw_now() + interval '1 minute'",
    )


async def _lease_expired(db: Any, op_id: str) -> None:
    await _set(
        db,
        op_id,
        "lease_owner = 'w1', lease_expires_at = jw_now() - interval '1 second',"
        " next_poll_at = jw_now() + interval '1 hour'",
    )


async def _held_back(db: Any, op_id: str) -> None:
    """The provider asked for no call before ten minutes from now (Retry-After)."""
    await _set(
        db,
        op_id,
        "not_before = jw_now() + interval '10 minutes',"
        " next_poll_at = jw_now() + interval '10 minutes'",
    )


async def _finished(db: Any, op_id: str) -> None:
    await drive(db, op_id, LocalState.FAILED)


async def _escalated(db: Any, op_id: str) -> None:
    await drive(db, op_id, LocalState.NEEDS_ATTENTION)
    await _unleased_later(db, op_id)


# case: (set-up, claimed right after the wake, wake still pending after that claim)
CASES: dict[str, tuple[Setup, bool, bool]] = {
    "unleased_due": (_unleased_due, True, False),
    "unleased_later": (_unleased_later, True, False),
    "leased": (_leased, False, True),
    "lease_expired": (_lease_expired, True, False),
    "held_back": (_held_back, False, True),
    "finished": (_finished, False, False),
    "escalated": (_escalated, False, False),
}


async def _pending(db: Any, op_id: str) -> bool:
    return bool(
        await db.fetchval("SELECT count(*) FROM operation_wakes WHERE operation_id = $1", op_id)
    )


async def _claimed(db: Any) -> set[str]:
    return {c.op.operation_id for c in await leases.claim(db, "w2", 100, LEASE_SECONDS)}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_claim_takes_a_woken_operation_when_lease_and_provider_allow(
    db: Any, case: str
) -> None:
    setup, claimed, pending = CASES[case]
    op_id = await submit(db)
    await setup(db, op_id)
    version = await db.fetchval("SELECT xmin::text FROM operations WHERE operation_id = $1", op_id)
    assert await db.fetchval("SELECT jw_request_wakes($1)", [op_id, op_id]) == 1
    # the wake itself never writes the operation row
    assert version == await db.fetchval(
        "SELECT xmin::text FROM operations WHERE operation_id = $1", op_id
    )
    assert (op_id in await _claimed(db)) is claimed
    assert await _pending(db, op_id) is pending


async def test_a_wake_during_a_lease_is_acted_on_after_release(db: Any) -> None:
    op_id = await submit(db)
    [held] = await leases.claim(db, "w1", 1, LEASE_SECONDS)
    assert held.op.operation_id == op_id
    await db.execute("SELECT jw_request_wake($1)", op_id)
    assert op_id not in await _claimed(db)
    # the holder lets go with an appointment an hour away: the wake still wins
    assert await leases.release(db, op_id, held.op.lease_fence, 3600.0)
    assert op_id in await _claimed(db)
    assert not await _pending(db, op_id)


async def test_a_held_back_wake_waits_for_the_provider(db: Any, clock: TestClock) -> None:
    op_id = await submit(db)
    await _held_back(db, op_id)
    await db.execute("SELECT jw_request_wake($1)", op_id)
    assert op_id not in await _claimed(db)
    await clock.advance(9 * 60)
    assert op_id not in await _claimed(db)
    await clock.advance(61)
    assert op_id in await _claimed(db)
    assert not await _pending(db, op_id)


async def test_wakes_of_unknown_or_finished_operations_leave_nothing(db: Any) -> None:
    done = await submit(db)
    await _finished(db, done)
    assert await db.fetchval("SELECT jw_request_wakes($1)", [done, "op_unknown"]) == 2
    assert await db.fetchval("SELECT count(*) FROM operation_wakes") == 0


async def test_a_claim_drops_the_wake_of_an_operation_that_left_the_scheduled_states(
    db: Any,
) -> None:
    op_id = await submit(db)
    await _leased(db, op_id)
    await db.execute("SELECT jw_request_wake($1)", op_id)
    await _set(db, op_id, "lease_owner = NULL, lease_expires_at = NULL")
    await drive(db, op_id, LocalState.NEEDS_ATTENTION)
    assert op_id not in await _claimed(db)
    assert not await _pending(db, op_id)


async def test_two_workers_never_claim_the_same_woken_operation(db_url: str, db: Any) -> None:
    from shared.db.connect import create_pool

    ops = [await submit(db) for _ in range(40)]
    for op_id in ops:
        await _unleased_later(db, op_id)
    await db.execute("SELECT jw_request_wakes($1)", ops)
    pool = await create_pool(db_url, min_size=2, max_size=2)
    try:
        first, second = await asyncio.gather(
            leases.claim(pool, "w1", 25, LEASE_SECONDS), leases.claim(pool, "w2", 25, LEASE_SECONDS)
        )
    finally:
        await pool.close()
    a = {c.op.operation_id for c in first}
    b = {c.op.operation_id for c in second}
    assert not a & b
    assert len(a) <= 25 and len(b) <= 25
    assert a | b == set(ops)


async def test_batch_wake_notifies_each_operation(db: Any) -> None:
    ops = [await submit(db) for _ in range(3)]
    seen: asyncio.Queue[str] = asyncio.Queue()
    await db.add_listener("jobwarden_wakeup", lambda *args: seen.put_nowait(args[3]))
    assert await db.fetchval("SELECT jw_request_wakes($1)", [*ops, "op_unknown"]) == 4
    woken: set[str] = set()
    async with asyncio.timeout(5):
        while not woken >= set(ops):
            woken.add(await seen.get())


def _rows_read(plan: dict[str, Any], table: str, parts: set[str], inside: bool = False) -> int:
    """Rows the scans of `table` returned, over all their loops, in the plan's `parts`
    (its CTEs by name; nested sub-plans belong to the part they are in)."""
    inside = inside or plan.get("Subplan Name") in parts
    own = 0
    if inside and plan.get("Relation Name") == table and "Scan" in plan["Node Type"]:
        own = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 1))
    return own + sum(_rows_read(child, table, parts, inside) for child in plan.get("Plans", []))


async def test_a_claim_reads_only_the_rows_its_wakes_name_whatever_the_statistics(
    db: Any,
) -> None:
    """Never analyzed (autovacuum off, a fresh table), a planner misjudges what
    the wakes join: as joins, the claim's wake parts read every scheduled
    operation (280-380 ms a claim at 200,000), and at this size the lookup
    and the update of the rows picked hashed a scan of all 20,000 too (45 ms
    a claim). Each wake and each picked row is now looked up by its key, and
    the stale-wake sweep tests only the wakes."""
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")  # bulk filler rows
        await db.execute(FILL_SQL, 1, 20_000, 0.0, 0.0)  # scheduled, none due
    woken = [await submit(db) for _ in range(3)]
    await db.execute("SELECT jw_request_wakes($1)", woken)
    assert (
        await db.fetchval(
            "SELECT count(*) FROM pg_stats WHERE tablename IN ('operations', 'operation_wakes')"
        )
        == 0
    )  # no statistics: the case this is about
    # EXPLAIN ANALYZE runs the claim: it leases what it claims
    explained = await db.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + q("claim_due"), "w1", 200, LEASE_SECONDS
    )
    read = _rows_read(explained[0]["Plan"], "operations", set(), inside=True)  # every part
    leased = await db.fetch("SELECT operation_id FROM operations WHERE lease_owner = 'w1'")
    assert {r["operation_id"] for r in leased} == set(woken)
    assert read <= 10 * len(woken), f"the claim read {read} operation rows for {len(woken)} wakes"
    assert read >= 2 * len(woken)  # each woken row is read to pick it and again to claim it


async def test_a_wake_for_an_operation_being_claimed_does_not_wait_for_the_claim(
    db_url: str, db: Any
) -> None:
    """A claim locks what its UPDATE needs (FOR NO KEY UPDATE), not more: a row
    that only references the operation (here a wake for a row claimed by its
    schedule; a stored webhook, a call) is written while the claim is still
    running, not after it commits."""
    op_id = await submit(db)
    await _unleased_due(db, op_id)
    claimer, waker = await connect(db_url), await connect(db_url)
    try:
        async with claimer.transaction():  # the claim, not yet committed
            claimed = await leases.claim(claimer, "w1", 10, LEASE_SECONDS)
            assert [c.op.operation_id for c in claimed] == [op_id]
            # FOR UPDATE made this wait for the claim's commit: here, the timeout
            await waker.execute("SET lock_timeout = '2s'")
            await waker.execute("SELECT jw_request_wake($1)", op_id)
            assert await _pending(waker, op_id)  # written while the claim holds its rows
            # and claims still exclude each other: the row is skipped, not taken twice
            assert await leases.claim(waker, "w2", 10, LEASE_SECONDS) == []
    finally:
        await claimer.close()
        await waker.close()
    # the wake arrived during the lease: the next claim after release takes it
    assert await _pending(db, op_id)


def _loops_of(plan: dict[str, Any], node_type: str, part: str, inside: bool = False) -> int:
    inside = inside or plan.get("Subplan Name") == part
    own = int(plan.get("Actual Loops", 0)) if inside and plan["Node Type"] == node_type else 0
    return own + sum(_loops_of(child, node_type, part, inside) for child in plan.get("Plans", []))


async def test_a_claim_looks_up_and_locks_only_as_many_woken_rows_as_it_takes(db: Any) -> None:
    """The wakes are read oldest first, one row at a time, and the lookup stops
    at the claim's limit: a Sort above the lookup would lock every woken row
    that is due, on every claim, and keep the rows past the limit locked."""
    ops = [await submit(db) for _ in range(30)]
    await db.execute("SELECT jw_request_wakes($1)", ops)
    explained = await db.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + q("claim_due"), "w1", 5, LEASE_SECONDS
    )
    assert _loops_of(explained[0]["Plan"], "LockRows", "CTE woken") == 5
    leased = await db.fetchval("SELECT count(*) FROM operations WHERE lease_owner = 'w1'")
    assert leased == 5
