"""The sequencer of the evidence log, and its signed checkpoints.

Writers never touch the log: their statements enqueue "(kind, row) changed"
(sql/migrations/010_transparency_log.sql). `sequence` takes a batch of those,
reads each row as it now is, appends one leaf per row (`shared.ledger.leaves`)
with the tree's stored hashes, and deletes the batch from the queue, all in
one transaction under an advisory lock: a crash anywhere loses nothing (the
queue is still there) and no two sequencers interleave. `checkpoint` signs the
tree head with a key the database never sees and returns the C2SP signed note;
`publish` writes it where an operator ships it off the host.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from shared.db.connect import Executor
from shared.db.queries import q
from shared.ledger.leaves import KINDS, LeafKind, leaf_data
from shared.secret import Secret
from shared.tlog import (
    Checkpoint,
    Signer,
    leaf_hash,
    sign,
    stored_hash_index,
    stored_hashes,
    tree_hash,
)

T = TypeVar("T")

SIGNING_KEY_ENV = "JW_LOG_SIGNING_KEY"

# Rows per transaction: large enough that a busy system's queue drains in few
# round trips, small enough that one batch holds its lock for milliseconds.
DEFAULT_BATCH = 2000


class _MissingHashes(Exception):
    """The reader was asked for stored hashes not loaded yet (fetched, then retried)."""

    def __init__(self, indexes: Sequence[int]) -> None:
        super().__init__(f"{len(indexes)} stored hashes not loaded")
        self.indexes = indexes


class HashCache:
    """Stored hashes by index: those read from the database plus those appended.

    The tlog functions read synchronously; a miss raises, the caller loads the
    missing indexes with one query and tries again (a handful per batch: the
    hashes of the tree's right edge).
    """

    def __init__(self) -> None:
        self.known: dict[int, bytes] = {}
        self.new: dict[int, bytes] = {}

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        missing = [i for i in indexes if i not in self.known]
        if missing:
            raise _MissingHashes(missing)
        return [self.known[i] for i in indexes]

    async def load(self, db: Executor, indexes: Sequence[int]) -> None:
        rows = await db.fetch(q("log_read_hashes"), list(indexes))
        found = {r["hash_index"]: bytes(r["hash"]) for r in rows}
        absent = set(indexes) - set(found)
        if absent:
            raise LogCorrupt(f"stored hashes {sorted(absent)[:5]} are missing from log_hashes")
        self.known.update(found)

    def add(self, index: int, value: bytes) -> None:
        self.known[index] = value
        self.new[index] = value


class LogCorrupt(RuntimeError):
    """The log's own tables contradict each other (tampering, or a bug): stop, never guess."""


async def with_hashes(db: Executor, cache: HashCache, compute: Callable[[], T]) -> T:
    """`compute()` with every stored hash it reads loaded first."""
    while True:
        try:
            return compute()
        except _MissingHashes as miss:
            await cache.load(db, miss.indexes)


@dataclass(frozen=True)
class Appended:
    leaves: int
    tree_size: int


async def sequence(conn: Any, batch: int = DEFAULT_BATCH) -> Appended | None:
    """Append one batch of queued changes (one transaction on `conn`).

    None when another sequencer holds the log.
    """
    async with conn.transaction():
        if not await conn.fetchval(q("log_try_lock")):
            return None
        queued = await conn.fetch(q("log_take_queue"), batch)
        size = int(await conn.fetchval(q("log_size")))
        keys = _distinct_keys(queued)
        if not keys:
            return Appended(0, size)
        rows = await current_rows(conn, keys)
        cache = HashCache()
        leaves: list[tuple[int, str, str, bytes, bool]] = []
        for kind, row_id in keys:
            row = rows.get((kind.name, row_id))
            data = leaf_data(kind, row_id, row)
            leaves.append((size + len(leaves), kind.name, row_id, leaf_hash(data), row is None))
        for index, _, _, hashed, _ in leaves:
            await _store(conn, cache, index, hashed)
        await conn.execute(q("log_append_leaves"), *map(list, zip(*leaves, strict=True)))
        await conn.execute(q("log_append_hashes"), list(cache.new), list(cache.new.values()))
        return Appended(len(leaves), size + len(leaves))


async def _store(conn: Any, cache: HashCache, index: int, hashed: bytes) -> None:
    """Add the stored hashes that appending leaf `index` completes."""

    def compute() -> list[bytes]:
        return stored_hashes(index, hashed, cache.read)

    first = stored_hash_index(0, index)
    for offset, value in enumerate(await with_hashes(conn, cache, compute)):
        cache.add(first + offset, value)


async def sequence_all(conn: Any, batch: int = DEFAULT_BATCH) -> int:
    """Sequence until the queue is empty (or another sequencer has the log); leaves appended."""
    total = 0
    while True:
        appended = await sequence(conn, batch)
        if appended is None or appended.leaves == 0:
            return total
        total += appended.leaves


def load_signer(key_file: str, env: Mapping[str, str]) -> Signer | None:
    """The checkpoint signer: JW_LOG_SIGNING_KEY, else the key file; None when neither is set.

    Read like provider credentials (shared.secret): errors name the source,
    never the key.
    """
    if env.get(SIGNING_KEY_ENV):
        secret = Secret.from_env(SIGNING_KEY_ENV, env)
    elif key_file:
        secret = Secret.from_file(key_file)
    else:
        return None
    try:
        return Signer.from_key(secret.reveal())
    except ValueError:
        raise ValueError(
            f"{secret.source}: not a signer key (PRIVATE+KEY+name+id+base64)"
        ) from None


def _distinct_keys(queued: Sequence[Any]) -> list[tuple[LeafKind, str]]:
    """Each changed row once, in queue order (several changes before a batch: one leaf)."""
    seen: dict[tuple[str, str], LeafKind] = {}
    for entry in queued:
        kind = KINDS.get(entry["kind"])
        if kind is None:
            raise LogCorrupt(f"log_queue names an unknown kind {entry['kind']!r}")
        seen.setdefault((kind.name, entry["row_id"]), kind)
    return [(kind, row_id) for (_, row_id), kind in seen.items()]


async def current_rows(
    conn: Any, keys: Sequence[tuple[LeafKind, str]]
) -> dict[tuple[str, str], Any]:
    by_kind: dict[str, list[str]] = {}
    for kind, row_id in keys:
        by_kind.setdefault(kind.name, []).append(row_id)
    rows: dict[tuple[str, str], Any] = {}
    for name, ids in by_kind.items():
        kind = KINDS[name]
        for row in await conn.fetch(q(f"log_rows_{name}"), *_id_arguments(kind, ids)):
            rows[(name, kind.row_id(row))] = row
    return rows


def _id_arguments(kind: LeafKind, ids: Sequence[str]) -> list[Any]:
    if kind.name == "operation":
        return [list(ids)]
    if kind.name == "failure":
        pairs = [row_id.split("/", 1) for row_id in ids]
        return [[int(result) for result, _ in pairs], [item for _, item in pairs]]
    return [[int(row_id) for row_id in ids]]


async def head(db: Executor) -> tuple[int, bytes]:
    """The tree as the database holds it now: (size, root hash from the stored hashes)."""
    size = int(await db.fetchval(q("log_size")))
    cache = HashCache()
    root = await with_hashes(db, cache, lambda: tree_hash(size, cache.read))
    return size, root


async def checkpoint(db: Executor, signer: Signer) -> str:
    """Sign the current tree head (origin = the key's name) and keep a copy; the note."""
    size, root = await head(db)
    note = sign(Checkpoint(signer.name, size, root).text(), [signer])
    await db.execute(q("log_record_checkpoint"), size, root, note)
    return note


def publish(note: str, directory: Path, tree_size: int) -> Path:
    """Write `checkpoint` (the latest, replaced atomically) and `checkpoint.<size>`."""
    directory.mkdir(parents=True, exist_ok=True)
    numbered = directory / f"checkpoint.{tree_size}"
    for target in (numbered, directory / "checkpoint"):
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".checkpoint-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(note)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    return numbered


__all__ = [
    "Appended",
    "HashCache",
    "LogCorrupt",
    "checkpoint",
    "current_rows",
    "head",
    "load_signer",
    "publish",
    "sequence",
    "sequence_all",
]
