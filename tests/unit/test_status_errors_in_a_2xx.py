"""A status read answered 2xx carrying `errors` and no state. GraphQL's failed
request (Shopify's THROTTLED) is no answer about the job: read again, uncounted.
Marketo answers every error so, 200 {"success": false, "errors": [{"code",
"message"}]}: its throttles (606, 615) listed in `[status.throttle_codes]`, any
other error (602, the hourly access token expired) is an answer, counted toward a
human as a read naming no state, its words kept. Before, every such answer was
read as a throttle: an expired token was read again, uncounted, until the result
deadline (a day by default), the job said to be running."""

from __future__ import annotations

import json
from typing import Any

from shared.providers import HttpResponse, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status


def load(**status: Any) -> ProviderDescription:
    table = {
        "base_url": "https://123-ABC-456.mktorest.example",
        "create": {
            "path": "/bulk/v1/leads/export/create.json",
            "idempotency": "none",
            "job_id": "/result/0/exportId",
        },
        "status": {
            "path": "/bulk/v1/leads/export/{job_id}/status.json",
            "state": "/result/0/status",
            "state_map": {"Queued": "pending", "Completed": "succeeded", "Failed": "failed"},
        }
        | status,
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def errors(code: str, message: str) -> HttpResponse:
    body = {"requestId": "e42b#1", "success": False, "errors": [{"code": code, "message": message}]}
    return HttpResponse(200, {}, json.dumps(body).encode())


THROTTLES = {"throttle_codes": {"/errors/0/code": ["606", "615"]}}


def test_an_error_the_description_does_not_list_as_a_throttle_is_an_answer() -> None:
    fact = parse_status(load(**THROTTLES), errors("602", "Access token expired"))
    assert fact.remote_state is None and not fact.request_failed, fact
    assert fact.problem is not None and "none a throttle" in fact.problem
    assert "602" in fact.problem and "Access token expired" in fact.problem, fact.problem


def test_a_listed_throttle_is_no_answer_about_the_job() -> None:
    fact = parse_status(load(**THROTTLES), errors("606", "Max rate limit '100' exceeded"))
    assert fact.request_failed and fact.remote_state is None, fact


def test_without_throttle_codes_any_error_is_no_answer_as_before() -> None:
    """GraphQL's THROTTLED, a timeout: a description naming no throttles reads every
    such answer as a failed request, as before."""
    fact = parse_status(load(), errors("602", "Access token expired"))
    assert fact.request_failed, fact


def test_a_state_beside_errors_is_the_state() -> None:
    body = {"success": True, "errors": [{"code": "1"}], "result": [{"status": "Completed"}]}
    fact = parse_status(load(**THROTTLES), HttpResponse(200, {}, json.dumps(body).encode()))
    assert fact.raw_state == "Completed" and not fact.request_failed
