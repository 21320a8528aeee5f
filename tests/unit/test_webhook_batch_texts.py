"""`receiver.webhooks.batches`: each element of a batch delivery cut from the body as sent.

The property that matters: whatever JSON a sender writes (any whitespace, any
nesting, escapes, numbers JSON's readers round), the texts cut for the list
`events` names parse to exactly the elements the receiver read from the
document, one for one; and where they cannot be cut, None (the receiver then
re-encodes), never a wrong cut.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receiver.webhooks.batches import batch_elements, element_texts
from receiver.webhooks.endpoint import _NOT_JSON, _parse_any
from shared.providers.paths import parse_path

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
_SPACE = st.text(alphabet=" \t\r\n", max_size=3)


def _written(value: Any, space: str, ascii_only: bool) -> str:
    """`value` as JSON text with `space` around every separator."""
    return json.dumps(
        value,
        ensure_ascii=ascii_only,
        separators=(f"{space},{space}", f"{space}:{space}"),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, max_size=6), _SPACE, st.booleans())
def test_the_cut_texts_read_back_as_the_elements(
    elements: list[Any], space: str, ascii_only: bool
) -> None:
    body = f"{space}{_written(elements, space, ascii_only)}{space}".encode()
    path = parse_path("")
    document = _parse_any(body)
    found = batch_elements(path, document)
    assert found is not None
    texts = element_texts(body, path, len(found))
    assert texts is not None
    assert [json.loads(text) for text in texts] == found
    # each cut is a slice of the body as sent
    assert all(text in body for text in texts)


@settings(max_examples=200, deadline=None)
@given(st.lists(_VALUES, max_size=4), _VALUES, _SPACE)
def test_a_list_inside_objects_and_lists(elements: list[Any], other: Any, space: str) -> None:
    document = {"meta": other, "data": [other, {"value": elements, "x": other}]}
    body = _written(document, space, True).encode()
    path = parse_path("/data/1/value")
    found = batch_elements(path, _parse_any(body))
    assert found == elements
    texts = element_texts(body, path, len(found))
    assert texts is not None and [json.loads(text) for text in texts] == elements


def test_the_last_of_two_members_with_one_name_as_the_readers_keep() -> None:
    body = b'{"value": [1, 2], "value": [{"id": "a"}]}'
    path = parse_path("/value")
    found = batch_elements(path, _parse_any(body))
    assert found == [{"id": "a"}]
    assert element_texts(body, path, 1) == [b'{"id": "a"}']


def test_numbers_and_escapes_are_cut_as_sent() -> None:
    body = b'[12345678901234567.89, 1e400, "caf\\u00e9", 1' + b"0" * 5000 + b"]"
    texts = element_texts(body, parse_path(""), 4)
    assert texts == [b"12345678901234567.89", b"1e400", b'"caf\\u00e9"', b"1" + b"0" * 5000]


def test_bodies_in_other_encodings_are_cut_as_json_reads_them() -> None:
    """UTF-16/32 and a BOM, as `json.loads` decodes bytes: each element's text in UTF-8."""
    root = parse_path("")
    text = '[12345678901234567.89, "\u00e9", {"a": 1e400}]'
    expected = [b"12345678901234567.89", '"\u00e9"'.encode(), b'{"a": 1e400}']
    for encoding in ("utf-16", "utf-16-le", "utf-32-be", "utf-8-sig"):
        assert element_texts(text.encode(encoding), root, 3) == expected
    # a surrogate sent as raw UTF-8 bytes (the reader takes it) is kept as those bytes
    assert element_texts(b'["\xed\xa0\x80"]', root, 1) == [b'"\xed\xa0\x80"']


def test_bodies_that_cannot_be_cut_give_none() -> None:
    root = parse_path("")
    assert element_texts(b"[1, 2]", root, 3) is None  # not the list the document held
    assert element_texts(b'{"a": 1}', root, 0) is None  # no list there
    assert element_texts(b"[1, 2", root, 2) is None  # cut short


def test_a_path_holding_no_list_is_no_batch() -> None:
    assert batch_elements(parse_path("/value"), {"value": {"a": 1}}) is None
    assert batch_elements(parse_path("/value"), [1, 2]) is None
    assert batch_elements(parse_path(""), {"a": 1}) is None


