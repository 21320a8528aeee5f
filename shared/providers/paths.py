"""Where a value lives in a provider's response: JSON pointer, dotted path, header, query.

Provider descriptions name locations as text so they fit in TOML:

- ``/a/b/0``  JSON pointer (RFC 6901, with ``~0``/``~1`` escapes for ``~`` and
  ``/``, and ``~2`` for ``[``); ``""`` is the whole document;
- a list's index is its digits, or a minus and its digits from the end
  (``/data/-1/id``: the last item's id);
- ``a.b.0``   dotted path (the friendlier spelling; no escapes, so keys holding a
  dot, a colon or a ``[`` need the pointer form);
- ``header:Operation-Location``  a response header (case-insensitive);
- ``query:op``  a query-string parameter (webhook URLs we handed out).

A body path may pick a list's element by what it holds rather than where it
stands, with a *selector* ``[member=value]``: the FIRST element of the list
that is an object whose ``member`` equals ``value``. CloudConvert lists a job's
tasks in no promised order; its file and its failed task's message are

- ``/data/tasks/[operation=export/url]/result/files/0/url`` (pointer: the
  selector is a segment of its own), or
  ``data.tasks[operation=export/url].result.files.0.url`` (dotted: after its
  list, or as a segment of its own, ``tasks.[k=v]``);
- ``/data/tasks/[operation=convert]/message`` (by what the task does: a
  failure marks the tasks after it ``error`` too, so ``[status=error]`` may
  pick one that only says its input failed).

``[*]`` is every element of a list, the rest of the path read in each: a list
of the values found (CloudConvert's export names each file as an object,
``/data/tasks/[operation=export/url]/result/files/[*]/url``). One per path,
and only where a list of values is wanted (``result.file_ids``: ``parse_path``
refuses it unless asked with ``each=True``); an element without the value
reads as None in its place.

The rules:

- one member, no nesting: ``[result.status=ok]`` is refused in the dotted
  spelling; in a pointer it names the one member literally called
  ``result.status``. The member name ends at the first ``=`` (it holds none;
  the value may), is not empty, and is written as one key of its spelling (a
  pointer's ``~`` escapes apply: ``/`` is ``~1``; a dotted one holds no dot).
- The value is compared as text: a string as it is, a number or a boolean as
  JSON writes it (``[n=3]``, ``[n=2.5]``, ``[ok=true]``; 3.0 is ``[n=3.0]``, not
  ``[n=3]``; the boolean true is not ``[n=1]``). A null, an object, a list or
  an absent member never matches; elements that are not objects are passed
  over. No match, or a value that is not a list, reads as None.
- The value may hold ``/``, ``.``, ``=``, ``:`` and ``]``: a selector ends at the
  first ``]`` followed by the path's separator (``/``; dotted: ``.`` or ``[``) or
  by the end. In a pointer the value is escaped as keys are (``~0`` for ``~``;
  ``]/`` is written ``]~1``). A dotted selector holds no whitespace (use the
  pointer form).
- Escape: a pointer segment that STARTS with ``[`` is always a selector; a key
  whose name starts with ``[`` is written with ``~2``: the key ``[a=b]`` is
  ``/~2a=b]``. A ``[`` anywhere later in a pointer segment is an ordinary
  character (``/x/a[0]``). Dotted paths give ``[`` no other meaning than a
  selector.
- A selector is read, never written: a path jobwarden writes into a create
  body (``idempotency_body_field``, ``client_reference_field``, ``set_body``)
  holding one is refused at load.

Paths are parsed once at load time (so a typo is a ConfigError at start-up,
not a silent ``None`` at 3 a.m.) and applied many times; a path without a
selector is walked exactly as before (a dict lookup per key).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, final


class PathSource(StrEnum):
    BODY = "body"
    HEADER = "header"
    QUERY = "query"


class PathSyntaxError(ValueError):
    """The text is not a valid value path."""


# RFC 9110 token characters: what a header field name may contain.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@final
@dataclass(frozen=True)
class Selector:
    """A path segment ``[member=value]``: the first object of a list whose `member` is `value`.

    Never equal to a `str`, so as a key of an object (a dict) it finds nothing.
    """

    member: str
    value: str

    def __str__(self) -> str:
        return f"[{self.member}={self.value}]"

    def first(self, items: list[Any]) -> Any:
        """The first element of `items` that is an object whose member matches, or None."""
        member, value = self.member, self.value
        for item in items:
            if type(item) is dict or isinstance(item, Mapping):
                found = item.get(member)
                if type(found) is str:
                    if found == value:
                        return item
                elif found is not None and _json_scalar(found) == value:
                    return item
        return None


@final
@dataclass(frozen=True)
class Each:
    """A path segment ``[*]``: every element of a list (`EACH`, the only one)."""

    def __str__(self) -> str:
        return "[*]"


EACH = Each()
# One step of a body path: an object's member (or a list's index), a selector, [*].
Segment = str | Selector | Each


def _json_scalar(found: Any) -> str | None:
    """A number or a boolean as JSON writes it; None for anything else."""
    if isinstance(found, bool):
        return "true" if found else "false"
    if isinstance(found, int | float):
        return str(found)  # JSON's spelling for an int and a finite float; a LongInt's digits
    return None


@dataclass(frozen=True)
class ValuePath:
    """A parsed location; `segments` is the key chain for body paths, the name otherwise.

    A body path's segment is a key (an object's member, or a list's index
    when all digits) or a `Selector`.
    """

    text: str
    source: PathSource
    segments: tuple[Segment, ...]

    def __str__(self) -> str:
        return self.text

    @property
    def name(self) -> str:
        """The header or query parameter name (body paths: the last key)."""
        return str(self.segments[-1]) if self.segments else ""

    @property
    def has_selector(self) -> bool:
        """Whether a segment picks a list's element by value, or each (read only)."""
        return any(type(segment) is not str for segment in self.segments)


