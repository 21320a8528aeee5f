"""The simulated provider's sense of time, injectable so tests move it instead of sleeping.

Every job fact that depends on time (state, progress, timestamps, Retry-After
dates, result TTL, cancel delay) reads one `Clock`. A test hands the simulator
a fake one and advances it: "the job finished" becomes a function call, not a
race against a sleep. Webhook redelivery pacing and the ticker keep real
`asyncio.sleep`s: they pace delivery, they are not facts about a job.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Two readings of now: one for intervals, one for what a wall clock shows."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; only differences mean anything."""
        ...

    def time(self) -> float:
        """Epoch seconds, for timestamps a client sees (updated_at, HTTP-dates)."""
        ...


class SystemClock:
    """The real clock: what the simulator uses unless a test injects another."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()
