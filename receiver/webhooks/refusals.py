"""Refused deliveries, tallied in memory and added to the database in batches.

A refusal stores no event, yet operators want every process's refusals in one
place (the console's webhooks page), and kept across restarts: Prometheus
counters are per process and start again at zero. Writing a row per refused
request would hand anyone who can reach the port a way to make the database
write as fast as they can send; so `note` only bumps an in-memory tally (a
dict keyed by provider label, reason and UTC day: bounded by construction)
and keeps the last few refusals in a ring, and `flush` adds both in one
small transaction every FLUSH_SECONDS, when the console's page asks, and at
shutdown.

A flush the database refuses (down, pool exhausted) puts the tally back for
the next one: refusals counted while the database is unreachable (503
`database_unavailable`) arrive once it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import asyncpg

from shared.ledger import webhooks

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 5.0
# Refusals a flush adds to `webhook_refusals_latest` at most (the newest).
LATEST_PER_FLUSH = 20
# Newest refusals the table keeps (each flush trims older ones).
KEEP_LATEST = 200
CLOSE_TIMEOUT_SECONDS = 5.0
SECONDS_PER_DAY = 86_400

# (provider label, reason, UTC day number) -> [refusals, newest unix time]
_Tally = dict[tuple[str, str, int], list[float]]
# (provider label, reason, HTTP status, unix time) of one refusal
_Noted = tuple[str, str, int, float]


class RefusalRecorder:
    """Counts refusals on the hot path (a dict update); adds them to the database off it."""

    def __init__(
        self,
        pool: Any,
        *,
        acquire_timeout: float,
        now: Callable[[], float],
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout
        self._now = now
        self._flush_seconds = flush_seconds
        self._tally: _Tally = {}
        self._latest: deque[_Noted] = deque(maxlen=LATEST_PER_FLUSH)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    @property
    def pending(self) -> int:
        """Refusals counted and not yet added to the database."""
        return _total(self._tally)

    def note(self, provider: str, reason: str, status: int) -> None:
        """One refused delivery; `provider` is a bounded label, never the raw path."""
        at = self._now()
        key = (provider, reason, int(at // SECONDS_PER_DAY))
        entry = self._tally.get(key)
        if entry is None:
            self._tally[key] = [1, at]
        else:
            entry[0] += 1
            entry[1] = max(entry[1], at)
        self._latest.append((provider, reason, status, at))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="refusal-recorder")

    async def close(self) -> None:
        """Stop the periodic flush and add what is left (bounded by CLOSE_TIMEOUT_SECONDS)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), CLOSE_TIMEOUT_SECONDS)
        if self._tally:
            logger.warning(
                "refused webhook deliveries not added to the database at shutdown",
                extra={"ctx": {"refusals": self.pending}},
            )

    async def flush(self) -> bool:
        """Add the tally and the newest refusals; False (tally kept) if the database failed.

        The tally is put back unless the database committed it: after a
        failure, and after a cancellation (shutdown, a page that went away)
        mid-flush. Once committed it is never put back, even if releasing the
        connection then fails, so nothing is counted twice.
        """
        async with self._lock:
            if not self._tally:
                return True
            tally, latest = self._tally, list(self._latest)
            self._tally = {}
            self._latest.clear()
            committed = False
            try:
                async with self._pool.acquire(timeout=self._acquire_timeout) as conn:
                    await webhooks.record_refusals(
                        conn, _counts(tally), [_refusal(r) for r in latest], keep=KEEP_LATEST
                    )
                    committed = True
            except (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError) as exc:
                # The database refuses this content and always will: keeping it
                # would block every later flush. Dropped, and said.
                logger.error(
                    "refused webhook deliveries the database would not store were dropped",
                    extra={"ctx": {"error": type(exc).__name__, "refusals": _total(tally)}},
                )
                return False
            except BaseException as exc:
                if not committed:
                    self._put_back(tally, latest)
                if not isinstance(exc, Exception):
                    raise  # cancelled: the tally is back for close() to report
                if not committed and not self._failing:
                    logger.warning(
                        "could not add refused webhook deliveries to the database; will retry",
                        extra={"ctx": {"error": type(exc).__name__, "refusals": self.pending}},
                    )
                self._failing = not committed
                return committed
            self._failing = False
            return True

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._flush_seconds)
            await self.flush()

    def _put_back(self, tally: _Tally, latest: list[_Noted]) -> None:
        for key, (count, at) in tally.items():
            entry = self._tally.setdefault(key, [0, at])
            entry[0] += count
            entry[1] = max(entry[1], at)
        newer = list(self._latest)
        self._latest.clear()
        self._latest.extend([*latest, *newer])  # the ring keeps the newest


def _total(tally: _Tally) -> int:
    return int(sum(entry[0] for entry in tally.values()))


def _when(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def _counts(tally: _Tally) -> list[webhooks.RefusalCount]:
    return [
        webhooks.RefusalCount(
            provider, reason, date.fromordinal(_EPOCH_ORDINAL + day), int(count), _when(at)
        )
        for (provider, reason, day), (count, at) in sorted(tally.items())
    ]


def _refusal(noted: _Noted) -> webhooks.Refusal:
    provider, reason, status, at = noted
    return webhooks.Refusal(provider, reason, status, _when(at))


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
