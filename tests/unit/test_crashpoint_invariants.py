"""The crash-point invariants must be able to fail: checked on fabricated records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.crashpoints import calls_inside_windows, calls_missing

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def call(
    n: int,
    at: float,
    window: float | None = None,
    error: str | None = None,
    finished: float | None = None,
) -> dict:
    return {
        "call_id": n,
        "started_at": T0 + timedelta(seconds=at),
        "finished_at": T0 + timedelta(seconds=at if finished is None else finished),
        "not_before": T0 + timedelta(seconds=window) if window is not None else None,
        "error_category": error,
    }


def test_a_call_inside_an_earlier_answers_window_is_named() -> None:
    calls = [call(1, 0, window=30), call(2, 10), call(3, 31)]
    assert calls_inside_windows(calls) == ["call #2 inside a back-pressure window"]


def test_a_call_that_never_left_is_no_violation() -> None:
    assert calls_inside_windows([call(1, 0, window=30), call(2, 5, error="not_sent")]) == []


def test_the_longest_window_so_far_counts() -> None:
    calls = [call(1, 0, window=60), call(2, 61, window=62), call(3, 61.5)]
    assert calls_inside_windows(calls) == ["call #3 inside a back-pressure window"]


def test_a_window_holds_from_when_it_was_imposed() -> None:
    # a read whose outcome was lost, recorded (with its hold) by a claim at 40
    calls = [call(1, 0, window=50, error="lost", finished=40), call(2, 20), call(3, 45)]
    assert calls_inside_windows(calls) == ["call #3 inside a back-pressure window"]


def test_a_request_the_provider_got_that_is_not_on_record_is_named() -> None:
    requests = [{"kind": "status"}, {"kind": "status"}, {"kind": "create"}]
    assert calls_missing({"status": 2, "create": 1}, requests) == []
    assert calls_missing({"status": 1, "create": 1}, requests) == [
        "2 status requests reached the provider, 1 on record"
    ]
