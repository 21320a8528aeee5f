"""The benchmarks' "floor's handler + the receiver's write" stores what the receiver stores.

`bench.receiver` splits the receiver's distance from the floor into its
handler's part and its write's with a server that puts the floor's handler
in front of `floor.ReceiverWrite`. The split means something only if that
write is the receiver's: the same row, the same statement's matching and
wake-up. Each case posts a bench delivery to the real receiver (a real
socket) and hands the same body, under another id, to `ReceiverWrite`, then
compares the two rows column by column. The rows alone would not show a
writer batching or planning otherwise: its configuration is held to the
receiver's too.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bench import floor
from bench.receiver import (
    PROVIDER,
    bench_provider,
    bench_webhooks,
    event_body,
    signed_headers,
)
from receiver.app import build_app
from receiver.webhooks.ingest import create_writer_pool
from shared import ledger
from shared.ledger.leaves import KINDS
from shared.serve import serve_app
from shared.settings import Settings

NOW = 1_800_000_000
# Every column the evidence log keeps of an event, but those naming the row
# itself (its ids, its times); the operation it is attached to, as whether.
_OWN = {"webhook_event_id", "provider", "event_id", "received_at", "attached_at", "operation_id"}
COLUMNS = (
    *(column for column in KINDS["webhook"].columns if column not in _OWN),
    "operation_id IS NOT NULL AS attached",
)


async def _row(db: Any, event_id: str) -> dict[str, Any]:
    row = await db.fetchrow(
        f"SELECT {', '.join(COLUMNS)} FROM webhook_events WHERE provider = $1 AND event_id = $2",
        PROVIDER,
        event_id,
    )
    assert row is not None, f"{event_id} was not stored"
    return dict(row)


async def _operation(db: Any, job: str) -> str:
    """An operation holding `job`, recorded through the ledger as a real one is."""
    submitted = await ledger.submit_operation(
        db,
        provider=PROVIDER,
        kind="bench",
        request=ledger.RequestSpec("POST", "/v1/jobs", {}),
        requested_by="test",
    )
    await ledger.record_remote_job(db, submitted.operation_id, job, create_mode="async")
    return submitted.operation_id


async def _woken(db: Any, operation_id: str) -> bool:
    """Whether a wake-up is pending for the operation; it is cleared as it is read."""
    woken: bool = await db.fetchval(
        "DELETE FROM operation_wakes WHERE operation_id = $1 RETURNING true", operation_id
    )
    return bool(woken)


@pytest.mark.parametrize(
    ("state", "known"),
    [
        ("succeeded", False),
        ("running", False),
        ("succeeded", True),
        ("paused", False),  # in no state map: kept raw, no state
        ("queued", False),  # the preset's map names it "pending"
        ("cancelling", True),  # "running" by the map: no wake-up
        ("pending", False),  # a ledger state, yet not one of the simulator's words
    ],
)
async def test_the_floor_writes_what_the_receiver_writes(
    db_url: str, db: Any, pool: Any, state: str, known: bool
) -> None:
    job = f"job_{state}_{known}"
    operation_id = await _operation(db, job) if known else None
    if operation_id is not None:
        await _woken(db, operation_id)  # none pending before the deliveries
    body = event_body(job, state)
    app = build_app(Settings(providers={PROVIDER: bench_provider()}), pool, now=lambda: float(NOW))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.post(
            f"/webhooks/{PROVIDER}", content=body, headers=signed_headers("by-receiver", NOW, body)
        )
        assert answer.status_code == 200, answer.text
    woken_by_receiver = operation_id is not None and await _woken(db, operation_id)

    write = floor.ReceiverWrite(PROVIDER, bench_webhooks().state_map)
    await write.start(db_url)
    try:
        await write.store("by-floor", body)
        await write.store("by-floor", body)  # a redelivery: counted, not stored again
    finally:
        await write.stop()

    by_receiver, by_floor = await _row(db, "by-receiver"), await _row(db, "by-floor")
    assert by_floor["duplicate_deliveries"] == 1
    by_floor["duplicate_deliveries"] = 0
    assert by_floor == by_receiver
    assert by_floor["attached"] is known
    if operation_id is not None:  # each event woke the operation, or neither did
        assert await _woken(db, operation_id) == woken_by_receiver
        # news of a running job wakes none
        assert woken_by_receiver is (state not in ("running", "cancelling"))


async def test_the_floor_writes_as_the_receiver_is_configured(db_url: str, pool: Any) -> None:
    """The same rows are not the same work: the writers, their batches and their
    connections (a statement planned once) are the receiver's as `jobwarden receiver`
    makes them (`run_receiver`: its writer pool beside the shared one)."""
    writer_pool = await create_writer_pool(db_url)
    write = floor.ReceiverWrite(PROVIDER, bench_webhooks().state_map)
    try:
        app = build_app(
            Settings(providers={PROVIDER: bench_provider()}), pool, writer_pool=writer_pool
        )
        receiver = app.state.ingestor
        await write.start(db_url)
        ours = write._ingestor  # what the bench's server runs with
        assert ours.writers == receiver.writers
        assert ours._max_batch == receiver._max_batch
        assert ours._acquire_timeout == receiver._acquire_timeout
        assert write._pool.get_max_size() == writer_pool.get_max_size()
        async with write._pool.acquire() as conn, writer_pool.acquire() as theirs:
            mode = "SHOW plan_cache_mode"
            assert await conn.fetchval(mode) == await theirs.fetchval(mode)
    finally:
        await write.stop()
        await writer_pool.close()
