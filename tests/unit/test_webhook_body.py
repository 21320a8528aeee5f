"""The receiver reads an authentic body exactly as the standard library does.

`_parse_json` takes orjson's fast reading only where it is the same (shared.jsonread); these
bodies are the ones where orjson alone would differ (refuse, or read a number
as another) and the ones both must refuse.
"""

from __future__ import annotations

import json

import pytest

from receiver.webhooks.endpoint import _parse_json
from shared import jsonread
from tests.json_documents import random_bodies

# A JSON object nested deeper than `json.loads` reads (RecursionError).
DEEP_OBJECT = b'{"job_id": "j", "a": ' + b"[" * 1000 + b"]" * 1000 + b"}"


@pytest.mark.parametrize(
    "body",
    [
        b'{"job_id": "job_1", "state": "running", "progress": 0.25}',
        b'{"job_id": 123456789012345678901234567890}',  # past 64 bits: stays an int
        b'{"job_id": 9223372036854775808}',  # int64's largest + 1
        b'{"job_id": -18446744073709551616}',
        b'{"amount": 1e999}',  # the standard library reads inf (storable_payload copes)
        b'{"text": "\\ud800 alone"}',  # a lone surrogate escape
        b'\xef\xbb\xbf{"job_id": "job_1"}',  # a UTF-8 BOM
        '{"job_id": "job_1"}'.encode("utf-16"),
        b'{"a": 1, "a": 2}',  # the last duplicate wins, as before
        b'{"pi": 3.141592653589793238462643383279, "tiny": 5e-324, "neg": -0.0}',
    ],
)
def test_a_body_reads_as_the_standard_library_reads_it(body: bytes) -> None:
    document = _parse_json(body)
    assert document == json.loads(body)
    assert repr(document) == repr(json.loads(body))  # int stays int, -0.0 stays -0.0


@pytest.mark.parametrize(
    "body",
    [
        b'{"progress": NaN}',
        b'{"progress": -Infinity}',
        b'{"job_id": "job_1"',
        b'{"job_id": "\xff"}',  # not UTF-8
        b'["job_1"]',  # SendGrid's event webhook posts an array
        b'"job_1"',
        b"{" * 5000,
        b"[" * 5000,
        DEEP_OBJECT.replace(b"}", b""),
        DEEP_OBJECT + b"{}",
        b"[" * 1000 + b"]" * 1000,
    ],
)
def test_what_is_not_a_readable_json_object_is_read_as_nothing_never_refused(body: bytes) -> None:
    """None: the authentic body is stored as it came, matched to nothing (a 400
    would lose it: no provider resends one)."""
    assert _parse_json(body) is None


@pytest.mark.parametrize("depth", [1000, 1022, 10_000, 100_000])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_an_object_deeper_than_the_standard_library_reads_is_json_all_the_same(
    depth: int, encoding: str
) -> None:
    # None: authentic JSON the receiver stores unread (orjson would read to 1,023)
    body = (b'{"job_id": "j", "a": ' + b"[" * depth + b"]" * depth + b"}").decode()
    with pytest.raises(RecursionError):
        json.loads(body)
    assert _parse_json(body.encode(encoding)) is None


def test_random_documents_read_the_same_both_ways() -> None:
    """Numbers of every size and strings of every plane, through both readers."""
    compared = 0
    for body, expected in random_bodies(13, 2000):
        assert repr(_parse_json(body)) == repr(expected)
        compared += 1
    assert compared > 3000


def test_many_brackets_send_a_body_the_slow_way_and_it_reads_the_same() -> None:
    body = b'{"a": ' + b"[" * 300 + b"]" * 300 + b', "b": 1}'
    assert body.count(b"[") > jsonread.MAX_FAST_BRACKETS
    assert _parse_json(body) == json.loads(body)


def test_long_digit_runs_are_what_sends_a_body_the_slow_way() -> None:
    assert not jsonread.fast_path_safe(b'{"id": 1234567890123456789}')
    assert jsonread.fast_path_safe(b'{"id": 123456789012345678}')
