"""A JSON result whose every page is the list itself (`result.items = ""`: Apify's
dataset items, `[{...}, {...}]` a page) is stored as ONE list of all its items,
the shape one page has: before, two pages or more were kept as a list of pages
(`[[...], [...]]`), so a run whose items fit one page and one that needed two
gave the agent two shapes. A page that is an object holding its list (`"/data"`)
is still one item of an array of pages."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from shared.providers import HttpResponse, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.results import result_content, validate_result
from tests.unit.result_fixtures import provider_table


def load(items: str) -> ProviderDescription:
    result = {
        "source": "path",
        "path": "/v2/actor-runs/{job_id}/dataset/items",
        "format": "json",
        "items": items,
        "pages": {"offset_param": "offset", "page_size": 2, "page_size_param": "limit"},
    }
    return parse_providers(provider_table(result), "t.toml", {})["p"]


def pages(*bodies: bytes) -> list[HttpResponse]:
    return [HttpResponse(200, {"content-type": "application/json"}, b) for b in bodies]


ONE = b'[{"n": 1}, {"n": 2}]'
TWO = b' \n[ {"n": 3.10} ]\n'
LAST = b"[]"


def test_list_pages_are_stored_as_one_list_of_their_items_as_sent() -> None:
    desc = load("")
    stored = result_content(desc.result, [ONE, TWO, LAST])
    assert json.loads(stored) == [{"n": 1}, {"n": 2}, {"n": 3.10}]
    assert b'{"n": 3.10}' in stored  # each item's own bytes
    check = validate_result(desc, pages(ONE, TWO, LAST), None)
    assert check.ok, check.reason
    assert check.items_total == 3
    assert check.sha256 == hashlib.sha256(stored).hexdigest()
    assert check.parsed == [{"n": 1}, {"n": 2}, {"n": 3.1}]


def test_one_list_page_is_kept_as_it_came() -> None:
    assert result_content(load("").result, [ONE]) == ONE


def test_object_pages_are_still_an_array_of_pages() -> None:
    desc = load("/data")
    first, second = b'{"data": [{"n": 1}]}', b'{"data": [{"n": 2}]}'
    stored: Any = json.loads(result_content(desc.result, [first, second]))
    assert stored == [{"data": [{"n": 1}]}, {"data": [{"n": 2}]}]
