"""Round 52 second read (reader): the collection's counts and its every-item-failed
verdict, as pure logic (reconciler.steps.collect._counts, _every_item_failed)."""

from __future__ import annotations

from reconciler.steps.collect import Collected, _counts, _every_item_failed
from shared.ledger.states import RemoteState
from shared.providers import ResultCheck, StatusFact
from shared.providers.facts import Counts


def _check(total: int | None, ok: int | None, failed: int | None) -> ResultCheck:
    return ResultCheck(
        ok=True,
        reason="valid",
        sha256="0" * 64,
        size=1,
        content_type="application/jsonl",
        items_total=total,
        items_succeeded=ok,
        items_failed=failed,
    )


def _status(counts: Counts | None) -> StatusFact:
    return StatusFact(200, RemoteState.SUCCEEDED, "ended", counts=counts)


def test_a_counted_cancellation_is_not_counted_twice_in_the_summed_total() -> None:
    """`counts_cancelled` is a subset of the not-ok items (description.py; the
    anthropic preset counts `canceled` in `counts_failed` too): with no total, the
    sum is succeeded + failed. 2 ok, 3 failed of which 1 cancelled is 5 items,
    not 6."""
    counts = Counts(total=None, succeeded=2, failed=3, cancelled=1)
    assert _counts(_check(5, 2, 3), _status(counts)) == (5, 2, 3)


def test_a_summed_total_never_falls_below_the_items_the_result_holds() -> None:
    """A status that counts 2 ok and 1 failed but leaves other items in neither
    (expired, never run) beside a result of 10 lines: the total is the result's 10,
    not 3 (the agent read 3 items, all accounted for, of a batch of 10)."""
    counts = Counts(total=None, succeeded=2, failed=1)
    assert _counts(_check(10, 2, 1), _status(counts))[0] == 10


def test_every_item_failed_needs_no_success_anywhere() -> None:
    """The status's 0 beside successes the result holds: no verdict; an opaque
    result (items_succeeded None) with the status's 0 succeeded and some failed:
    the verdict, as outcome_from_counts would give."""
    status = _status(Counts(total=None, succeeded=0, failed=2))
    holds = _check(3, 3, 0)
    assert _every_item_failed(Collected(holds, b"", "result", _counts(holds, status))) is None
    opaque = _check(None, None, None)
    verdict = _every_item_failed(Collected(opaque, b"", "result", _counts(opaque, status)))
    assert verdict is not None and "every item failed (2 of 2)" in verdict.message


def test_a_verdict_with_items_neither_failed_nor_succeeded_does_not_say_every_item_failed() -> None:
    """0 ok and 2 failed of 10 (the other 8 cancelled or expired): no item
    succeeded, so failed, but "every item failed (2 of 10)" said what is not so."""
    status = _status(Counts(total=10, succeeded=0, failed=2, cancelled=8))
    opaque = _check(None, None, None)
    verdict = _every_item_failed(Collected(opaque, b"", "result", _counts(opaque, status)))
    assert verdict is not None
    assert "every item failed" not in verdict.message, verdict.message
    assert "no item succeeded (2 of 10 failed)" in verdict.message, verdict.message


def test_successes_are_the_total_less_the_failed_when_only_those_are_counted() -> None:
    """Mailchimp's batch: total_operations 3 and errored_operations 1, its result an
    archive that counts nothing. Before, the summary said 3 items, 1 failed and
    succeeded null, though the status's counts (and outcome_from_counts) say 2."""
    counts = Counts(total=3, succeeded=None, failed=1)
    assert _counts(_check(None, None, None), _status(counts)) == (3, 2, 1)
    assert _counts(_check(3, 3, 0), _status(counts)) == (3, 3, 1)  # the result's own
