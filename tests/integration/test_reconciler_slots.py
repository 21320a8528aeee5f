"""Provider slots, pool connections and leases: the waits a step may and may not do.

Steps that hold a pool connection queue for a provider slot (create, cancel,
result fetch). So a step holding a slot must never wait for a pool
connection, or the process deadlocks: that was seen in `make chaos` (16
creates holding every connection, queued for slots; 8 status reads holding
every slot, waiting for a connection to renew their lease).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from bench.harness import TestClock
from reconciler.lanes import Lanes
from reconciler.step import MAX_SLOT_ROUNDS, Step
from shared.db.connect import create_pool
from shared.db.queries import q
from shared.ledger import Operation
from shared.ledger.states import LocalState
from shared.providers import ConfigError, HttpRequest
from shared.serve import serve_app
from shared.settings import check_reconciler_settings, load_settings
from tests.harness import Rig, rig

ONE_SLOT = {"limits": {"max_concurrency": 1}}
# Event-loop turns a test waits for a coroutine to reach an expected wait
# (a slot, a connection): each turn lets every ready task run one step, so
# this bounds a wait on a signal, not a time.
LOOP_TURNS = 10_000
# The bound on a wait for an explicit signal (`Asked`): one that never comes.
GIVE_UP_AFTER_S = 30.0


async def until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the event loop until `condition()` holds (no sleeping, no timing)."""
    for _ in range(LOOP_TURNS):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never reached: {what}")


class Asked:
    """Set when a task other than the test asks `sem` for a turn: the explicit
    signal a test waits on before it moves the clock. A step that gave its slot
    back renews its lease (a database round trip) before it queues again; under
    a full suite's load that outlasted any count of loop turns."""

    def __init__(self, sem: asyncio.Semaphore) -> None:
        self.sem = sem
        self.event = asyncio.Event()
        test = asyncio.current_task()
        original = sem.acquire

        async def acquire() -> bool:
            if asyncio.current_task() is not test:
                self.event.set()
            return await original()

        sem.acquire = acquire  # type: ignore[method-assign]

    async def queued(self, what: str) -> None:
        """Wait until the step asked for a turn and is queued for it (the asking
        queues it before its first await)."""
        try:
            await asyncio.wait_for(self.event.wait(), GIVE_UP_AFTER_S)
        except TimeoutError:
            raise AssertionError(f"never reached: {what}") from None
        self.event.clear()
        await until(lambda: waiting_for(self.sem) == 1, what)


def waiting_for(slot: asyncio.Semaphore) -> int:
    """How many tasks are queued on `slot` (asyncio keeps its waiters in `_waiters`)."""
    return len(slot._waiters or ())


class RenewalSignal:
    """The rig's pool, setting `renewing` when a step asks it for a lease renewal."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self.renewing = asyncio.Event()
        self.renewed = 0  # renewals that went through
        self.changed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def fetchval(self, query: str, *args: Any) -> Any:
        if query != q("renew_lease"):
            return await self._pool.fetchval(query, *args)
        self.renewing.set()
        value = await self._pool.fetchval(query, *args)
        self.renewed += 1
        self.changed.set()
        return value

    async def wait_renewals(self, count: int) -> None:
        while self.renewed < count:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 10)


async def claimed_observing_step(r: Rig) -> Step:
    """A step on an observing operation, claimed with a fresh lease."""
    op_id = await r.submit("never_finishes")
    await r.settle(op_id, {LocalState.OBSERVING})
    await r.pool.execute(
        "UPDATE operations SET next_poll_at = jw_now() - interval '1 second'"
        " WHERE operation_id = $1",
        op_id,
    )
    [claimed] = await r.reconciler.claim(1)
    op = claimed.op
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
    clock = TestClock(small)
    signal = RenewalSignal(small)
    try:
        async with rig(small, tmp_path, overrides=ONE_SLOT, lease_seconds=3.0, clock=clock) as r:
            step = await claimed_observing_step(r)
            # 1.8 s left of a 3 s lease: less than the call's 1 s + 1 s margin.
            await clock.advance(1.2)
            slot = r.ctx.semaphore("sim")
            held = await small.acquire()  # every pool connection is taken
            try:
                sending = asyncio.ensure_future(step.send(status_request(step), signal))
                await asyncio.wait_for(signal.renewing.wait(), 5)  # it needs a connection...
                assert not sending.done()
                assert not slot.locked()  # ...and waits for it without holding the slot
            finally:
                await small.release(held)
            sent = await asyncio.wait_for(sending, 5)
            assert sent.response is not None and sent.response.status_code == 200
    finally:
        await small.close()


async def test_a_slot_wait_longer_than_the_lease_renews_before_sending(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    # Lease 2 s, request timeout 1 s: after a 1.3 s wait for the slot, 0.7 s of
    # lease is left, less than the call may take.
    async with rig(pool, tmp_path, overrides=ONE_SLOT, lease_seconds=2.0, clock=clock) as r:
        step = await claimed_observing_step(r)
        slot = r.ctx.semaphore("sim")
        await slot.acquire()  # another call holds the only slot
        sending = asyncio.ensure_future(step.send(status_request(step)))
        await until(lambda: waiting_for(slot) == 1, "the step queues for the slot")
        await clock.advance(1.3)
        freed_at = clock.now()
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


async def test_a_wait_for_the_process_wide_bound_renews_before_sending(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The slot comes free at once, but every call the process may make is in flight
    (max_in_flight, all providers): after that wait the lease is checked again."""
    async with rig(pool, tmp_path, lease_seconds=2.0, clock=clock) as r, Lanes(1) as lanes:
        r.ctx.lanes = lanes
        step = await claimed_observing_step(r)
        bound = lanes._in_flight
        async with lanes.lane("another provider"):  # the one call allowed, elsewhere
            sending = asyncio.ensure_future(step.send(status_request(step)))
            await until(lambda: waiting_for(bound) == 1, "the step waits for the bound")
            await clock.advance(1.3)  # 0.7 s of lease left: less than the call may take
            freed_at = clock.now()
        sent = await asyncio.wait_for(sending, 5)
        assert sent.response is not None and sent.response.status_code == 200
        expires = step.op.lease_expires_at
        assert expires is not None
        assert expires > freed_at + timedelta(seconds=1.5)  # renewed before it left


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
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    # Lease 4 s, timeout 1 s: a call needs 1 s plus a 1.5 s margin for its writes.
    # After a 2 s wait for the slot, 2 s are left: enough for the call alone,
    # not for writing its answer under the lease.
    async with rig(pool, tmp_path, overrides=ONE_SLOT, lease_seconds=4.0, clock=clock) as r:
        step = await claimed_observing_step(r)
        slot = r.ctx.semaphore("sim")
        await slot.acquire()
        sending = asyncio.ensure_future(step.send(status_request(step)))
        await until(lambda: waiting_for(slot) == 1, "the step queues for the slot")
        await clock.advance(2.0)
        freed_at = clock.now()
        slot.release()
        sent = await asyncio.wait_for(sending, 5)
        assert sent.response is not None
        assert step.op.lease_expires_at is not None
        assert step.op.lease_expires_at > freed_at + timedelta(seconds=3)


