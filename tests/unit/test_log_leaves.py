"""What a leaf of the evidence log covers: one canonical encoding per row version."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from shared.ledger.leaves import KINDS, LEAF_PREFIX, LeafError, leaf_data

DECISION: dict[str, Any] = {
    "decision_id": 7,
    "operation_id": "op_01J0000000000000000000000A",
    "actor": "operator:ann",
    "decided_at": datetime(2026, 12, 2, 8, 0, 0, 123456, tzinfo=UTC),
    "decision": "retry",
    "reason": "provider confirmed the outage",
    "unrelated_column": "added by a later migration",
}


def _document(data: bytes) -> dict[str, Any]:
    assert data.startswith(LEAF_PREFIX)
    parsed: dict[str, Any] = json.loads(data[len(LEAF_PREFIX) :])
    return parsed


def test_a_row_is_encoded_canonically_with_only_its_covered_columns() -> None:
    data = leaf_data(KINDS["decision"], "7", DECISION)
    assert data == leaf_data(KINDS["decision"], "7", dict(reversed(DECISION.items())))
    document = _document(data)
    assert document["kind"] == "decision" and document["id"] == "7"
    assert "unrelated_column" not in document["row"]  # a new column needs a new leaf version
    assert document["row"]["decided_at"] == "2026-12-02T08:00:00.123456Z"
    assert b" " not in data[len(LEAF_PREFIX) :].replace(b"provider confirmed the outage", b"")


def test_the_same_instant_in_another_zone_is_the_same_leaf() -> None:
    paris = DECISION["decided_at"].astimezone(timezone(timedelta(hours=1)))
    assert leaf_data(KINDS["decision"], "7", {**DECISION, "decided_at": paris}) == leaf_data(
        KINDS["decision"], "7", DECISION
    )


def test_any_change_to_a_covered_value_changes_the_leaf() -> None:
    base = leaf_data(KINDS["decision"], "7", DECISION)
    for column in KINDS["decision"].columns:
        value = DECISION[column]
        changed = (
            value + timedelta(microseconds=1)
            if isinstance(value, datetime)
            else (value + 1 if isinstance(value, int) else value + "x")
        )
        assert leaf_data(KINDS["decision"], "7", {**DECISION, column: changed}) != base, column


def test_documents_numbers_and_arrays_encode_stably() -> None:
    row = dict.fromkeys(KINDS["observation"].columns)
    row.update(
        observation_id=1,
        progress_percent=Decimal("12.50"),
        counts={"total": 3, "failed": 1, "ratio": 0.1},
        anomalies=["completed_exceeds_total"],
        error={"b": [1, {"z": None, "a": "ü"}]},
    )
    data = leaf_data(KINDS["observation"], "1", row)
    document = _document(data)["row"]
    assert document["progress_percent"] == "12.50"  # numerics as their decimal text
    assert document["counts"] == {"failed": 1, "ratio": 0.1, "total": 3}
    assert "ü".encode() in data  # UTF-8, not escapes
    reordered = {**row, "error": {"b": [1, {"a": "ü", "z": None}]}}
    assert leaf_data(KINDS["observation"], "1", reordered) == data


def test_a_vanished_row_has_a_deletion_leaf() -> None:
    assert _document(leaf_data(KINDS["webhook"], "9", None)) == {
        "kind": "webhook",
        "id": "9",
        "deleted": True,
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"decided_at": datetime(2026, 1, 1)}, "time zone"),
        ({"decision": object()}, "cannot encode"),
    ],
)
def test_unencodable_values_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(LeafError, match=message):
        leaf_data(KINDS["decision"], "7", {**DECISION, **change})


def test_a_missing_column_is_refused() -> None:
    row = {k: v for k, v in DECISION.items() if k != "reason"}
    with pytest.raises(LeafError, match="reason"):
        leaf_data(KINDS["decision"], "7", row)


def test_row_ids_are_the_queue_keys() -> None:
    assert KINDS["failure"].row_id({"result_id": 3, "item_key": "a/b"}) == "3/a/b"
    assert KINDS["call"].row_id({"call_id": 12}) == "12"
