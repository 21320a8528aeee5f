"""Parsing signed timestamps and enforcing the replay window.

A timestamp is signed as the sender wrote it (the template takes the header's
text); only its meaning for the window depends on `timestamp_format`: unix
seconds (most senders), unix milliseconds (HubSpot's
`X-HubSpot-Request-Timestamp`) or ISO 8601 with an offset (Box's
`BOX-DELIVERY-TIMESTAMP`).
"""

from __future__ import annotations

from datetime import datetime

from .errors import SignatureError

TIMESTAMP_FORMATS: frozenset[str] = frozenset({"unix", "unix_ms", "iso8601"})
# `2027-01-15T08:00:00.123456+05:30` is 32 characters; more is not a timestamp.
_MAX_ISO_CHARS = 40

# Plain ASCII digits only: `int()` would also accept "+1", " 1", "1_000" and
# non-ASCII digits, i.e. several spellings of one signed value, and leading
# zeros would be more (they could move characters between a signed id and a
# signed timestamp). 15 digits reaches far beyond any real clock and bounds
# the work of parsing.
_MAX_DIGITS = 15


def parse_unix_seconds(value: str) -> int:
    """The timestamp a header carries, or malformed_header.

    Accepts exactly what the pattern `0|[1-9][0-9]{0,14}` matches, checked
    with string methods (a third of a regular expression match's cost, paid
    on every delivery): ASCII text whose every character is a digit is made
    of 0-9 only, and `isdigit` is False for "".
    """
    if not (
        len(value) <= _MAX_DIGITS
        and value.isascii()
        and value.isdigit()
        and (value[0] != "0" or value == "0")
    ):
        raise SignatureError("malformed_header")
    return int(value)


def parse_timestamp(timestamp_format: str, value: str) -> int:
    """The unix seconds `value` stands for under `timestamp_format`, or malformed_header.

    Milliseconds and fractions of a second are dropped (floored): the window
    is whole seconds. An ISO 8601 time without an offset is malformed, as its
    instant would be our guess at the sender's zone.
    """
    if timestamp_format == "unix":
        return parse_unix_seconds(value)
    if timestamp_format == "unix_ms":
        return parse_unix_seconds(value) // 1000
    if not (len(value) <= _MAX_ISO_CHARS and value.isascii() and value[:4].isdigit()):
        raise SignatureError("malformed_header")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise SignatureError("malformed_header") from None
    if moment.tzinfo is None:
        raise SignatureError("malformed_header")
    return int(moment.timestamp() // 1)


def check_freshness(timestamp: int, now: float, tolerance_seconds: int) -> None:
    """Reject timestamps outside `now ± tolerance`.

    The past bound stops replays of captured requests; the future bound stops
    an attacker (or a sender with a broken clock) from minting requests that
    stay replayable for a long time.
    """
    if timestamp < now - tolerance_seconds:
        raise SignatureError("stale_timestamp")
    if timestamp > now + tolerance_seconds:
        raise SignatureError("future_timestamp")
