"""JSON text for jsonb from values a provider controls (pure functions)."""

from __future__ import annotations

import enum
import json
import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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


class _Odd(float):
    pass


class _Plain(enum.Enum):
    NUMBER = 1.5
    NOT_A_NUMBER = math.nan
    TEXT = "a\x00b"


def test_a_non_finite_number_inside_a_subclass_or_an_enum_is_refused() -> None:
    for value in ({"x": _Odd("nan")}, {"x": _Plain.NOT_A_NUMBER}):
        with pytest.raises(ValueError):
            pgjson.dumps(value)


def test_a_plain_record_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(value: Any) -> str:
        raise AssertionError("the standard library's path was taken")

    monkeypatch.setattr(pgjson, "_exact", refuse)
    row = {"id": "op_1", "n": 2**64 - 1, "m": -(2**63), "x": 2.5, "t": None, "l": ["é", True]}
    assert json.loads(pgjson.dumps(row)) == row  # the 64-bit edges stay exact


def test_enums_and_uuids_encode_alike_on_either_path() -> None:
    fast = {"u": uuid.UUID(int=7), "e": _Plain.NUMBER}
    slow = {**fast, "nul": "x\x00"}  # a NUL sends the document the standard library's way
    for value in (fast, slow):
        decoded = json.loads(pgjson.dumps(value))
        assert decoded["u"] == "00000000-0000-0000-0000-000000000007"
        assert decoded["e"] == 1.5
    assert json.loads(pgjson.dumps({"e": _Plain.TEXT, "big": 2**70})) == {
        "e": "a\ufffdb",
        "big": 2**70,
    }


def test_nesting_deeper_than_orjson_takes_is_still_encoded() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    assert json.loads(pgjson.dumps(deep)) == deep
