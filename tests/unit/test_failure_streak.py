"""A failure repeating on every tick is logged as it starts, now and then, and as it ends."""

from __future__ import annotations

import logging

import pytest

from shared.failure_streak import FailureStreak


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_of_many_ticks_is_a_few_lines(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    streak = FailureStreak(logging.getLogger("jw.test"), "sweep failed", clock=clock)
    caplog.set_level(logging.INFO, "jw.test")
    for _ in range(240):  # two minutes of a sweep every 0.5 s, the database down
        streak.failed(ConnectionError("refused"))
        clock.now += 0.5
    streak.succeeded()
    streak.succeeded()
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "sweep failed",
        "sweep failed (still failing: 121 times in a row)",
        "sweep failed: recovered after 240 failures in a row",
    ]
    assert caplog.records[0].exc_info is not None  # the first failure is logged whole


def test_a_new_outage_after_a_recovery_is_logged_again(caplog: pytest.LogCaptureFixture) -> None:
    streak = FailureStreak(logging.getLogger("jw.test"), "batch not stored", logging.WARNING)
    caplog.set_level(logging.INFO, "jw.test")
    streak.failed()
    streak.succeeded()
    streak.failed()
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO", "WARNING"]
