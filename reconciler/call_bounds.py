"""Whole-call time bounds that share one timer per event loop.

Every provider call is bounded as a whole (reconciler/calls.py): the lease
that fences it is sized against that bound. `asyncio.timeout` arms a timer
of its own per call and disarms it when the call returns (on uvloop, a
libuv timer made, started, stopped and freed for every status read). Calls
nearly always return long before their bound, and their bounds are all
about the same length from their start, so one timer set for the earliest
bound is enough: a bound that ends later than the armed
timer arms nothing. When the timer fires it cancels the calls whose bound
has passed and arms itself for the earliest one left; a call that returned
meanwhile is simply gone from the table. A bound is honoured to the
loop's timer resolution, as asyncio.timeout's is.

The cancellation is turned into TimeoutError exactly as asyncio.timeout
turns it (`Task.uncancel`): a cancel from elsewhere (shutdown) stays a
CancelledError.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from types import TracebackType


class _Timer:
    """The bounds of one event loop's calls in flight, and the one timer for them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._bounds: dict[int, Bound] = {}
        self._keys = itertools.count()
        self._armed_at: float | None = None
        self._handle: asyncio.TimerHandle | None = None

    def add(self, bound: Bound) -> int:
        key = next(self._keys)
        self._bounds[key] = bound
        if self._armed_at is None or bound.when < self._armed_at:
            self._arm(bound.when)
        return key

    def discard(self, key: int) -> None:
        self._bounds.pop(key, None)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = self._armed_at = None
        now = self._loop.time()
        earliest: float | None = None
        for key, bound in list(self._bounds.items()):
            if bound.when <= now:
                del self._bounds[key]
                bound.expire()
            elif earliest is None or bound.when < earliest:
                earliest = bound.when
        if earliest is not None:
            self._arm(earliest)


_timers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Timer] = weakref.WeakKeyDictionary()


def _timer(loop: asyncio.AbstractEventLoop) -> _Timer:
    timer = _timers.get(loop)
    if timer is None:
        timer = _timers[loop] = _Timer(loop)
    return timer


class Bound:
    """`async with Bound(seconds):` — TimeoutError if the body outlasts `seconds`
    (None: no bound), as `asyncio.timeout(seconds)` would raise it."""

    __slots__ = ("_cancelling", "_expired", "_key", "_seconds", "_task", "_timer", "when")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._expired = False
        self._key: int | None = None
        self._task: asyncio.Task[object] | None = None
        self._timer: _Timer | None = None
        self._cancelling = 0
        self.when = 0.0

    async def __aenter__(self) -> Bound:
        if self._seconds is None:
            return self
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a call bound must be used inside a task")
        loop = asyncio.get_running_loop()
        self._task = task
        self._cancelling = task.cancelling()
        self.when = loop.time() + self._seconds
        self._timer = _timer(loop)
        self._key = self._timer.add(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._timer is None or self._key is None or self._task is None:
            return
        self._timer.discard(self._key)
        if not self._expired:
            return
        # our cancel, not someone else's: the same test asyncio.timeout makes
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        """The bound has passed: cancel the call (its exit makes it a TimeoutError)."""
        if self._task is not None and not self._task.done():
            self._expired = True
            self._task.cancel()
