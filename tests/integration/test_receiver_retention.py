"""Dedupe rows: kept as long as providers retry, unattached ones purged after, evidence kept."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from bench.harness import FILL_SQL
from shared import ledger
from shared.db.queries import q
from shared.ledger.webhooks import StragglerSweep, attach_stragglers, purge_webhook_events
from tests.integration.test_receiver_support import (
    delivery,
    running_receiver,
    stored_events,
    webhook_observations,
)
from tests.support import submit


async def _age(db: Any, event_id: str, days: int) -> None:
    await db.execute(
        "UPDATE webhook_events SET received_at = now() - make_interval(days => $2)"
        " WHERE event_id = $1",
        event_id,
        days,
    )


async def test_purge_removes_only_old_unattached_events(db: Any, pool: Any) -> None:
    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, "job_ours", create_mode="async")
    async with running_receiver(pool) as rx:
        await rx.post(*delivery("job_ours", "old_attached"))
        await rx.post(*delivery("job_unknown", "old_unattached"))
        await rx.post(*delivery("job_unknown", "young_unattached"))
    await _age(db, "old_attached", 30)
    await _age(db, "old_unattached", 15)
    await _age(db, "young_unattached", 13)

    assert await purge_webhook_events(db, retention_days=14) == 1

    assert sorted(e["event_id"] for e in await stored_events(db)) == [
        "old_attached",
        "young_unattached",
    ]
    assert len(await webhook_observations(db, op_id)) == 1


async def test_a_redelivery_within_retention_is_still_a_duplicate(db: Any, pool: Any) -> None:
    body, headers = delivery("job_unknown", "msg_kept")
    async with running_receiver(pool) as rx:
        await rx.post(body, headers)
        await _age(db, "msg_kept", 13)
        await purge_webhook_events(db, retention_days=14)
        again = await rx.post(body, headers)
    assert again.json() == {"status": "duplicate"}


async def test_retention_below_one_day_is_refused(db: Any) -> None:
    with pytest.raises(ValueError, match="at least one day"):
        await purge_webhook_events(db, retention_days=0)


async def test_the_database_keeps_a_day_whatever_the_caller_asks(db: Any, pool: Any) -> None:
    async with running_receiver(pool) as rx:
        await rx.post(*delivery("job_unknown", "hours_old"))
    await db.execute("UPDATE webhook_events SET received_at = now() - interval '12 hours'")
    deleted = await db.fetchval("SELECT jw_purge_webhook_events(interval '1 second', 100)")
    assert deleted == 0 and len(await stored_events(db)) == 1


async def test_reconciler_role_purges_through_the_function_only(db: Any, pool: Any) -> None:
    async with running_receiver(pool) as rx:
        await rx.post(*delivery("job_unknown", "old"))
    await _age(db, "old", 30)
    await db.execute("SET ROLE jobwarden_reconciler")
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await db.execute("DELETE FROM webhook_events")
        assert await purge_webhook_events(db, retention_days=14) == 1
    finally:
        await db.execute("RESET ROLE")
    assert await stored_events(db) == []


async def test_straggler_missed_by_the_trigger_is_attached_by_the_sweep(db: Any, pool: Any) -> None:
    op_id = await submit(db)
    async with running_receiver(pool) as rx:
        resp = await rx.post(*delivery("job_late", "msg_straggler", "running"))
    assert resp.json()["matched"] is False
    # What a receiver commit racing the job-id write looks like afterwards:
    # the job id is on record, the event is not attached.
    await db.execute("ALTER TABLE operations DISABLE TRIGGER operations_attach_events")
    try:
        await ledger.record_remote_job(db, op_id, "job_late", create_mode="async")
    finally:
        await db.execute("ALTER TABLE operations ENABLE TRIGGER operations_attach_events")
    await db.execute("DELETE FROM operation_wakes WHERE operation_id = $1", op_id)
    assert await webhook_observations(db, op_id) == []

    await db.execute("SET ROLE jobwarden_reconciler")
    try:
        assert await attach_stragglers(db) == 1
        assert await attach_stragglers(db) == 0
    finally:
        await db.execute("RESET ROLE")

    [event] = await stored_events(db)
    assert event["operation_id"] == op_id
    [obs] = await webhook_observations(db, op_id)
    assert (obs["webhook_event_id"], obs["remote_state"]) == (event["webhook_event_id"], "running")
    assert await db.fetchval(
        "SELECT count(*) = 1 FROM operation_wakes WHERE operation_id = $1", op_id
    )


async def test_purge_attaches_matchable_events_instead_of_deleting_them(db: Any, pool: Any) -> None:
    op_id = await submit(db)
    async with running_receiver(pool) as rx:
        await rx.post(*delivery("job_late", "msg_old"))
    await db.execute("ALTER TABLE operations DISABLE TRIGGER operations_attach_events")
    try:
        await ledger.record_remote_job(db, op_id, "job_late", create_mode="async")
    finally:
        await db.execute("ALTER TABLE operations ENABLE TRIGGER operations_attach_events")
    await _age(db, "msg_old", 30)
    assert await purge_webhook_events(db, retention_days=14) == 0
    [event] = await stored_events(db)
    assert event["operation_id"] == op_id


# Unattached events for jobs nobody here started, stored long ago, of a
# provider whose operations have job ids too (bulk filler, see FILL_SQL).
FOREIGN_EVENTS_SQL = """
INSERT INTO webhook_events (provider, event_id, received_at, signature_scheme, id_signed,
                            remote_job_id, payload)
