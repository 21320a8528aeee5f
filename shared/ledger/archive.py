"""Retention without losing proof: move old finished operations' evidence to an archive.

An archive is a directory the operator ships off the host, like the
checkpoints. It is written completely (and fsynced) before anything is
deleted, so a crash at any point loses nothing: before the database commit
the directory is an orphan that no log entry names (verify ignores it; the
next run writes another); after it, the rows are gone from the database and
held by the archive the log names.

    archive-20261202T120000Z-1a2b3c4d/
        manifest        the rows it holds, one JSON line each (manifest order):
                        ["op_…", "call", "34", 12]  (operation, kind, row id, leaf)
        rows.jsonl      the same rows, one {"kind","id","leaf","row"} line each,
                        "row" the base64 row document the leaf names
        receipts/       each operation's receipt (shared/ledger/receipts.py)
                        against the checkpoint signed for the archive
        archive.json    name, cutoff, counts, the manifest's sha256, the checkpoint

The database keeps the log itself (leaves and stored hashes: 32-byte hashes
and digests per row version), the archive's row (a leaf: its manifest's
sha256) and log_archived (which rows went where). The manifest digest binds
that list to the signed tree, and `audit verify --archive ROOT` recomputes
every archived row from the files against its leaf.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import asyncpg

from shared.db.errors import DATABASE_DOWN
from shared.db.queries import q
from shared.ledger import log
from shared.ledger.leaves import KINDS, Digests, leaf_data, row_document
from shared.ledger.log_tiles import TilesWritten, export_tiles
from shared.ledger.receipts import build_receipt
from shared.tlog import Checkpoint, Signer, Verifier, leaf_hash, open_note

FORMAT = "jobwarden-archive/v1"
MANIFEST_PREFIX = b"jobwarden/archive-manifest/v1\n"
# Operations per archive, and the rows and document bytes beyond which no
# further operation is added: an archive is built in memory (documents
# included) before it is written, so these bound the memory of a run. An
# operation larger than them alone is left in the database, with the reason.
DEFAULT_OPERATIONS = 1000
MAX_ROWS = 50_000
MAX_BYTES = 256 * 1024 * 1024
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,120}")


class ArchiveError(RuntimeError):
    """An archive cannot be made (no signing key, the log forked), or read."""


def manifest_line(operation_id: str, kind: str, row_id: str, leaf_index: int) -> bytes:
    """One manifest line: unambiguous whatever the ids hold (JSON, ASCII)."""
    return (
        json.dumps([operation_id, kind, row_id, leaf_index], separators=(",", ":")).encode("ascii")
        + b"\n"
    )


def manifest_order(operation_id: str, kind: str, row_id: str) -> tuple[bytes, bytes, bytes]:
    """The manifest's order: bytewise, as PostgreSQL's COLLATE "C" sorts UTF-8 text."""
    return (operation_id.encode(), kind.encode(), row_id.encode())


def receipt_file(operation_id: str) -> str:
    """The receipt's file name (an operation id is ours, but never trusted as a path)."""
    if _SAFE_NAME.fullmatch(operation_id) and operation_id not in {".", ".."}:
        return f"{operation_id}.json"
    return hashlib.sha256(operation_id.encode("utf-8", "surrogatepass")).hexdigest() + ".json"


@dataclass(frozen=True)
class ArchivedRow:
    operation_id: str
    kind: str
    row_id: str
    leaf_index: int
    document: bytes

    def line(self) -> bytes:
        return (
            json.dumps(
                {
                    "kind": self.kind,
                    "id": self.row_id,
                    "leaf": self.leaf_index,
                    "operation": self.operation_id,
                    "row": base64.b64encode(self.document).decode("ascii"),
                },
                separators=(",", ":"),
            ).encode("ascii")
            + b"\n"
        )


@dataclass
class Archived:
    """What one run archived (None name: nothing was eligible)."""

    name: str | None = None
    path: Path | None = None
    operations: int = 0
    rows: int = 0
    # operations left in the database this time, and why
    skipped: list[str] = field(default_factory=list)
    tiles: TilesWritten | None = None


