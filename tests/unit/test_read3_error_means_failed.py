"""Second reading of c45bb52 (`status.error_means_failed`): an error beside a
success is a failure, but not where the counts say items succeeded: a batch read
as partially succeeded by its counts, with its error saying some items failed
(OpenAI's and Anthropic's batches carry one), was turned failed, and the
results of the items that succeeded were never collected."""

from __future__ import annotations

from typing import Any

import pytest

from shared.ledger.states import RemoteState
from tests.unit.test_error_means_failed_and_file_urls import FAL, load, read

BATCH = {
    "state_map": {"ended": "succeeded", "running": "running"},
    "error_message": "/error",
    "outcome_from_counts": True,
    "error_means_failed": True,
}


def test_a_partial_success_by_its_counts_is_not_turned_failed_by_its_error() -> None:
    desc = load(BATCH)
    body = {
        "status": "ended",
        "error": "2 of 10 requests failed",
        "counts": {"total": 10, "succeeded": 8, "failed": 2},
    }
    fact = read(desc, body)
    assert fact.remote_state is RemoteState.PARTIALLY_SUCCEEDED, fact
    assert fact.error is not None and fact.error.message == "2 of 10 requests failed"


def test_a_batch_whose_counts_say_all_succeeded_is_still_turned_by_its_error() -> None:
    """The counts announce every item done; the error says the job failed after all."""
    desc = load(BATCH)
    body = {"status": "ended", "error": "output lost", "counts": {"total": 3, "succeeded": 3}}
    assert read(desc, body).remote_state is RemoteState.FAILED


@pytest.mark.parametrize(
    "extra",
    [{"error": {}}, {"error": []}, {"error": False}, {"error_type": []}, {"error_type": ""}],
)
def test_an_empty_error_of_any_type_names_none(extra: dict[str, Any]) -> None:
    desc = load({**FAL, "error_means_failed": True})
    assert read(desc, {"status": "COMPLETED", **extra}).remote_state is RemoteState.SUCCEEDED
