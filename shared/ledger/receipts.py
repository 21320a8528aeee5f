"""Receipts: one operation's evidence, provable offline with only the log's public key.

A receipt bundles a signed checkpoint with, for every evidence row of the
operation that the checkpoint covers, the row as logged (its document,
`shared.ledger.leaves`), the leaf's bytes (which name the document's sha256)
and the leaf's audit path (RFC 9162 inclusion proof). Anyone holding the
public key checks it without the database: the note's signature, each
document against the digest its leaf names, each leaf up its path to the
signed root. It proves that these rows are in the log, not that the
operation has no others.
`check_receipt` does that here; `deploy/verify-receipt.py` does the same in
a page of standalone Python, for auditors who run none of our code.

Format (JSON)::

    {"format": "jobwarden-receipt/v1", "operation_id": "op_…",
     "checkpoint": "<C2SP signed note>",
     "leaves": [{"index": 12, "kind": "history", "id": "34",
                 "leaf": "<base64 leaf bytes>", "row": "<base64 row document>",
                 "path": ["<base64 hash>", …]}],
     "unproven": ["call 56: …"]}
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.db.queries import q
from shared.ledger.leaves import KINDS, LEAF_PREFIX, Digests, LeafKind, leaf_data, row_document
from shared.ledger.log import HashCache, LogCorrupt, current_rows, with_hashes
from shared.tlog import (
    Checkpoint,
    CheckpointError,
    NoteError,
    ProofError,
    Verifier,
    inclusion_proof,
    leaf_hash,
    note_text,
    open_note,
    tree_hash,
    verify_inclusion,
)

log = logging.getLogger("jobwarden.receipts")

FORMAT = "jobwarden-receipt/v1"
# Failed items proven in one receipt (each costs a leaf and an audit path).
MAX_FAILED_ITEMS = 1000
# Checkpoint rows (within the log's size, newest first) a receipt looks at for
# one it can be built on. The reconciler writes one row per signing, each over
# the log as it was, so the newest row is good unless a login that may insert
# into log_checkpoints added others (rows are never deleted: they stay). Each
# row looked at costs at most one read of 1 + log2(size) stored hashes; this
# many bounds what a table of forged rows costs every receipt, then the caller
# gets NoUsableCheckpoint rather than a scan of all of them.
MAX_CHECKPOINT_CANDIDATES = 16


class ReceiptError(ValueError):
    """A receipt cannot be made (no checkpoint yet), or one does not verify."""


class NoUsableCheckpoint(ReceiptError):
    """Checkpoint rows exist but none the receipt looked at agrees with the log.

    Not "wait for the next signing" but a log an operator must look at (the
    rows were not written by the reconciler, or the log changed under them):
    the API answers it as the log's inconsistency, not as a missing checkpoint.
    """


@dataclass(frozen=True)
class UsableCheckpoint:
    """A stored checkpoint row that agrees with the log: what a receipt proves against.

    `skipped`: newer rows passed over because they do not agree with the log
    (an operator must look: the reconciler never writes such a row).
    """

    size: int
    note: str
    root_hash: bytes
    signed_at: datetime
    skipped: int = 0


@dataclass(frozen=True)
class ReceiptLeaf:
    index: int
    kind: str
    row_id: str
    leaf: bytes  # what the leaf hashes: kind, id and the version's digests
    row: bytes  # the row document whose sha256 the leaf names
    path: tuple[bytes, ...]


@dataclass
class Receipt:
    operation_id: str
    checkpoint: str
    leaves: list[ReceiptLeaf] = field(default_factory=list)
    # evidence of the operation the checkpoint does not cover (yet), in words
    unproven: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def b64(value: bytes) -> str:
            return base64.b64encode(value).decode("ascii")

        return {
            "format": FORMAT,
            "operation_id": self.operation_id,
            "checkpoint": self.checkpoint,
            "leaves": [
                {
                    "index": leaf.index,
                    "kind": leaf.kind,
                    "id": leaf.row_id,
                    "leaf": b64(leaf.leaf),
                    "row": b64(leaf.row),
                    "path": [b64(h) for h in leaf.path],
                }
                for leaf in self.leaves
            ],
            "unproven": self.unproven,
        }


async def build_receipt(conn: Any, operation_id: str) -> Receipt:
    """The receipt of `operation_id` against the newest checkpoint that agrees with the log."""
    cache = HashCache()
    usable = await usable_checkpoint(conn, cache)
    size = usable.size
    receipt = Receipt(operation_id, usable.note)
    listed = await conn.fetch(q("log_leaves_of_operation"), operation_id, size)
    if not listed:
        raise ReceiptError(f"no operation {operation_id}")
    failures = [r for r in listed if r["kind"] == "failure"]
    if len(failures) > MAX_FAILED_ITEMS:
        # a receipt is built in memory and sent whole: a batch's millions of
        # failed items stay provable, by `audit proof`, page by page later
        listed = [r for r in listed if r["kind"] != "failure"] + failures[:MAX_FAILED_ITEMS]
        receipt.unproven.append(
            f"{len(failures) - MAX_FAILED_ITEMS} more failed item(s) beyond the first "
            f"{MAX_FAILED_ITEMS} are not in this receipt"
        )
    for moved in await conn.fetch(q("archive_of_operation"), operation_id):
        receipt.unproven.append(
            f"{moved['rows']} row(s) moved to archive {moved['name']} on "
            f"{moved['archived_at']:%Y-%m-%d}: its receipts/ holds their receipt"
        )
    keys = [(KINDS[r["kind"]], r["row_id"]) for r in listed]
    rows = await current_rows(conn, keys)
    for entry, (kind, row_id) in zip(listed, keys, strict=True):
        leaf = await _proved_leaf(conn, cache, entry, kind, rows.get((kind.name, row_id)), size)
        if isinstance(leaf, str):
            receipt.unproven.append(f"{kind.name} {row_id}: {leaf}")
        else:
            receipt.leaves.append(leaf)
    return receipt


async def usable_checkpoint(conn: Any, cache: HashCache | None = None) -> UsableCheckpoint:
    """The newest checkpoint row a receipt can be built on, or ReceiptError saying why none.

    log_checkpoints is only a copy of what the reconciler signed, and a login
    that may insert into it may insert anything: trusting its newest row let
    one forged row break every receipt. A row is used only if it claims no
    more leaves than the log holds, its note is a well-formed signed note
    whose checkpoint states the row's own size and root, and that root is the
    log's at that size. The signature cannot be checked here (no public key):
    whoever reads the receipt checks it. Rows that fail are skipped, counted
    in a warning that never repeats their content (attacker-chosen text).
    """
    if cache is None:
        cache = HashCache()
    log_size = int(await conn.fetchval(q("log_size")))
    beyond = int(
        await conn.fetchval(q("log_checkpoints_beyond"), log_size, MAX_CHECKPOINT_CANDIDATES)
    )
    candidates = await conn.fetch(q("log_receipt_checkpoints"), log_size, MAX_CHECKPOINT_CANDIDATES)
    if not candidates and not beyond:
        raise ReceiptError(
            "no signed checkpoint yet: the reconciler signs one every log_interval seconds "
            "once a signing key is configured (JW_LOG_SIGNING_KEY_FILE)"
        )
    skipped: Counter[str] = Counter()
    if beyond:
        skipped["beyond the log's size"] = beyond
    for row in candidates:
        problem = await _checkpoint_problem(conn, cache, row)
        if problem is None:
            if skipped:
                log.warning(
                    "receipt built on an older checkpoint: newer log_checkpoints rows "
                    "do not agree with the log (jobwarden audit verify)",
                    extra={"ctx": {"tree_size": int(row["tree_size"]), "skipped": dict(skipped)}},
                )
            return UsableCheckpoint(
                int(row["tree_size"]),
                row["note"],
                bytes(row["root_hash"]),
                row["signed_at"],
                sum(skipped.values()),
            )
        skipped[problem] += 1
    reasons = ", ".join(f"{count} {why}" for why, count in sorted(skipped.items()))
    raise NoUsableCheckpoint(
        f"no usable signed checkpoint: no log_checkpoints row agrees with the log of "
        f"{log_size} leaves ({reasons}; each counted up to {MAX_CHECKPOINT_CANDIDATES}): "
        "run jobwarden audit verify, then let the reconciler sign a new one"
    )


async def shown_checkpoint(conn: Any) -> UsableCheckpoint | NoUsableCheckpoint | None:
    """What a page may show as "the latest signed checkpoint": None if none was signed yet.

    The newest row as stored would let one forged row tell an operator that
    everything is covered by a checkpoint the log does not agree with; the
    console shows the row receipts would use, or why there is none.
    """
    try:
        return await usable_checkpoint(conn)
    except NoUsableCheckpoint as exc:
        return exc
    except ReceiptError:
        return None


async def _checkpoint_problem(conn: Any, cache: HashCache, row: Any) -> str | None:
    """Why this checkpoint row cannot carry a receipt (a reason, never its content)."""
    try:
        text = note_text(row["note"])  # its signature is the reader's to check
    except NoteError:
        return "not a signed note"
    try:
        stated = Checkpoint.parse(text)
    except CheckpointError:
        return "not a checkpoint note"
    size, root = int(row["tree_size"]), bytes(row["root_hash"])
    if stated.size != size or stated.root_hash != root:
        return "note disagreeing with its row"
    try:
        logged = await with_hashes(conn, cache, lambda: tree_hash(size, cache.read))
    except (LogCorrupt, ProofError):
        return "size the stored hashes do not cover"
    if logged != root:
        return "root not the log's at its size"
    return None


async def _proved_leaf(
    conn: Any, cache: HashCache, entry: Any, kind: LeafKind, row: Any, size: int
) -> ReceiptLeaf | str:
    """The row's leaf with its audit path, or why it cannot be proven by this checkpoint."""
    if entry["leaf_index"] is None:
        return f"not in the checkpoint of size {size} yet"
    if row is None:
        return "gone since the checkpoint"
    digests = Digests.of(kind, row)
    data = leaf_data(kind.name, entry["row_id"], digests)
    if leaf_hash(data) != bytes(entry["leaf_hash"]):
        return "changed since the checkpoint (or altered): its newest version is not covered yet"
    index = int(entry["leaf_index"])
    path = await with_hashes(conn, cache, lambda: inclusion_proof(index, size, cache.read))
    document = row_document(kind, row)
    return ReceiptLeaf(index, kind.name, entry["row_id"], data, document, tuple(path))


