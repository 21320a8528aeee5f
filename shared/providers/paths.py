"""Where a value lives in a provider's response: JSON pointer, dotted path, header, query.

Provider descriptions name locations as text so they fit in TOML:

- ``/a/b/0``  JSON pointer (RFC 6901, with ``~0``/``~1`` escapes); ``""`` is the
  whole document;
- ``a.b.0``   dotted path (the friendlier spelling; no escapes, so keys holding a
  dot or a colon need the pointer form);
- ``header:Operation-Location``  a response header (case-insensitive);
- ``query:op``  a query-string parameter (webhook URLs we handed out).

Paths are parsed once at load time (so a typo is a ConfigError at start-up,
not a silent ``None`` at 3 a.m.) and applied many times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class PathSource(StrEnum):
    BODY = "body"
    HEADER = "header"
    QUERY = "query"


class PathSyntaxError(ValueError):
    """The text is not a valid value path."""


# RFC 9110 token characters: what a header field name may contain.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@dataclass(frozen=True)
class ValuePath:
    """A parsed location; `segments` is the key chain for body paths, the name otherwise."""

    text: str
    source: PathSource
    segments: tuple[str, ...]

    def __str__(self) -> str:
        return self.text

    @property
    def name(self) -> str:
        """The header or query parameter name (body paths: the last key)."""
        return self.segments[-1] if self.segments else ""


def parse_path(text: str) -> ValuePath:
    """Parse a location; raises PathSyntaxError with a plain reason."""
    if text.startswith("/") or text == "":
        return ValuePath(text, PathSource.BODY, _pointer_segments(text))
    if ":" in text:
        prefix, _, rest = text.partition(":")
        if prefix == "header":
            if not _TOKEN.match(rest):
                raise PathSyntaxError(f"'{text}': header name must be a non-empty HTTP token")
            return ValuePath(text, PathSource.HEADER, (rest,))
        if prefix == "query":
            if not rest or rest.strip() != rest:
                raise PathSyntaxError(f"'{text}': query parameter name is empty or padded")
            return ValuePath(text, PathSource.QUERY, (rest,))
        raise PathSyntaxError(
            f"'{text}': unknown source '{prefix}:' (use header:, query:, "
            "a JSON pointer '/a/b' or a dotted path 'a.b')"
        )
    return ValuePath(text, PathSource.BODY, _dotted_segments(text))


def _pointer_segments(text: str) -> tuple[str, ...]:
    if text == "":
        return ()
    segments = []
    for raw in text[1:].split("/"):
        if re.search(r"~(?![01])", raw):
            raise PathSyntaxError(f"'{text}': '~' must be followed by 0 or 1 in a JSON pointer")
        segments.append(raw.replace("~1", "/").replace("~0", "~"))
    return tuple(segments)


def _dotted_segments(text: str) -> tuple[str, ...]:
    segments = tuple(text.split("."))
    for segment in segments:
        if not segment:
            raise PathSyntaxError(f"'{text}': empty segment in dotted path")
        if segment.strip() != segment or any(c.isspace() for c in segment):
            raise PathSyntaxError(f"'{text}': whitespace in dotted path")
    return segments


def extract(
    path: ValuePath,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
) -> Any:
    """The value at `path`, or None when absent (JSON null is also None)."""
    if path.source is PathSource.HEADER:
        return _lookup_ci(headers, path.name)
    if path.source is PathSource.QUERY:
        return None if query is None else query.get(path.name)
    node = body
    for segment in path.segments:
        node = _step(node, segment)
        if node is None:
            return None
    return node


def _step(node: Any, segment: str) -> Any:
    if type(node) is dict or isinstance(node, Mapping):  # a dict spares the ABC check
        return node.get(segment)
    if isinstance(node, list) and segment.isdigit():
        index = int(segment)
        return node[index] if index < len(node) else None
    return None


def _lookup_ci(headers: Mapping[str, str] | None, name: str) -> str | None:
    if headers is None:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, candidate in headers.items():
        if key.lower() == lowered:
            return candidate
    return None


def set_value(body: MutableMapping[str, Any], path: ValuePath, value: Any) -> None:
    """Write `value` at a body path, creating intermediate objects as needed.

    Used to place our operation id or idempotency token in a create body
    (``metadata.jobwarden_operation_id``). Refuses to overwrite a non-object on
    the way, because silently replacing the caller's data would change the
    request the fingerprint was computed for.
    """
    if path.source is not PathSource.BODY or not path.segments:
        raise PathSyntaxError(f"'{path.text}': only a non-empty body path can be written")
    node: MutableMapping[str, Any] = body
    for segment in path.segments[:-1]:
        child = node.get(segment)
        if child is None:
            child = {}
            node[segment] = child
        if not isinstance(child, MutableMapping):
            raise PathSyntaxError(f"'{path.text}': '{segment}' holds a non-object value")
        node = child
    node[path.segments[-1]] = value
