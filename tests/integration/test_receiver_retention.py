"""Dedupe rows: kept as long as providers retry, unattached ones purged after, evidence kept."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from shared import ledger
from shared.ledger.webhooks import attach_stragglers, purge_webhook_events
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
