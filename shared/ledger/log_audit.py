"""`jobwarden audit verify --checkpoint`: prove the evidence log to someone who trusts no database.

What is checked, in one repeatable-read snapshot, streaming (memory does not
grow with the log):

1. the checkpoint's signature, with a public key given by the auditor (the
   database holds no key that could sign one);
2. the log's leaves, recomputed into the tree head: at the checkpoint's size
   it must be the signed root (so nothing the checkpoint covers was rewritten,
   removed, added or re-ordered), and the stored hashes that proofs are built
   from must give the same head;
3. every evidence row against its newest leaf, recomputed from the row by
   `shared.ledger.leaves` (altered rows), every newest leaf against its row
   (removed rows), and every row has a leaf or a queued change (rows outside
   the log).

Without a checkpoint, 2 proves only that the log is self-consistent: whoever
administers the database could have rewritten rows and leaves together. The
report says so rather than pretending otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.db.queries import q
from shared.ledger.leaves import KINDS, LeafError, LeafKind, leaf_data
from shared.ledger.log import HashCache, LogCorrupt, with_hashes
from shared.tlog import (
    EMPTY_ROOT,
    Checkpoint,
    CheckpointError,
    NoteError,
    ProofError,
    RootAccumulator,
    Verifier,
    consistency_proof,
    leaf_hash,
    open_note,
    tree_hash,
    verify_consistency,
)

# Rows fetched per round trip while streaming.
PREFETCH = 5000
# Problems listed in full; beyond this only counted (a wholesale rewrite
# would otherwise print millions of lines).
MAX_LISTED = 50

UNPROVEN = (
    "no checkpoint given: this proves the log is consistent with itself, not that it is the "
    "log that was signed. Someone with full control of the database could have rewritten rows "
    "and leaves together. Verify against a checkpoint kept off this host: "
    "--checkpoint FILE --key PUBLIC_KEY"
)


@dataclass
class LogReport:
    tree_size: int = 0
    root: bytes = b""
    checkpoint: Checkpoint | None = None
    rows_checked: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    oldest_pending: datetime | None = None
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    unproven: str | None = None

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_LISTED:
            self.problems.append(text)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0


def open_checkpoint(
    note: str, keys: list[Verifier], witnesses: Sequence[Verifier] = ()
) -> Checkpoint:
    """The checkpoint a signed note carries; NoteError/CheckpointError if it does not verify.

    One of `keys` (the log's, several across a rotation) must have signed it,
    and every one of `witnesses` must have cosigned it.
    """
    opened = open_note(note, [*keys, *witnesses])
    signed_by = {v.vkey for v in opened.verified}
    if not signed_by & {k.vkey for k in keys}:
        raise NoteError("no signature by the log's key (only witnesses signed it)")
    missing = [w.name for w in witnesses if w.vkey not in signed_by]
    if missing:
        raise NoteError(f"no cosignature by the required witness(es) {', '.join(missing)}")
    return Checkpoint.parse(opened.text)


async def verify_log(conn: Any, checkpoint: Checkpoint | None) -> LogReport:
    """Check the log (and, given one, against a checkpoint already verified by its key)."""
    report = LogReport(checkpoint=checkpoint, unproven=None if checkpoint else UNPROVEN)
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        await _check_tree(conn, report)
        for kind in KINDS.values():
            await _check_rows(conn, kind, report)
        await _check_versions(conn, report)
        pending = await conn.fetchrow(q("log_pending"))
        report.pending, report.oldest_pending = int(pending["rows"]), pending["oldest"]
    return report


async def _check_tree(conn: Any, report: LogReport) -> None:
    accumulator = RootAccumulator()
    wanted = report.checkpoint
    async for row in conn.cursor(q("log_leaf_hashes"), prefetch=PREFETCH):
        if row["leaf_index"] != accumulator.size:
            report.problem(f"leaf {accumulator.size} is missing (next is {row['leaf_index']})")
            return
        accumulator.append(bytes(row["leaf_hash"]))
        if wanted is not None and accumulator.size == wanted.size:
            _compare_checkpoint(accumulator.root(), wanted, report)
    report.tree_size, report.root = accumulator.size, accumulator.root()
    if wanted is not None and wanted.size == 0:
        _compare_checkpoint(EMPTY_ROOT, wanted, report)  # every tree extends the empty one
    if wanted is not None and accumulator.size < wanted.size:
        report.problem(
            f"the log has {accumulator.size} leaves, the checkpoint signed {wanted.size}: "
            "the newest entries were removed"
        )
    cache = HashCache()
    try:
        stored = await with_hashes(conn, cache, lambda: tree_hash(accumulator.size, cache.read))
    except LogCorrupt as exc:
        report.problem(f"stored hashes: {exc}")
        return
    if stored != report.root:
        report.problem("the stored hashes disagree with the leaves: proofs would not verify")


def _compare_checkpoint(root: bytes, wanted: Checkpoint, report: LogReport) -> None:
    if root != wanted.root_hash:
        report.problem(
            f"the first {wanted.size} leaves do not hash to the checkpoint's root: "
            "entries it covers were rewritten, removed, added or re-ordered"
        )


async def consistency_problem(conn: Any, old: Checkpoint, new: Checkpoint) -> str | None:
    """Why `new` does not extend `old` (by a consistency proof the database must produce)."""
    if new.size < old.size:
        return f"the new checkpoint ({new.size}) is smaller than the previous one ({old.size})"
    if old.size == new.size:
        if old.root_hash == new.root_hash:
            return None
        return f"two different trees of size {new.size}: the log was forked or rewritten"
    if old.size == 0:
        return None  # every tree extends the empty one
    cache = HashCache()
    try:
        proof = await with_hashes(
            conn, cache, lambda: consistency_proof(old.size, new.size, cache.read)
        )
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proof)
    except (ProofError, LogCorrupt) as exc:
        return f"the log does not prove the new checkpoint extends the previous one: {exc}"
    return None


async def _check_rows(conn: Any, kind: LeafKind, report: LogReport) -> None:
    checked = 0
    async for row in conn.cursor(q(f"log_check_{kind.name}"), prefetch=PREFETCH):
        checked += 1
        problem = _row_problem(kind, row)
        if problem:
            report.problem(f"{kind.table} {row['log_row_id']}: {problem}")
    report.rows_checked[kind.name] = checked


async def _check_versions(conn: Any, report: LogReport) -> None:
    write_once = [kind.name for kind in KINDS.values() if not kind.updatable]
    async for row in conn.cursor(q("log_rewritten_rows"), write_once, prefetch=PREFETCH):
        table = KINDS[row["kind"]].table
        report.problem(
            f"{table} {row['row_id']}: logged in {row['versions']} versions, but such rows "
            "are written once: it was changed after it was logged"
        )


def _row_problem(kind: LeafKind, row: Any) -> str | None:
    exists, logged, queued = (
        row["log_row_exists"],
        row["log_leaf_hash"] is not None,
        row["log_queued"],
    )
    if not logged:
        return None if queued else "outside the log (no leaf, no queued change)"
    if not exists:
        if row["log_deleted"] or queued:
            return None
        return "removed (its leaf is in the log, the row is gone)"
    if queued and kind.updatable:
        return None  # changed since its last leaf; the sequencer has not caught up yet
    if row["log_deleted"]:
        return "present, but the log records its deletion"
    try:
        expected = leaf_hash(leaf_data(kind, row["log_row_id"], row))
    except LeafError as exc:
        return f"cannot be encoded ({exc})"
    if expected != bytes(row["log_leaf_hash"]):
        return "altered (its content does not match its leaf)"
    return None


__all__ = [
    "UNPROVEN",
    "CheckpointError",
    "LogReport",
    "NoteError",
    "open_checkpoint",
    "verify_log",
]
