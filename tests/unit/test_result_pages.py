"""`[result.pages]`: a result served a page at a time (Salesforce Bulk 2.0's
`Sforce-Locator`). Its first page alone was stored as the whole result."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shared.providers import ConfigError, HttpResponse, StatusFact, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.guarantees import describe_guarantees
from shared.providers.requests import build_result_page, build_result_requests
from shared.providers.responses import result_next_page

BASE = "https://sf.test/services/data/v60.0"
LOCATOR = {"next_page_token": "header:Sforce-Locator", "page_token_param": "locator"}


def described(fmt: str = "csv", source: str = "path", **pages: Any) -> ProviderDescription:
    result: dict[str, Any] = {"source": source, "format": fmt, "pages": pages}
    if source == "path":
        result["path"] = "/jobs/query/{job_id}/results?maxRecords=2"
    table = {
        "base_url": BASE,
        "auth": {"secret_env": "SF_TOKEN"},
        "create": {"path": "/jobs/query", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/jobs/query/{job_id}",
            "state": "/state",
            "state_map": {"JobComplete": "succeeded"},
            "result_url": "/url",
        },
        "result": result,
    }
    return parse_providers({"providers": {"sf": table}}, "test.toml", {"SF_TOKEN": "t0k"})["sf"]


def test_a_page_carries_the_token_in_its_parameter_replacing_any_earlier_one() -> None:
    desc = described(**LOCATOR)
    first = build_result_requests(desc, "750x", StatusFact(status_code=200))[0]
    second = build_result_page(desc, first, "MTAw MDA/+")
    assert second.url == f"{BASE}/jobs/query/750x/results?maxRecords=2&locator=MTAw+MDA%2F%2B"
    assert second.headers["Authorization"] == "Bearer t0k"
    third = build_result_page(desc, second, "MjAw")
    assert third.url == f"{BASE}/jobs/query/750x/results?maxRecords=2&locator=MjAw"


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ({"Sforce-Locator": "MTAw"}, "MTAw"),
        ({"sforce-locator": "MTAw"}, "MTAw"),  # header names are case-insensitive
        ({"Sforce-Locator": "null"}, None),  # one of end_values: the last page
        ({"Sforce-Locator": ""}, None),
        ({"Sforce-Locator": "  "}, None),
        ({}, None),
    ],
)
def test_the_next_page_token_and_the_last_page(headers: dict[str, str], token: str | None) -> None:
    desc = described(**LOCATOR, end_values=["null"])
    assert result_next_page(desc, HttpResponse(200, headers, b"Id\n1\n")) == token


def test_a_json_result_may_name_its_next_page_in_the_body() -> None:
    desc = described("json", next_page_token="/next", page_token_param="cursor")
    assert result_next_page(desc, HttpResponse(200, body=b'{"items": [], "next": "c2"}')) == "c2"
    assert result_next_page(desc, HttpResponse(200, body=b'{"items": [], "next": null}')) is None


def test_an_unpaged_result_has_no_next_page() -> None:
    paged = described(**LOCATOR)
    unpaged = dataclasses.replace(paged, result=dataclasses.replace(paged.result, pages=None))
    assert result_next_page(unpaged, HttpResponse(200, {"Sforce-Locator": "x"})) is None


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"fmt": "text", **LOCATOR}, "a text result cannot be joined from pages"),
        ({"fmt": "binary", **LOCATOR}, "a binary result cannot be joined from pages"),
        ({"fmt": "csv", "next_page_token": "/next"}, "a csv page has no body path"),
        ({"fmt": "jsonl", "next_page_token": "/next"}, "a jsonl page has no body path"),
        ({"page_token_param": "locator"}, "next_page_token: required"),
        ({**LOCATOR, "max_pages": 1}, "max_pages"),
        ({**LOCATOR, "end_values": "null"}, "end_values"),
        ({**LOCATOR, "cursor": "x"}, "cursor"),
    ],
)
def test_a_description_that_cannot_page_is_refused(kwargs: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        described(**kwargs)


def test_providers_check_says_the_result_is_read_page_by_page() -> None:
    found = {name: text for name, _, text in describe_guarantees(described(**LOCATOR))}
    assert (
        "every page (the next named by header:Sforce-Locator, at most 1000)"
        in (found["result integrity checked"])
    )