def parse_path(text: str, *, each: bool = False) -> ValuePath:
    """Parse a location; raises PathSyntaxError with a plain reason. `each`: may it
    hold ``[*]`` (a path read for a list of values: `result.file_ids`)?"""
    parsed = _parse_path(text)
    found = sum(1 for segment in parsed.segments if segment is EACH)
    if found and not each:
        raise PathSyntaxError(
            f"'{text}': [*] (every element of a list) is read only where a list of "
            "values is wanted (result.file_ids); name one element ('/0', [member=value])"
        )
    if found > 1:
        raise PathSyntaxError(f"'{text}': one [*] per path (a list of lists names no value)")
    return parsed


def _parse_path(text: str) -> ValuePath:
    if text.startswith("/") or text == "":
        return ValuePath(text, PathSource.BODY, _pointer_segments(text))
    prefix, colon, rest = text.partition(":")
    if colon and "[" not in prefix:  # a colon inside a selector is the value's
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


_BAD_TILDE = re.compile(r"~(?![012])")


def _unescape(text: str, raw: str) -> str:
    """A pointer's key (or a selector's member or value) with its ``~`` escapes decoded."""
    if "~" not in raw:
        return raw
    if _BAD_TILDE.search(raw):
        raise PathSyntaxError(f"'{text}': '~' must be followed by 0, 1 or 2 in a JSON pointer")
    # ~0 last, as RFC 6901 says: "~01" is the key "~1"
    return raw.replace("~1", "/").replace("~2", "[").replace("~0", "~")


def _pointer_segments(text: str) -> tuple[Segment, ...]:
    if text == "":
        return ()
    if "/[" not in text:  # no segment starts with '[': keys only
        return tuple(_unescape(text, raw) for raw in text[1:].split("/"))
    segments: list[Segment] = []
    start = 1
    while True:
        if text.startswith("[", start):
            end = _selector_end(text, start, "/")
            segments.append(_selector(text, text[start + 1 : end], pointer=True))
            if end + 1 == len(text):
                return tuple(segments)
            start = end + 2  # past "]/"
            continue
        slash = text.find("/", start)
        if slash < 0:
            segments.append(_unescape(text, text[start:]))
            return tuple(segments)
        segments.append(_unescape(text, text[start:slash]))
        start = slash + 1


def _selector_end(text: str, start: int, separators: str) -> int:
    """Where the selector opened at `start` closes: its first ']' before a separator or the end."""
    close = text.find("]", start)
    while close >= 0:
        if close + 1 == len(text) or text[close + 1] in separators:
            return close
        close = text.find("]", close + 1)
    after = " or ".join(f"'{s}'" for s in separators)
    raise PathSyntaxError(
        f"'{text}': selector '{text[start:]}' has no closing ']' "
        f"(a selector ends at a ']' followed by {after} or the end of the path)"
    )


def _selector(text: str, inner: str, pointer: bool) -> Selector | Each:
    if inner == "*":
        return EACH
    member, equals, value = inner.partition("=")
    if not equals:
        raise PathSyntaxError(
            f"'{text}': '[{inner}]' is not a selector: write [member=value] "
            "(an index is a plain segment, '/0' or '.0'"
            + (", and a key starting with '[' is written '~2')" if pointer else ")")
        )
    if not member:
        raise PathSyntaxError(f"'{text}': '[{inner}]' has an empty member name")
    if pointer:
        if "/" in member:
            raise PathSyntaxError(
                f"'{text}': '[{inner}]' compares one member, no nesting "
                "(a member named with a '/' is written '~1')"
            )
        return Selector(_unescape(text, member), _unescape(text, value))
    if "." in member:
        raise PathSyntaxError(
            f"'{text}': '[{inner}]' compares one member, no nesting "
            "(a member named with a '.' needs the pointer form)"
        )
    if any(c.isspace() for c in inner):
        raise PathSyntaxError(f"'{text}': whitespace in a dotted path's selector")
    return Selector(member, value)


