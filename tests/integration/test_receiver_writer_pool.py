"""The group-commit writers' own connections: planned once, and never queued behind the API."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Generator
from typing import Any

import asyncpg
import pytest

from receiver.webhooks import ingest
from receiver.webhooks.ingest import Event, Ingestor
from shared.db.connect import create_pool, with_database
from shared.db.queries import q
from tests.integration.test_receiver_support import (
    PROVIDER,
    delivery,
    running_receiver,
    settings_for,
    stored_events,
)
from tests.support import submit

# One-event batches, one after another: a quiet receiver's usual traffic.
BATCHES = 12


def _event(index: int) -> Event:
    return Event(
        provider="sim",
        event_id=f"evt_{index}",
        scheme="standard_webhooks",
        id_signed=True,
        remote_job_id=f"job_{index}",
        operation_ref=None,
        remote_state="running",
        remote_state_raw="running",
        payload='{"state": "running"}',
    )


async def _store_plans(pool: Any) -> tuple[int, int]:
    """(generic, custom) plans of the batch statement on the pool's one connection."""
    async with pool.acquire() as conn:
        if await conn.fetchval("SELECT current_setting('server_version_num')::int") < 140000:
            pytest.skip("pg_prepared_statements counts plans from PostgreSQL 14 on")
    ingestor = Ingestor(pool, acquire_timeout=5.0, writers=1)
    ingestor.start()
    try:
        for index in range(BATCHES):
            outcome = await ingestor.submit(_event(index))
            assert outcome.status == "stored"
    finally:
        await ingestor.close()
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
            q("receiver_store_events"),
        )
    assert row is not None, "the batch statement was not prepared on the writer's connection"
    return row["generic_plans"], row["custom_plans"]


async def test_the_writers_plan_the_batch_statement_once(db_url: str) -> None:
    writers = await ingest.create_writer_pool(db_url, writers=1)
    try:
        assert await _store_plans(writers) == (BATCHES, 0)
    finally:
        await writers.close()


async def test_a_plain_connection_would_plan_every_small_batch_afresh(db_url: str) -> None:
    """Why the writers have their own setting: PostgreSQL's choice on its own."""
    plain = await create_pool(db_url, min_size=0, max_size=1)
    try:
        generic, custom = await _store_plans(plain)
    finally:
        await plain.close()
    assert custom > 0, (generic, custom)


async def test_deliveries_are_stored_while_the_api_holds_every_shared_connection(
    db: Any, db_url: str
) -> None:
    shared = await create_pool(db_url, min_size=0, max_size=2)
    writers = await ingest.create_writer_pool(db_url)
    held = [await shared.acquire() for _ in range(2)]  # e.g. slow console queries
    try:
        async with running_receiver(shared, writer_pool=writers) as rx:
            answers = await asyncio.gather(
                *(rx.post(*delivery("job_1", f"msg_{i}")) for i in range(5))
            )
    finally:
        for conn in held:
            await shared.release(conn)
        await shared.close()
        await writers.close()
    assert [r.status_code for r in answers] == [200] * 5
    assert len(await stored_events(db)) == 5


async def _operations_index_scans(conn: Any) -> list[str]:
    """How the writers' one plan of the batch statement reads `operations`."""
    await conn.execute(f"PREPARE jw_store_plan AS {q('receiver_store_events')}")
    try:
        nulls = ", ".join(["NULL"] * 11)
        [[plan]] = await conn.fetch(f"EXPLAIN (FORMAT JSON) EXECUTE jw_store_plan({nulls})")
    finally:
        await conn.execute("DEALLOCATE jw_store_plan")
    scans: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "operations":
            scans.append(node.get("Index Name") or node["Node Type"])
        for child in node.get("Plans", []):
            walk(child)

    walk((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"])
    return sorted(scans)


# One probe per reference, each on its own index: never a provider's operations walked.
PROBES = ["operations_client_reference", "operations_one_per_job", "operations_pkey"]


async def test_a_plan_made_on_an_empty_table_probes_each_reference_by_its_index(
    db: Any, db_url: str
) -> None:
    writers = await ingest.create_writer_pool(db_url, writers=1)
    try:
        async with writers.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM operations") == 0
            assert await _operations_index_scans(conn) == PROBES
            for index in range(300):
                await submit(db, ref=f"ref_{index}")
            await db.execute("ANALYZE operations")
            assert await _operations_index_scans(conn) == PROBES
    finally:
        await writers.close()


async def test_readiness_probes_the_writers_own_connections(db_url: str) -> None:
    shared = await create_pool(db_url, min_size=0, max_size=2)
    nowhere = await ingest.create_writer_pool(with_database(db_url, "jw_no_such_database"))
    try:
        async with running_receiver(shared, writer_pool=nowhere) as rx:
            ready = await rx.client.get("/readyz")
    finally:
        await shared.close()
        await nowhere.close()
    assert ready.status_code == 503
    assert ready.json() == {"status": "not_ready", "reason": "database_unreachable"}


class _AnnouncingPool:
    """A writers' pool that says when it has handed out its connection."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self.handed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def acquire(self, *, timeout: float | None = None) -> _Announced:
        return _Announced(self._pool.acquire(timeout=timeout), self.handed)


class _Announced:
    """asyncpg's acquire (awaited, or as a context manager), then the event set:
    set before the writer resumes, so it counts itself as writing before
    anything else can run."""

    def __init__(self, acquiring: Any, handed: asyncio.Event) -> None:
        self._acquiring = acquiring
        self._handed = handed

    def __await__(self) -> Generator[Any, None, Any]:
        conn = yield from self._acquiring.__await__()
        self._handed.set()
        return conn

    async def __aenter__(self) -> Any:
        conn = await self._acquiring.__aenter__()
        self._handed.set()
        return conn

    async def __aexit__(self, *exc: object) -> None:
        await self._acquiring.__aexit__(*exc)


async def test_a_writer_at_work_is_not_probed_so_a_busy_receiver_stays_ready(
    db: Any, db_url: str
) -> None:
    """The writer holds its one connection through a batch; readiness must not
    queue behind it (it would time out and report a working receiver unready)."""
    shared = await create_pool(db_url, min_size=0, max_size=2)
    writers = _AnnouncingPool(await ingest.create_writer_pool(db_url, writers=1))
    settings = settings_for(db_acquire_timeout=0.5)
    held = db.transaction()
    await held.start()
    try:
        # the same event, uncommitted: the writer's insert waits on its key, so
        # its batch stays in flight until this transaction ends
        await db.execute(
            "INSERT INTO webhook_events (provider, event_id, signature_scheme,"
            " id_signed, payload) VALUES ($1, 'msg_held', 'standard_webhooks', true, '{}')",
            PROVIDER,
        )
        async with running_receiver(shared, settings, writer_pool=writers) as rx:
            stored = asyncio.create_task(rx.post(*delivery("job_1", "msg_held")))
            await writers.handed.wait()
            assert rx.app.state.ingestor.writing
            ready = await rx.client.get("/readyz")
            await held.rollback()  # lets the batch through
            answer = await stored
    finally:
        with contextlib.suppress(asyncpg.InterfaceError):  # rolled back already
            await held.rollback()
        await shared.close()
        await writers.close()
    assert ready.status_code == 200, ready.text
    assert answer.json()["status"] == "stored"
