"""`status.error_only_when_failed`: a status message every read carries (Apify's
`statusMessage`, Databricks' `state_message`) is the job's error only on a read
that says it failed or was cancelled; on any other read it is the job's news, not
an error kept as the operation's last one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import ConfigError, HttpResponse, StatusFact, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status
from tests.unit.result_fixtures import provider_table

APIFY = {
    "state": "/data/status",
    "state_map": {
        "RUNNING": "running",
        "SUCCEEDED": "succeeded",
        "FAILED": "failed",
        "ABORTED": "cancelled",
    },
    "error_message": "/data/statusMessage",
}


def load(status: dict[str, Any]) -> ProviderDescription:
    table = provider_table({"source": "url"}, status)
    return parse_providers(table, "t.toml", {})["p"]


def read(desc: ProviderDescription, state: str, message: str | None) -> StatusFact:
    body = {"data": {"status": state, "statusMessage": message}}
    return parse_status(desc, HttpResponse(200, {}, json.dumps(body).encode()))


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("RUNNING", "Crawling: 2 of 5 pages"),
        ("SUCCEEDED", "Finished! Total 5 requests: 5 succeeded, 0 failed."),
    ],
)
def test_a_message_beside_a_running_or_succeeded_state_is_no_error(
    state: str, message: str
) -> None:
    desc = load({**APIFY, "error_only_when_failed": True})
    fact = read(desc, state, message)
    assert fact.remote_state is not RemoteState.FAILED
    assert fact.error is None


@pytest.mark.parametrize("state", ["FAILED", "ABORTED"])
def test_a_message_beside_a_failed_or_cancelled_state_is_its_error(state: str) -> None:
    desc = load({**APIFY, "error_only_when_failed": True})
    fact = read(desc, state, "The Actor process failed")
    assert fact.error is not None and fact.error.message == "The Actor process failed"


def test_off_by_default_a_message_beside_a_success_is_kept() -> None:
    """As before: an error beside a success is a warning at some providers."""
    fact = read(load(APIFY), "SUCCEEDED", "a warning")
    assert fact.error is not None and fact.error.message == "a warning"


def test_it_needs_an_error_path_and_excludes_error_means_failed() -> None:
    with pytest.raises(ConfigError) as caught:
        unread = {k: v for k, v in APIFY.items() if k != "error_message"}
        load({**unread, "error_only_when_failed": True})
    assert "error_only_when_failed" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load({**APIFY, "error_only_when_failed": True, "error_means_failed": True})
    assert "error_means_failed" in str(caught.value)


def test_a_partial_success_keeps_its_message_as_its_error() -> None:
    """A read the provider says partly succeeded ended with failures: its message
    says which (a "3 of 10 items failed"), as a partial success's error does
    without the flag. Before, it was dropped as a success's summary, and the
    agent got part of a result with no word of why."""
    desc = load(
        {
            **APIFY,
            "state_map": {**APIFY["state_map"], "COMPLETED_WITH_ERRORS": "partially_succeeded"},
            "error_only_when_failed": True,
        }
    )
    fact = read(desc, "COMPLETED_WITH_ERRORS", "3 of 10 items failed")
    assert fact.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    assert fact.error is not None and fact.error.message == "3 of 10 items failed"


def _counted(state: str, message: str, succeeded: int, total: int) -> StatusFact:
    desc = load(
        {
            **APIFY,
            "error_only_when_failed": True,
            "outcome_from_counts": True,
            "counts_succeeded": "/data/ok",
            "counts_total": "/data/total",
        }
    )
    body = {"data": {"status": state, "statusMessage": message, "ok": succeeded, "total": total}}
    return parse_status(desc, HttpResponse(200, {}, json.dumps(body).encode()))


def test_a_success_its_counts_made_a_failure_is_told_by_the_counts() -> None:
    """The message beside a SUCCEEDED read is the success's summary: when the
    counts say no item succeeded, the failure's reason is what the counts say, not
    that summary. Before, "Finished! ..." was the failure's reason."""
    fact = _counted("SUCCEEDED", "Finished! Total 5 requests", 0, 5)
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.code == "no_item_succeeded"
    partial = _counted("SUCCEEDED", "Finished! Total 5 requests", 2, 5)
    assert partial.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    assert partial.error is None
    failed = _counted("FAILED", "The Actor process failed", 0, 5)
    assert failed.error is not None and failed.error.message == "The Actor process failed"
