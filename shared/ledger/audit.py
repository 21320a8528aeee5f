"""`jobwarden audit verify`: prove nobody rewrote history after the fact.

The hash chain is recomputed here in Python, independently of the SQL function
that wrote it, so a tampered trigger cannot vouch for itself. A chain breaks
when a row was altered (its hash no longer matches), removed or reordered (seq
gaps, prev_hash not the previous row's hash), or the newest rows were removed
(the operation's recorded chain head or state disagree with the last row).
Each transition is also replayed through the state machine: a chain rehashed
around a move the history trigger refuses is still broken.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.db.queries import q
from shared.ledger.states import EDGES, LocalState

_SEP = "\x1f"
# History rows fetched per round trip while streaming.
PREFETCH = 5000


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
        try:
            recomputed = row_hash(row)
        except (TypeError, AttributeError, ValueError) as exc:
            # a column emptied or retyped (NOT NULL dropped, ALTER COLUMN ... TYPE): the
            # row can no longer be what was hashed; a break, not a traceback
            return Break(operation_id, row["seq"], f"row cannot be hashed ({exc}): altered")
        if recomputed != row["row_hash"]:
            return Break(operation_id, row["seq"], "row content does not match its hash: altered")
        refused = _transition_problem(rows[expected_seq - 2] if expected_seq > 1 else None, row)
        if refused:
            return Break(operation_id, row["seq"], refused)
        prev = row["row_hash"]
    if head["history_seq"] != len(rows) or (rows and head["history_head"] != prev):
        return Break(operation_id, None, "newest history rows are missing")
    if rows and str(head["state"]) != str(rows[-1]["to_state"]):
        return Break(operation_id, None, "operation state differs from its last transition")
    return _result_break(operation_id, rows, head)


def _transition_problem(previous: Mapping[str, Any] | None, row: Mapping[str, Any]) -> str | None:
    """Why the history trigger would have refused this transition, replayed (None: it
    would not).

    A chain hashes whatever it is given: a row appended by hand (triggers off,
    the hash computed with the database's own function) after the newest
    checkpoint is logged like any other, so a finished operation could be moved
    on, `failed` made `cancelled`. The state machine is the one the trigger
    holds every insert to (`states.EDGES`, proved equal to SQL's by
    test_state_machine.py): an edge it has, from the state the previous row
    ended in, citing the kind of evidence the edge needs.
    """
    src, dst = row["from_state"], str(row["to_state"])
    if src is None or previous is None:
        if src is None and previous is None and dst == LocalState.CREATE_PENDING:
            return None
        return "only the first transition starts from nothing, and into create_pending"
    src, ended = str(src), str(previous["to_state"])
    if src != ended:
        return f"starts from {src}, but the previous transition ended in {ended}"
    try:
        evidence = EDGES.get((LocalState(src), LocalState(dst)))
    except ValueError:
        return f"{src} -> {dst} names a state the state machine does not have"
    if evidence is None:
        return f"{src} -> {dst} is not a transition the state machine allows"
    if evidence and row["evidence_kind"] not in evidence:
        return f"{src} -> {dst} cites no {' or '.join(sorted(evidence))}"
    if src == LocalState.NEEDS_ATTENTION and not str(row["actor"]).startswith("operator:"):
        return "only an operator's decision moves an operation out of needs_attention"
    return None


def _result_break(
    operation_id: str, rows: list[Mapping[str, Any]], head: Mapping[str, Any]
) -> Break | None:
    """The result agents are shown must be the one the chain proves.

    The operation row is working state, but its result is what agents read
    (agent_operations, agent_failed_items): pointing it at another operation's
    result would show them someone else's items. A success proven by a result
    (its transition cites it) must name that result.
    """
    if not head["result_owned"]:
        return Break(operation_id, None, "its result is not a valid result of its own")
    last = rows[-1] if rows else None
    if (
        last is not None
        and str(last["to_state"]) == "succeeded"
        and last["evidence_kind"] == "result"
        and head["result_id"] != last["evidence_id"]
    ):
        return Break(operation_id, None, "its result is not the one its success cites")
    return None


async def verify(db: Any, operation_id: str | None = None) -> tuple[int, list[Break]]:
    """Check every chain (or one); returns (operations checked, first break of each).

    Every chain is streamed, one operation's history in memory at a time, in
    one repeatable-read snapshot (`db` is a connection).
    """
    async with db.transaction(isolation="repeatable_read", readonly=True):
        if operation_id is not None:
            # one snapshot too: a transition committed between the two reads
            # made the history longer than its head, a break on a live database
            heads = await db.fetch(q("chain_heads"), operation_id)
            rows = list(await db.fetch(q("history_of"), operation_id))
            found = [verify_chain(h["operation_id"], rows, h) for h in heads]
            return len(heads), [b for b in found if b is not None]
        return await _verify_all(db)


async def _verify_all(conn: Any) -> tuple[int, list[Break]]:
    rows = conn.cursor(q("history_all_ordered"), prefetch=PREFETCH).__aiter__()
    row = await anext(rows, None)
    checked, breaks = 0, []
    async for head in conn.cursor(q("chain_heads"), None, prefetch=PREFETCH):
        op_id = head["operation_id"]
        # history naming no operation (NOT NULL dropped) streams last: an orphan too
        while row is not None and (row["operation_id"] is None or row["operation_id"] < op_id):
            breaks.append(Break(row["operation_id"], row["seq"], "history of no operation"))
            row = await _skip_operation(rows, row)
        chain = []
        while row is not None and row["operation_id"] == op_id:
            chain.append(row)
            row = await anext(rows, None)
        checked += 1
        found = verify_chain(op_id, chain, head)
        if found:
            breaks.append(found)
    while row is not None:
        breaks.append(Break(row["operation_id"], row["seq"], "history of no operation"))
        row = await _skip_operation(rows, row)
    return checked, breaks


async def _skip_operation(rows: Any, row: Mapping[str, Any]) -> Any:
    """The first row of the next operation (orphan rows are reported once per operation)."""
    op_id = row["operation_id"]
    current: Any = row
    while current is not None and current["operation_id"] == op_id:
        current = await anext(rows, None)
    return current
