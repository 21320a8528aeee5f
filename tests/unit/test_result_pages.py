"""`[result.pages]`: a result served a page at a time (Salesforce Bulk 2.0's
`Sforce-Locator`). Its first page alone was stored as the whole result."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from shared.providers import ConfigError, HttpResponse, StatusFact, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.errors import RequestBuildError
from shared.providers.guarantees import describe_guarantees
from shared.providers.paths import parse_path
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
    assert second.url == f"{BASE}/jobs/query/750x/results?maxRecords=2&locator=MTAw%20MDA%2F%2B"
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


# ------------------------------------------------ the next page's URL (Firecrawl's `next`)

CRAWL = "https://api.firecrawl.test/v1"


def crawl(**options: Any) -> ProviderDescription:
    """Firecrawl's crawl status: the result's pages name the next page's URL in `next`."""
    result: dict[str, Any] = {
        "source": "path",
        "path": "/crawl/{job_id}",
        "format": "json",
        "items": "/data",
        "pages": {"next_page_url": "/next", **options.pop("pages", {})},
        **options,
    }
    table = {
        "base_url": CRAWL,
        "auth": {"secret_env": "FC_TOKEN", "extra_hosts": ["pages.firecrawl.test"]},
        "create": {"path": "/crawl", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/crawl/{job_id}",
            "state": "/status",
            "state_map": {"done": "succeeded"},
        },
        "result": result,
    }
    return parse_providers({"providers": {"fc": table}}, "test.toml", {"FC_TOKEN": "fc"})["fc"]


def first_page(desc: ProviderDescription) -> Any:
    return build_result_requests(desc, "c1", StatusFact(status_code=200))[0]


@pytest.mark.parametrize(
    ("named", "url", "token"),
    [
        # absolute, on the provider's origin: fetched as given, our token with it
        (f"{CRAWL}/crawl/c1?skip=10", f"{CRAWL}/crawl/c1?skip=10", True),
        ("https://API.firecrawl.test:443/v1/crawl/c1?skip=10", None, True),  # the same origin
        # relative: resolved against the URL of the page that named it
        ("?skip=20", f"{CRAWL}/crawl/c1?skip=20", True),
        ("/v1/crawl/c1?skip=20", f"{CRAWL}/crawl/c1?skip=20", True),
        # auth.extra_hosts (https): fetched with our token; allowed_hosts: without it
        ("https://pages.firecrawl.test/c1/2", "https://pages.firecrawl.test/c1/2", True),
        ("https://pages.firecrawl.test:443/c1/2", None, True),
        ("https://10.0.0.5/c1/2", "https://10.0.0.5/c1/2", False),  # bare: the default port
        ("https://10.0.0.5:443/c1/2", None, False),
        ("https://store.test:8443/c1/2", None, False),  # `host:port`: that port
    ],
)
def test_a_next_page_url_is_fetched_as_named_where_the_providers_pages_are(
    named: str, url: str | None, token: bool
) -> None:
    desc = crawl(allowed_hosts=["10.0.0.5", "store.test:8443"])
    first = first_page(desc)
    page = build_result_page(desc, first, named, f"{CRAWL}/crawl/c1?skip=10")
    assert page.url == (url or named)
    assert ("Authorization" in page.headers) is token


def test_a_relative_next_page_url_resolves_against_the_first_page_without_its_own() -> None:
    desc = crawl()
    assert build_result_page(desc, first_page(desc), "?skip=10").url == f"{CRAWL}/crawl/c1?skip=10"


