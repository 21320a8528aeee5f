"""[result] formats and checksum options at load: wrong keys and combinations name the key."""

from __future__ import annotations

from typing import Any

import pytest

from shared.providers import ConfigError, describe_guarantees, parse_providers
from shared.providers.description import (
    Checksum,
    ChecksumAlgorithm,
    ChecksumEncoding,
    CsvOptions,
    ResultFormat,
)
from tests.unit.result_fixtures import provider_table


def _table(result: dict[str, Any]) -> dict[str, Any]:
    return provider_table({"source": "url", **result})


def load(**result: Any) -> Any:
    return parse_providers(_table(result), "t.toml", {})["p"]


def error(**result: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        load(**result)
    return str(caught.value)


def test_csv_defaults() -> None:
    desc = load(format="csv")
    assert desc.result.format is ResultFormat.CSV
    assert desc.result.csv == CsvOptions()


def test_csv_options_loaded() -> None:
    csv = {"header": False, "delimiter": "\t", "failed_column": 2, "failed_values": ["E", 1]}
    desc = load(format="csv", csv={**csv, "error_column": 3, "id_column": 0})
    assert desc.result.csv == CsvOptions(
        header=False,
        delimiter="\t",
        failed_column=2,
        failed_values=frozenset({"E", "1"}),
        error_column=3,
        id_column=0,
    )


def test_json_has_no_csv_options() -> None:
    assert load().result.csv is None


def test_csv_table_with_json_format_is_refused() -> None:
    message = error(csv={"header": True})
    assert message == "t.toml: providers.p.result.csv: only with format = csv, not 'json'"


def test_flat_csv_keys_are_pointed_to_the_csv_table() -> None:
    message = error(format="csv", delimiter=";")
    assert message.startswith("t.toml: providers.p.result.delimiter: a CSV option")
    assert "[result.csv]" in message
    assert error(format="text", failed_column="x").startswith(
        "t.toml: providers.p.result.failed_column: a CSV option"
    )


def test_failed_values_without_failed_column() -> None:
    message = error(format="csv", csv={"failed_values": ["error"]})
    assert message.startswith("t.toml: providers.p.result.csv.failed_values: needs failed_column")


def test_error_column_without_failed_column() -> None:
    message = error(format="csv", csv={"error_column": "message"})
    assert message.startswith("t.toml: providers.p.result.csv.error_column: needs failed_column")


def test_named_column_without_header() -> None:
    message = error(format="csv", csv={"header": False, "failed_column": "status"})
    assert message.startswith("t.toml: providers.p.result.csv.failed_column: 'status' names")
    message = error(format="csv", csv={"header": False, "required_columns": ["id"]})
    assert message.startswith("t.toml: providers.p.result.csv.required_columns: needs header")


def test_bad_column_values() -> None:
    assert "0-based" in error(format="csv", csv={"failed_column": 1.5})
    assert "at least 0" in error(format="csv", csv={"failed_column": -1})
    assert "0-based" in error(format="csv", csv={"failed_column": True})


def test_bad_delimiter() -> None:
    for bad in (",,", '"', "\n", "", 1):
        message = error(format="csv", csv={"delimiter": bad})
        assert message.startswith("t.toml: providers.p.result.csv.delimiter:"), message


def test_unknown_csv_key_has_a_hint() -> None:
    message = error(format="csv", csv={"delimeter": ";"})
    assert message == (
        "t.toml: providers.p.result.csv.delimeter: unknown key (did you mean 'delimiter'?)"
    )


def test_json_item_keys_refused_for_other_formats() -> None:
    message = error(format="csv", item_error="/error")
    assert message.startswith("t.toml: providers.p.result.item_error: only with format = json")
    assert "result.csv" in message
    assert "only with format" in error(format="binary", items="/items")


def test_required_fields_refused_for_csv_text_binary() -> None:
    message = error(format="csv", expect={"required_fields": ["id"]})
    assert message.startswith("t.toml: providers.p.result.expect.required_fields:")
    assert "required_columns" in message
    assert "reads JSON" in error(format="text", expect={"required_fields": ["id"]})


def test_item_count_rules_per_format() -> None:
    assert load(format="csv", expect={"item_count": "from_status_counts"})
    message = error(format="csv", expect={"item_count": "/count"})
    assert message.startswith("t.toml: providers.p.result.expect.item_count: a path reads JSON")
    message = error(format="text", expect={"item_count": "from_status_counts"})
    assert (
        message
        == "t.toml: providers.p.result.expect.item_count: a text result has no items to count"
    )


def test_binary_inline_and_formats_without_a_document() -> None:
    message = error(source="inline", inline="/output", format="binary")
    assert message.startswith("t.toml: providers.p.result.format: 'binary' with source = inline")
    message = error(source="none", format="csv")
    assert message.startswith("t.toml: providers.p.result.format: 'csv' with source = none")
    assert load(source="inline", inline="/output", format="text").result.format is ResultFormat.TEXT


def test_unknown_format_lists_the_choices() -> None:
    message = error(format="xml")
    assert message.endswith("'xml' is not one of json, jsonl, csv, text, binary")


# --------------------------------------------------------------------- checksum


def checksum_error(**checksum: Any) -> str:
    return error(format="binary", expect={"checksum": checksum})


def test_shorthand_still_loads() -> None:
    expect = load(expect={"checksum": "content-digest"}).result.expect
    assert expect.checksum is Checksum.CONTENT_DIGEST
    assert expect.checksum_options.required and expect.checksum_options.algorithm is None


def test_shorthand_header_or_status_needs_a_table() -> None:
    message = error(expect={"checksum": "status"})
    assert message.startswith("t.toml: providers.p.result.expect.checksum: 'status' needs a table")


def test_status_checksum_loads() -> None:
    checksum = {"source": "status", "field": "/output_sha256", "algorithm": "sha256"}
    expect = load(format="csv", expect={"checksum": checksum}).result.expect
    assert expect.checksum is Checksum.STATUS
    options = expect.checksum_options
    assert options.status_field is not None and options.status_field.text == "/output_sha256"
    assert options.algorithm is ChecksumAlgorithm.SHA256
    assert options.encoding is ChecksumEncoding.HEX and options.required


def test_checksum_table_errors_name_the_key() -> None:
    prefix = "t.toml: providers.p.result.expect.checksum."
    cases = [
        ({"source": "status", "algorithm": "sha256"}, "field: required with source = status"),
        ({"source": "status", "field": "/x"}, "algorithm: required (one of sha256, sha512, md5)"),
        ({"source": "header", "algorithm": "md5"}, "header: required with source = header"),
        ({"source": "header", "header": "a b", "algorithm": "md5"}, "header: 'a b' is not a valid"),
        ({"source": "digest", "header": "X"}, "header: only with source = header"),
        ({"source": "header", "header": "X", "field": "/x"}, "field: only with source = status"),
        ({"source": "content-digest", "algorithm": "md5"}, "algorithm: Content-Digest (RFC 9530)"),
        ({"source": "content-digest", "encoding": "hex"}, "encoding: content-digest has its own"),
        ({"source": "status", "field": "/x", "algorithm": "crc32"}, "algorithm: 'crc32' is not"),
        ({"source": "status", "field": "/x", "algorithm": "md5", "encoding": "b64"}, "encoding:"),
        ({"source": "status", "field": "/x", "algorithm": "md5", "required": "y"}, "required:"),
        ({"source": "status", "field": "/x", "algorithm": "md5", "alg": 1}, "alg: unknown key"),
        ({"source": "none", "required": False}, "required: meaningless with source = none"),
        ({"algorithm": "sha256"}, "source: required"),
    ]
    for checksum, expected in cases:
        message = checksum_error(**checksum)
        assert message.startswith(prefix + expected), (checksum, message)


def test_any_checksum_on_an_inline_result_is_refused() -> None:
    checksum = {"source": "status", "field": "/x", "algorithm": "sha256"}
    message = error(source="inline", inline="/output", expect={"checksum": checksum})
    assert message.startswith("t.toml: providers.p.result.expect.checksum: inline results")


# --------------------------------------------------------------------- guarantees


def integrity(desc: Any) -> tuple[bool, str]:
    return next(
        (holds, why)
        for n, holds, why in describe_guarantees(desc)
        if n == "result integrity checked"
    )


def test_guarantee_names_the_status_field() -> None:
    checksum = {"source": "status", "field": "/output_sha256", "algorithm": "sha256"}
    holds, why = integrity(load(format="csv", expect={"checksum": checksum}))
    assert holds
    assert why.startswith("status field /output_sha256 sha256 verified; also checked: ")
    assert "CSV rows well-formed" in why


def test_guarantee_names_the_header_and_md5_caveat() -> None:
    checksum = {"source": "header", "header": "Content-MD5", "algorithm": "md5", "required": False}
    holds, why = integrity(load(format="binary", expect={"checksum": checksum}))
    assert holds
    assert why.startswith("header Content-MD5 md5 verified (md5 catches corruption, not")
    assert "a result without a checksum is still accepted" in why


def test_guarantee_shorthand_wording_unchanged() -> None:
    holds, why = integrity(load(expect={"checksum": "content-digest"}))
    assert holds and why.startswith("Content-Digest sha-256 verified; also checked: max")
    holds, why = integrity(load(format="text"))
    assert (
        not holds
        and why == "no checksum from the provider; checked: max 52428800 bytes, UTF-8 text"
    )


def test_failures_only_needs_items_to_count_as_failures() -> None:
    assert load(items="/results", failures_only=True).result.failures_only
    assert load(format="jsonl", failures_only=True).result.failures_only
    assert not load(items="/results").result.failures_only
    message = error(failures_only=True)
    assert message == (
        "t.toml: providers.p.result.failures_only: needs result.items (the list of failures)"
    )
    assert "no items to count as failures" in error(format="text", failures_only=True)
    assert "no items to count as failures" in error(format="csv", failures_only=True)
    message = error(
        items="/r", failures_only=True, item_success="/ok", item_success_values=["true"]
    )
    assert "item_success says nothing" in message
