"""What a leaf of the evidence log covers: one canonical encoding per row version."""

from __future__ import annotations

import enum
import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.ledger.leaves import (
    KINDS,
    LEAF_PREFIX,
    Digests,
    LeafError,
    digests_of_document,
    leaf_data,
    row_document,
)

DECISION: dict[str, Any] = {
    "decision_id": 7,
    "operation_id": "op_01J0000000000000000000000A",
    "actor": "operator:ann",
    "decided_at": datetime(2026, 12, 2, 8, 0, 0, 123456, tzinfo=UTC),
    "decision": "retry",
    "reason": "provider confirmed the outage",
    "unrelated_column": "added by a later migration",
}


def _leaf(data: bytes) -> dict[str, Any]:
    assert data.startswith(LEAF_PREFIX)
    parsed: dict[str, Any] = json.loads(data[len(LEAF_PREFIX) :])
    return parsed


def _row(kind: str, row: dict[str, Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(row_document(KINDS[kind], row))
    return parsed


def test_a_row_is_encoded_canonically_with_only_its_covered_columns() -> None:
    data = row_document(KINDS["decision"], DECISION)
    assert data == row_document(KINDS["decision"], dict(reversed(DECISION.items())))
    document = _row("decision", DECISION)
    assert "unrelated_column" not in document  # a new column needs a new leaf version
    assert document["decided_at"] == "2026-12-02T08:00:00.123456Z"
    assert b" " not in data.replace(b"provider confirmed the outage", b"")


def test_a_leaf_names_its_row_and_the_digests_of_that_version() -> None:
    digests = Digests.of(KINDS["decision"], DECISION)
    leaf = _leaf(leaf_data("decision", "7", digests))
    document = row_document(KINDS["decision"], DECISION)
    assert leaf == {
        "kind": "decision",
        "id": "7",
        "deleted": False,
        "row": hashlib.sha256(document).hexdigest(),
        "fixed": hashlib.sha256(document).hexdigest(),  # written once: all of it is fixed
        "settled": None,
    }


def test_the_same_instant_in_another_zone_is_the_same_leaf() -> None:
    paris = DECISION["decided_at"].astimezone(timezone(timedelta(hours=1)))
    moved = {**DECISION, "decided_at": paris}
    assert row_document(KINDS["decision"], moved) == row_document(KINDS["decision"], DECISION)


def test_any_change_to_a_covered_value_changes_the_leaf() -> None:
    base = Digests.of(KINDS["decision"], DECISION)
    for column in KINDS["decision"].columns:
        value = DECISION[column]
        changed = (
            value + timedelta(microseconds=1)
            if isinstance(value, datetime)
            else (value + 1 if isinstance(value, int) else value + "x")
        )
        assert Digests.of(KINDS["decision"], {**DECISION, column: changed}) != base, column


def test_documents_numbers_and_arrays_encode_stably() -> None:
    row = dict.fromkeys(KINDS["observation"].columns)
    row.update(
        observation_id=1,
        progress_percent=Decimal("12.50"),
        counts={"total": 3, "failed": 1, "ratio": 0.1},
        anomalies=["completed_exceeds_total"],
        error={"b": [1, {"z": None, "a": "ü"}]},
    )
    data = row_document(KINDS["observation"], row)
    document = json.loads(data)
    assert document["progress_percent"] == "12.50"  # numerics as their decimal text
    assert document["counts"] == {"failed": 1, "ratio": 0.1, "total": 3}
    assert "ü".encode() in data  # UTF-8, not escapes
    reordered = {**row, "error": {"b": [1, {"a": "ü", "z": None}]}}
    assert row_document(KINDS["observation"], reordered) == data


def test_a_vanished_row_has_a_deletion_leaf() -> None:
    assert _leaf(leaf_data("webhook", "9", Digests.of(KINDS["webhook"], None))) == {
        "kind": "webhook",
        "id": "9",
        "deleted": True,
        "row": None,
        "fixed": None,
        "settled": None,
    }


def _call(**values: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(KINDS["call"].columns)
    row.update(call_id=5, operation_id="op_x", call_kind="status", attempt=1, worker="w")
    row.update(trace_id="t", method="GET", url="https://p/jobs/1", request_headers={})
    row.update(started_at=DECISION["decided_at"], marked=False)
    return {**row, **values}


def test_a_calls_answer_settles_it_and_its_identity_never_changes() -> None:
    sent, answered = _call(), _call(finished_at=DECISION["decided_at"], status_code=200)
    before, after = Digests.of(KINDS["call"], sent), Digests.of(KINDS["call"], answered)
    assert before.settled is None and after.settled is not None
    assert before.fixed == after.fixed and before.row != after.row
    lost = _call(finished_at=DECISION["decided_at"], error_category="lost")
    assert Digests.of(KINDS["call"], lost).settled is None  # its late answer completes it
    remarked = Digests.of(KINDS["call"], {**answered, "marked": True})
    assert (remarked.fixed, remarked.settled) == (after.fixed, after.settled)
    assert Digests.of(KINDS["call"], {**answered, "attempt": 2}).fixed != after.fixed


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"decided_at": datetime(2026, 1, 1)}, "time zone"),
        ({"decision": object()}, "cannot encode"),
    ],
)
def test_unencodable_values_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(LeafError, match=message):
        Digests.of(KINDS["decision"], {**DECISION, **change})


