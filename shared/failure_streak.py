"""A failure that repeats on every tick, logged when it starts, now and then, and when it ends.

A daemon retries on a short tick (a sweep every 0.5 s, a webhook batch per
delivery): with the database down, a line per failure was 7,200 error lines
an hour from the reconciler and one per delivery from the receiver, burying
whatever else was said. The first failure is logged whole; while it lasts, a
reminder with the count every REMIND_SECONDS; the first success says how
many failed. Called from one event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

# While a failure lasts, one reminder line this often.
REMIND_SECONDS = 60.0


class FailureStreak:
    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        level: int = logging.ERROR,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._message = message
        self._level = level
        self._clock = clock
        self.failures = 0
        self._reminded_at = 0.0

    def failed(self, exc: BaseException | None = None, ctx: dict[str, Any] | None = None) -> None:
        """One more failure: logged if it starts a streak or a reminder is due."""
        self.failures += 1
        now = self._clock()
        if self.failures == 1:
            self._reminded_at = now
            self._logger.log(self._level, self._message, exc_info=exc, extra={"ctx": ctx or {}})
        elif now - self._reminded_at >= REMIND_SECONDS:
            self._reminded_at = now
            self._logger.log(
                self._level,
                "%s (still failing: %d times in a row)",
                self._message,
                self.failures,
                exc_info=exc,
                extra={"ctx": {**(ctx or {}), "failures": self.failures}},
            )

    def succeeded(self) -> None:
        """A success: a streak that was failing ends with one line."""
        if self.failures:
            self._logger.info(
                "%s: recovered after %d failures in a row",
                self._message,
                self.failures,
                extra={"ctx": {"failures": self.failures}},
            )
            self.failures = 0
