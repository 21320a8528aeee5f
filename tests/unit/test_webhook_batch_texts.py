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

from hypothesis import given, settings
from hypothesis import strategies as st

from receiver.webhooks.batches import batch_elements, element_texts
from receiver.webhooks.endpoint import _parse_any
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