@pytest.mark.parametrize(
    ("named", "problem"),
    [
        ("https://evil.test/v1/crawl/c1?skip=10", "is on https://evil.test, not the provider's"),
        ("http://api.firecrawl.test/v1/crawl/c1", "is on http://api.firecrawl.test, not"),
        ("https://api.firecrawl.test:8443/v1/crawl/c1", "is on https://api.firecrawl.test:8443,"),
        # a host named, on another port or scheme: another origin, refused as another host
        ("https://pages.firecrawl.test:8443/c1/2", "is on https://pages.firecrawl.test:8443,"),
        ("http://pages.firecrawl.test/c1/2", "is on http://pages.firecrawl.test, not"),
        ("https://10.0.0.5:8443/c1/2", "is on https://10.0.0.5:8443, not the provider's"),
        ("http://10.0.0.5/c1/2", "is on http://10.0.0.5, not the provider's origin"),
        ("http://10.0.0.5:443/c1/2", "is on http://10.0.0.5:443, not the provider's"),
        ("https://store.test/c1/2", "is on https://store.test, not the provider's origin"),
        ("https://169.254.169.254/latest/meta-data", "a link-local address"),
        ("ftp://api.firecrawl.test/c1", "not an http(s) URL (ftp scheme)"),
        ("https://api.firecrawl.test:99999/c1", "cannot be parsed"),
        ("/v1/crawl/c1?skip=\x00", "contains a control character"),
        ("https://api.firecrawl.test/" + "a" * 20_000, "characters long"),
        ("https://u:p@api.firecrawl.test/v1/crawl/c1", "carries a user name or password"),
    ],
)
def test_a_next_page_url_elsewhere_is_refused_not_built(named: str, problem: str) -> None:
    desc = crawl(allowed_hosts=["10.0.0.5", "store.test:8443"])
    with pytest.raises(RequestBuildError, match=re.escape(problem)):
        build_result_page(desc, first_page(desc), named, f"{CRAWL}/crawl/c1")


def test_the_refusal_says_how_to_allow_a_host() -> None:
    desc = crawl()
    with pytest.raises(RequestBuildError) as refused:
        build_result_page(desc, first_page(desc), "https://cdn.test/p2", None)
    assert "(https://api.firecrawl.test)" in str(refused.value)
    assert "name the host in result.allowed_hosts" in str(refused.value)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"data": [], "next": "https://api.firecrawl.test/v1/crawl/c1?skip=10"}', True),
        (b'{"data": [], "next": null}', False),
        (b'{"data": []}', False),
        (b'{"data": [], "next": ""}', False),
        (b'{"data": [], "next": "null"}', False),  # one of end_values
    ],
)
def test_the_next_page_url_and_the_last_page(body: bytes, named: bool) -> None:
    desc = crawl(pages={"end_values": ["null"]})
    found = result_next_page(desc, HttpResponse(200, body=body))
    assert found == ("https://api.firecrawl.test/v1/crawl/c1?skip=10" if named else None)


# ------------------------------------------------ offsets (Apify's dataset items)

DATASET = "https://api.apify.test/v2"


def dataset(fmt: str = "json", source: str = "path", **pages: Any) -> ProviderDescription:
    result: dict[str, Any] = {
        "source": source,
        "format": fmt,
        "pages": {"offset_param": "offset", **pages},
    }
    if fmt == "json":
        result["items"] = ""
    if source == "path":
        result["path"] = "/actor-runs/{job_id}/dataset/items?format=json"
    table = {
        "base_url": DATASET,
        "create": {"path": "/acts/a/runs", "idempotency": "none", "job_id": "/data/id"},
        "status": {
            "path": "/actor-runs/{job_id}",
            "state": "/data/status",
            "state_map": {"SUCCEEDED": "succeeded"},
            "result_url": "/data/itemsUrl",
        },
        "result": result,
    }
    return parse_providers({"providers": {"apify": table}}, "test.toml", {})["apify"]


def test_an_offset_paged_result_names_its_first_page_and_each_next_by_offset() -> None:
    desc = dataset(page_size=1000, page_size_param="limit")
    first = first_page(desc)
    assert first.url == f"{DATASET}/actor-runs/c1/dataset/items?format=json&offset=0&limit=1000"
    second = build_result_page(desc, first, "1000")
    assert second.url == f"{DATASET}/actor-runs/c1/dataset/items?format=json&offset=1000&limit=1000"


