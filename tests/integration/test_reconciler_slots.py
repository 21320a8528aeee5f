"""Provider slots, pool connections and leases: the waits a step may and may not do.

Steps that hold a pool connection queue for a provider slot (create, cancel,
result fetch). So a step holding a slot must never wait for a pool
connection, or the process deadlocks: that was seen in `make chaos` (16
creates holding every connection, queued for slots; 8 status reads holding
every slot, waiting for a connection to renew their lease).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from reconciler.step import MAX_SLOT_ROUNDS, Step
from shared.db.connect import create_pool
from shared.ledger import Operation
from shared.ledger.states import LocalState
from shared.providers import ConfigError, HttpRequest
from shared.serve import serve_app
from shared.settings import check_reconciler_settings, load_settings
from tests.harness import Rig, rig

ONE_SLOT = {"limits": {"max_concurrency": 1}}


async def claimed_observing_step(r: Rig) -> Step:
    """A step on an observing operation, claimed with a fresh lease."""
    op_id = await r.submit("never_finishes")
    await r.settle(op_id, {LocalState.OBSERVING})
    await r.pool.execute(
        "UPDATE operations SET next_poll_at = now() - interval '1 second' WHERE operation_id = $1",
        op_id,
    )
    [op] = await r.reconciler.claim(1)
    adapter = r.ctx.adapter(op.provider)
    assert adapter is not None
    return Step(r.ctx, op, adapter, op.lease_fence)


def status_request(step: Step) -> Any:
    op: Operation = step.op
    assert op.remote_job_id is not None
    return step.adapter.build_status(op.remote_job_id, op.status_url)


async def test_a_step_waiting_for_a_connection_holds_no_provider_slot(
    db_url: str, tmp_path: Path
) -> None:
    small = await create_pool(db_url, min_size=1, max_size=1)
    try:
        async with rig(small, tmp_path, overrides=ONE_SLOT, lease_seconds=3.0) as r:
            step = await claimed_observing_step(r)
            # 1.8 s left of a 3 s lease: less than the call's 1 s + 1 s margin.
            await asyncio.sleep(1.2)
            slot = r.ctx.semaphore("sim")
            held = await small.acquire()  # every pool connection is taken
            try:
                sending = asyncio.ensure_future(step.send(status_request(step)))
                await asyncio.sleep(0.3)
                assert not sending.done()  # it needs a connection to renew its lease...
                assert not slot.locked()  # ...and waits for it without holding the slot
            finally:
                await small.release(held)
            sent = await asyncio.wait_for(sending, 5)
            assert sent.response is not None and sent.response.status_code == 200
    finally:
        await small.close()


async def test_a_slot_wait_longer_than_the_lease_renews_before_sending(
    pool: Any, tmp_path: Path
) -> None:
    # Lease 2 s, request timeout 1 s: after a 1.3 s wait for the slot, 0.7 s of
    # lease is left, less than the call may take.
    async with rig(pool, tmp_path, overrides=ONE_SLOT, lease_seconds=2.0) as r:
        step = await claimed_observing_step(r)
        slot = r.ctx.semaphore("sim")
        await slot.acquire()  # another call holds the only slot
        sending = asyncio.ensure_future(step.send(status_request(step)))
        await asyncio.sleep(1.3)
        freed_at = datetime.now(UTC)
        slot.release()
        sent = await asyncio.wait_for(sending, 5)
        assert sent.response is not None and sent.response.status_code == 200
        expires = step.op.lease_expires_at
        assert expires is not None
        # Renewed after the slot came free, not only before queueing for it.
        assert expires > freed_at + timedelta(seconds=1.5)
        in_db = await pool.fetchval(
            "SELECT lease_expires_at FROM operations WHERE operation_id = $1",
            step.op.operation_id,
        )
        assert in_db == expires


def test_a_request_timeout_the_lease_cannot_cover_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text(
        '[providers.sim]\npreset = "simulator"\nbase_url = "http://127.0.0.1:9"\n'
        "[providers.sim.limits]\nrequest_timeout = 90\n",
        "utf-8",
    )
    settings = load_settings(config, env={})  # the receiver has no leases: fine for it
    with pytest.raises(ConfigError) as caught:
        check_reconciler_settings(settings)  # lease_seconds defaults to 60
    message = str(caught.value)
    assert str(config) in message
    assert "providers.sim.limits.request_timeout (90 s)" in message
    assert "lease_seconds (60 s" in message
    check_reconciler_settings(load_settings(config, env={"JW_LEASE_SECONDS": "120"}))


async def test_a_slot_wait_that_eats_the_margin_renews_before_sending(
    pool: Any, tmp_path: Path
) -> None:
    # Lease 4 s, timeout 1 s: a call needs 1 s plus a 1.5 s margin for its writes.
    # After a 2 s wait for the slot, 2 s are left: enough for the call alone,
    # not for writing its answer under the lease.
    async with rig(pool, tmp_path, overrides=ONE_SLOT, lease_seconds=4.0) as r:
        step = await claimed_observing_step(r)
        slot = r.ctx.semaphore("sim")
        await slot.acquire()
        sending = asyncio.ensure_future(step.send(status_request(step)))
        await asyncio.sleep(2.0)
        freed_at = datetime.now(UTC)
        slot.release()
        sent = await asyncio.wait_for(sending, 5)
        assert sent.response is not None
        assert step.op.lease_expires_at is not None
        assert step.op.lease_expires_at > freed_at + timedelta(seconds=3)


async def test_a_step_that_never_gets_a_slot_in_time_records_a_call_never_sent(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, overrides=ONE_SLOT, lease_seconds=2.0) as r:
        step = await claimed_observing_step(r)
        reads_before = sum((await r.stats())["status_calls_per_job"].values())
        slot = r.ctx.semaphore("sim")
        await slot.acquire()
        sending = asyncio.ensure_future(step.send(status_request(step)))
        for _ in range(MAX_SLOT_ROUNDS):
            await asyncio.sleep(0.6)  # 1.4 s of lease left: less than 1 s + 0.5 s margin
            slot.release()
            await slot.acquire()  # the step took it, found its lease short, gave it back
        sent = await asyncio.wait_for(sending, 5)
        slot.release()
        assert sent.response is None
        assert sent.error_category == "connect"  # never left: safe to make again
        assert sum((await r.stats())["status_calls_per_job"].values()) == reads_before


async def _trickle(_: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(15):  # 3 s in all, a chunk every 0.2 s
            await asyncio.sleep(0.2)
            yield b"y" * 100

    return StreamingResponse(body(), media_type="application/octet-stream")


async def test_a_download_longer_than_the_lease_keeps_the_lease(pool: Any, tmp_path: Path) -> None:
    async with (
        serve_app(Starlette(routes=[Route("/big", _trickle)])) as files,
        rig(pool, tmp_path, lease_seconds=2.0) as r,
    ):
        step = await claimed_observing_step(r)
        req = HttpRequest("result", "GET", f"{files}/big", {}, timeout=1.0)
        sent = await step.send(req)
        assert sent.response is not None and sent.response.body == b"y" * 1500
        held = await pool.fetchval(
            "SELECT lease_fence = $2 AND lease_expires_at > clock_timestamp()"
            " FROM operations WHERE operation_id = $1",
            step.op.operation_id,
            step.fence,
        )
        assert held  # 3 s of download under a 2 s lease: renewed while it ran
