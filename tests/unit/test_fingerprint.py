from __future__ import annotations

import math
import unicodedata

import pytest

from shared.fingerprint import FingerprintError, canonical_json, request_fingerprint


def test_key_order_and_whitespace_do_not_matter() -> None:
    assert request_fingerprint("POST", "/v1/r", {"a": 1, "b": [1, 2]}) == request_fingerprint(
        "post", "/v1/r", {"b": [1, 2], "a": 1}
    )


def test_integer_valued_floats_equal_integers() -> None:
    assert (
        canonical_json({"n": 1.0, "m": 2e0}) == canonical_json({"n": 1, "m": 2}) == '{"m":2,"n":1}'
    )


def test_fractional_numbers_stay_distinct() -> None:
    assert canonical_json(1.5) != canonical_json(1)


def test_unicode_forms_are_normalized() -> None:
    composed = unicodedata.normalize("NFC", "café")
    decomposed = unicodedata.normalize("NFD", "café")
    assert composed != decomposed
    assert request_fingerprint("POST", "/x", {decomposed: decomposed}) == request_fingerprint(
        "POST", "/x", {composed: composed}
    )


def test_any_change_of_meaning_changes_the_fingerprint() -> None:
    base = request_fingerprint("POST", "/v1/reports", {"format": "csv"})
    assert base != request_fingerprint("POST", "/v1/reports", {"format": "xlsx"})
    assert base != request_fingerprint("PUT", "/v1/reports", {"format": "csv"})
    assert base != request_fingerprint("POST", "/v1/exports", {"format": "csv"})
    assert base != request_fingerprint("POST", "/v1/reports", {"format": "csv", "x": None})


def test_fingerprint_format() -> None:
    fp = request_fingerprint("POST", "/", {})
    assert fp.startswith("sha256:") and len(fp) == 7 + 64


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "x"}, {"s": {1, 2}}])
def test_non_json_values_are_refused(bad: object) -> None:
    with pytest.raises(FingerprintError):
        canonical_json(bad)


def test_keys_colliding_after_normalization_are_refused() -> None:
    with pytest.raises(FingerprintError, match="duplicate key"):
        canonical_json({unicodedata.normalize("NFC", "é"): 1, unicodedata.normalize("NFD", "é"): 2})