# ------------------------------------------------ hostile text, written by hand
#
# JSON written as text, not by an encoder: duplicate names (at the path and
# inside elements), every escape (NUL, lone surrogates of either half, a
# name spelled with an escape), numbers each reader rounds or cannot convert
# (a long decimal, 1e400, 5,000 digits), any whitespace, non-ASCII; then
# encoded as a sender may (UTF-16/32, a BOM), or damaged byte by byte.

_CHARS = st.one_of(
    st.characters(
        blacklist_categories=("Cs",),
        blacklist_characters='"\\' + "".join(map(chr, range(32))),
    ),
    st.sampled_from(['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]),
    st.integers(0, 0xFFFF).map(lambda n: f"\\u{n:04x}"),
    st.sampled_from(["\\u0000", "\\ud800", "\\uDC00", "\\ud83d\\ude00"]),
)
_STRING = st.lists(_CHARS, max_size=5).map(lambda chars: '"' + "".join(chars) + '"')
_NUMBER = st.one_of(
    st.integers().map(str),
    st.sampled_from(["1" + "0" * 5000, "1e400", "-0", "12345678901234567.89", "1E-400"]),
    st.from_regex(r"-?(0|[1-9][0-9]{0,22})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)
_NAME = st.one_of(st.sampled_from(['"value"', '"v\\u0061lue"', '"data"', '"0"', '"é"']), _STRING)


def _compound(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    items = st.lists(st.tuples(_SPACE, inner, _SPACE), max_size=4)
    members = st.lists(st.tuples(_NAME, _SPACE, inner, _SPACE), max_size=4)
    return st.one_of(
        items.map(lambda found: "[" + ",".join(a + v + b for a, v, b in found) + "]"),
        members.map(
            lambda found: "{" + ",".join(k + a + ":" + v + b for k, a, v, b in found) + "}"
        ),
    )


_TEXT = st.recursive(
    st.one_of(_STRING, _NUMBER, st.sampled_from(["true", "false", "null"])),
    _compound,
    max_leaves=12,
)
_PATHS = st.sampled_from(
    ["", "/value", "/data/0", "/value/-1", "/0", "/data/0/value", "/é", "/value/01"]
)


def _same(one: Any, other: Any) -> bool:
    """Equal and of one type all the way down (1 is not 1.0, -0.0 not 0.0, a
    LongInt by its digits, members in their order)."""
    if type(one) is not type(other):
        return False
    if isinstance(one, float):
        return str(one) == str(other)
    if isinstance(one, list):
        return len(one) == len(other) and all(map(_same, one, other))
    if isinstance(one, dict):
        return list(one) == list(other) and all(_same(one[k], other[k]) for k in one)
    return bool(one == other)


def _cut_as_read(body: bytes, path_text: str) -> None:
    """The invariant: either no cut, or texts the reader reads as the elements."""
    path = parse_path(path_text)
    document = _parse_any(body)
    found = None if document is _NOT_JSON else batch_elements(path, document)
    if found is None:
        return
    texts = element_texts(body, path, len(found))
    if texts is None:
        return
    assert len(texts) == len(found)
    for text, element in zip(texts, found, strict=True):
        assert _same(_parse_any(text), element), (body, path_text, text)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_TEXT, _SPACE, _PATHS, st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-32-le"]))
def test_hand_written_json_is_cut_as_read(text: str, space: str, path: str, encoding: str) -> None:
    _cut_as_read((space + text + space).encode(encoding), path)
    _cut_as_read(
        ('{"value": ' + text + ', "data": [' + text + '], "value": ' + text + "}").encode(), path
    )
    _cut_as_read(("[" + text + "," + text + "]").encode(), path)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_TEXT, _PATHS, st.integers(0, 200), st.binary(max_size=3))
def test_damaged_json_is_cut_as_read_or_not_at_all(
    text: str, path: str, at: int, junk: bytes
) -> None:
    body = text.encode()
    at %= len(body) + 1
    _cut_as_read(body[:at] + junk + body[at:], path)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=48), _PATHS)
def test_arbitrary_bytes_are_cut_as_read_or_not_at_all(body: bytes, path: str) -> None:
    _cut_as_read(body, path)