def test_a_result_url_has_its_own_offset_replaced_by_the_first_pages() -> None:
    desc = dataset(source="url", page_size=10, page_size_param="limit")
    status = StatusFact(
        status_code=200, result_url=f"{DATASET}/datasets/d1/items?offset=50&limit=5"
    )
    (first,) = build_result_requests(desc, "c1", status)
    assert first.url == f"{DATASET}/datasets/d1/items?offset=0&limit=10"


def test_the_rest_of_a_paged_urls_query_is_kept_as_written() -> None:
    """A signed link's signature covers its bytes: only the paging values change."""
    desc = dataset(source="url", page_size=10, page_size_param="limit")
    signed = f"{DATASET}/datasets/d1/items?X-Sig=a%2Fb%3D&offset=50&t=%7E1"
    (first,) = build_result_requests(desc, "c1", StatusFact(status_code=200, result_url=signed))
    assert first.url == f"{DATASET}/datasets/d1/items?X-Sig=a%2Fb%3D&t=%7E1&offset=0&limit=10"
    following = build_result_page(desc, first, "10")
    assert following.url == f"{DATASET}/datasets/d1/items?X-Sig=a%2Fb%3D&t=%7E1&offset=10&limit=10"


def page_of(count: int, headers: dict[str, str] | None = None) -> HttpResponse:
    return HttpResponse(200, headers or {}, json.dumps([{"n": n} for n in range(count)]).encode())


@pytest.mark.parametrize(
    ("pages", "count", "asked", "headers", "following"),
    [
        ({}, 10, None, {}, "10"),
        ({}, 10, "30", {}, "40"),
        ({}, 3, "30", {}, "33"),  # "empty": a short page is not the end
        ({}, 0, "30", {}, None),
        ({"last_page": "short", "page_size": 10}, 10, "10", {}, "20"),
        ({"last_page": "short", "page_size": 10}, 5, "20", {}, None),
        ({"last_page": "short", "page_size": 10}, 0, "20", {}, None),
        ({"total": "header:X-Total"}, 10, "10", {"X-Total": "25"}, "20"),
        ({"total": "header:X-Total"}, 10, "10", {"X-Total": "20"}, None),
        ({"total": "header:X-Total"}, 10, "10", {}, "20"),  # no total read: to the empty page
        ({"total": "header:X-Total"}, 0, "20", {"X-Total": "25"}, None),  # empty: the end
    ],
)
def test_the_next_offset_and_the_last_page(
    pages: dict[str, Any],
    count: int,
    asked: str | None,
    headers: dict[str, str],
    following: str | None,
) -> None:
    desc = dataset(**pages)
    assert result_next_page(desc, page_of(count, headers), asked) == following


def test_a_total_may_be_in_a_json_page() -> None:
    desc = dataset(total="/total")
    desc = dataclasses.replace(
        desc, result=dataclasses.replace(desc.result, items=parse_path("/items"))
    )
    page = HttpResponse(200, body=b'{"items": [1, 2], "total": 12}')
    assert result_next_page(desc, page, "10") is None
    assert result_next_page(desc, page, "2") == "4"


@pytest.mark.parametrize(
    ("fmt", "body", "following"),
    [
        ("jsonl", b'{"n": 1}\n\n{"n": 2}\n', "12"),
        ("jsonl", b"", None),
        ("csv", b'Id,Name\n1,"a\nb"\n2,c\n', "12"),  # a quoted newline is one row
        ("csv", b"Id,Name\n", None),  # a header alone: an empty page
        ("csv", b'Id,Name\n1,"a\n', None),  # not CSV: validation refuses it
        ("json", b'{"not": "a list"}', None),  # no item list: validation refuses it
        ("json", b"not json", None),
    ],
)
def test_a_pages_items_are_counted_as_validation_counts_them(
    fmt: str, body: bytes, following: str | None
) -> None:
    desc = dataset(fmt)
    assert result_next_page(desc, HttpResponse(200, body=body), "10") == following


# ------------------------------------------------ contradictions refused at load