SELECT 'sim', 'foreign_' || g, now() - interval '2 days', 'standard-webhooks', true,
       'job_elsewhere_' || g, '{}'
FROM generate_series(1, $1) AS g"""
JOBS_OF_FILLER_SQL = """
UPDATE operations SET remote_job_id = 'job_here_' || substr(operation_id, 4)
WHERE requested_by = 'agent:fill'"""


async def _unmatched(db: Any, pool: Any, job: str, event_id: str) -> str:
    """An operation whose job id is not on record yet, and an event for that job."""
    op_id = await submit(db)
    async with running_receiver(pool) as rx:
        resp = await rx.post(*delivery(job, event_id, "running"))
    assert resp.json()["matched"] is False
    return op_id


async def _record_job_past_the_trigger(db: Any, op_id: str, job: str) -> None:
    """The job id written as a receiver commit racing it leaves things (see above)."""
    await db.execute("ALTER TABLE operations DISABLE TRIGGER operations_attach_events")
    try:
        await ledger.record_remote_job(db, op_id, job, create_mode="async")
    finally:
        await db.execute("ALTER TABLE operations ENABLE TRIGGER operations_attach_events")


async def _straggler(db: Any, pool: Any, job: str, event_id: str) -> str:
    op_id = await _unmatched(db, pool, job, event_id)
    await _record_job_past_the_trigger(db, op_id, job)
    return op_id


def _reads(plan: dict[str, Any], table: str) -> tuple[int, int]:
    """What the plan's scans of `table` and of its indexes read: (rows and index
    entries, returned or filtered out, over all loops; scans run, over all loops).

    The second counts each per-row lookup even when it finds nothing (EXPLAIN's
    row counts are per-loop averages, rounded)."""
    entries = scans = 0
    if "Scan" in plan["Node Type"] and (
        plan.get("Relation Name") == table or plan.get("Index Name", "").startswith(table)
    ):
        loops = int(plan.get("Actual Loops", 1))
        removed = ("Rows Removed by Filter", "Rows Removed by Index Recheck")
        entries = int(plan.get("Actual Rows", 0)) + sum(int(plan.get(k, 0)) for k in removed)
        entries *= loops
        scans = loops
    for child in plan.get("Plans", []):
        more_entries, more_scans = _reads(child, table)
        entries, scans = entries + more_entries, scans + more_scans
    return entries, scans


async def test_the_frequent_sweep_reads_only_recent_events_once_it_has_read_them_all(
    db: Any, pool: Any
) -> None:
    """Events that never match (jobs started elsewhere) stay for the whole
    retention; the minute's sweep read them all, every minute. After its first
    full sweeps it looks only at events after the newest one of `lookback`
    sweeps ago, each by its id, statistics or not."""
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")  # bulk filler rows
        await db.execute(FILL_SQL, 1, 20_000, 0.0, 0.0)
        await db.execute(JOBS_OF_FILLER_SQL)
        await db.execute(FOREIGN_EVENTS_SQL, 20_000)
    sweep = StragglerSweep(lookback=2)
    assert sweep.after is None
    assert await sweep.run(db) == 0  # every unattached event
    assert sweep.after is None
    assert await sweep.run(db) == 0  # and again: it has not looked back far enough yet
    newest_before_the_first = await db.fetchval("SELECT max(webhook_event_id) FROM webhook_events")
    assert sweep.after == newest_before_the_first

    op_id = await _straggler(db, pool, "job_racing", "msg_racing")
    assert (
        await db.fetchval(
            "SELECT count(*) FROM pg_stats WHERE tablename IN ('operations', 'webhook_events')"
        )
        == 0
    )  # no statistics: the planner's guesses, the case this is about
    explained = await db.fetchval(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + q("webhook_attach_recent_stragglers"),
        sweep.after,
        await db.fetchval(q("webhook_newest_event")),
    )
    entries, scans = _reads(explained[0]["Plan"], "webhook_events")
    # the newest-id probe, then the racing event and its update (a few each)
    assert entries <= 8, f"a bounded sweep read {entries} event rows or index entries"
    assert scans <= 8, f"a bounded sweep ran {scans} scans of events"
    [event] = await stored_events_of(db, "msg_racing")
    assert event["operation_id"] == op_id  # EXPLAIN ANALYZE ran it: attached
    [obs] = await webhook_observations(db, op_id)
    assert obs["webhook_event_id"] == event["webhook_event_id"]


async def test_an_old_event_is_left_to_the_full_sweep(db: Any, pool: Any) -> None:
    """The boundary, and what backs it: an event stored before the window is not
    looked at by the frequent sweep, and the purge's full sweep attaches it."""
    old_op = await _unmatched(db, pool, "job_slow", "msg_slow")
    sweep = StragglerSweep(lookback=1)
    assert await sweep.run(db) == 0  # the first sweep reads every event
    [old] = await stored_events_of(db, "msg_slow")
    assert sweep.after == old["webhook_event_id"]
    await _record_job_past_the_trigger(db, old_op, "job_slow")  # matchable, but old
    new_op = await _straggler(db, pool, "job_racing", "msg_racing")
    assert await sweep.run(db) == 1  # the recent one only
    assert (await stored_events_of(db, "msg_racing"))[0]["operation_id"] == new_op
    assert (await stored_events_of(db, "msg_slow"))[0]["operation_id"] is None
    assert await purge_webhook_events(db, retention_days=14) == 0  # its full sweep first
    assert (await stored_events_of(db, "msg_slow"))[0]["operation_id"] == old_op


async def test_a_failed_sweep_does_not_move_the_window(db: Any) -> None:
    class Refusing:
        """The real connection, whose sweep statement fails."""

        async def fetchval(self, query: str, *args: Any) -> Any:
            if query != q("webhook_newest_event"):
                raise asyncpg.exceptions.QueryCanceledError("canceling statement due to timeout")
            return await db.fetchval(query, *args)

    sweep = StragglerSweep(lookback=1)
    with pytest.raises(asyncpg.exceptions.QueryCanceledError):
        await sweep.run(Refusing())
    assert sweep.after is None  # the next sweep is still a full one
    await sweep.run(db)
    assert sweep.after == 0  # no event yet: everything after none


def test_a_sweep_looks_back_at_least_one_sweep() -> None:
    with pytest.raises(ValueError, match="at least one sweep"):
        StragglerSweep(lookback=0)


async def stored_events_of(db: Any, event_id: str) -> list[Any]:
    return [e for e in await stored_events(db) if e["event_id"] == event_id]
