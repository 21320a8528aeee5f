"""Result formats csv, text and binary: decoding, row items, count checks, bounded failures."""

from __future__ import annotations

import hashlib
from typing import Any

from shared.providers import (
    HttpResponse,
    StatusFact,
    parse_providers,
    validate_inline_result,
    validate_result,
)
from shared.providers.results import MAX_FAILED_ITEMS
from tests.unit.result_fixtures import counts, ok, provider, provider_table

FAILING = {"failed_column": "status", "failed_values": ["error", "failed"]}
CSV: dict[str, Any] = {
    "format": "csv",
    "csv": {**FAILING, "error_column": "message", "id_column": "id"},
    "expect": {"item_count": "from_status_counts"},
}
BODY = b"id,status,message\r\na,ok,\r\nb,error,bad input\r\nc,ok,\r\nd,failed,timeout\r\n"


# --------------------------------------------------------------------- csv


def test_csv_rows_are_items_and_failed_rows_become_item_failures() -> None:
    check = validate_result(provider(**CSV), ok(BODY), counts(4, 2, 2))
    assert check.ok, check.reason
    assert (check.items_total, check.items_succeeded, check.items_failed) == (4, 2, 2)
    assert [(f.index, f.item_id, f.code, f.message) for f in check.failed_items] == [
        (1, "b", "error", "bad input"),
        (3, "d", "failed", "timeout"),
    ]
    assert check.parsed == {
        "columns": ["id", "status", "message"],
        "rows": [
            ["a", "ok", ""],
            ["b", "error", "bad input"],
            ["c", "ok", ""],
            ["d", "failed", "timeout"],
        ],
    }
    assert check.sha256 == hashlib.sha256(BODY).hexdigest()


def test_csv_successes_checked_against_status_counts() -> None:
    check = validate_result(provider(**CSV), ok(BODY), counts(4, 3, 1))
    assert not check.ok and not check.unavailable
    assert check.reason == "expected 3 successful items, got 2"


def test_csv_total_checked_against_status_counts_when_rows_can_fail() -> None:
    check = validate_result(provider(**CSV), ok(BODY), counts(5, 2, 3))
    assert check.reason == "expected 5 items, got 4"


def test_csv_without_failed_rule_counts_every_row_as_success() -> None:
    desc = provider(format="csv", expect={"item_count": "from_status_counts"})
    check = validate_result(desc, ok(b"id\n1\n2\n"), counts(5, 2, 3))
    assert check.ok, check.reason  # failures live elsewhere: total is not compared
    assert (check.items_total, check.items_succeeded, check.items_failed) == (2, 2, 0)
    assert check.failed_items == ()


def test_csv_no_counts_in_status_is_a_note() -> None:
    check = validate_result(provider(**CSV), ok(BODY), StatusFact(status_code=200))
    assert check.ok and check.notes == ("item count not checked: the status reported no counts",)


def test_csv_failed_column_without_values_means_any_non_empty_value() -> None:
    desc = provider(format="csv", csv={"failed_column": "error"})
    check = validate_result(desc, ok(b"id,error\n1,\n2,  \n3,boom\n"), None)
    assert check.ok and check.items_failed == 1
    assert check.failed_items[0].index == 2 and check.failed_items[0].code == "boom"


def test_csv_without_header_uses_column_indexes_and_delimiter() -> None:
    csv = {"header": False, "delimiter": ";", "failed_column": 1, "failed_values": ["KO"]}
    desc = provider(format="csv", csv={**csv, "error_column": 2, "id_column": 0})
    check = validate_result(desc, ok(b"x;OK;\ny;KO;no luck\n"), counts(2, 1, 1))
    assert check.ok, check.reason
    assert check.parsed == {"columns": None, "rows": [["x", "OK", ""], ["y", "KO", "no luck"]]}
    assert check.failed_items[0].index == 1
    assert check.failed_items[0].item_id == "y"
    assert check.failed_items[0].message == "no luck"


