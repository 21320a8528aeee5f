"""A lookup's paging as described in [lookup]: cursor, page number or offset.

A lookup that stops before the list's end and calls what it read "absence"
re-sends a create that a provider without idempotency runs twice (Mistral's
batch jobs, paged `?page=0&page_size=100`, lost a create this way). These hold
what is refused at load, which pages are asked for, when the end is reached,
and what `providers check` says about it.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shared.providers import ConfigError, build_lookup, parse_lookup, parse_providers
from shared.providers.config import advisories
from shared.providers.description import LastPage, ProviderDescription
from shared.providers.guarantees import describe_guarantees
from shared.providers.messages import HttpResponse
from shared.providers.responses import unreferenced_listing

OP = "op_ours"

BASE: dict[str, Any] = {
    "base_url": "https://api.mistral.test",
    "create": {"path": "/v1/batch/jobs", "idempotency": "none", "job_id": "/id"},
    "status": {
        "path": "/v1/batch/jobs/{job_id}",
        "state": "/status",
        "state_map": {"RUNNING": "running", "SUCCESS": "succeeded"},
    },
    "result": {"source": "inline", "inline": "/output"},
}
LIST = {"path": "/v1/batch/jobs", "list": "/data", "match": "/metadata/op", "job_id": "/id"}
PAGES = {**LIST, "page_param": "page", "first_page": 0, "page_size": 100}


def provider(lookup: dict[str, Any]) -> ProviderDescription:
    table = {**BASE, "lookup": lookup}
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def refusal(lookup: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        provider(lookup)
    return str(caught.value)


def page(jobs: int, *, ours: bool = False, total: int | None = None) -> HttpResponse:
    data = [{"id": f"b{i}", "metadata": {"op": f"op_other_{i}"}} for i in range(jobs)]
    if ours:
        data[-1] = {"id": "b_ours", "metadata": {"op": OP}}
    body: dict[str, Any] = {"data": data, "object": "list"}
    if total is not None:
        body["total"] = total
    return HttpResponse(status_code=200, headers={}, body=json.dumps(body).encode())


def query(desc: ProviderDescription, page_token: str | None = None) -> dict[str, list[str]]:
    return parse_qs(urlsplit(build_lookup(desc, OP, None, page_token).url).query)


# --------------------------------------------------------------------- loading


def test_page_numbers_load_with_their_end_read_from_total() -> None:
    spec = provider({**PAGES, "total": "/total"}).lookup
    assert spec.page_param == "page" and spec.first_page == 0 and spec.page_size == 100
    assert spec.last_page is LastPage.TOTAL and spec.numbered and spec.paged


def test_an_empty_page_is_the_end_unless_told_otherwise() -> None:
    assert provider(PAGES).lookup.last_page is LastPage.EMPTY
    offsets = provider({**LIST, "offset_param": "offset"}).lookup
    assert offsets.numbered and offsets.last_page is LastPage.EMPTY


@pytest.mark.parametrize(
    ("lookup", "says"),
    [
        (
            {**LIST, "page_param": "page"},
            "lookup.first_page: required with page_param (0 or 1",
        ),
        ({**PAGES, "first_page": 2}, "lookup.first_page: must be at most 1"),
        ({**PAGES, "first_page": -1}, "lookup.first_page: must be at least 0"),
        (
            {**PAGES, "offset_param": "offset"},
            "lookup.offset_param: contradicts page_param",
        ),
        (
            {**PAGES, "next_page_token": "/next"},
            "lookup.page_param: contradicts next_page_token",
        ),
        (
            {**LIST, "offset_param": "offset", "next_page_token": "/next"},
            "lookup.offset_param: contradicts next_page_token",
        ),
        ({**PAGES, "has_more": "/has_more"}, "lookup.has_more: only meaningful with next_page"),
        ({**PAGES, "page_token_param": "after"}, "lookup.page_token_param: names a cursor's"),
        ({**LIST, "first_page": 0}, "lookup.first_page: only meaningful with page_param or"),
        (
            {**LIST, "offset_param": "offset", "first_page": 1},
            "lookup.first_page: only meaningful with page_param (offsets start at 0)",
        ),
        ({**LIST, "last_page": "empty"}, "lookup.last_page: only meaningful with page_param"),
        ({**LIST, "total": "/total"}, "lookup.total: only meaningful with page_param"),
        ({**PAGES, "last_page": "total"}, 'lookup.total: required with last_page = "total"'),
        (
            {**PAGES, "last_page": "empty", "total": "/total"},
            'lookup.total: contradicts last_page = "empty"',
        ),
        (
            {**LIST, "page_param": "page", "first_page": 0, "last_page": "short"},
            'lookup.page_size: required with last_page = "short"',
        ),
        ({**PAGES, "last_page": "last"}, "lookup.last_page: 'last' is not one of"),
        ({**PAGES, "page_size": 0}, "lookup.page_size: must be at least 1"),
        ({**LIST, "page_size_param": "limit"}, "lookup.page_size_param: meaningless without"),
        (
            {**PAGES, "page_size_param": "page"},
            "lookup.page_param: names a query parameter another lookup key already uses",
        ),
        (
            {**PAGES, "query_param": "page"},
            "lookup.page_param: names a query parameter another lookup key already uses",
        ),
        (
            {**PAGES, "path": "/v1/batch/jobs?page=0"},
            "lookup.page_param: path already sets ?page=",
        ),
        (
            {"kind": "get", "path": "/v1/jobs/{client_reference}", "page_param": "page"},
            "lookup.page_param: only meaningful with kind = list",
        ),
    ],
)
def test_contradictory_or_invalid_paging_is_refused_naming_the_key(
    lookup: dict[str, Any], says: str
) -> None:
    assert f"test.toml: providers.p.{says}" in refusal(lookup)


# --------------------------------------------------------------------- requests


def test_every_page_is_asked_for_by_number_the_first_one_too() -> None:
    desc = provider(PAGES)
    assert query(desc) == {"page": ["0"], "page_size": ["100"]}
    assert query(desc, "3:300") == {"page": ["3"], "page_size": ["100"]}
    one_based = provider({**PAGES, "first_page": 1})
    assert query(one_based)["page"] == ["1"]


def test_offsets_start_at_zero_and_a_cursor_travels_as_before() -> None:
    assert query(provider({**LIST, "offset_param": "offset"})) == {"offset": ["0"]}
    cursor = provider({**LIST, "next_page_token": "/next", "page_token_param": "after"})
    assert query(cursor) == {} and query(cursor, "b99") == {"after": ["b99"]}


# --------------------------------------------------------------------- the end


def test_page_numbers_go_on_until_an_empty_page() -> None:
    desc = provider(PAGES)
    assert parse_lookup(desc, page(100), OP).next_page_token == "1:100"
    fact = parse_lookup(desc, page(40, ours=True), OP, "1:100")
    assert fact.found_job_ids == ("b_ours",) and fact.next_page_token == "2:140"
    last = parse_lookup(desc, page(0), OP, "2:140")
    assert last.next_page_token is None and last.proven_absent


def test_our_job_listed_without_a_readable_id_is_no_absence() -> None:
    """The list shows our operation id on an item whose id is not at `job_id` (a
    typo, `/job_id` where the list says `/id`; or a list that names its items
    otherwise than the create does). That item was dropped and the page, the
    last, was "proven absent": the lost create was sent again and the job ran
    twice. Our job is there: the answer is a problem, never absence."""
    desc = provider({**LIST, "job_id": "/job_id"})
    fact = parse_lookup(desc, page(3, ours=True), OP)
    assert not fact.proven_absent and fact.found_job_ids == ()
    assert fact.problem is not None and "/job_id" in fact.problem
    # strangers without a readable id prove nothing either way, and are skipped
    assert parse_lookup(desc, page(3), OP).proven_absent


def test_a_page_of_items_without_any_reference_is_no_absence() -> None:
    """`match = "/metadata/operation"` where the items say `/metadata/op`: no item
    carries a reference, ours included. The last page was "proven absent" and the
    lost create went out again. A page of such items proves nothing by itself;
    the counts let the scan judge over every page it reads."""
    desc = provider({**LIST, "match": "/metadata/operation"})
    fact = parse_lookup(desc, page(3, ours=True), OP)
    assert not fact.proven_absent and fact.found_job_ids == () and fact.problem is None
    assert (fact.referenced, fact.unreferenced) == (0, 3)
    why = unreferenced_listing(desc.lookup, 0, 3)
    assert why is not None and "3 job(s)" in why and "lookup.match = /metadata/operation" in why
    # an empty list is absence whatever the path
    assert parse_lookup(desc, page(0), OP).proven_absent
    # others' references, ours not among them: absence, as before
    right = provider(LIST)
    strangers = parse_lookup(right, page(3), OP)
    assert strangers.proven_absent and (strangers.referenced, strangers.unreferenced) == (3, 0)
    # over a scan: one referenced item anywhere makes the path a working one
    assert unreferenced_listing(right.lookup, 1, 250) is None
    assert unreferenced_listing(right.lookup, 0, 0) is None


def test_a_short_page_ends_only_when_told() -> None:
    short = provider({**PAGES, "last_page": "short"})
    fact = parse_lookup(short, page(40), OP, "1:100")
    assert fact.next_page_token is None and fact.proven_absent
    assert parse_lookup(short, page(100), OP, "1:100").next_page_token == "2:200"


def test_total_ends_the_scan_when_the_pages_read_hold_it() -> None:
    desc = provider({**PAGES, "total": "/total"})
    assert parse_lookup(desc, page(100, total=250), OP).next_page_token == "1:100"
    assert parse_lookup(desc, page(100, total=200), OP, "1:100").next_page_token is None
    # a last page holding fewer ends it once the items read reach the total
    assert parse_lookup(desc, page(50, total=250), OP, "2:200").next_page_token is None
    assert parse_lookup(desc, page(50, total=300), OP, "2:200").next_page_token == "3:250"
    # without a readable total, the empty page still ends it
    assert parse_lookup(desc, page(100), OP, "5:500").next_page_token == "6:600"


def test_total_counts_the_items_read_whatever_each_page_held() -> None:
    """A provider that capped the first page below page_size, then sent full
    pages: counting pages times the last page's size read 200 of a total of 150
    after two pages, and took the 40 unread for absent (a second reader)."""
    desc = provider({**PAGES, "total": "/total"})
    first = parse_lookup(desc, page(10, total=150), OP)
    second = parse_lookup(desc, page(100, total=150), OP, first.next_page_token)
    assert second.next_page_token == "2:110" and not second.proven_absent
    third = parse_lookup(desc, page(40, total=150), OP, second.next_page_token)
    assert third.next_page_token is None and third.proven_absent


def test_offsets_advance_by_the_items_read() -> None:
    desc = provider({**LIST, "offset_param": "offset", "total": "/total"})
    assert parse_lookup(desc, page(37, total=100), OP).next_page_token == "37"
    assert parse_lookup(desc, page(63, total=100), OP, "37").next_page_token is None


def test_more_pages_that_no_cursor_names_are_no_absence() -> None:
    desc = provider({**LIST, "next_page_token": "/next", "has_more": "/has_more"})
    body = {"data": [], "has_more": True}
    resp = HttpResponse(status_code=200, headers={}, body=json.dumps(body).encode())
    fact = parse_lookup(desc, resp, OP)
    assert fact.next_page_token is None and fact.more_unreadable and not fact.proven_absent


# --------------------------------------------------------------------- providers check


def lookup_line(desc: ProviderDescription) -> str:
    return next(why for name, _, why in describe_guarantees(desc) if name.startswith("lookup"))


def test_check_writes_our_parameter_after_a_query_the_path_holds() -> None:
    """GitLab's `?ref=main&…` path with query_param = "name": the check said
    `…?ref=main?name=<operation id>`, a URL the lookup never sends."""
    line = lookup_line(provider({**LIST, "path": "/v1/batch/jobs?ref=main", "query_param": "n"}))
    assert "GET /v1/batch/jobs?ref=main&n=<operation id>" in line, line
    plain = lookup_line(provider({**LIST, "query_param": "n"}))
    assert "GET /v1/batch/jobs?n=<operation id>" in plain, plain


def test_check_names_the_pages_it_will_read() -> None:
    line = lookup_line(provider({**PAGES, "total": "/total"}))
    assert "pages ?page=0 to 9, up to 10 pages of 100, until the items read reach /total" in line
    assert "cut short by that limit proves no absence: the create is not sent again" in line
    cursor = lookup_line(provider({**LIST, "next_page_token": "/next", "max_pages": 3}))
    assert "following the cursor at /next in ?page_token=, up to 3 pages" in cursor
    assert advisories(provider(PAGES)) == []


def test_check_says_an_offset_scan_in_the_words_the_result_pages_use() -> None:
    """Gladia's list pages by offset: the check said "?offset=0 on by the items
    read", where the same paging of a result reads "?offset=<items read>"."""
    line = lookup_line(
        provider({**LIST, "offset_param": "offset", "page_size": 100, "page_size_param": "limit"})
    )
    assert "(by offset, ?offset=<items read>, from 0, up to 10 pages of 100," in line, line


def test_check_warns_that_an_unpaged_scan_reads_one_page() -> None:
    desc = provider(LIST)
    assert "(its first page only: no paging is described)" in lookup_line(desc)
    (warning,) = advisories(desc)
    assert "only the first page is read" in warning and "absence is weak" in warning
    filtered = provider({**LIST, "query_param": "reference"})
    assert "(one page: the provider filters the list by our reference)" in lookup_line(filtered)
    assert advisories(filtered) == []


def test_check_says_a_list_without_references_proves_no_absence() -> None:
    """A `match` that reads nothing on any item (a typo, a list that omits the
    field) leaves the lost create to a human: the check says so, and where it looks."""
    line = lookup_line(provider({**PAGES, "total": "/total"}))
    assert "a list whose jobs carry no reference at /metadata/op" in line, line
    assert "only jobs made elsewhere) proves no absence" in line, line
    filtered = lookup_line(provider({**LIST, "query_param": "reference"}))
    assert "(a wrong path, or items that leave it out) proves no absence" in filtered
