"""JSON bodies read by orjson where that reads them exactly as the standard library would.

orjson reads a common body about five times faster than `json.loads`, but
not always the same way: it refuses what `json.loads` takes (lone
surrogates in escapes, a BOM, UTF-16, NaN, 1e999), reads an integer past 64
bits as a float (a numeric job id would become another), and takes nesting
up to 1,023 levels where the standard library stops near its recursion
limit. So a body with a run of 19 or more digits or with more than
MAX_FAST_BRACKETS opening brackets, and any body orjson refuses, is read by
`json.loads` as before: orjson only makes a body faster to read, never read
differently. The webhook receiver and the reconciler's provider answers
both read this way.

For what the standard library refuses yet is JSON, the receiver has one
more reader here: `int_or_long` (an integer longer than `int()` reads, as a
`LongInt`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

# Integers that may not fit 64 bits have 19 digits or more (int64's largest
# has 19). Bodies with more opening brackets than MAX_FAST_BRACKETS may nest
# deeper than the standard library reads (it refuses near its recursion
# limit, about 1,000 levels less the stack in use).
MAX_FAST_BRACKETS = 256
# One pass over the body finds both: every digit becomes "0", every opening
# bracket "[", anything else a space. (A regex search for a digit run costs
# about three times the whole orjson reading of a small body.)
_SHAPE = bytes(
    ord("0") if chr(c).isdigit() and c < 128 else ord("[") if c in b"[{" else ord(" ")
    for c in range(256)
)
_LONG_DIGITS = b"0" * 19

# What `loads` raises for bytes that are not JSON to the standard library:
# ValueError (not JSON, not UTF-8) or RecursionError (nested deeper than the
# interpreter's stack, e.g. 100,000 "[").
NOT_JSON: tuple[type[Exception], ...] = (ValueError, RecursionError)


def fast_path_safe(body: bytes) -> bool:
    """Whether orjson's reading of `body`, if it reads it at all, is the standard library's."""
    shape = body.translate(_SHAPE)
    return _LONG_DIGITS not in shape and shape.count(b"[") <= MAX_FAST_BRACKETS


def loads(body: bytes, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads(body, parse_constant=parse_constant)`, faster; raises what it raises.

    `parse_constant` sees NaN, Infinity and -Infinity, which orjson never
    reads: a body holding one always takes the standard library's path.
    """
    if isinstance(body, bytes) and fast_path_safe(body):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # perhaps JSON to the standard library: it decides
    return json.loads(body, parse_constant=parse_constant)


class LongInt(float):
    """An integer literal too long for `int()`: infinite as a number, its digits as text.

    Python refuses to read an integer of more than `sys.get_int_max_str_digits()`
    digits (4,300 by default), yet such a body is JSON. As a number it is what
    `json.loads` makes of any literal beyond a double's range (infinity, which
    no encoder writes back); as text (`str`) it is exactly its digits, so an
    id read from it is the one the sender wrote. A float by type only: it is
    an integer, and `shared.providers.values.as_id` reads it as one.
    """

    __slots__ = ("_literal",)
    _literal: str

    def __new__(cls, literal: str) -> LongInt:
        number = super().__new__(cls, literal)
        number._literal = literal
        return number

    def __str__(self) -> str:
        return self._literal

    __repr__ = __str__


def int_or_long(literal: str) -> int | float:
    """`parse_int` for `json.loads`: an `int`, or a `LongInt` past what `int()` reads."""
    try:
        return int(literal)
    except ValueError:  # more digits than int() reads
        return LongInt(literal)
