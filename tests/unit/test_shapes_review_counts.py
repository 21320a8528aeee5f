"""A result that cannot account for its status's counts is not valid, item_count or not.

A reviewer's Salesforce bulk query: 3 CSV rows of 6 (the next page behind
`Sforce-Locator`), `numberRecordsProcessed: 6`, no `expect.item_count`: the
result was stored as valid, its summary saying 6 total, 3 succeeded, 0 failed.
"""

from __future__ import annotations

import json

from shared.ledger.states import RemoteState
from shared.providers import Counts, HttpResponse, StatusFact, validate_result
from shared.providers.config import advisories, load_preset
from tests.unit.result_fixtures import ok, provider

CSV_3 = b"Id,Name\n1,a\n2,b\n3,c\n"


def status(
    total: int | None,
    succeeded: int | None = None,
    failed: int | None = None,
    cancelled: int | None = None,
    state: RemoteState = RemoteState.SUCCEEDED,
) -> StatusFact:
    return StatusFact(
        status_code=200,
        remote_state=state,
        counts=Counts(total=total, succeeded=succeeded, failed=failed, cancelled=cancelled),
    )


def jsonl(*items: object) -> HttpResponse:
    body = b"".join(json.dumps(i).encode() + b"\n" for i in items)
    return HttpResponse(200, {"Content-Type": "application/jsonl"}, body)


def test_csv_rows_short_of_the_status_total_are_not_valid() -> None:
    check = validate_result(provider(format="csv"), ok(CSV_3), status(6))
    assert not check.ok and not check.unavailable
    assert check.reason == (
        "the status reports 6 items, the result accounts for 3 (3 succeeded, 0 failed): "
        "the rest is missing (a truncated or paginated result?)"
    )


def test_csv_rows_matching_the_status_total_are_valid() -> None:
    check = validate_result(provider(format="csv"), ok(CSV_3), status(3))
    assert check.ok, check.reason


def test_fewer_successes_than_the_status_announces_are_not_valid() -> None:
    desc = provider(format="jsonl")
    check = validate_result(desc, jsonl({"n": 1}, {"n": 2}), status(6, succeeded=6))
    assert check.reason.startswith(
        "the status reports 6 successful items of 6, the result holds 2:"
    )


def test_failures_the_status_counts_elsewhere_account_for_the_rest() -> None:
    """Successes in the result, failures on an errors list (the simulator's shape)."""
    desc = provider(format="jsonl")
    assert validate_result(desc, jsonl({"n": 1}, {"n": 2}), status(5, failed=3)).ok
    assert validate_result(desc, jsonl({"n": 1}, {"n": 2}), status(5, succeeded=2)).ok


def test_failed_items_in_the_result_and_cancelled_ones_count_toward_the_total() -> None:
    desc = provider(format="jsonl", item_error="/error")
    items = jsonl({"n": 1}, {"n": 2, "error": "boom"})
    assert validate_result(desc, items, status(2)).ok
    assert validate_result(desc, items, status(3, cancelled=1)).ok
    assert "accounts for 3 (1 succeeded, 1 failed, 1 cancelled)" in (
        validate_result(desc, items, status(4, cancelled=1)).reason
    )


def test_the_partial_output_of_a_cancelled_job_is_exempt() -> None:
    cancelled = status(6, state=RemoteState.CANCELLED)
    assert validate_result(provider(format="csv"), ok(CSV_3), cancelled).ok


def test_results_without_countable_items_are_not_held_to_the_counts() -> None:
    doc = HttpResponse(200, {"Content-Type": "application/json"}, b'{"summary": "done"}')
    assert validate_result(provider(), doc, status(6)).ok
    assert validate_result(provider(format="csv"), ok(CSV_3), status(None)).ok
    assert validate_result(provider(format="csv"), ok(CSV_3), None).ok


def test_a_json_item_list_is_held_to_the_total() -> None:
    desc = provider(items="/rows")
    doc = HttpResponse(200, {}, b'{"rows": [1, 2]}')
    assert validate_result(desc, doc, status(2)).ok
    assert "accounts for 2" in validate_result(desc, doc, status(4)).reason


def test_providers_check_is_told_when_counts_are_read_without_item_count() -> None:
    (warning,) = advisories(provider(format="csv"))
    assert "result.expect.item_count is not set" in warning
    assert advisories(provider(format="csv", expect={"item_count": "from_status_counts"})) == []
    assert advisories(provider(format="text")) == []  # nothing to count
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "JW_SIM_API_KEY": "k"}
    for preset in ("openai_batch", "anthropic_batches", "simulator"):
        assert advisories(load_preset(preset, env=env)) == []
