"""Which answers hold every call back and which only advise when to read again."""

from __future__ import annotations

from reconciler.calls import back_pressure_wait, poll_hint
from shared.ledger.evidence import MAX_WAIT_SECONDS
from shared.providers.facts import StatusFact


def test_a_429s_retry_after_holds_every_call_back_and_is_no_poll_hint() -> None:
    fact = StatusFact(429, retry_after_seconds=30.0, back_pressure=True)
    assert back_pressure_wait(fact) == 30.0
    assert poll_hint(fact) is None


def test_a_200s_retry_after_is_a_polling_interval_not_back_pressure() -> None:
    # Azure-style long-running operations send Retry-After on every 200/202
    fact = StatusFact(200, retry_after_seconds=10.0)
    assert back_pressure_wait(fact) is None
    assert poll_hint(fact) == 10.0


def test_the_longer_of_two_hints_wins() -> None:
    fact = StatusFact(200, poll_after_seconds=5.0, retry_after_seconds=12.0)
    assert poll_hint(fact) == 12.0
    assert poll_hint(StatusFact(200, poll_after_seconds=7.0)) == 7.0
    assert poll_hint(StatusFact(200)) is None


def test_a_far_off_back_pressure_is_capped_and_a_nonsense_one_ignored() -> None:
    assert back_pressure_wait(StatusFact(503, retry_after_seconds=1e12, back_pressure=True)) == (
        MAX_WAIT_SECONDS
    )
    assert back_pressure_wait(StatusFact(503, retry_after_seconds=-4, back_pressure=True)) is None
    assert back_pressure_wait(StatusFact(503, back_pressure=True)) is None


def test_a_wait_before_the_first_read_is_kept_only_when_it_is_one() -> None:
    """The accepting answer's Retry-After becomes the job's poll hint: capped like
    every provider wait, and nothing at all when it asks for no wait."""
    from shared.ledger.evidence import bounded_wait

    assert bounded_wait(30.0) == 30.0
    assert bounded_wait(10.0 * MAX_WAIT_SECONDS) == MAX_WAIT_SECONDS
    for nothing in (None, 0.0, -5.0, float("nan"), float("-inf")):
        assert bounded_wait(nothing) is None
    assert bounded_wait(float("inf")) is None