async def archive(
    conn: Any,
    root: Path,
    older_than: timedelta,
    signer: Signer,
    checkpoint_dir: Path,
    max_operations: int = DEFAULT_OPERATIONS,
    previous_keys: Sequence[Verifier] = (),
) -> Archived:
    """Archive the evidence of operations finished more than `older_than` ago.

    The log is sequenced and a checkpoint signed first, so every archived row
    is covered by a signed tree (the archive's receipts prove against it);
    after the deletion, the log is sequenced and signed again, so the move
    itself is covered. `previous_keys` (log_previous_key_files) open a checkpoint
    published before a key rotation, as the reconciler's sequencer does.
    """
    await _take_back_recorded(conn, root)
    checkpoint, note = await _sign(conn, signer, checkpoint_dir, previous_keys)
    window = await conn.fetchrow(q("archive_cutoff"), older_than)
    candidates = await conn.fetch(q("archive_candidates"), window["cutoff"], max_operations)
    result = Archived()
    chosen: dict[str, list[ArchivedRow]] = {}
    total = size = 0
    for candidate in candidates:
        op_id = candidate["operation_id"]
        rows = await _rows_of(conn, op_id, checkpoint.size)
        if isinstance(rows, str):
            result.skipped.append(f"{op_id}: {rows}")
            continue
        weight = sum(len(r.document) for r in rows)
        if chosen and (total + len(rows) > MAX_ROWS or size + weight > MAX_BYTES):
            break  # the next run takes it
        if weight > MAX_BYTES:
            result.skipped.append(
                f"{op_id}: {weight} bytes of evidence, more than one archive holds"
            )
            continue
        chosen[op_id] = rows
        total, size = total + len(rows), size + weight
    if not chosen:
        return result
    name = f"archive-{window['now']:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
    proofs = {op_id: (await build_receipt(conn, op_id)).to_json() for op_id in chosen}
    path, digest = await asyncio.to_thread(
        _write, root, name, chosen, proofs, (checkpoint, note), window["cutoff"]
    )
    try:
        await _commit(conn, name, window["cutoff"], checkpoint.size, chosen, digest)
    except DATABASE_DOWN:
        # The connection went: the COMMIT may have taken effect, the rows may
        # be gone and this archive their only copy. Kept as it is (a reviewer
        # cut the connection after the COMMIT executed: the set-aside below hid
        # the only copy under `.unrecorded-` and verify failed).
        raise
    except asyncpg.PostgresError:
        # the server refused it, so it rolled back: no log entry names this archive
        _set_aside(path)
        raise
    await _sign(conn, signer, checkpoint_dir, previous_keys)
    # The tree the receipts prove against, as C2SP tiles beside the archives.
    result.tiles = await export_tiles(conn, root, checkpoint.size, note)
    result.name, result.path, result.operations, result.rows = name, path, len(chosen), total
    return result


async def _commit(
    conn: Any,
    name: str,
    cutoff: datetime,
    checkpoint_size: int,
    chosen: dict[str, list[ArchivedRow]],
    digest: str,
) -> None:
    """List the archive's rows and delete them, in one transaction."""
    total = sum(len(rows) for rows in chosen.values())
    async with conn.transaction():
        archive_id = await conn.fetchval(
            q("archive_insert"),
            name,
            cutoff,
            checkpoint_size,
            len(chosen),
            total,
            digest,
        )
        listed = [row for rows in chosen.values() for row in rows]
        await conn.execute(
            q("archive_insert_rows"),
            archive_id,
            [r.operation_id for r in listed],
            [r.kind for r in listed],
            [r.row_id for r in listed],
            [r.leaf_index for r in listed],
        )
        await conn.fetchval(q("archive_delete"), archive_id)


async def _take_back_recorded(conn: Any, root: Path) -> None:
    """Give an archive set aside as unrecorded its name back if the log does name it.

    Best effort against a set-aside whose commit did take effect after all (a
    connection lost in a way that looked like a refusal): its rows are gone
    from the database, so this directory is their copy, and verify looks for
    it under its own name.
    """
    aside = _unrecorded(root)
    if aside:
        recorded = await conn.fetch(q("archive_names_recorded"), sorted(aside))
        _rename_back(root, {aside[r["name"]]: r["name"] for r in recorded})


def _unrecorded(root: Path) -> dict[str, Path]:
    """The archives set aside under `root`, by the name they were written under."""
    if not root.is_dir():
        return {}
    return {p.name.removeprefix(".unrecorded-"): p for p in root.glob(".unrecorded-archive-*")}


def _rename_back(root: Path, names: dict[Path, str]) -> None:
    for path, name in names.items():
        if not (root / name).exists():
            with contextlib.suppress(OSError):
                os.rename(path, root / name)


def _set_aside(path: Path) -> None:
    """Rename an archive whose rows stayed in the database to `.unrecorded-…`
    (best effort: a crash leaves it as it is, and verify ignores it either way)."""
    with contextlib.suppress(OSError):
        os.rename(path, path.with_name(f".unrecorded-{path.name}"))


