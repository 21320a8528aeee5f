"""Wake-ups for long-polls and event streams: one LISTEN, many waiters.

Every transition NOTIFYs `jobwarden_transition` ("<operation_id> <seq>
<to_state>", from the history trigger). A hub holds one pooled connection that
LISTENs on it while anyone waits, and wakes the waiters of that operation; the
waiters then re-read the database, which stays the only source of truth (a
notification is a hint to look, never a fact). Nobody polls the provider, and
an idle receiver holds no connection: the listener is returned to the pool
when the last waiter leaves, so shutting the pool down never hangs on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from shared.db import pooled

CHANNEL = "jobwarden_transition"
# Subscribing to this "operation id" rings on every transition (the operator
# console's live list); no operation id has this shape.
ANY_OPERATION = "*"
log = logging.getLogger(__name__)


class Subscription:
    """One waiter's doorbell for one operation."""

    def __init__(self, operation_id: str) -> None:
        self.operation_id = operation_id
        self._rung = asyncio.Event()

    def ring(self) -> None:
        self._rung.set()

    async def wait(self, seconds: float) -> bool:
        """Wait for a ring (True) or `seconds` to pass (False).

        A ring that came while the caller was reading the database is not
        lost: it is consumed here and the caller reads again at once.
        """
        if not self._rung.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(seconds, 0.0)):
                    await self._rung.wait()
        rung = self._rung.is_set()
        self._rung.clear()
        return rung


class TransitionHub:
    def __init__(self, pool: Any, *, acquire_timeout: float) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout
        self._subscribers: dict[str, set[Subscription]] = {}
        self._count = 0
        self._conn: Any = None
        self._lock = asyncio.Lock()
        # Strong references to listener shutdowns in flight (a task nobody
        # holds may be garbage-collected before it returns the connection).
        self._stopping: set[asyncio.Task[None]] = set()

    @property
    def waiters(self) -> int:
        """How many long-polls and streams are waiting (for metrics and tests)."""
        return self._count

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @contextlib.asynccontextmanager
    async def subscribe(self, operation_id: str) -> AsyncIterator[Subscription]:
        """Register before reading the state, so no transition can slip between."""
        sub = Subscription(operation_id)
        self._subscribers.setdefault(operation_id, set()).add(sub)
        self._count += 1
        try:
            await self.ensure_listening()
            yield sub
        finally:
            waiters = self._subscribers.get(operation_id)
            if waiters is not None:
                waiters.discard(sub)
                if not waiters:
                    del self._subscribers[operation_id]
            self._count -= 1
            if self._count == 0:
                # Shielded: a waiter cancelled by a client disconnect must still
                # give the connection back.
                task = asyncio.ensure_future(self._stop_if_idle())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)
                await asyncio.shield(task)

    async def ensure_listening(self) -> None:
        """Start (or restart, after a lost connection) the shared LISTEN."""
        if self.listening:
            return
        async with self._lock:
            if self.listening:
                return
            restarted = self._conn is not None
            if restarted:  # the connection was lost: hand it back, listen anew
                dead, self._conn = self._conn, None
                await self._release(dead)
            conn = await self._pool.acquire(timeout=self._acquire_timeout)
            try:
                await conn.add_listener(CHANNEL, self._on_notify)
                conn.add_termination_listener(self._on_terminated)
            except BaseException:
                await self._release(conn)
                raise
            self._conn = conn
            if restarted:
                # Transitions while nobody listened were not announced: ring
                # every waiter so each re-reads now.
                self._ring_all()

    async def _stop_if_idle(self) -> None:
        async with self._lock:
            if self._count > 0 or self._conn is None:
                return
            conn, self._conn = self._conn, None
            await self._release(conn)

    async def _release(self, conn: Any) -> None:
        try:
            if not conn.is_closed():
                await conn.remove_listener(CHANNEL, self._on_notify)
                conn.remove_termination_listener(self._on_terminated)
        except Exception:  # the pool's reset closes a broken connection anyway
            log.debug("could not UNLISTEN before release", exc_info=True)
        finally:
            await pooled.release(self._pool, conn)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        operation_id = payload.split(" ", 1)[0]
        for key in (operation_id, ANY_OPERATION):
            for sub in self._subscribers.get(key, ()):
                sub.ring()

    def _on_terminated(self, _conn: Any) -> None:
        log.warning("transition listener connection lost; waiters fall back to re-reading")
        self._ring_all()

    def _ring_all(self) -> None:
        for waiters in self._subscribers.values():
            for sub in waiters:
                sub.ring()


class TooManyWaits(Exception):
    """A caller already holds as many long-polls as it may."""


class WaitSlots:
    """How many long-polls each caller holds, with a cap per caller.

    A long-poll costs the server a task and one of uvicorn's MAX_CONCURRENCY
    slots for up to five minutes; without a cap per caller, one token could
    fill every slot and turn /healthz, webhooks and every other agent away.
    `until()` lets a test (or a shutdown) wait for a count on a signal, at
    each change, instead of polling it.
    """

    def __init__(self, per_caller: int) -> None:
        self._per_caller = per_caller
        self._held: dict[str, int] = {}
        self._watchers: list[tuple[Callable[[int], bool], asyncio.Event]] = []

    @property
    def running(self) -> int:
        return sum(self._held.values())

    @contextlib.contextmanager
    def hold(self, caller: str) -> Iterator[None]:
        """One of `caller`'s slots for the duration; TooManyWaits when it has none left.

        Synchronous on purpose: the release in `finally` cannot be skipped by
        a cancellation (a client that went away cancels its handler).
        """
        held = self._held.get(caller, 0)
        if held >= self._per_caller:
            raise TooManyWaits(caller)
        self._held[caller] = held + 1
        self._changed()
        try:
            yield
        finally:
            left = self._held[caller] - 1
            if left:
                self._held[caller] = left
            else:
                del self._held[caller]
            self._changed()

    def _changed(self) -> None:
        running = self.running
        for predicate, event in self._watchers:
            if predicate(running):
                event.set()

    async def until(self, predicate: Callable[[int], bool]) -> None:
        """Return once `predicate(running)` holds; checked at every change."""
        event = asyncio.Event()
        watcher = (predicate, event)
        self._watchers.append(watcher)
        try:
            if not predicate(self.running):
                await event.wait()
        finally:
            self._watchers.remove(watcher)
