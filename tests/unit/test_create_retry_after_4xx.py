"""A create refused with a 403 or 413 that carries Retry-After is refused for now.

GitHub's secondary rate limit answers a dispatch 403 {"message": "You have
exceeded a secondary rate limit..."} with `retry-after`: "you should not retry
your request until after that many seconds". A 4xx made nothing either way; with
Retry-After the provider asks to be asked again, so the create goes again after
it (back-pressure), as a status read so answered already was read again. Before,
the operation ended failed, its request never made.
"""

from __future__ import annotations

import json
from typing import Any

from shared.providers.messages import HttpResponse
from shared.providers.responses import parse_create
from tests.unit.test_providers_loader import acme, load

SECONDARY = {
    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before"
    " you try again. If you reach out to GitHub Support for help, please include the"
    " request ID 1234:5678.",
    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
}


def answer(code: int, body: dict[str, Any], **headers: str) -> HttpResponse:
    headers = {"content-type": "application/json", **headers}
    return HttpResponse(code, headers, json.dumps(body).encode())


def test_a_403_with_retry_after_is_back_pressure_nothing_created() -> None:
    github = load(acme(create={"error_message": "/message"}))
    fact = parse_create(github, answer(403, SECONDARY, **{"retry-after": "60"}))
    assert fact.kind == "not_created" and fact.back_pressure
    assert fact.retry_after_seconds == 60
    assert fact.error is not None and fact.error.message == SECONDARY["message"]


def test_a_403_without_it_is_still_a_refusal() -> None:
    denied = {"message": "Resource not accessible by integration"}
    fact = parse_create(load(acme()), answer(403, denied))
    assert fact.kind == "rejected"


def test_a_401_or_422_with_retry_after_is_still_a_refusal() -> None:
    """A revoked key or a bad body says Retry-After too on some gateways: still
    refused for good, told now; before, sent again until the create deadline,
    which then said only that no job exists."""
    for code in (400, 401, 404, 422):
        fact = parse_create(load(acme()), answer(code, {"message": "no"}, **{"retry-after": "5"}))
        assert fact.kind == "rejected", code


def test_a_413_with_retry_after_is_refused_for_now() -> None:
    fact = parse_create(load(acme()), answer(413, {"message": "busy"}, **{"retry-after": "5"}))
    assert fact.kind == "not_created" and fact.back_pressure