async def _sign(
    conn: Any, signer: Signer, checkpoint_dir: Path, previous_keys: Sequence[Verifier]
) -> tuple[Checkpoint, str]:
    await log.sequence_all(conn)
    try:
        # a published checkpoint no named key opens is a refusal, not a traceback
        previous = log.published(checkpoint_dir, signer, previous_keys)
        note = await log.checkpoint(conn, signer, previous, previous_keys)
    except (log.LogForked, ValueError) as exc:
        raise ArchiveError(f"checkpoint NOT signed, nothing archived: {exc}") from None
    signed = Checkpoint.parse(open_note(note, [signer.verifier]).text)
    log.publish(note, checkpoint_dir)
    return signed, note


async def _rows_of(conn: Any, operation_id: str, size: int) -> list[ArchivedRow] | str:
    """The operation's archivable rows as the checkpoint covers them, or why not now."""
    listed = await conn.fetch(q("archive_rows_of_operation"), operation_id, MAX_ROWS + 1)
    if len(listed) > MAX_ROWS:
        return f"more than {MAX_ROWS} rows of evidence, more than one archive holds"
    keys = [(KINDS[r["kind"]], r["row_id"]) for r in listed]
    current = await log.current_rows(conn, keys)
    rows = []
    for entry, (kind, row_id) in zip(listed, keys, strict=True):
        where = f"{kind.name} {row_id}"
        row = current.get((kind.name, row_id))
        if entry["queued"] or entry["leaf_index"] is None or entry["leaf_index"] >= size:
            return f"{where} has a change the log has not sequenced and signed yet"
        if row is None:
            return f"{where} is gone"
        if leaf_hash(leaf_data(kind.name, row_id, Digests.of(kind, row))) != bytes(
            entry["leaf_hash"]
        ):
            return f"{where} does not match its leaf (run `jobwarden audit verify`)"
        rows.append(
            ArchivedRow(
                operation_id, kind.name, row_id, entry["leaf_index"], row_document(kind, row)
            )
        )
    return rows


def _write(
    root: Path,
    name: str,
    chosen: dict[str, list[ArchivedRow]],
    proofs: dict[str, dict[str, Any]],
    signed: tuple[Checkpoint, str],
    cutoff: datetime,
) -> tuple[Path, str]:
    """Write the archive beside its final place, fsync it, rename it in: (path, manifest sha)."""
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}-"))
    try:
        ordered = sorted(
            (row for rows in chosen.values() for row in rows),
            key=lambda r: manifest_order(r.operation_id, r.kind, r.row_id),
        )
        digest = hashlib.sha256(MANIFEST_PREFIX)
        with _durable(staging / "manifest") as manifest, _durable(staging / "rows.jsonl") as data:
            manifest.write(MANIFEST_PREFIX)
            for row in ordered:
                line = manifest_line(row.operation_id, row.kind, row.row_id, row.leaf_index)
                digest.update(line)
                manifest.write(line)
                data.write(row.line())
        (staging / "receipts").mkdir()
        for op_id, proof in proofs.items():
            with _durable(staging / "receipts" / receipt_file(op_id)) as out:
                out.write(json.dumps(proof, indent=1).encode() + b"\n")
        summary = {
            "format": FORMAT,
            "name": name,
            "cutoff": cutoff.isoformat(),
            "operations": len(chosen),
            "rows": len(ordered),
            "manifest_sha256": digest.hexdigest(),
            "checkpoint_size": signed[0].size,
            "checkpoint": signed[1],
        }
        with _durable(staging / "archive.json") as out:
            out.write(json.dumps(summary, indent=1).encode() + b"\n")
        _fsync_dir(staging / "receipts")
        _fsync_dir(staging)
        final = root / name
        os.rename(staging, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final, digest.hexdigest()


class _durable:
    """A new file opened for writing, flushed and fsynced on a clean close."""

    def __init__(self, path: Path) -> None:
        self.file: BinaryIO = path.open("xb")

    def __enter__(self) -> BinaryIO:
        return self.file

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is None:
                self.file.flush()
                os.fsync(self.file.fileno())
        finally:
            self.file.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_lines(path: Path) -> Iterator[bytes]:
    """An archive file's lines, one at a time (memory does not grow with the archive)."""
    with path.open("rb") as source:
        yield from source


def find_receipt(root: Path, names: list[str], operation_id: str) -> Path | None:
    """The newest of the named archives under `root` that holds the operation's receipt."""
    for name in names:
        candidate = root / name / "receipts" / receipt_file(operation_id)
        if candidate.is_file():
            return candidate
    return None


__all__ = [
    "FORMAT",
    "MANIFEST_PREFIX",
    "ArchiveError",
    "Archived",
    "ArchivedRow",
    "archive",
    "find_receipt",
    "manifest_line",
    "manifest_order",
    "read_lines",
    "receipt_file",
]
