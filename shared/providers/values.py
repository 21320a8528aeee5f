"""Lenient coercion of JSON values into the types facts hold.

Providers disagree on types (ids as numbers, counts as strings, timestamps as
RFC 3339 or Unix seconds). Coercion here is lenient about spelling and strict
about meaning: a value that cannot be read becomes None, never a guess.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from shared.jsonread import LongInt
from shared.providers.facts import ErrorInfo, ItemFailure
from shared.providers.paths import ValuePath, extract

# Bounds on text copied from provider bodies into facts (and so the ledger).
MAX_TEXT = 500

_FRACTION = re.compile(r"(\.\d{6})\d+")


def as_str(value: Any) -> str | None:
    """Scalars as text (ids may be numbers); objects, lists, booleans and "" -> None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, int | float):
        return str(value)
    return None


def as_id(value: Any) -> str | None:
    """An id or reference (an event id, a job id...) as text, or None when it names nothing.

    A JSON float (a literal with a fraction or an exponent) names nothing
    exactly: it was rounded to a double as it was read, so two different ids
    (1e400 and 2e400, 9007199254740993.0 and 9007199254740992.0) would read
    as one, and 1e400 would name the job "inf". It counts as absent. Integers
    are exact however long (a `LongInt` is an integer by its digits); text
    is as given.
    """
    if isinstance(value, float) and not isinstance(value, LongInt):
        return None
    return as_str(value)


def as_code(value: Any) -> str | None:
    """A code (an error code, a numeric state) as text; an integral float is its integer's.

    A provider that writes the code 1 as 1.0 means 1: both read as "1", so a
    code sent either way matches the same configured codes. Past 2**53 a
    float is no longer exactly the integer that was sent, so it stays as is.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return as_str(value)


def listed_code(found: str | None, codes: frozenset[str]) -> bool:
    """Whether `found` is one of `codes`, as written or in the forms AWS sends a
    code in: its JSON protocols may qualify `__type` with the shape's namespace
    (`com.amazonaws.textract#ThrottlingException`) and `x-amzn-ErrorType` may
    carry a URI after a colon (`ThrottlingException:http://internal...`).
    botocore strips both before comparing; a code listed bare matches either."""
    if found is None:
        return False
    return found in codes or found.partition(":")[0].rpartition("#")[2] in codes


def raw_text(value: Any) -> str | None:
    """A remote state value as the text used for state_map lookups."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # JSON integers have no size limit; a double has
            return None
    elif isinstance(value, str):
        try:
            number = float(value.strip().rstrip("%").rstrip("s"))
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


# An ISO 8601 duration in days, hours, minutes and seconds ("PT30S", "P1DT2H"):
# years and months have no fixed length, so they are not read.
_ISO_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_DURATION_UNITS = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}


def as_seconds(value: Any) -> float | None:
    """A duration: a number of seconds ("30", 30, Google's "30s") or ISO 8601 ("PT30S")."""
    number = as_float(value)
    if number is not None or not isinstance(value, str):
        return number
    found = _ISO_DURATION.match(value.strip().upper())
    if found is None or not any(found.groupdict().values()):
        return None
    return sum(float(v) * _DURATION_UNITS[k] for k, v in found.groupdict().items() if v)


def as_int(value: Any) -> int | None:
    """Integers exactly, whatever their size (a count past 2**53 must not be rounded
    through a double); integral floats and numeric text as well."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass  # "12.0", "1e3", "5s": the lenient float reading below
    number = as_float(value)
    if number is None or number != int(number):
        return None
    return int(number)


def as_datetime(value: Any) -> datetime | None:
    """RFC 3339 text (any fraction length, trailing Z) or Unix seconds -> aware datetime."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    text = _FRACTION.sub(r"\1", value.strip())
    try:
        parsed = datetime.fromisoformat(text)
        # in UTC, so that every instant we keep is one PostgreSQL and asyncpg
        # both hold (0001-01-01T00:00+01:00 is a year-0 instant, BC to them)
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def clip(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def error_info(
    body: Any,
    whole: ValuePath | None,
    code: ValuePath | None,
    message: ValuePath | None,
    headers: Mapping[str, str] | None = None,
) -> ErrorInfo | None:
    """An error from its object (`whole`) and/or code/message paths; None when absent.

    A string where the object was expected is the message (AssemblyAI puts
    `"error": "text"`); objects without `code` fall back to `type` (Anthropic).
    """
    # a response's paths may name a header (`header:X-Error-Code`); an item's never do
    code_value = extract(code, body, headers) if code is not None else None
    message_value = extract(message, body, headers) if message is not None else None
    if whole is not None:
        container = extract(whole, body, headers)
        if isinstance(container, str) and message_value is None:
            message_value = container
        elif isinstance(container, dict):
            code_value = code_value if code_value is not None else container.get("code")
            if code_value is None:
                code_value = container.get("type")
            if message_value is None:
                message_value = container.get("message")
    code_text = clip(as_code(code_value))  # 409 codes, failures: 1.0 is the code 1
    message_text = clip(message_value if isinstance(message_value, str) else as_str(message_value))
    if code_text is None and message_text is None:
        return None
    return ErrorInfo(code=code_text, message=message_text)


def item_failure(
    item: Any,
    position: int | None,
    index: ValuePath | None,
    item_id: ValuePath | None,
    error: ValuePath | None,
    code: ValuePath | None = None,
    message: ValuePath | None = None,
) -> ItemFailure:
    """One failed batch item; `position` is used when the item carries no index."""
    found_index = as_int(extract(index, item)) if index is not None else None
    info = error_info(item, error, code, message)
    return ItemFailure(
        index=found_index if found_index is not None else position,
        item_id=clip(as_str(extract(item_id, item))) if item_id is not None else None,
        code=info.code if info else None,
        message=info.message if info else None,
    )
