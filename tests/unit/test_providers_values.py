"""Lenient reading of provider numbers: exact integers of any size, never an exception."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.providers.paths import parse_path
from shared.providers.values import (
    as_code,
    as_datetime,
    as_float,
    as_int,
    as_seconds,
    error_info,
)


def test_an_integer_past_what_a_double_holds_stays_exact() -> None:
    # JSON integers have no size limit; a count read through a double lost its last digit.
    assert as_int(2**53 + 1) == 2**53 + 1
    assert as_int(2**63 - 1) == 2**63 - 1
    assert as_int(str(2**63 - 1)) == 2**63 - 1


def test_an_integer_too_large_for_a_double_is_no_float_and_no_crash() -> None:
    # float(10**400) raises OverflowError: it escaped parse_status before.
    assert as_float(10**400) is None
    assert as_int(10**400) == 10**400


@pytest.mark.parametrize(
    ("value", "expected"),
    [(12, 12), (12.0, 12), ("12", 12), (" 12 ", 12), ("12.0", 12), ("1e3", 1000), ("5s", 5)],
)
def test_integral_values_in_any_spelling_read_as_integers(value: Any, expected: int) -> None:
    assert as_int(value) == expected


@pytest.mark.parametrize("value", [True, None, 1.5, "1.5", "x", "", "nan", float("inf"), [], {}])
def test_what_is_not_an_integer_reads_as_none(value: Any) -> None:
    assert as_int(value) is None


@pytest.mark.parametrize(
    "text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01T00:30:00+00:45"]
)
def test_an_instant_outside_years_1_to_9999_in_utc_is_no_timestamp(text: str) -> None:
    # PostgreSQL would store it as a BC or year-10000 instant asyncpg cannot read back
    assert as_datetime(text) is None


def test_timestamps_come_back_in_utc() -> None:
    parsed = as_datetime("2026-12-02T09:00:00+01:00")
    assert parsed is not None and parsed.utcoffset() == timedelta(0) and parsed.hour == 8


def test_a_poll_hint_reads_iso_8601_durations() -> None:
    assert as_seconds("PT30S") == 30.0 and as_seconds("P1DT2H") == 93_600.0
    assert as_seconds("pt1m30s") == 90.0 and as_seconds("30s") == 30.0 and as_seconds(45) == 45.0
    assert as_seconds("P") is None and as_seconds("PT") is None and as_seconds("P1Y") is None
    assert as_seconds("soon") is None and as_seconds(None) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.0, "1"), (-3.0, "-3"), (-0.0, "0"), (1, "1"), ("1.0", "1.0"), (1.5, "1.5"), (None, None)],
)
def test_a_code_sent_as_an_integral_float_is_its_integers_text(value: Any, expected: str) -> None:
    assert as_code(value) == expected


def test_a_float_past_what_a_double_holds_exactly_is_no_integer_code() -> None:
    assert as_code(float(2**53)) == str(float(2**53))
    assert as_code(float("inf")) == "inf"


def test_an_error_code_sent_as_an_integral_float_is_its_integer() -> None:
    """As a state code is (as_code): a 409's code 1.0 matches a configured "1"."""
    error = error_info(
        {"error": {"code": 1.0, "message": "busy"}}, parse_path("/error"), None, None
    )
    assert error is not None and (error.code, error.message) == ("1", "busy")
    kept = error_info({"code": 1.5}, None, parse_path("/code"), None)
    assert kept is not None and kept.code == "1.5"