def _dotted_segments(text: str) -> tuple[Segment, ...]:
    if "[" not in text:
        segments = tuple(text.split("."))
        for segment in segments:
            _check_dotted_key(text, segment)
        return segments
    found: list[Segment] = []
    start, length = 0, len(text)
    while True:
        # one segment: a key, a key and its selectors, or selectors alone
        stop = start
        while stop < length and text[stop] not in ".[":
            stop += 1
        if stop > start:
            key = text[start:stop]
            _check_dotted_key(text, key)
            found.append(key)
        elif stop == length or text[stop] == ".":
            raise PathSyntaxError(f"'{text}': empty segment in dotted path")
        while stop < length and text[stop] == "[":
            end = _selector_end(text, stop, ".[")
            found.append(_selector(text, text[stop + 1 : end], pointer=False))
            stop = end + 1
        if stop == length:
            return tuple(found)
        start = stop + 1  # past the '.'


def _check_dotted_key(text: str, segment: str) -> None:
    if not segment:
        raise PathSyntaxError(f"'{text}': empty segment in dotted path")
    if any(c.isspace() for c in segment):
        raise PathSyntaxError(f"'{text}': whitespace in dotted path")


# A list index: 0, 1, ... from the start, -1, -2, ... from the end.
_INDEX = re.compile(r"-?[0-9]+")
# An enum member read from its class costs more than the rest of a short
# extract (Python 3.11): read once, here.
_HEADER, _QUERY = PathSource.HEADER, PathSource.QUERY


def extract(
    path: ValuePath,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
) -> Any:
    """The value at `path`, or None when absent (JSON null is also None)."""
    source = path.source
    if source is _HEADER:
        return _lookup_ci(headers, path.name)
    if source is _QUERY:
        return None if query is None else query.get(path.name)
    node = body
    for segment in path.segments:
        if type(node) is dict and type(segment) is str:  # `_step`'s common step, inlined
            node = node.get(segment)
        elif type(segment) is Each:
            return _each(node, path.segments)
        else:
            node = _step(node, segment)
        if node is None:
            return None
    return node


def _each(node: Any, segments: tuple[Segment, ...]) -> list[Any] | None:
    """The list a path's one [*] stands on, what follows [*] read in each element
    (None where absent); None when it is no list. Kept out of `extract`'s loop,
    which reads every status answer's paths: a path without [*] pays one type
    check a segment for it (an enumerate and a call a path cost a short extract
    about two thirds more)."""
    if not isinstance(node, list):
        return None
    # parse_path allows one [*] per path: none follows it
    rest = tuple(s for s in segments[segments.index(EACH) + 1 :] if not isinstance(s, Each))
    return [_rest(item, rest) for item in node]


def _rest(node: Any, segments: tuple[str | Selector, ...]) -> Any:
    for segment in segments:
        node = _step(node, segment)
        if node is None:
            return None
    return node


def _step(node: Any, segment: str | Selector) -> Any:
    if type(node) is dict:  # the common step: one lookup (a Selector is no key: None)
        return node.get(segment)
    if isinstance(node, list):
        if type(segment) is Selector:
            return segment.first(node)
        if _INDEX.fullmatch(segment) is None:  # ASCII digits only: int("²") raises
            return None
        try:
            index = int(segment)
        except ValueError:  # more digits than int() reads (4,300): past any list's end
            return None
        # -1 is the last item (OpenAI lists: the next page's cursor is the last id)
        return node[index] if -len(node) <= index < len(node) else None
    if isinstance(node, Mapping) and type(segment) is str:
        return node.get(segment)
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
    keys = writable_keys(path)
    node: MutableMapping[str, Any] = body
    for segment in keys[:-1]:
        child = node.get(segment)
        if child is None:
            child = {}
            node[segment] = child
        if not isinstance(child, MutableMapping):
            raise PathSyntaxError(f"'{path.text}': '{segment}' holds a non-object value")
        node = child
    node[keys[-1]] = value


def writable_keys(path: ValuePath) -> tuple[str, ...]:
    """A path's keys, for writing; PathSyntaxError when a selector is among them.

    Writing through ``[member=value]`` would mean choosing what to do when no
    element matches (add one? of what shape?) in a body the caller gave us and
    whose fingerprint was taken: a written path names object members only.
    """
    keys = tuple(s for s in path.segments if type(s) is str)
    if len(keys) != len(path.segments):
        raise PathSyntaxError(
            f"'{path.text}': a selector ([member=value]) is read, never written: "
            "a path written into a create body names object members only"
        )
    return keys
