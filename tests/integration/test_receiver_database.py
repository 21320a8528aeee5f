"""When PostgreSQL cannot take an event: 503 + Retry-After, nothing half-saved, nothing lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from shared import ledger
from shared.db.connect import ResolvedDatabase, connect, create_pool
from tests.integration.test_receiver_support import (
    PROVIDER,
    delivery,
    running_receiver,
    settings_for,
    stored_events,
    webhook_observations,
)
from tests.support import submit


@asynccontextmanager
async def database_down(pg_server: ResolvedDatabase, db_url: str) -> AsyncIterator[None]:
    """Refuse new connections to the test database and cut the open ones, then restore."""
    name = urlsplit(db_url).path.lstrip("/")
    admin = await connect(pg_server.admin_url)
    try:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name
        )
        yield
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await admin.close()


async def test_database_down_is_503_then_the_retry_is_stored_once(
    pg_server: ResolvedDatabase, db_url: str
) -> None:
    pool = await create_pool(db_url, min_size=0, max_size=2)
    body, headers = delivery("job_1", "msg_outage")
    try:
        async with running_receiver(pool) as rx:
            warm = await rx.post(*delivery("job_1", "msg_before"))
            assert warm.status_code == 200  # the pool now holds a live connection
            async with database_down(pg_server, db_url):
                refused = await rx.post(body, headers)
                ready = await rx.client.get("/readyz")
                assert (
                    rx.metric("jobwarden_webhook_events_unavailable_total", {"provider": PROVIDER})
                    == 1
                )
                assert rx.metric("jobwarden_webhook_db_errors_total", {"kind": "unavailable"}) >= 1
            retried = await rx.post(body, headers)
    finally:
        await pool.close()
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "5"
    assert refused.json() == {"error": "unavailable"}
    assert ready.status_code == 503 and ready.json()["reason"] == "database_unreachable"
    # The provider's retry is the first time this event is stored: never 2xx
    # for an unsaved event, never a duplicate of something that was not saved.
    assert retried.status_code == 200 and retried.json()["status"] == "stored"
    db = await connect(db_url)
    try:
        events = {e["event_id"]: e for e in await stored_events(db)}
    finally:
        await db.close()
    assert sorted(events) == ["msg_before", "msg_outage"]
    assert events["msg_outage"]["duplicate_deliveries"] == 0


async def test_exhausted_pool_is_503_after_the_acquire_timeout(db: Any, db_url: str) -> None:
    pool = await create_pool(db_url, min_size=1, max_size=1)
    settings = settings_for(db_acquire_timeout=0.2)
    body, headers = delivery("job_1", "msg_busy")
    try:
        async with running_receiver(pool, settings) as rx:
            held = await pool.acquire()
            try:
                loop = asyncio.get_running_loop()
                started = loop.time()
                refused = await rx.post(body, headers)
                waited = loop.time() - started
            finally:
                await pool.release(held)
            assert rx.metric("jobwarden_webhook_db_errors_total", {"kind": "pool_timeout"}) == 1
            retried = await rx.post(body, headers)
    finally:
        await pool.close()
    assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
    assert 0.2 <= waited < 2.0
    assert retried.json()["status"] == "stored"
    [event] = await stored_events(db)
    assert event["duplicate_deliveries"] == 0


async def test_receiver_role_has_exactly_the_grants_it_needs(db: Any, db_url: str) -> None:
    async def as_receiver(conn: Any) -> None:
        await conn.execute("SET ROLE jobwarden_receiver")

    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, "job_1", create_mode="async")
    pool = await create_pool(db_url, max_size=2, setup=as_receiver)
    try:
        async with running_receiver(pool) as rx:
            stored = await rx.post(*delivery("job_1", "msg_role"))
            duplicate = await rx.post(*delivery("job_1", "msg_role"))
            ready = await rx.client.get("/readyz")
    finally:
        await pool.close()
    assert stored.json() == {"status": "stored", "matched": True}
    assert duplicate.json() == {"status": "duplicate"}
    assert ready.status_code == 200
    assert len(await webhook_observations(db, op_id)) == 1
    assert await db.fetchval(
        "SELECT count(*) = 1 FROM operation_wakes WHERE operation_id = $1", op_id
    )
