"""Canonical JSON and the request fingerprint that guards an idempotency token.

A token may only ever be replayed for the request it was minted for. Agents
rewrite requests while reasoning, so "the same request" must be decided on
meaning, not bytes: keys are sorted, insignificant whitespace dropped, strings
NFC-normalized, and numbers compared by value (1 == 1.0 == 1e0; an integer
valued float is written as an integer). NaN and infinities are refused: JSON
cannot carry them and they have no stable meaning.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from decimal import Decimal
from typing import Any


class FingerprintError(ValueError):
    """The request cannot be canonicalized (non-JSON value, NaN, ...)."""


def _canonical(value: Any, path: str) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        if isinstance(value, float) and not math.isfinite(value):
            raise FingerprintError(f"{path or '$'}: {value!r} is not a JSON number")
        if isinstance(value, Decimal) and not value.is_finite():
            raise FingerprintError(f"{path or '$'}: {value!r} is not a JSON number")
        if value == int(value):
            return int(value)
        return float(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise FingerprintError(f"{path or '$'}: object keys must be strings, got {key!r}")
            norm = unicodedata.normalize("NFC", key)
            if norm in out:
                raise FingerprintError(f"{path or '$'}: duplicate key {norm!r} after normalization")
            out[norm] = _canonical(item, f"{path}.{norm}")
        return out
    if isinstance(value, list | tuple):
        return [_canonical(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise FingerprintError(f"{path or '$'}: {type(value).__name__} is not JSON")


def canonical_json(value: Any) -> str:
    """Deterministic JSON text for a JSON-compatible value."""
    return json.dumps(
        _canonical(value, ""), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def request_fingerprint(method: str, target: str, body: Any) -> str:
    """`sha256:<hex>` over canonical JSON of method + target + body."""
    document = {"method": method.upper(), "target": target, "body": body}
    digest = hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
