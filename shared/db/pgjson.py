"""JSON text PostgreSQL's jsonb will take, from values a provider controls.

jsonb refuses the escape for NUL, and unpaired surrogates (which Python
strings can hold and UTF-8 cannot). Provider bodies may carry either; a row
must never fail to store because of them, so they become U+FFFD. Everything
else is kept exactly.
"""

from __future__ import annotations

import json
import math
import re
from enum import Enum
from typing import Any
from uuid import UUID

import orjson

from shared.text import scrub_text

# What json.dumps (ensure_ascii) writes for NUL and for surrogates. A literal
# backslash before "u0000" in the data also matches: that only sends the value
# through the (correct, slower) scrubbing path.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
# What orjson hands back to the standard library's path: datetimes and
# dataclasses are refused there too (TypeError), rather than encoded here only.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
# Leaves the non-finite check skips at once: the types a row is mostly made of.
_PLAIN = (str, int, bool, type(None))


def scrub(value: Any) -> Any:
    """`value` with every string (keys included) made storable."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {scrub_text(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """`value` as JSON text jsonb accepts (UTF-8; NaN and infinities refused).

    Encoded by orjson, about ten times the standard library's speed on a
    status read's record (the reconciler writes one per read). Whatever
    orjson refuses or could get wrong goes the standard library's way, which
    decides exactly as before: a lone surrogate, an integer beyond 64 bits or
    a key that is not a string (orjson refuses them), a NUL (scrubbed there),
    and a NaN or an infinity (orjson would write null; ValueError there).
    """
    try:
        data = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return _exact(value)
    if b"\\u0000" in data or (b"null" in data and _holds_non_finite(value)):
        return _exact(value)
    return data.decode()


def _exact(value: Any) -> str:
    """The standard library's encoding, scrubbed when jsonb would refuse it."""
    text = json.dumps(value, allow_nan=False, separators=(",", ":"), default=_as_orjson_does)
    if _RISKY_ESCAPE.search(text):
        text = json.dumps(
            scrub(value), allow_nan=False, separators=(",", ":"), default=_as_orjson_does
        )
    return text


def _as_orjson_does(value: Any) -> Any:
    """What orjson encodes that json.dumps has no form for: one document is
    encoded alike whichever path it takes (a NUL elsewhere in it sends it here)."""
    if isinstance(value, Enum):
        return scrub(value.value)
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _holds_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity is anywhere in `value` (orjson writes them as null)."""
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple):
        items = value
    elif isinstance(value, Enum):
        return _holds_non_finite(value.value)
    else:
        return isinstance(value, float) and not math.isfinite(value)
    for item in items:
        if type(item) in _PLAIN:
            continue
        if _holds_non_finite(item):
            return True
    return False
