"""Batch deliveries: one signed body carrying a list of events (`[webhooks] events`).

HubSpot posts a JSON array of up to 100 events, SendGrid's Event Webhook an
array of any length, Azure Event Grid an array, Microsoft Graph an object
whose `value` is one. Stored as one unread event, such a delivery matched no
operation and woke none: each job waited for its backstop read. With
`events` set, each element is an event of its own, read with the provider's
other body paths (`job_id = "/objectId"` in each element) as a single
delivery's body is read:

- its dedupe key is its own id where `event_id` points at one in a signed
  body (HubSpot's `eventId`, SendGrid's `sg_event_id`: the same event in a
  later batch is a duplicate), else the hash of its bytes as sent (a
  redelivered batch's elements are duplicates, and so is an element repeated
  verbatim);
- its payload is its own text as sent (`element_texts`), not the whole body
  once per element, nor a re-encoding that would round a long decimal
  through a double or write 1e400 as Infinity: a body JSON's reader decodes
  from UTF-16/32 or past a BOM is cut all the same, each element's text
  then in UTF-8. A body whose list could not be cut (never, for JSON the
  reader read) is stored by the endpoint as one unread event, as without
  `events`;
- header and query paths read the request's, the same for every element.

Pure functions: the endpoint submits the events and answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from shared.providers.paths import ValuePath, extract

# JSON's insignificant whitespace (RFC 8259), which is all `raw_decode` will not skip.
_WS = re.compile(r"[ \t\n\r]*")


def _ignored(_literal: str) -> None:
    """A number or constant's value: not needed to find where an element ends."""


# Builds only what it must to find each value's end: numbers are not converted
# (a 5,000-digit integer would raise in int()), and NaN is no concern here (the
# body was read already, NaN refused).
_SKIPPER = json.JSONDecoder(parse_int=_ignored, parse_float=_ignored, parse_constant=_ignored)


def batch_elements(path: ValuePath, document: Any) -> list[Any] | None:
    """The delivery's list of events, or None when `path` holds no list (the body is
    then one event, read as a provider without `events` reads it)."""
    found = extract(path, document)
    return found if isinstance(found, list) else None


def element_texts(body: bytes, path: ValuePath, count: int) -> list[bytes] | None:
    """Each element's text as sent, in UTF-8 (a UTF-8 body's own bytes), or None where
    this reading does not find the list with `count` elements (then the caller
    stores the body unread, never a wrong cut).

    The body is decoded as `json.loads` decodes bytes (`_decoded`), so whatever
    the endpoint read is cut: a re-encoding of the parsed elements would lose
    what a double cannot hold, and recurse past the interpreter's limit for an
    element nested as deep as the reader follows (a 500 on every delivery).
    """
    try:
        text = _decoded(body)
        start = _value_start(text, path.segments)
        if not text.startswith("[", start):
            return None
        spans = list(_elements(text, start))
    except (ValueError, IndexError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if len(spans) != count:
        return None
    # surrogatepass: a surrogate the body carried as raw bytes stays those bytes
    # (`storable_payload` then writes it as U+FFFD, as for a single event)
    return [text[begin:end].encode("utf-8", "surrogatepass") for begin, end in spans]


def _decoded(body: bytes) -> str:
    """The body's text as `json.loads` reads bytes: UTF-8, -16 or -32 by its first
    bytes, a BOM dropped, a surrogate in UTF-8 kept (the endpoint's reader takes it)."""
    return body.decode(json.detect_encoding(body), "surrogatepass")


def _skip_ws(text: str, index: int) -> int:
    found = _WS.match(text, index)
    assert found is not None  # matches the empty string
    return found.end()


def _value_start(text: str, segments: Sequence[Any]) -> int:
    """Where the value `segments` name begins in `text`, as the parsed document
    reads it: of an object's members with one name, the last (as the JSON
    readers keep); a list's index counted from the end when negative."""
    index = _skip_ws(text, 0)
    for segment in segments:
        if text.startswith("{", index):
            index = _member(text, index, segment)
        elif text.startswith("[", index):
            index = _element(text, index, segment)
        else:
            raise ValueError("no object or list on the path")
    return index


def _member(text: str, index: int, name: str) -> int:
    start = None
    for key, begin, _end in _members(text, index):
        if key == name:
            start = begin
    if start is None:
        raise ValueError("no such member")
    return start


def _element(text: str, index: int, segment: str) -> int:
    if not segment.lstrip("-").isdigit():
        raise ValueError("not a list index")
    spans = list(_elements(text, index))
    return spans[int(segment)][0]


def _members(text: str, index: int) -> Iterator[tuple[str, int, int]]:
    """(name, value's start, value's end) of each member of the object at `index`."""
    index = _skip_ws(text, index + 1)
    if text.startswith("}", index):
        return
    while True:
        if not text.startswith('"', index):
            raise ValueError("a member's name expected")
        key, index = _SKIPPER.raw_decode(text, index)  # a name is a JSON string
        index = _skip_ws(text, index)
        if not text.startswith(":", index):
            raise ValueError("':' expected")
        begin = _skip_ws(text, index + 1)
        _, end = _SKIPPER.raw_decode(text, begin)
        yield key, begin, end
        index = _skip_ws(text, end)
        if text.startswith(",", index):
            index = _skip_ws(text, index + 1)
        elif text.startswith("}", index):
            return
        else:
            raise ValueError("',' or '}' expected")


def _elements(text: str, index: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each element of the list at `index`."""
    index = _skip_ws(text, index + 1)
    if text.startswith("]", index):
        return
    while True:
        _, end = _SKIPPER.raw_decode(text, index)
        yield index, end
        index = _skip_ws(text, end)
        if text.startswith(",", index):
            index = _skip_ws(text, index + 1)
        elif text.startswith("]", index):
            return
        else:
            raise ValueError("',' or ']' expected")
