"""What PostgreSQL cannot store, recognised before it is sent.

`text` and `jsonb` refuse U+0000, and asyncpg cannot encode a lone surrogate
(which JSON's `\\ud800` escape can produce) as UTF-8: both were 500s. The API
checks every string a caller sends here and refuses it as a 4xx naming the
field, instead of cleaning it: the request is the caller's, and a silently
altered request would be fingerprinted and sent as something else.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store `text`, or None when it can."""
    if "\x00" in text:
        return "contains U+0000 (NUL), which PostgreSQL cannot store"
    if _SURROGATE.search(text):
        return "contains a lone UTF-16 surrogate, which is not valid Unicode text"
    return None
