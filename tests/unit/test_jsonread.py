"""`shared.jsonread.loads` reads every body exactly as `json.loads` does.

It takes orjson's reading only where that is the same; these are the bodies
where orjson alone would differ (refuse, read a number as another, or take
nesting the standard library refuses), random documents, and the constants
a caller may refuse.
"""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any, NoReturn

import pytest

from shared import jsonread
from tests.json_documents import random_bodies

DIFFERENT_ALONE = [
    b'{"job_id": 123456789012345678901234567890}',  # past 64 bits: stays an int
    b'{"job_id": 9223372036854775808}',  # int64's largest + 1
    b"[-18446744073709551616]",
    b'{"amount": 1e999}',  # the standard library reads inf
    b'{"text": "\\ud800 alone"}',  # a lone surrogate escape
    b'\xef\xbb\xbf{"job_id": "job_1"}',  # a UTF-8 BOM
    '{"job_id": "job_1"}'.encode("utf-16"),
    b'{"a": 1, "a": 2}',  # the last duplicate wins
    b'{"pi": 3.141592653589793238462643383279, "tiny": 5e-324, "neg": -0.0}',
    b'{"x": NaN, "y": -Infinity}',
    b'"just a string"',
    b"[" * 300 + b"]" * 300,  # deeper than MAX_FAST_BRACKETS: the slow path
]


def _same(a: Any, b: Any) -> bool:
    # repr tells -0.0 from 0.0, 1 from 1.0 and True from 1; NaN never equals itself
    return repr(a) == repr(b)


@pytest.mark.parametrize("body", DIFFERENT_ALONE)
def test_a_body_reads_as_the_standard_library_reads_it(body: bytes) -> None:
    assert _same(jsonread.loads(body), json.loads(body))


@pytest.mark.parametrize(
    "body", [b"", b"{", b'{"a": 1,}', b"\xff\xfe\x00", b'{"a": 1} trailing', b"[" * 100_000]
)
def test_what_the_standard_library_refuses_is_refused(body: bytes) -> None:
    with pytest.raises(jsonread.NOT_JSON):
        json.loads(body)
    with pytest.raises(jsonread.NOT_JSON):
        jsonread.loads(body)


def _refuse(name: str) -> NoReturn:
    raise ValueError(name)


def test_a_refused_constant_is_refused_on_either_path() -> None:
    with pytest.raises(ValueError, match="NaN"):
        jsonread.loads(b'{"x": NaN}', _refuse)
    assert math.isinf(jsonread.loads(b'{"x": -Infinity}')["x"])
    assert jsonread.loads(b'{"x": 1.5}', _refuse) == {"x": 1.5}


def test_deep_nesting_orjson_would_take_is_refused_as_before() -> None:
    # orjson reads up to 1,023 levels; the standard library refuses near its
    # recursion limit, and that refusal must stand.
    body = b"[" * 1022 + b"]" * 1022
    with pytest.raises(RecursionError):
        json.loads(body)
    with pytest.raises(jsonread.NOT_JSON):
        jsonread.loads(body)


def test_the_guards_send_exactly_these_bodies_the_slow_way() -> None:
    assert not jsonread.fast_path_safe(b'{"id": 1234567890123456789}')
    assert jsonread.fast_path_safe(b'{"id": 123456789012345678}')
    many = b"{" * (jsonread.MAX_FAST_BRACKETS + 1)
    assert not jsonread.fast_path_safe(many)
    assert jsonread.fast_path_safe(many[:-1])


def test_random_documents_read_the_same_both_ways() -> None:
    compared = 0
    for body, expected in random_bodies(20261203, 2000):
        assert _same(jsonread.loads(body), expected)
        compared += 1
    assert compared > 3000


def test_the_guard_is_exactly_a_digit_run_or_a_bracket_count() -> None:
    # the one-pass guard against its definition, on bytes drawn to sit near both edges
    rng = random.Random(7)
    alphabet = b'0123456789[{]}", :-.e\xd9\xa0'
    seen = set()
    for _ in range(3000):
        size = rng.choice([10, 40, 300, 600])
        filler = rng.choice(b"1[{")  # runs of digits, or a bracket count near the bound
        body = bytes(rng.choice(alphabet) if rng.random() < 0.55 else filler for _ in range(size))
        long_run = re.search(rb"[0-9]{19}", body) is not None
        many = body.count(b"[") + body.count(b"{") > jsonread.MAX_FAST_BRACKETS
        assert jsonread.fast_path_safe(body) is not (long_run or many)
        seen.add((long_run, many))
    assert seen >= {(False, False), (True, False), (False, True)}
