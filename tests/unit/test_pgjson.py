"""JSON text for jsonb from values a provider controls (pure functions)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from shared.db import pgjson


def test_plain_values_are_encoded_exactly() -> None:
    value = {"a": [1, 2.5, None, True, -0.0, 1e-7, 1e16], "é": "ü", "nested": {"k": ("v",)}}
    assert json.loads(pgjson.dumps(value)) == {**value, "nested": {"k": ["v"]}}


@pytest.mark.parametrize(
    "value",
    [
        {"big": 2**64},  # beyond orjson's 64 bits: the standard library keeps it exact
        {"small": -(2**63) - 1},
        {"digits": int("9" * 40)},
        {2: "int key", None: "null key", True: "bool key"},  # as json.dumps names them
    ],
)
def test_what_orjson_refuses_is_encoded_as_the_standard_library_does(value: object) -> None:
    assert pgjson.dumps(value) == json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "shape",
    [
        lambda x: x,
        lambda x: {"x": x},
        lambda x: {"a": None, "b": [1, {"c": (None, x)}]},
    ],
)
def test_a_non_finite_number_is_refused_wherever_it_is(bad: float, shape: object) -> None:
    assert callable(shape)
    with pytest.raises(ValueError):
        pgjson.dumps(shape(bad))


@dataclass
class _Row:
    x: int


@pytest.mark.parametrize("value", [{"at": datetime(2026, 1, 1, tzinfo=UTC)}, {"row": _Row(1)}])
def test_values_json_has_no_form_for_are_refused(value: object) -> None:
    with pytest.raises(TypeError):
        pgjson.dumps(value)


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("a\x00b", "a\ufffdb"),
        ("x\ud800y", "x\ufffdy"),  # unpaired high surrogate
        ("\udfff", "\ufffd"),  # unpaired low surrogate
        ("\U0001f600", "\U0001f600"),  # a valid pair stays
    ],
)
def test_text_jsonb_refuses_is_replaced(raw: str, stored: str) -> None:
    text = pgjson.dumps({raw: [raw]})
    assert "\\u0000" not in text
    assert json.loads(text) == {stored: [stored]}


def test_a_literal_backslash_u0000_is_kept_as_text() -> None:
    value = {"path": "C:\\u0000dir"}
    assert json.loads(pgjson.dumps(value)) == value


def test_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError):
        pgjson.dumps({"x": float("nan")})
