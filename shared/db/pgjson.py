"""JSON text PostgreSQL's jsonb will take, from values a provider controls.

jsonb refuses the escape for NUL, and unpaired surrogates (which Python
strings can hold and UTF-8 cannot). Provider bodies may carry either; a row
must never fail to store because of them, so they become U+FFFD. Everything
else is kept exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any

from shared.text import scrub_text

# What json.dumps (ensure_ascii) writes for NUL and for surrogates. A literal
# backslash before "u0000" in the data also matches: that only sends the value
# through the (correct, slower) scrubbing path.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


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
    """`value` as JSON text jsonb accepts (ASCII; NaN and infinities refused).

    The common case is one C-speed `json.dumps`; only a document that
    carries NUL or surrogates is scrubbed and encoded again.
    """
    text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    if _RISKY_ESCAPE.search(text):
        text = json.dumps(scrub(value), allow_nan=False, separators=(",", ":"))
    return text