def test_csv_quoted_fields_may_hold_delimiters_and_newlines() -> None:
    body = b'id,status,message\n1,error,"line one\nline two, still"\n'
    check = validate_result(provider(**CSV), ok(body), None)
    assert check.ok, check.reason
    assert check.failed_items[0].message == "line one\nline two, still"


def test_csv_blank_lines_and_byte_order_mark_are_ignored() -> None:
    check = validate_result(
        provider(**CSV), ok(b"\xef\xbb\xbfid,status,message\n\na,ok,\n\n"), None
    )
    assert check.ok, check.reason
    assert check.items_total == 1


def test_csv_ragged_row_is_a_validation_failure() -> None:
    check = validate_result(provider(**CSV), ok(b"id,status,message\na,ok,\nb,error\n"), None)
    assert not check.ok and not check.unavailable
    assert check.reason == "result line 3 has 2 fields, expected 3"


def test_csv_bad_quoting_is_a_validation_failure() -> None:
    check = validate_result(provider(**CSV), ok(b'id,status,message\na,"ok"x,\n'), None)
    assert not check.ok
    assert check.reason.startswith("result is not valid CSV: line 2:")


def test_csv_unterminated_quote_is_a_validation_failure() -> None:
    check = validate_result(provider(**CSV), ok(b'id,status,message\na,ok,"never closed\n'), None)
    assert not check.ok and check.reason.startswith("result is not valid CSV")


def test_csv_undecodable_bytes_are_a_validation_failure() -> None:
    check = validate_result(provider(**CSV), ok(b"id,status,message\na,\xff,\n"), None)
    assert not check.ok
    assert check.reason == "result is not valid UTF-8 (byte 20)"


def test_csv_huge_field_is_a_validation_failure_not_an_exception() -> None:
    body = b"id,status,message\na,ok," + b"x" * 200_000 + b"\n"
    check = validate_result(provider(**CSV), ok(body), None)
    assert not check.ok and check.reason.startswith("result is not valid CSV")


def test_csv_missing_header_row() -> None:
    check = validate_result(provider(**CSV), ok(b""), None)
    assert check.reason == "result has no CSV header row"


def test_csv_header_without_the_failed_column() -> None:
    check = validate_result(provider(**CSV), ok(b"id,state,message\na,ok,\n"), None)
    assert check.reason == "CSV header has no column status (failed_column)"


def test_csv_ambiguous_column_name() -> None:
    check = validate_result(provider(**CSV), ok(b"id,status,status,message\na,ok,ok,\n"), None)
    assert check.reason == "CSV header names column status 2 times (failed_column)"


def test_csv_column_index_beyond_the_row() -> None:
    desc = provider(format="csv", csv={"header": False, "failed_column": 3})
    check = validate_result(desc, ok(b"a,b\n"), None)
    assert check.reason == "failed_column 3 is beyond the 2 columns of the result"


def test_csv_required_columns() -> None:
    desc = provider(format="csv", csv={"required_columns": ["id", "score"]})
    assert validate_result(desc, ok(b"id,score\n1,2\n"), None).ok
    check = validate_result(desc, ok(b"id\n1\n"), None)
    assert check.reason == "missing required column score"


def test_csv_failures_listed_are_bounded() -> None:
    rows = b"".join(b"%d,error,x\n" % n for n in range(MAX_FAILED_ITEMS + 5))
    check = validate_result(provider(**CSV), ok(b"id,status,message\n" + rows), None)
    assert check.ok and check.items_failed == MAX_FAILED_ITEMS + 5
    assert len(check.failed_items) == MAX_FAILED_ITEMS and check.failed_items_truncated


def test_csv_parts_are_one_table_with_one_header() -> None:
    parts = [ok(b"id,status,message\na,ok,\n"), ok(b"id,status,message\nb,error,no\n")]
    check = validate_result(provider(**CSV), parts, counts(2, 1, 1))
    assert check.ok, check.reason
    assert check.failed_items[0].index == 1  # positions run across parts
    assert check.parsed["rows"] == [["a", "ok", ""], ["b", "error", "no"]]


