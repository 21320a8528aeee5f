"""The group-commit writers' own connections: planned once, and never queued behind the API."""

from __future__ import annotations

import asyncio
from typing import Any

from receiver.webhooks import ingest
from receiver.webhooks.ingest import Event, Ingestor
from shared.db.connect import create_pool
from shared.db.queries import q
from tests.integration.test_receiver_support import delivery, running_receiver, stored_events

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
    assert custom == BATCHES and generic == 0


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