@pytest.mark.parametrize(
    ("pages", "problem"),
    [
        ({}, "next_page_token: required, or next_page_url, or offset_param"),
        (
            {"next_page_token": "/c", "next_page_url": "/next"},
            "next_page_url: contradicts next_page_token",
        ),
        (
            {"next_page_url": "/next", "offset_param": "offset"},
            "offset_param: contradicts next_page_url",
        ),
        (
            {"next_page_url": "/next", "page_token_param": "skip"},
            "page_token_param: names a cursor's parameter; with next_page_url there is none "
            "(the next page's URL is fetched as given)",
        ),
        (
            {"offset_param": "offset", "page_token_param": "skip"},
            "page_token_param: names a cursor's parameter; with offset_param there is none",
        ),
        ({"offset_param": "offset", "end_values": ["null"]}, "end_values: only meaningful with"),
        (
            {"next_page_url": "/next", "page_size": 10},
            "page_size: only meaningful with offset_param; with next_page_url each page names "
            "the next (a page size goes in result.path's query)",
        ),
        ({"next_page_token": "/c", "last_page": "short"}, "last_page: only meaningful with"),
        ({"next_page_url": "/next", "total": "/total"}, "total: only meaningful with"),
        (
            {"offset_param": "offset", "page_size_param": "limit"},
            "page_size_param: meaningless without page_size",
        ),
        (
            {"offset_param": "limit", "page_size": 10, "page_size_param": "limit"},
            "page_size_param: is offset_param too",
        ),
        (
            {"offset_param": "offset", "last_page": "short"},
            'page_size: required with last_page = "short"',
        ),
        (
            {"offset_param": "offset", "last_page": "total"},
            'total: required with last_page = "total"',
        ),
        (
            {"offset_param": "offset", "last_page": "empty", "total": "/total"},
            'total: contradicts last_page = "empty"',
        ),
        (
            {"offset_param": "format"},
            "offset_param: result.path already sets ?format=: set it in one place",
        ),
        (
            {"offset_param": "offset", "page_size": 10, "page_size_param": "format"},
            "page_size_param: result.path already sets ?format=",
        ),
        ({"offset_param": "offset", "page_size": 0}, "page_size: must be at least 1"),
        ({"offset_param": "offset", "page_size": 1_000_001}, "page_size: must be at most 1000000"),
    ],
)
def test_contradictory_paging_is_refused_naming_the_key(
    pages: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"result.pages.{problem}")):
        dataset(**pages) if "offset_param" in pages else described("json", **pages)


@pytest.mark.parametrize(
    ("fmt", "pages", "problem"),
    [
        ("csv", {"next_page_url": "/next"}, "next_page_url: a csv page has no body path"),
        ("jsonl", {"offset_param": "o", "total": "/total"}, "total: a jsonl page has no body path"),
    ],
)
def test_a_body_path_is_refused_where_a_page_has_no_body(
    fmt: str, pages: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"result.pages.{problem}")):
        described(fmt, **pages)


def test_a_json_result_paged_by_offset_needs_its_item_list() -> None:
    with pytest.raises(
        ConfigError, match=re.escape("result.pages.offset_param: needs result.items")
    ):
        described("json", offset_param="offset")


def test_a_header_next_page_url_serves_any_paged_format() -> None:
    desc = described("csv", next_page_url="header:Next-Page")
    assert desc.result.pages is not None and desc.result.pages.next_page_url is not None


def test_providers_check_says_how_the_pages_follow() -> None:
    found = {name: text for name, _, text in describe_guarantees(crawl())}
    assert (
        "every page (the next page's URL named by /next, on the provider's origin or allowed "
        "hosts only, at most 1000)" in found["result integrity checked"]
    )
    offsets = dataset(page_size=1000, page_size_param="limit", total="header:X-Total")
    found = {name: text for name, _, text in describe_guarantees(offsets)}
    assert (
        "every page (by offset, ?offset=<items read>&limit=1000, until the items read reach "
        "header:X-Total, at most 1000)" in found["result integrity checked"]
    )