def test_a_missing_column_is_refused() -> None:
    row = {k: v for k, v in DECISION.items() if k != "reason"}
    with pytest.raises(LeafError, match="reason"):
        Digests.of(KINDS["decision"], row)


def test_row_ids_are_the_queue_keys() -> None:
    assert KINDS["failure"].row_id({"result_id": 3, "item_key": "a/b"}) == "3/a/b"
    assert KINDS["call"].row_id({"call_id": 12}) == "12"


@pytest.mark.parametrize(
    "row",
    [
        _call(),
        _call(finished_at=DECISION["decided_at"], status_code=200, duration_ms=Decimal("1.5")),
        _call(finished_at=DECISION["decided_at"], error_category="lost"),
        _call(response_body={"z": [1, 2.5, "é\u2028"], "a": None}, anomalies=["x"]),
        DECISION,
    ],
    ids=["sent", "answered", "lost", "json", "decision"],
)
def test_an_archived_document_gives_the_digests_of_its_row(row: dict[str, Any]) -> None:
    """An archived row is checked from its document alone: the same digests, so the
    same leaf, as the row it was made from."""
    kind = KINDS["decision"] if "decision_id" in row else KINDS["call"]
    document = row_document(kind, row)
    assert digests_of_document(kind, document) == Digests.of(kind, row)


@pytest.mark.parametrize(
    "document",
    [b"not json", b"[1]", b'{"decision_id": 1}', b"\xff\xfe"],
    ids=["text", "array", "columns-missing", "bytes"],
)
def test_a_document_that_is_not_a_row_is_refused(document: bytes) -> None:
    with pytest.raises(LeafError):
        digests_of_document(KINDS["decision"], document)


# ------------------------------------------------------ the encoding, by its definition


class LocalStateLike(enum.StrEnum):
    RUNNING = "running"


class Counted(enum.IntEnum):
    TWO = 2


_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_ZONES = st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30)), timezone.max])
_COLUMN = (
    _JSON
    | st.decimals(allow_nan=False, allow_infinity=False, places=4)
    | st.datetimes(datetime(1900, 1, 1), datetime(2200, 1, 1), timezones=_ZONES)
    | st.sampled_from([LocalStateLike.RUNNING, Counted.TWO])  # str / int subclasses
)


@given(st.sampled_from(sorted(KINDS)), st.data())
@settings(max_examples=400, deadline=None)
def test_digests_are_the_hashes_of_the_canonical_json_the_module_docstring_defines(
    name: str, data: st.DataObject
) -> None:
    """Digests.of joins each column's encoding into its documents; the bytes must be
    json.dumps's of the same dict (sorted keys, no spaces, UTF-8), or every leaf
    the log already holds would stop verifying."""
    kind = KINDS[name]
    row = {c: data.draw(_COLUMN, label=c) for c in kind.columns}
    if kind.settled_when is not None and data.draw(st.booleans(), label="settled"):
        row[kind.settled_when] = datetime(2026, 12, 2, tzinfo=UTC)
    digests = Digests.of(kind, row)
    document = row_document(kind, row)
    parsed = json.loads(document.decode("utf-8", "surrogatepass"))

    def by_definition(columns: tuple[str, ...]) -> bytes:
        text = json.dumps(
            {c: parsed[c] for c in columns},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    assert digests.row == by_definition(kind.columns)
    assert digests.fixed == by_definition(kind.fixed)
    assert digests.settled == (by_definition(kind.settled) if kind.is_settled(row) else None)


@given(_TEXT, st.sampled_from(sorted(KINDS)), st.booleans())
def test_a_leaf_is_the_canonical_json_of_what_it_names(
    row_id: str, name: str, deleted: bool
) -> None:
    digest = hashlib.sha256(row_id.encode("utf-8", "surrogatepass")).digest()
    digests = Digests(None, None, None) if deleted else Digests(digest, digest, None)
    document = {
        "kind": name,
        "id": row_id,
        "deleted": deleted,
        "row": None if deleted else digest.hex(),
        "fixed": None if deleted else digest.hex(),
        "settled": None,
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert leaf_data(name, row_id, digests) == LEAF_PREFIX + text.encode("utf-8", "surrogatepass")
