"""The shared-timer call bound behaves as asyncio.timeout does, call for call."""

from __future__ import annotations

import asyncio

import pytest

from reconciler.call_bounds import Bound

NEVER = 3600.0  # a bound that must not fire during a test
FAILSAFE = 5.0  # how long a test waits for a short bound before calling it missed


async def _outlasts(seconds: float) -> None:
    async with Bound(seconds):
        await asyncio.Event().wait()  # never set: only the bound ends it


async def _ends_by_its_own_bound(seconds: float) -> None:
    """The body ends by its bound's TimeoutError, soon after the bound (a failsafe
    far beyond it fails the test rather than ending it the same way)."""
    body = asyncio.ensure_future(_outlasts(seconds))
    done, _ = await asyncio.wait([body], timeout=FAILSAFE)
    if not done:
        body.cancel()
        pytest.fail(f"a {seconds} s bound had not fired after {FAILSAFE} s")
    assert isinstance(body.exception(), TimeoutError)


async def test_a_body_that_outlasts_its_bound_raises_timeout_error() -> None:
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(TimeoutError):
        await _outlasts(0.05)
    assert loop.time() - began >= 0.05


async def test_a_body_within_its_bound_is_untouched_and_the_task_not_cancelled() -> None:
    async with Bound(NEVER):
        await asyncio.sleep(0)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # no cancel left pending for the next await


async def test_no_bound_is_no_bound() -> None:
    """None arms nothing: the body is never cancelled, however long it awaits."""
    async with Bound(None) as bound:
        await asyncio.sleep(0)
    assert bound.when == 0.0  # no deadline was ever set


async def test_an_earlier_bound_made_after_a_later_one_still_fires_first() -> None:
    """The one timer is armed for the later bound first: the earlier one re-arms it."""
    late = asyncio.ensure_future(_outlasts(NEVER))
    await asyncio.sleep(0)  # the later bound is registered and armed
    try:
        await _ends_by_its_own_bound(0.05)
        assert not late.done()
    finally:
        late.cancel()
        with pytest.raises(asyncio.CancelledError):
            await late


async def test_a_timer_armed_for_a_finished_call_goes_on_to_the_next_bound() -> None:
    """The call the timer was armed for returned long ago; one that outlasts its own
    later bound must still end when that bound passes."""
    async with Bound(0.02):
        pass  # returned at once: its bound stays armed, its entry is gone
    await _ends_by_its_own_bound(0.1)


async def test_many_calls_each_end_at_their_own_bound() -> None:
    bounds = [0.03, 0.01, 0.05, 0.02]
    loop = asyncio.get_running_loop()
    ended: dict[float, float] = {}

    async def one(seconds: float) -> None:
        began = loop.time()
        with pytest.raises(TimeoutError):
            await _outlasts(seconds)
        ended[seconds] = loop.time() - began

    await asyncio.gather(*(one(s) for s in bounds))
    assert all(ended[s] >= s for s in bounds)


async def test_a_cancel_from_elsewhere_stays_a_cancel() -> None:
    """Shutdown cancels a call in flight: that is not a timeout, and must not read as one."""
    task = asyncio.ensure_future(_outlasts(NEVER))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancel_from_elsewhere_after_the_bound_passed_stays_a_cancel() -> None:
    """Both at once (the bound's cancel and shutdown's): shutdown's wins, as with
    asyncio.timeout, so the caller does not go on as if a call merely timed out."""
    started = asyncio.Event()

    async def body() -> None:
        async with Bound(0.0):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(body())
    await started.wait()
    task.cancel()  # shutdown's cancel, beside the bound's (armed for now)
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_bound_outside_a_task_is_refused() -> None:
    async def enter() -> None:
        await Bound(1.0).__aenter__()

    coro = enter()
    with pytest.raises(RuntimeError):
        coro.send(None)  # no running loop, no task
    coro.close()
