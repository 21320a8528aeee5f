"""Text PostgreSQL can hold: no NUL, no unpaired surrogate (neither has a place in `text`).

Pure, so both the database layer (shared.db.pgjson) and the provider adapters,
which know no database, clean provider text the same way.
"""

from __future__ import annotations


def scrub_text(text: str) -> str:
    """`text` with NUL and unpaired surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def holds_exactly(text: str) -> bool:
    """Whether PostgreSQL `text` holds `text` unchanged (no NUL, no unpaired surrogate).

    For values that name something (an event id, a job id): a scrubbed copy
    would be another name, so such a value is hashed or dropped, never cleaned.
    """
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate
        return False
    return True
