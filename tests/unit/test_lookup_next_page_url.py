"""`lookup.next_page_url`: a list that names its next page by a whole URL, the
cursor inside it (Twilio's `meta.next_page_url`, PageToken and all), with no bare
token to send back. Before, only `next_page_token` (a token sent in
page_token_param) or numbered paging could be written: such a list was read to
its first page, or not looked up at all, and a lost create went to a human
(`test_unseen_round56.py::test_twilio_a_lost_create_is_found_on_the_lists_second_page`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import HttpResponse, build_lookup, parse_lookup
from shared.providers.config import advisories
from shared.providers.errors import RequestBuildError
from tests.unit.test_providers_lookup_paging import LIST, OP, lookup_line, provider, refusal

URL_PAGES = {**LIST, "next_page_url": "/meta/next_page_url"}
NEXT = "https://api.mistral.test/v1/batch/jobs?PageSize=1&Page=1&PageToken=PAJS01"


def page(ours: bool, next_url: str | None) -> HttpResponse:
    job = {"id": "b_ours" if ours else "b1", "metadata": {"op": OP if ours else "op_other"}}
    body: dict[str, Any] = {"data": [job], "meta": {"next_page_url": next_url}}
    return HttpResponse(status_code=200, headers={}, body=json.dumps(body).encode())


def test_the_next_page_is_asked_for_at_the_url_the_page_before_named() -> None:
    desc = provider(URL_PAGES)
    assert build_lookup(desc, OP, None).url == "https://api.mistral.test/v1/batch/jobs"
    first = parse_lookup(desc, page(False, NEXT), OP)
    assert first.next_page_token == NEXT and not first.proven_absent
    assert build_lookup(desc, OP, None, NEXT).url == NEXT
    last = parse_lookup(desc, page(True, None), OP, NEXT)
    assert last.found_job_ids == ("b_ours",) and last.next_page_token is None


def test_a_last_page_naming_no_url_proves_absence() -> None:
    desc = provider(URL_PAGES)
    assert parse_lookup(desc, page(False, None), OP, NEXT).proven_absent


def test_the_check_names_the_url_it_follows_and_finds_the_paging() -> None:
    desc = provider(URL_PAGES)
    assert "following the next page's URL at /meta/next_page_url" in lookup_line(desc)
    assert advisories(desc) == []


def test_contradictions_are_refused_naming_the_key() -> None:
    said = refusal({**URL_PAGES, "next_page_token": "/next"})
    assert "lookup.next_page_url: contradicts next_page_token" in said, said
    said = refusal({**URL_PAGES, "page_token_param": "PageToken"})
    assert "lookup.page_token_param: names a cursor's parameter" in said, said
    said = refusal({**URL_PAGES, "page_param": "Page", "first_page": 0})
    assert "contradicts next_page_url" in said, said


def test_a_next_page_off_the_providers_origin_is_not_followed() -> None:
    """A page from elsewhere could list any job as ours: refused, never adopted."""
    desc = provider(URL_PAGES)
    for elsewhere in ("https://evil.test/v1/batch/jobs?PageToken=x", "http://api.mistral.test/x"):
        with pytest.raises(RequestBuildError, match="not the provider's origin"):
            build_lookup(desc, OP, None, elsewhere)