async def test_a_step_that_never_gets_a_slot_in_time_records_a_call_never_sent(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, overrides=ONE_SLOT, lease_seconds=2.0, clock=clock) as r:
        step = await claimed_observing_step(r)
        reads_before = sum((await r.stats())["status_calls_per_job"].values())
        slot = r.ctx.semaphore("sim")
        await slot.acquire()
        asked = Asked(slot)
        sending = asyncio.ensure_future(step.send(status_request(step)))
        for round_ in range(MAX_SLOT_ROUNDS):
            await asked.queued(f"the step queues (round {round_})")
            await clock.advance(0.6)  # 1.4 s of lease left: less than 1 s + 0.5 s margin
            slot.release()
            await slot.acquire()  # the step took it, found its lease short, gave it back
        sent = await asyncio.wait_for(sending, 5)
        slot.release()
        assert sent.response is None
        assert sent.error_category == "not_sent"  # never left: safe to make again
        assert sent.transport_failure == "connect"
        assert sum((await r.stats())["status_calls_per_job"].values()) == reads_before


class Trickle:
    """A slow download that ends only when the test says so.

    It keeps sending a small chunk every CHUNK_EVERY seconds (well inside the
    1 s read timeout, as a slow but live transfer does) until `finish` is set.
    """

    CHUNK_EVERY = 0.2  # the transfer's pace, not a wait of the test

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finish = asyncio.Event()
        self.sent = 0

    async def endpoint(self, _: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            self.started.set()
            while not self.finish.is_set():
                self.sent += 100
                yield b"y" * 100
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.finish.wait(), self.CHUNK_EVERY)

        return StreamingResponse(body(), media_type="application/octet-stream")


async def test_a_download_longer_than_the_lease_keeps_the_lease(pool: Any, tmp_path: Path) -> None:
    # Real time here: the download's own pace decides when the lease needs
    # renewing. The last chunk is held back until the lease was renewed twice
    # (about once per half lease), so the transfer outlives a whole lease.
    trickle = Trickle()
    signal = RenewalSignal(pool)
    async with (
        serve_app(Starlette(routes=[Route("/big", trickle.endpoint)])) as files,
        rig(pool, tmp_path, lease_seconds=2.0) as r,
    ):
        step = await claimed_observing_step(r)
        started = step.ctx.clock.monotonic()
        req = HttpRequest("result", "GET", f"{files}/big", {}, timeout=1.0)
        sending = asyncio.ensure_future(step.send(req, signal))
        await asyncio.wait_for(trickle.started.wait(), 5)
        await signal.wait_renewals(2)
        assert step.ctx.clock.monotonic() - started >= 1.9  # about a lease: renewed meanwhile
        trickle.finish.set()
        sent = await asyncio.wait_for(sending, 5)
        assert sent.response is not None and sent.response.body == b"y" * trickle.sent
        held = await pool.fetchval(
            "SELECT lease_fence = $2 AND lease_expires_at > jw_now()"
            " FROM operations WHERE operation_id = $1",
            step.op.operation_id,
            step.fence,
        )
        assert held