def test_csv_parts_with_different_headers_fail() -> None:
    parts = [ok(b"id,status,message\na,ok,\n"), ok(b"id,message,status\nb,no,error\n")]
    check = validate_result(provider(**CSV), parts, None)
    assert check.reason == "result part 2 has another CSV header than part 1"


def test_csv_ragged_row_in_a_later_part_names_the_part() -> None:
    parts = [ok(b"id,status,message\na,ok,\n"), ok(b"id,status,message\nb,ok\n")]
    check = validate_result(provider(**CSV), parts, None)
    assert check.reason == "result part 2 line 2 has 2 fields, expected 3"


def test_csv_size_limit_applies_before_parsing() -> None:
    desc = provider(**{**CSV, "expect": {"max_bytes": 10}})
    check = validate_result(desc, ok(BODY), None)
    assert check.reason.startswith("result larger than max_bytes")


def test_csv_inline_result_is_a_string() -> None:
    desc = parse_providers(
        provider_table({"source": "inline", "inline": "/output", **CSV}), "test.toml", {}
    )["p"]
    check = validate_inline_result(desc, "id,status,message\na,ok,\nb,error,x\n", counts(2, 1, 1))
    assert check.ok, check.reason
    assert check.items_failed == 1 and check.parsed["columns"] == ["id", "status", "message"]
    bad = validate_inline_result(desc, {"id": 1}, None)
    assert bad.reason == "inline csv result is not a string"


# --------------------------------------------------------------------- text


def test_text_result_is_decoded_and_kept() -> None:
    desc = provider(format="text", expect={"content_types": ["text/*"]})
    check = validate_result(desc, ok("héllo\nwörld\n".encode(), "text/plain"), None)
    assert check.ok, check.reason
    assert check.parsed == "héllo\nwörld\n"
    assert check.items_total is None and check.failed_items == ()


def test_text_undecodable_is_a_validation_failure() -> None:
    check = validate_result(provider(format="text"), ok(b"ok \xc3\x28", "text/plain"), None)
    assert not check.ok and not check.unavailable
    assert check.reason == "result is not valid UTF-8 (byte 3)"


def test_text_parts_name_the_part() -> None:
    parts = [ok(b"fine", "text/plain"), ok(b"\xff", "text/plain")]
    check = validate_result(provider(format="text"), parts, None)
    assert check.reason == "result part 2 is not valid UTF-8 (byte 0)"


def test_text_size_limit() -> None:
    desc = provider(format="text", expect={"max_bytes": 3})
    assert validate_result(desc, ok(b"abcd", "text/plain"), None).reason.startswith(
        "result larger than max_bytes"
    )


def test_text_content_type_still_checked() -> None:
    desc = provider(format="text", expect={"content_types": ["text/plain"]})
    check = validate_result(desc, ok(b"x", "application/json"), None)
    assert check.reason == "unexpected content type application/json (expected text/plain)"


# --------------------------------------------------------------------- binary


def test_binary_result_is_only_sized_and_hashed() -> None:
    body = bytes(range(256)) * 4
    desc = provider(format="binary", expect={"content_types": ["application/octet-stream"]})
    check = validate_result(desc, ok(body, "application/octet-stream"), counts(9, 9, 0))
    assert check.ok, check.reason
    assert check.parsed is None  # stored as a file only, never as JSON
    assert check.size == len(body) and check.sha256 == hashlib.sha256(body).hexdigest()
    assert check.items_total is None


def test_binary_size_limit() -> None:
    desc = provider(format="binary", expect={"max_bytes": 4})
    check = validate_result(desc, ok(b"\x00" * 5, "application/octet-stream"), None)
    assert not check.ok and check.reason == "result larger than max_bytes (5 > 4 bytes)"


def test_binary_fetch_failure_is_unavailable() -> None:
    check = validate_result(provider(format="binary"), HttpResponse(410, {}, b""), None)
    assert check.unavailable and check.reason == "result fetch answered HTTP 410"


def test_json_still_parses_as_before() -> None:
    check = validate_result(provider(), ok(b'{"a": 1}', "application/json"), None)
    assert check.ok and check.parsed == {"a": 1}
