"""JSON text for jsonb from values a provider controls (pure functions)."""

from __future__ import annotations

import json

import pytest

from shared.db import pgjson


def test_plain_values_are_encoded_once_and_exactly() -> None:
    value = {"a": [1, 2.5, None, True], "é": "ü", "nested": {"k": "v"}}
    assert json.loads(pgjson.dumps(value)) == value
    assert pgjson.dumps(value).isascii()


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
