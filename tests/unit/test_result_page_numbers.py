"""`[result.pages]` by number: Snowflake's SQL API cuts a large result into
partitions, `GET /api/v2/statements/{handle}?partition=N`; the first says how many
in `resultSetMetaData.partitionInfo`, the later ones carry their `data` alone.
Before, no paging mode could ask for a page by its number (a token, a next URL
or an item offset only), and such a result was its first partition, refused by
its row count at best."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import ConfigError, HttpResponse, StatusFact, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.guarantees import describe_guarantees
from shared.providers.requests import build_result_page, build_result_requests
from shared.providers.responses import result_next_page

BASE = "https://acct.snowflakecomputing.com"
PARTITIONS = {
    "page_param": "partition",
    "first_page": 0,
    "page_count": "/resultSetMetaData/partitionInfo",
}


def load(**pages: Any) -> ProviderDescription:
    table = {
        "base_url": BASE,
        "create": {"path": "/api/v2/statements", "idempotency": "none", "job_id": "/h"},
        "status": {
            "path": "/api/v2/statements/{job_id}",
            "state": "/code",
            "state_map": {"090001": "succeeded"},
        },
        "result": {
            "source": "path",
            "path": "/api/v2/statements/{job_id}",
            "format": "json",
            "items": "/data",
            "pages": pages,
        },
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def page(body: Any) -> HttpResponse:
    return HttpResponse(200, {}, json.dumps(body).encode())


FIRST = page({"resultSetMetaData": {"numRows": 5, "partitionInfo": [{}, {}, {}]}, "data": [[1]]})


def test_each_page_is_asked_for_by_its_number_up_to_the_count_the_first_names() -> None:
    desc = load(**PARTITIONS)
    first = build_result_requests(desc, "01b2", StatusFact(status_code=200))[0]
    assert first.url == f"{BASE}/api/v2/statements/01b2?partition=0"
    token = result_next_page(desc, FIRST)
    assert token == "1:3"
    assert build_result_page(desc, first, token).url.endswith("/01b2?partition=1")
    later = page({"data": [[2], [3]]})  # no metadata: the count rides in the token
    token = result_next_page(desc, later, token)
    assert token == "2:3"
    assert build_result_page(desc, first, token).url.endswith("/01b2?partition=2")
    assert result_next_page(desc, later, token) is None


def test_a_count_given_as_a_number_and_a_first_page_that_names_none() -> None:
    desc = load(**PARTITIONS | {"page_count": "/pages", "first_page": 1})
    assert result_next_page(desc, page({"pages": 2, "data": []})) == "2:2"
    assert result_next_page(desc, page({"pages": 2}), "2:2") is None
    assert result_next_page(desc, page({"data": [[1]]})) is None  # no count: one page


def test_providers_check_says_how_the_pages_are_asked_for() -> None:
    said = dict((g[0], g[2]) for g in describe_guarantees(load(**PARTITIONS)))
    assert "?partition=<n> from 0" in said["result integrity checked"], said


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        ({"page_param": "partition", "page_count": "/n"}, "first_page: required"),
        ({"page_param": "partition", "first_page": 0}, "page_count: required"),
        ({**PARTITIONS, "offset_param": "offset"}, "never two"),
        ({"next_page_token": "/next", "first_page": 0}, "first_page: only meaningful"),
    ],
)
def test_paging_by_number_is_refused_incomplete_or_mixed(
    pages: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(**pages)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_count_in_the_body_of_a_page_that_is_no_json_document_is_refused(fmt: str) -> None:
    """A csv or jsonl page is never read as one JSON document, so a body path
    there names no count: the first page was always the last, the rest of the
    result never asked for, and the key accepted all the same (as offset
    paging's `total` is refused, a header is where such a page can say it)."""
    table: dict[str, Any] = {
        "base_url": BASE,
        "create": {"path": "/api/v2/statements", "idempotency": "none", "job_id": "/h"},
        "status": {
            "path": "/api/v2/statements/{job_id}",
            "state": "/code",
            "state_map": {"090001": "succeeded"},
        },
        "result": {"source": "path", "path": "/r/{job_id}", "format": fmt, "pages": PARTITIONS},
    }
    with pytest.raises(ConfigError, match="page_count"):
        parse_providers({"providers": {"p": table}}, "test.toml", {})
    table["result"]["pages"] = PARTITIONS | {"page_count": "header:X-Page-Count"}
    desc = parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]
    assert desc.result.pages is not None and desc.result.pages.page_param == "partition"
