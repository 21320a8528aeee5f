"""The schedule off the operation row (migration 029) against a real PostgreSQL.

The claim finds due rows through `operation_schedule`, which a trigger keeps
equal to `operations.next_poll_at` whatever writes it; no index of
`operations` has a column a claim or a status read changes, so both rewrite
the row in place (HOT: no index entry written).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from shared.db import pgjson
from shared.db.connect import create_pool
from shared.ledger import Operation, evidence, leases
from shared.ledger.states import LocalState
from tests.integration.test_poll_writer import read
from tests.support import drive, submit

LEASE_SECONDS = 30.0


async def _due(db: Any, count: int, prefix: str) -> list[str]:
    """`count` observing operations, all due now."""
    ids = [await submit(db, ref=f"{prefix}-{i}") for i in range(count)]
    for op_id in ids:
        await drive(db, op_id, LocalState.OBSERVING)
    await db.execute(
        "UPDATE operations SET next_poll_at = jw_now() - interval '1 second'"
        " WHERE operation_id = ANY($1)",
        ids,
    )
    return ids


async def _schedule_matches_rows(db: Any) -> None:
    rows = await db.fetch(
        "SELECT operation_id, next_poll_at FROM operations WHERE next_poll_at IS NOT NULL"
    )
    schedule = await db.fetch("SELECT operation_id, next_poll_at FROM operation_schedule")
    assert {r["operation_id"]: r["next_poll_at"] for r in schedule} == {
        r["operation_id"]: r["next_poll_at"] for r in rows
    }


async def _update_counts(conn: Any) -> tuple[int, int]:
    """(rows updated, of which HOT) in `operations` by this backend, not yet
    flushed to the shared statistics (a flush waits until it is idle, outside
    a transaction: a difference within one transaction is that transaction's)."""
    row = await conn.fetchrow(
        "SELECT pg_stat_get_xact_tuples_updated('operations'::regclass) AS updated,"
        " pg_stat_get_xact_tuples_hot_updated('operations'::regclass) AS hot"
    )
    return int(row["updated"]), int(row["hot"])


async def _updates_by(conn: Any, work: Any) -> tuple[Any, tuple[int, int]]:
    """What `work()` returns, and the (updated, HOT) rows of `operations` it wrote."""
    async with conn.transaction():
        before = await _update_counts(conn)
        result = await work()
        after = await _update_counts(conn)
    return result, (after[0] - before[0], after[1] - before[1])


async def test_the_schedule_follows_every_writer_of_next_poll_at(db: Any) -> None:
    fresh = await submit(db, ref="fresh")  # the insert schedules it (create_pending, due now)
    assert (
        await db.fetchval("SELECT count(*) FROM operation_schedule WHERE operation_id = $1", fresh)
        == 1
    )
    due = await _due(db, 4, "follow")
    claimed = await leases.claim(db, "w1", 2, LEASE_SECONDS)  # moved to the lease's end
    assert len(claimed) == 2
    await leases.release(db, claimed[0].op.operation_id, claimed[0].op.lease_fence, 120.0)
    await leases.release(db, claimed[1].op.operation_id, claimed[1].op.lease_fence, None)
    await drive(db, due[3], LocalState.NEEDS_ATTENTION)  # escalated: nothing scheduled
    async with db.transaction():  # a bulk writer with ordinary triggers off
        await db.execute("SET LOCAL session_replication_role = replica")
        await db.execute(
            "UPDATE operations SET next_poll_at = jw_now() + interval '1 hour'"
            " WHERE operation_id = $1",
            due[2],
        )
    await _schedule_matches_rows(db)
    assert not await db.fetchval(
        "SELECT count(*) FROM operation_schedule WHERE operation_id = ANY($1)",
        [due[3], claimed[1].op.operation_id],
    )


async def test_claims_and_status_reads_rewrite_the_operation_in_place(db: Any) -> None:
    """One row per transaction, as a sweep with little due does: every update is HOT.

    With next_poll_at indexed on the row (before 029) none was.
    """
    await _due(db, 6, "hot")
    await db.execute("VACUUM operations")  # the transitions' old versions gone
    claims = reads = 0
    while True:
        claimed, counts = await _updates_by(db, lambda: leases.claim(db, "w1", 1, LEASE_SECONDS))
        if not claimed:
            break
        assert counts == (1, 1), "the claim wrote index entries"
        claims += 1
        op: Operation = claimed[0].op
        row = pgjson.dumps(read(op, release_after=600.0))
        written, counts = await _updates_by(db, functools.partial(evidence.record_polls, db, [row]))
        assert op.operation_id in written
        assert counts == (1, 1), "the status read wrote index entries"
        reads += 1
    assert claims == reads == 6
    await _schedule_matches_rows(db)


async def test_concurrent_claims_take_different_rows_and_fill_their_batches(
    db_url: str, db: Any
) -> None:
    """The batch counts rows claimed, not schedule rows looked at: while one claim
    holds its rows, another takes the next ones rather than coming back short."""
    ids = await _due(db, 10, "share")
    pool = await create_pool(db_url, min_size=2, max_size=2)
    try:
        async with pool.acquire() as first_conn, first_conn.transaction():
            first = await leases.claim(first_conn, "w1", 4, LEASE_SECONDS)
            async with pool.acquire() as second_conn:
                second = await asyncio.wait_for(
                    leases.claim(second_conn, "w2", 4, LEASE_SECONDS), timeout=10
                )
    finally:
        await pool.close()
    a = {c.op.operation_id for c in first}
    b = {c.op.operation_id for c in second}
    assert len(a) == len(b) == 4
    assert not a & b
    assert a | b <= set(ids)
