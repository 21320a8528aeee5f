"""The pages a throttled attempt read, kept for the next (reconciler/page_memory.py):
bounded by bytes and by age, handed out once."""

from __future__ import annotations

import json

from reconciler.page_memory import PageMemory, PageProgress
from shared.providers import HttpRequest, HttpResponse
from shared.providers.paths import parse_path

FIRST = ("https://api.example/v1/result", "null")


def progress(*sizes: int) -> PageProgress:
    req = HttpRequest("result", "GET", "https://api.example/v1/result", {})
    parts = [HttpResponse(200, body=b"x" * size) for size in sizes]
    return PageProgress(req, parts, req, "next")


def test_what_is_kept_is_handed_out_once() -> None:
    memory = PageMemory()
    kept = progress(10, 20)
    memory.keep("op-1", FIRST, kept, now=0.0)
    assert memory.take("op-2", FIRST, now=1.0) is None  # another operation's result
    assert memory.take("op-1", ("https://api.example/v1/other", "null"), now=1.0) is None
    assert memory.take("op-1", FIRST, now=1.0) is kept
    assert memory.take("op-1", FIRST, now=1.0) is None
    assert len(memory) == 0


def test_an_entry_past_its_age_is_not_handed_out() -> None:
    memory = PageMemory(max_age=60.0)
    memory.keep("op-1", FIRST, progress(10), now=0.0)
    assert memory.take("op-1", FIRST, now=60.5) is None


def test_stale_entries_go_when_another_is_kept() -> None:
    memory = PageMemory(max_age=60.0)
    memory.keep("op-1", FIRST, progress(10), now=0.0)
    memory.keep("op-2", FIRST, progress(10), now=100.0)
    assert len(memory) == 1
    assert memory.take("op-2", FIRST, now=101.0) is not None


def test_the_oldest_entries_make_room_within_the_byte_bound() -> None:
    memory = PageMemory(max_bytes=100)
    memory.keep("op-1", FIRST, progress(40), now=0.0)
    memory.keep("op-2", FIRST, progress(40), now=1.0)
    memory.keep("op-3", FIRST, progress(40), now=2.0)  # 120 bytes: op-1 goes
    assert memory.take("op-1", FIRST, now=3.0) is None
    assert memory.take("op-2", FIRST, now=3.0) is not None
    assert memory.take("op-3", FIRST, now=3.0) is not None


def test_an_entry_larger_than_the_bound_is_not_kept_and_evicts_nothing() -> None:
    memory = PageMemory(max_bytes=100)
    memory.keep("op-1", FIRST, progress(40), now=0.0)
    memory.keep("op-2", FIRST, progress(60, 60), now=1.0)
    assert memory.take("op-2", FIRST, now=2.0) is None
    assert memory.take("op-1", FIRST, now=2.0) is not None


def test_keeping_again_replaces_and_counts_the_bytes_once() -> None:
    memory = PageMemory(max_bytes=100)
    memory.keep("op-1", FIRST, progress(60), now=0.0)
    memory.keep("op-1", FIRST, progress(70), now=1.0)  # the same result, further on
    memory.keep("op-2", FIRST, progress(30), now=2.0)
    assert memory.take("op-1", FIRST, now=3.0) is not None
    assert memory.take("op-2", FIRST, now=3.0) is not None


def test_the_kept_pages_go_on_only_from_the_same_first_page() -> None:
    """The attempt that goes on fetches page 1 again: the same bytes, the same
    result; other bytes (the result rewritten meanwhile), or an answer other than
    the kept 2xx, another one, whose kept pages would join two versions."""
    kept = progress(10, 20)
    assert kept.same_result(HttpResponse(200, body=b"x" * 10))
    assert not kept.same_result(HttpResponse(200, body=b"y" * 10))
    assert not kept.same_result(HttpResponse(200, body=b"x" * 11))
    assert not kept.same_result(HttpResponse(404, body=b"x" * 10))


def _page(items: list[int], cursor: str) -> HttpResponse:
    return HttpResponse(200, body=json.dumps({"data": items, "next": cursor}).encode())


def test_a_first_page_whose_items_are_the_same_is_the_same_result() -> None:
    """A page 1 fetched again may name a fresh cursor or signed next link, a request
    id, the time, though the result did not change: with the result's items
    named, those are compared. Byte for byte, every resume would go back to page 1
    and, throttled on each, end with the result said to keep changing."""
    req = HttpRequest("result", "GET", "https://api.example/v1/result", {})
    kept = PageProgress(req, [_page([1, 2, 3], "c-1")], req, "c-1")
    items = parse_path("/data")
    assert kept.same_result(_page([1, 2, 3], "c-2"), items)
    assert not kept.same_result(_page([1, 2, 4], "c-1"), items)  # rewritten
    assert not kept.same_result(_page([1, 2, 3], "c-2"))  # no items named: the bytes
    assert not kept.same_result(HttpResponse(200, body=b"<html>"), items)
    elsewhere = parse_path("/missing")  # neither page holds items there: the bytes
    assert not kept.same_result(_page([1, 2, 3], "c-2"), elsewhere)
