"""`jobwarden audit verify`: prove nobody rewrote history after the fact.

The hash chain is recomputed here in Python, independently of the SQL function
that wrote it, so a tampered trigger cannot vouch for itself. A chain breaks
when a row was altered (its hash no longer matches), removed or reordered (seq
gaps, prev_hash not the previous row's hash), or the newest rows were removed
(the operation's recorded chain head or state disagree with the last row).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.db.connect import Executor
from shared.db.queries import q

_SEP = "\x1f"


def genesis_hash(operation_id: str) -> str:
    return hashlib.sha256(f"jobwarden-genesis{_SEP}{operation_id}".encode()).hexdigest()


def _ts(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def row_hash(row: Mapping[str, Any]) -> str:
    """The hash of one history row given its prev_hash (mirrors jw_history_hash)."""
    parts = [
        row["prev_hash"],
        row["operation_id"],
        str(row["seq"]),
        _ts(row["at"]),
        row["actor"],
        row["from_state"] or "",
        row["to_state"],
        row["cause"],
        row["evidence_kind"] or "",
        "" if row["evidence_id"] is None else str(row["evidence_id"]),
        row["remote_job_id"] or "",
    ]
    return hashlib.sha256(_SEP.join(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Break:
    operation_id: str
    seq: int | None
    problem: str

    def __str__(self) -> str:
        where = f"seq {self.seq}" if self.seq is not None else "chain head"
        return f"{self.operation_id} {where}: {self.problem}"


def verify_chain(
    operation_id: str, rows: list[Mapping[str, Any]], head: Mapping[str, Any]
) -> Break | None:
    """The first break in one operation's chain, or None if it is intact."""
    prev = genesis_hash(operation_id)
    for expected_seq, row in enumerate(rows, start=1):
        if row["seq"] != expected_seq:
            return Break(operation_id, row["seq"], f"expected seq {expected_seq}: rows missing")
        if row["prev_hash"] != prev:
            return Break(
                operation_id, row["seq"], "prev_hash does not link: rows removed/reordered"
            )
        if row_hash(row) != row["row_hash"]:
            return Break(operation_id, row["seq"], "row content does not match its hash: altered")
        prev = row["row_hash"]
    if head["history_seq"] != len(rows) or (rows and head["history_head"] != prev):
        return Break(operation_id, None, "newest history rows are missing")
    if rows and str(head["state"]) != str(rows[-1]["to_state"]):
        return Break(operation_id, None, "operation state differs from its last transition")
    return None


async def verify(db: Executor, operation_id: str | None = None) -> tuple[int, list[Break]]:
    """Check every chain (or one); returns (operations checked, first break of each)."""
    heads = {r["operation_id"]: r for r in await db.fetch(q("chain_heads"), operation_id)}
    rows_by_op: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    if operation_id is None:
        for row in await db.fetch(q("history_all_ordered")):
            rows_by_op[row["operation_id"]].append(row)
    else:
        rows_by_op[operation_id] = list(await db.fetch(q("history_of"), operation_id))
    breaks = []
    for op_id, head in sorted(heads.items()):
        found = verify_chain(op_id, rows_by_op.get(op_id, []), head)
        if found:
            breaks.append(found)
    return len(heads), breaks
