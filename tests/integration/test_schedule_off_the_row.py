"""The schedule off the operation row (migration 029) against a real PostgreSQL.

The claim finds due rows through `operation_schedule`, which a trigger keeps
equal to `operations.next_poll_at` whatever writes it; no index of
`operations` has a column a claim or a status read changes, so both rewrite
the row in place (HOT: no index entry written).
"""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Any

from shared.db import pgjson
from shared.db.connect import connect, create_pool, with_database
from shared.db.migrate import apply_migrations, load_migrations
from shared.ledger import Operation, evidence, leases
from shared.ledger.states import LocalState
from tests.conftest import _drop
from tests.integration.test_migrations import _empty_database
from tests.integration.test_poll_writer import observing_due, read
from tests.support import drive, lock_waits, submit

LEASE_SECONDS = 30.0


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
    due = await observing_due(db, 4, "follow")
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
    await observing_due(db, 6, "hot")
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
    ids = await observing_due(db, 10, "share")
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


async def test_the_upgrade_waits_for_running_daemons_before_it_locks_a_row(
    pg_server: Any,
) -> None:
    """A daemon's transaction in progress (a row locked, then an update) while 029
    is applied: the migration waits for the table first, the daemon finishes,
    the migration follows. Taking its table lock last (after its backfill had
    locked rows) it deadlocked with the daemon and one of them was aborted."""
    name = f"jw_mig_029_{os.getpid()}"
    conn = await _empty_database(pg_server, name)
    url = with_database(pg_server.admin_url, name)
    daemon = await connect(url)
    try:
        migrations = [m for m in load_migrations() if m.version <= 29]  # later ones aside
        await apply_migrations(conn, [m for m in migrations if m.version < 29])
        ids = [await submit(conn, ref=f"upgrade-{i}") for i in range(3)]
        async with daemon.transaction():
            await daemon.execute(
                "SELECT 1 FROM operations WHERE operation_id = $1 FOR UPDATE", ids[0]
            )
            waits = await lock_waits(conn)
            upgrade = asyncio.ensure_future(apply_migrations(conn, migrations))
            first_wait = await asyncio.wait_for(waits.get(), 10)
            assert "AccessExclusiveLock on relation" in first_wait, first_wait
            assert not upgrade.done()
            await daemon.execute(
                "UPDATE operations SET last_error = NULL WHERE operation_id = $1", ids[1]
            )
        assert await asyncio.wait_for(upgrade, 10) == [migrations[-1].name]
        await _schedule_matches_rows(conn)
    finally:
        await daemon.close()
        await conn.close()
        await _drop(pg_server.admin_url, name)
