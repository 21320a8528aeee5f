"""An answer's headers as the call log keeps them: sanitized and bounded (shared.redaction).

A provider chooses its headers: httpcore reads up to about 100 KiB of them,
and every one was stored in the call log and hashed into its evidence leaf.
A call rebuilt from its record (`recorded_response`) is not trusted when a
header it reads may have been cut or left out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconciler.calls import recorded_response
from shared.redaction import (
    CUT,
    MAX_STORED_HEADER_CHARS,
    MAX_STORED_HEADERS,
    MORE_HEADERS,
    REDACTED,
    stored_headers,
)


def test_ordinary_headers_are_stored_as_sanitized() -> None:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer x", "X-Id": "7"}
    assert stored_headers(headers) == {**headers, "Authorization": REDACTED}


def test_a_long_value_is_cut_and_says_so() -> None:
    stored = stored_headers({"X-Padding": "a" * 90_000, "X-Id": "7"})
    assert stored["X-Id"] == "7"
    assert stored["X-Padding"].endswith(f"{CUT} 90000 characters")
    assert len(stored["X-Padding"]) < MAX_STORED_HEADER_CHARS


def test_a_long_name_is_cut_too_and_two_cut_alike_stay_two() -> None:
    stored = stored_headers({"X-" + "n" * 50_000 + "a": "v", "X-" + "n" * 50_000 + "b": "w"})
    assert len(stored) == 2
    for name, value in stored.items():
        assert CUT in name and len(name) + len(value) <= MAX_STORED_HEADER_CHARS


def test_headers_past_the_count_are_one_entry() -> None:
    many = {f"X-H{i}": "v" for i in range(5_000)}
    stored = stored_headers(many)
    assert len(stored) == MAX_STORED_HEADERS + 1
    assert stored[MORE_HEADERS] == f"{5_000 - MAX_STORED_HEADERS} more headers not stored"
    assert len(json.dumps(stored)) < 10_000


def record(headers: dict[str, str], body: str = '{"state":"running"}') -> dict[str, Any]:
    return {
        "status_code": 200,
        "response_body": body,
        "response_sha256": hashlib.sha256(body.encode()).hexdigest(),
        "response_headers": headers,
        "url": "https://api.example/v1/jobs/1",
    }


def test_a_record_whose_read_header_was_cut_is_read_again() -> None:
    row = record(stored_headers({"Location": "https://cdn.example/" + "p" * 9_000}))
    assert recorded_response(row, frozenset({"location"})) is None
    assert recorded_response(row, frozenset()) is not None  # a header nobody reads


def test_a_record_with_headers_left_out_is_read_again_when_any_header_is_read() -> None:
    row = record(stored_headers({f"X-H{i}": "v" for i in range(MAX_STORED_HEADERS + 5)}))
    assert recorded_response(row, frozenset({"x-h1"})) is None
    assert recorded_response(row, None) is None
    rebuilt = recorded_response(row, frozenset())
    assert rebuilt is not None and rebuilt.body == b'{"state":"running"}'