@dataclass(frozen=True)
class CheckedReceipt:
    operation_id: str
    checkpoint: Checkpoint
    # (kind, row id, the row as logged) of every leaf proven
    rows: list[tuple[str, str, dict[str, Any]]]


def check_receipt(document: Any, verifiers: list[Verifier]) -> CheckedReceipt:
    """Verify a receipt offline; ReceiptError names the first thing that does not hold."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ReceiptError(f"not a {FORMAT} receipt")
    try:
        checkpoint = Checkpoint.parse(open_note(document["checkpoint"], verifiers).text)
        leaves = document["leaves"]
        operation_id = str(document["operation_id"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReceiptError(f"the checkpoint does not verify with the given key(s): {exc}") from None
    if not isinstance(leaves, list) or not leaves:
        raise ReceiptError("the receipt proves no leaf")
    rows = [_check_leaf(leaf, checkpoint) for leaf in leaves]
    _check_belongs(operation_id, rows)
    return CheckedReceipt(operation_id, checkpoint, rows)


def _check_leaf(leaf: Any, checkpoint: Checkpoint) -> tuple[str, str, dict[str, Any]]:
    try:
        data = base64.b64decode(leaf["leaf"], validate=True)
        document = base64.b64decode(leaf["row"], validate=True)
        path = [base64.b64decode(h, validate=True) for h in leaf["path"]]
        index = int(leaf["index"])
        verify_inclusion(index, checkpoint.size, leaf_hash(data), path, checkpoint.root_hash)
        if not data.startswith(LEAF_PREFIX):
            raise ValueError("not a jobwarden evidence leaf")
        named = json.loads(data[len(LEAF_PREFIX) :])
        row = json.loads(document)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        where = leaf.get("index") if isinstance(leaf, dict) else leaf
        raise ReceiptError(f"leaf {where} does not verify: {exc}") from None
    if (
        named.get("deleted") is not False
        or named.get("row") != hashlib.sha256(document).hexdigest()
    ):
        raise ReceiptError(f"leaf {index} does not name this row document")
    if (named.get("kind"), named.get("id")) != (leaf.get("kind"), leaf.get("id")):
        raise ReceiptError(f"leaf {index} is not the row it is labelled as")
    if not isinstance(row, dict):
        raise ReceiptError(f"leaf {index}: the row document is not an object")
    return named["kind"], named["id"], row


def _check_belongs(operation_id: str, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
    """Every proven row is the operation's: by its operation_id, or (a failed item, which
    has none) by a result of the operation proven in the same receipt."""
    results = {
        str(row.get("result_id"))
        for kind, _, row in rows
        if kind == "result" and row.get("operation_id") == operation_id
    }
    for kind, row_id, row in rows:
        if kind == "failure":
            owned = str(row.get("result_id")) in results
        else:
            owned = row.get("operation_id") == operation_id
        if not owned:
            raise ReceiptError(f"{kind} {row_id} is not proven to belong to {operation_id}")
