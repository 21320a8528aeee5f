"""Retry-After parsing and poll scheduling (SPEC §4)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from shared.providers import next_poll_delay, parse_retry_after
from shared.providers.description import Limits
from shared.providers.timing import backoff_ceiling, retry_delay

NOW = datetime(2025, 1, 6, 12, 0, 0, tzinfo=UTC)
LIMITS = Limits(
    backoff_base=2.0, backoff_factor=2.0, backoff_cap=60.0, webhook_backstop_poll_seconds=300.0
)


def test_retry_after_seconds() -> None:
    assert parse_retry_after("120", NOW) == 120.0


def test_retry_after_http_date() -> None:
    assert parse_retry_after("Mon, 06 Jan 2025 12:01:30 GMT", NOW) == 90.0


def test_retry_after_date_in_the_past_is_zero() -> None:
    assert parse_retry_after("Mon, 06 Jan 2025 11:00:00 GMT", NOW) == 0.0


def test_retry_after_naive_now_is_taken_as_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert parse_retry_after("Mon, 06 Jan 2025 12:00:10 GMT", naive) == 10.0


@pytest.mark.parametrize(
    "value",
    [
        *(None, "", "soon", "-5", "nan", "Mon, 99 Foo 2025"),
        # parsedate_to_datetime raises OverflowError: a zone, a day out of range
        "Mon, 01 Jan 2027 00:00:00 +99999999999999999999",
        "Mon, 99999999999 Jan 2027 00:00:00 GMT",
    ],
)
def test_retry_after_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None


def test_retry_after_absurd_value_is_capped_to_a_day() -> None:
    far = (NOW + timedelta(days=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after(far, NOW) == 86400.0
    assert parse_retry_after("99999999", NOW) == 86400.0


def test_backoff_ceiling_doubles_then_caps() -> None:
    assert [backoff_ceiling(LIMITS, n) for n in range(7)] == [2, 4, 8, 16, 32, 60, 60]


def test_backoff_ceiling_survives_huge_attempts() -> None:
    assert backoff_ceiling(LIMITS, 100_000) == 60.0


def test_jittered_delay_stays_within_floor_and_ceiling() -> None:
    rng = random.Random(7)
    for attempt in range(12):
        for _ in range(200):
            delay = next_poll_delay(LIMITS, attempt, None, None, rng, webhooks_configured=False)
            ceiling = backoff_ceiling(LIMITS, attempt)
            # equal jitter: never below half the ceiling (full jitter doubled the reads),
            # and after two draws at the cap (attempts 5 and 6) within its top tenth
            lowest = ceiling * (0.9 if attempt >= 7 else 0.5)
            assert max(1.0, lowest) <= delay <= ceiling


def test_jitter_actually_spreads_delays() -> None:
    rng = random.Random(11)
    delays = {round(next_poll_delay(LIMITS, 4, None, None, rng, False), 3) for _ in range(50)}
    assert len(delays) > 40  # jitter: not lock-step
    assert max(delays) > 30 and min(delays) < 18  # over the upper half of the range


def test_at_the_cap_jitter_keeps_the_spread_without_reading_more_often() -> None:
    rng = random.Random(11)
    first = {round(next_poll_delay(LIMITS, 6, None, None, rng, False), 3) for _ in range(50)}
    assert min(first) < 35  # the first draws at the cap still spread widely
    later = {round(next_poll_delay(LIMITS, 9, None, None, rng, False), 3) for _ in range(50)}
    assert len(later) > 40  # still not lock-step
    assert min(later) >= 54 and max(later) > 59  # but about the cap's own rate


def test_operations_created_together_spread_over_most_of_a_minute() -> None:
    """1,000 operations polled from the same instant: where their tenth read falls."""
    rng = random.Random(3)
    tenth = sorted(
        sum(next_poll_delay(LIMITS, n, None, None, rng, False) for n in range(10))
        for _ in range(1000)
    )
    assert tenth[900] - tenth[100] > 30  # the middle 80 % over more than half a minute


def test_a_schedule_already_at_its_cap_still_starts_with_wide_draws() -> None:
    flat = Limits(backoff_base=60.0, backoff_factor=1.0, backoff_cap=60.0)
    rng = random.Random(5)
    first = [next_poll_delay(flat, 0, None, None, rng, False) for _ in range(200)]
    assert min(first) < 35  # not lock-step from the first read
    third = [next_poll_delay(flat, 2, None, None, rng, False) for _ in range(200)]
    assert min(third) >= 54


def test_seeded_rng_is_reproducible() -> None:
    first = [next_poll_delay(LIMITS, n, None, None, random.Random(3), False) for n in range(5)]
    again = [next_poll_delay(LIMITS, n, None, None, random.Random(3), False) for n in range(5)]
    assert first == again


def test_retry_after_wins_over_poll_after_and_backoff() -> None:
    rng = random.Random(1)
    assert next_poll_delay(LIMITS, 0, 45.0, 3.0, rng, False) == 45.0


def test_poll_after_wins_over_backoff() -> None:
    assert next_poll_delay(LIMITS, 9, None, 5.0, random.Random(1), False) == 5.0


def test_zero_hints_never_hammer() -> None:
    assert next_poll_delay(LIMITS, 0, 0.0, None, random.Random(1), False) == 1.0
    assert next_poll_delay(LIMITS, 0, None, 0.0, random.Random(1), False) == 1.0


def test_webhooks_make_polling_a_slow_backstop() -> None:
    assert next_poll_delay(LIMITS, 0, None, 2.0, random.Random(1), True) == 300.0
    # ...but a longer Retry-After is still honoured.
    assert next_poll_delay(LIMITS, 0, 900.0, None, random.Random(1), True) == 900.0


def test_a_retry_follows_the_backoff_whatever_the_webhooks_or_the_poll_interval() -> None:
    """A retry is not a status read: neither the backstop nor a fixed poll interval."""
    fixed = Limits(
        backoff_base=2.0,
        backoff_factor=2.0,
        backoff_cap=60.0,
        webhook_backstop_poll_seconds=300.0,
        default_poll_after_seconds=120.0,
    )
    for attempt in range(12):
        rng, same = random.Random(attempt), random.Random(attempt)
        delay = retry_delay(fixed, attempt, None, rng)
        assert fixed.backoff_base / 2 <= delay <= backoff_ceiling(fixed, attempt)
        # the same draw as a status read of a provider with neither
        assert delay == next_poll_delay(LIMITS, attempt, None, None, same, False)
    assert next_poll_delay(fixed, 0, None, None, random.Random(0), True) == 300.0


def test_a_retry_honours_retry_after_capped_to_a_day_and_floored() -> None:
    rng = random.Random(1)
    assert retry_delay(LIMITS, 0, 90.0, rng) == 90.0
    assert retry_delay(LIMITS, 0, 0.0, rng) == LIMITS.backoff_base / 2
    assert retry_delay(LIMITS, 0, 10**9, rng) == 86400.0
