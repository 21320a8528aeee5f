"""A multi-file result is stored as one document of its format (a results review).

Laid end to end, the parts were not one: a JSONL line glued to the next
part's first, each later CSV header a data row, two JSON documents back to
back. `joined_parts` keeps each part's bytes and makes the whole parse as its
format says.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import Counts, HttpResponse, StatusFact, validate_result
from shared.providers.description import CsvOptions, ProviderDescription, ResultFormat
from shared.providers.result_formats import joined_parts, merge_csv, parse_csv
from shared.providers.results import result_content
from tests.unit.result_fixtures import provider


def test_jsonl_parts_without_a_final_newline_stay_one_item_per_line() -> None:
    whole = joined_parts(ResultFormat.JSONL, None, [b'{"n":1}\n{"n":2}', b'{"n":3}\n', b'{"n":4}'])
    assert [json.loads(line) for line in whole.splitlines()] == [{"n": n} for n in (1, 2, 3, 4)]


@pytest.mark.parametrize(
    "parts",
    [
        [b"id,v\n1,a", b"id,v\r\n2,b\r\n"],
        [b'id,"v\nx"\n1,a\n', b'\xef\xbb\xbfid,"v\nx"\n2,b\n'],  # a header over two lines, a BOM
    ],
)
def test_later_csv_parts_lose_their_header_and_nothing_else(parts: list[bytes]) -> None:
    options = CsvOptions()
    whole = parse_csv(options, joined_parts(ResultFormat.CSV, options, parts))
    assert whole == merge_csv([parse_csv(options, part) for part in parts])
    assert [row[0] for row in whole.rows] == ["1", "2"]


def test_headerless_csv_parts_are_separated_by_a_newline() -> None:
    options = CsvOptions(header=False)
    whole = joined_parts(ResultFormat.CSV, options, [b"1,a", b"2,b\n"])
    assert parse_csv(options, whole).rows == (("1", "a"), ("2", "b"))


def test_json_documents_become_the_items_of_one_array() -> None:
    whole = joined_parts(ResultFormat.JSON, None, [b'{"a": 1.50}', b' {"b": 2}\n'])
    assert json.loads(whole) == [{"a": 1.5}, {"b": 2}]
    assert b'{"a": 1.50}' in whole  # each part's own bytes


BOM = b"\xef\xbb\xbf"


def test_a_part_s_utf8_bom_is_not_kept_inside_the_joined_document() -> None:
    """Validation reads each part as UTF-8 with its BOM dropped (`_strict_json`,
    `decode_text`), so a part that starts with one passes; laid inside the joined
    document, the BOM was a U+FEFF in the middle of it: two JSON pages stored as
    `[{..},\ufeff{..}]` (not JSON at all, though judged valid), a JSONL line and a
    header-less CSV row that a strict reader refuses or reads with U+FEFF in its
    first field."""
    whole = joined_parts(ResultFormat.JSON, None, [BOM + b'{"a": 1}', BOM + b'{"b": 2}'])
    assert json.loads(whole.decode("utf-8")) == [{"a": 1}, {"b": 2}]
    lines = joined_parts(ResultFormat.JSONL, None, [b'{"n":1}\n', BOM + b'{"n":2}\n'])
    assert [json.loads(line) for line in lines.decode("utf-8").splitlines()] == [
        {"n": 1},
        {"n": 2},
    ]
    options = CsvOptions(header=False)
    table = joined_parts(ResultFormat.CSV, options, [b"1,a\n", BOM + b"2,b\n"])
    assert table.decode("utf-8").splitlines() == ["1,a", "2,b"]


def test_a_paged_json_result_with_a_bom_is_stored_as_json_it_was_judged() -> None:
    desc = provider(format="json")
    parts = [HttpResponse(200, {"content-type": "application/json"}, BOM + b'{"a": 1}')] * 2
    check = validate_result(desc, parts, None)
    assert check.ok, check.reason
    stored = result_content(desc.result, [p.body for p in parts])
    assert json.loads(stored.decode("utf-8")) == check.parsed == [{"a": 1}, {"a": 1}]


def test_a_single_part_and_opaque_formats_are_left_as_they_are() -> None:
    assert joined_parts(ResultFormat.JSONL, None, [b'{"n":1}']) == b'{"n":1}'
    assert joined_parts(ResultFormat.BINARY, None, [b"\x00\x01", b"\x02"]) == b"\x00\x01\x02"


def _files(**result: Any) -> ProviderDescription:
    return provider(
        status={"counts_total": "/counts/total"},
        source="files",
        path="/v1/files/{file_id}",
        file_ids=["/a", "/b"],
        **result,
    )


def _done(total: int) -> StatusFact:
    counts = Counts(total=total, succeeded=None, failed=None)
    return StatusFact(200, RemoteState.SUCCEEDED, counts=counts, result_file_ids=("a", "b"))


def test_a_multi_file_result_is_hashed_as_the_document_stored() -> None:
    desc = _files(format="jsonl")
    parts = [HttpResponse(200, {}, b'{"n":1}'), HttpResponse(200, {}, b'{"n":2}\n')]
    check = validate_result(desc, parts, _done(2))
    stored = result_content(desc.result, [p.body for p in parts])
    assert check.ok and check.sha256 == hashlib.sha256(stored).hexdigest()
    assert check.size == len(stored) and stored == b'{"n":1}\n{"n":2}\n'


def test_each_json_part_states_its_own_count_and_the_whole_is_their_sum() -> None:
    desc = _files(format="json", items="/items", expect={"item_count": "/count"})
    parts = [
        HttpResponse(200, {}, b'{"count": 2, "items": [1, 2]}'),
        HttpResponse(200, {}, b'{"count": 1, "items": [3]}'),
    ]
    check = validate_result(desc, parts, _done(3))
    assert check.ok, check.reason  # was "expected 2 items, got 3": part 1's count only


@pytest.mark.parametrize(
    "body",
    [b'{"n": 1}\nNaN\n', b'{"x": Infinity}\n', '{"n": 1}\n'.encode("utf-16")],
)
def test_what_strict_json_parsers_refuse_is_no_json_result(body: bytes) -> None:
    check = validate_result(provider(format="jsonl"), HttpResponse(200, {}, body), None)
    assert not check.ok and "not valid JSON" in check.reason
