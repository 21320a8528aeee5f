"""The one clock of a process, injectable so tests move time instead of sleeping.

Every component that compares times (deadlines, leases, back-pressure) asks a
`Clock`, never `datetime.now()` or `time.monotonic()` directly. The database
side of the same clock is `jw_now()` (migration 008): a test that shifts time
shifts both, with the harness in bench/harness.py, so Python and SQL always
agree about "now".
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall-clock time (UTC, aware): for comparing with times stored in the database."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: for measuring this process's own waits."""
        ...

    def time(self) -> float:
        """Epoch seconds of `now()` (what the simulated provider stamps its answers with)."""
        ...


class SystemClock:
    """The real clock: what every daemon uses."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


class ShiftedClock:
    """The real clock plus an offset that only grows: a test's way of letting time pass.

    Both readings move together, so a lease measured on `monotonic()` lapses
    exactly when the database (whose `jw_now()` the harness shifts by the same
    offset) says it does.
    """

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset)

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def time(self) -> float:
        return time.time() + self.offset

    def shift(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        self.offset += seconds


SYSTEM_CLOCK: Clock = SystemClock()
