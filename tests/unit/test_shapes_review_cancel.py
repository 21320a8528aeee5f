"""`cancel.body`: the JSON object a cancel carries (Salesforce aborts a job with
PATCH {"state": "Aborted"}; sent empty, the cancel was refused with 400)."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.requests import build_cancel


def described(cancel: dict[str, Any]) -> ProviderDescription:
    table = {
        "base_url": "https://example.my.salesforce.test/services/data/v60.0",
        "create": {"path": "/jobs/query", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/jobs/query/{job_id}",
            "state": "/state",
            "state_map": {"JobComplete": "succeeded"},
        },
        "cancel": {"method": "PATCH", "path": "/jobs/query/{job_id}", **cancel},
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"sf": table}}, "test.toml", {})["sf"]


def test_the_cancel_carries_its_body_with_the_job_id_filled_in() -> None:
    body = {"state": "Aborted", "meta": {"why": "job {job_id}", "n": [1, True, 2.5, "x"]}}
    req = build_cancel(described({"body": body}), "750R0000000zlh9")
    assert req.method == "PATCH"
    assert req.json == {
        "state": "Aborted",
        "meta": {"why": "job 750R0000000zlh9", "n": [1, True, 2.5, "x"]},
    }


def test_no_body_is_no_body() -> None:
    assert build_cancel(described({}), "750").json is None


def test_a_job_id_is_data_in_the_body_never_json_syntax() -> None:
    req = build_cancel(described({"body": {"id": "{job_id}"}}), 'a"b')
    assert req.json == {"id": 'a"b'}


@pytest.mark.parametrize(
    ("cancel", "problem"),
    [
        ({"body": "state=Aborted"}, "cancel.body: must be a table (the JSON object sent)"),
        ({"body": {"state": "{status}"}}, "cancel.body.state: unknown placeholder {status}"),
        ({"body": {"at": datetime.date(2025, 1, 1)}}, "cancel.body.at: date is not a JSON value"),
        ({"body": {"x": [1, float("inf")]}}, "cancel.body.x[1]: float is not a JSON value"),
        ({"body": {"state": "Aborted"}, "method": "GET"}, "cancel.body: a GET carries no body"),
    ],
)
def test_a_body_that_cannot_be_sent_is_refused_at_load(
    cancel: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        described(cancel)
