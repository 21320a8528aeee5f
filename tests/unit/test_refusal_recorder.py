"""The refusal tally's bookkeeping (pure logic): a failed flush loses and doubles nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from receiver.webhooks import refusals
from receiver.webhooks.refusals import RefusalRecorder

DAY = 86_400.0


class FlakyPool:
    """Refuses the first `failures` acquisitions; then hands out a connection recording calls.

    `stall`: the statement never returns (until cancelled); `release_fails`:
    handing the connection back raises after the statements ran; `refuse`: the
    statement raises this database error.
    """

    def __init__(
        self,
        failures: int,
        *,
        stall: bool = False,
        release_fails: bool = False,
        refuse: Exception | None = None,
    ) -> None:
        self.failures = failures
        self.stall = stall
        self.release_fails = release_fails
        self.refuse = refuse
        self.executed: list[tuple[str, tuple[Any, ...]]] = []

    @contextlib.asynccontextmanager
    async def acquire(self, timeout: float) -> AsyncIterator[FlakyPool]:
        if self.failures:
            self.failures -= 1
            raise OSError("connection refused")
        yield self
        if self.release_fails:
            raise OSError("connection reset while releasing")

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        yield

    async def execute(self, query: str, *args: Any) -> None:
        if self.stall:
            await asyncio.Event().wait()
        if self.refuse is not None:
            raise self.refuse
        self.executed.append((query, args))


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


async def test_a_failed_flush_keeps_the_tally_for_the_next_one() -> None:
    pool, clock = FlakyPool(failures=1), Clock(10 * DAY + 5)
    recorder = RefusalRecorder(pool, acquire_timeout=1.0, now=clock)
    recorder.note("sim", "bad_signature", 401)
    recorder.note("sim", "bad_signature", 401)
    assert await recorder.flush() is False
    assert recorder.pending == 2
    clock.at += DAY  # the next refusal falls on the next UTC day
    recorder.note("sim", "bad_signature", 401)
    assert await recorder.flush() is True
    assert recorder.pending == 0
    (_, count_args), (_, latest_args) = pool.executed
    days, counts = count_args[2], count_args[3]
    assert [d.isoformat() for d in days] == ["1970-01-11", "1970-01-12"]
    assert counts == [2, 1]
    assert len(latest_args[0]) == 3  # the ring kept the refusals of the failed flush too
    assert await recorder.flush() is True and len(pool.executed) == 2  # nothing left to add


async def test_the_ring_keeps_only_the_newest_refusals() -> None:
    pool = FlakyPool(failures=0)
    recorder = RefusalRecorder(pool, acquire_timeout=1.0, now=Clock(0.0))
    for _ in range(refusals.LATEST_PER_FLUSH + 7):
        recorder.note("unknown", "unknown_provider", 404)
    await recorder.flush()
    (_, count_args), (_, latest_args) = pool.executed
    assert count_args[3] == [refusals.LATEST_PER_FLUSH + 7]
    assert len(latest_args[0]) == refusals.LATEST_PER_FLUSH


async def test_a_flush_cancelled_mid_way_keeps_the_tally() -> None:
    recorder = RefusalRecorder(FlakyPool(0, stall=True), acquire_timeout=1.0, now=Clock(0.0))
    recorder.note("sim", "bad_signature", 401)
    flushing = asyncio.ensure_future(recorder.flush())
    await asyncio.sleep(0)  # let it reach the stalled statement
    await asyncio.sleep(0)
    flushing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await flushing
    assert recorder.pending == 1


async def test_a_committed_flush_is_not_added_again_when_release_fails() -> None:
    pool = FlakyPool(0, release_fails=True)
    recorder = RefusalRecorder(pool, acquire_timeout=1.0, now=Clock(0.0))
    recorder.note("sim", "bad_signature", 401)
    assert await recorder.flush() is True
    assert recorder.pending == 0 and len(pool.executed) == 2


async def test_content_the_database_refuses_is_dropped_not_retried_forever() -> None:
    pool = FlakyPool(0, refuse=asyncpg.CheckViolationError("provider too long"))
    recorder = RefusalRecorder(pool, acquire_timeout=1.0, now=Clock(0.0))
    recorder.note("x" * 80, "bad_signature", 401)
    assert await recorder.flush() is False
    assert recorder.pending == 0
