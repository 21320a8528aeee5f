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

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from shared.atomic_file import write_atomically
from shared.db.connect import Executor
from shared.db.queries import q
from shared.ledger.leaves import KINDS, Digests, LeafKind, leaf_data
from shared.secret import Secret
from shared.tlog import (
    ALG_ED25519,
    Checkpoint,
    CheckpointError,
    NoteError,
    ProofError,
    Signer,
    Verifier,
    consistency_proof,
    leaf_hash,
    note_text,
    open_note,
    sign,
    stored_hash_index,
    stored_hashes,
    tree_hash,
    verify_consistency,
)

T = TypeVar("T")
log = logging.getLogger("jobwarden.log")

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
        leaves: list[tuple[Any, ...]] = []
        for kind, row_id in keys:
            digests = Digests.of(kind, rows.get((kind.name, row_id)))
            hashed = leaf_hash(leaf_data(kind.name, row_id, digests))
            index = size + len(leaves)
            leaves.append(
                (
                    index,
                    kind.name,
                    row_id,
                    hashed,
                    digests.row is None,
                    digests.row,
                    digests.fixed,
                    digests.settled,
                )
            )
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


async def sequence_all(
    conn: Any, batch: int = DEFAULT_BATCH, *, stopped: Callable[[], bool] = lambda: False
) -> int:
    """Sequence until the queue is empty (or another sequencer has the log, or
    `stopped()` says so between batches, each its own transaction); leaves appended."""
    total = 0
    while not stopped():
        appended = await sequence(conn, batch)
        if appended is None or appended.leaves == 0:
            return total
        total += appended.leaves
    return total


def load_signer(key_file: str, env: Mapping[str, str]) -> Signer | None:
    """The checkpoint signer: JW_LOG_SIGNING_KEY, else the key file; None when neither is set.

    Read like provider credentials (shared.secret): errors name the source,
    never the key.
    """
    if env.get(SIGNING_KEY_ENV):
        secret = Secret.from_env(SIGNING_KEY_ENV, env)
    elif key_file:
        secret = Secret.from_file(key_file)
        if os.stat(key_file).st_mode & 0o077:
            log.warning(
                "the checkpoint signing key can be read by other users: chmod 600 it",
                extra={"ctx": {"key_file": key_file}},
            )
    else:
        return None
    try:
        return Signer.from_key(secret.reveal())
    except ValueError:
        raise ValueError(
            f"{secret.source}: not a signer key (PRIVATE+KEY+name+id+base64)"
        ) from None


# A verifier key is under 200 bytes; a file far larger was named by mistake.
MAX_PUBLIC_KEY_FILE_BYTES = 64 * 1024


class KeyFileError(ValueError):
    """A previous public key file that cannot serve; the message names the file, never its text."""


def load_previous_keys(key_files: Sequence[str]) -> tuple[Verifier, ...]:
    """The public keys of rotated-out signing keys (log_previous_key_files).

    The checkpoint published last may be signed by one of them: `published`
    opens it with these besides the signer's own key, so the new key's first
    checkpoint is held to the old key's last by a consistency proof.
    """
    return tuple(_previous_key(Path(name)) for name in key_files)


def _previous_key(path: Path) -> Verifier:
    """Read bounded (a log or /dev/zero named by mistake is not read whole); a
    private key named here, the likeliest mix-up, is said so and never echoed."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_PUBLIC_KEY_FILE_BYTES + 1)
    except FileNotFoundError:
        raise KeyFileError(f"{path}: no such file") from None
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError:  # a NUL in the name (a TOML string may hold one): no file has it
        raise KeyFileError(f"{str(path)!r}: a file name holds no NUL character") from None
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        text = ""
    if text.startswith("PRIVATE+"):
        raise KeyFileError(
            f"{path}: a private signer key: name its public key (the .pub file `audit keygen`"
            " wrote beside it)"
        )
    try:
        if len(data) > MAX_PUBLIC_KEY_FILE_BYTES:
            raise NoteError("too large")
        verifier = Verifier.from_key(text)
    except NoteError:  # its reason may quote the file: said generically
        raise KeyFileError(
            f"{path}: not a verifier key (name+id+base64, the .pub file `audit keygen` wrote)"
        ) from None
    if verifier.algorithm != ALG_ED25519:
        raise KeyFileError(f"{path}: a witness's cosigning key, not a log signer's public key")
    return verifier


def _distinct_keys(queued: Sequence[Any]) -> list[tuple[LeafKind, str]]:
    """Each changed row once, in queue order (several changes before a batch: one leaf).

    An entry no evidence row can have (an unknown kind, an id that is not
    one) was not written by a trigger: it is dropped with a warning rather
    than stopping the log for good. Whatever it tried to excuse, verify still
    checks the rows themselves.
    """
    seen: dict[tuple[str, str], LeafKind] = {}
    for entry in queued:
        kind = KINDS.get(entry["kind"])
        if kind is None or not _plausible_id(kind, entry["row_id"]):
            log.warning(
                "log_queue entry ignored: no evidence row has this key",
                extra={"ctx": {"kind": entry["kind"], "row_id": entry["row_id"][:100]}},
            )
            continue
        seen.setdefault((kind.name, entry["row_id"]), kind)
    return [(kind, row_id) for (_, row_id), kind in seen.items()]


def _plausible_id(kind: LeafKind, row_id: str) -> bool:
    if kind.name == "operation":
        return bool(row_id)
    if kind.name == "failure" and "/" not in row_id:
        return False
    number = row_id.split("/", 1)[0] if kind.name == "failure" else row_id
    return number.isascii() and number.isdigit() and len(number) <= 19


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


class LogForked(RuntimeError):
    """The database's tree does not extend the last checkpoint this signer published."""


async def checkpoint(
    db: Executor,
    signer: Signer,
    previous: Checkpoint | None = None,
    previous_keys: Sequence[Verifier] = (),
) -> str:
    """Sign the current tree head (origin = the key's name) and keep a copy; the note.

    `previous`, the last checkpoint this signer published (read back from
    where it was published, outside the database), must be extended by the
    tree: the database proves it with a consistency proof checked here, so a
    rewritten log is never signed. LogForked otherwise. So must the newest
    checkpoint the database keeps that this key signed: a signer whose
    published copy is gone (a new host, a lost directory) would otherwise
    sign whatever log it found (a tester's rewrite was signed so). Only a
    database that also lost those rows can still pass a rewrite off that way.
    `previous_keys`, the public keys of keys rotated out, count as this
    signer's there: a new key's first checkpoint extends the old key's last.
    """
    # read before the head: a checkpoint another sequencer signed meanwhile is
    # then never ahead of the head this one signs
    kept = await _newest_signed(db, [signer.verifier, *previous_keys])
    size, root = await head(db)
    current = Checkpoint(signer.name, size, root)
    for earlier in (previous, kept if kept != previous else None):  # one proof each
        if earlier is None:
            continue
        problem = await consistency_problem(db, earlier, current)
        if problem:
            raise LogForked(problem)
    note = sign(current.text(), [signer])
    recorded = await db.fetchrow(q("log_record_checkpoint"), size, root, note)
    if recorded is None or bytes(recorded["root_hash"]) != root:
        raise LogForked(f"log_checkpoints already holds another tree of size {size}")
    return note


# How many of the newest checkpoint rows the signer looks through for its own:
# rows its key does not verify (forged) are skipped, not trusted.
SIGNED_CANDIDATES = 20


async def _newest_signed(db: Executor, keys: Sequence[Verifier]) -> Checkpoint | None:
    """The newest checkpoint the database keeps that one of `keys` signed, as
    the log of that key's name (None: none)."""
    for row in await db.fetch(q("log_newest_checkpoints"), SIGNED_CANDIDATES):
        try:
            opened = open_note(row["note"], keys)
            signed = Checkpoint.parse(opened.text)
        except (NoteError, CheckpointError):
            continue
        if signed.origin in {key.name for key in opened.verified}:
            return signed
    return None


async def consistency_problem(db: Executor, old: Checkpoint, new: Checkpoint) -> str | None:
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
            db, cache, lambda: consistency_proof(old.size, new.size, cache.read)
        )
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proof)
    except (ProofError, LogCorrupt) as exc:
        return f"the log does not prove the new checkpoint extends the previous one: {exc}"
    return None


def published(
    directory: Path, signer: Signer, previous_keys: Sequence[Verifier] = ()
) -> Checkpoint | None:
    """The latest checkpoint `publish` wrote there, as this signer, or a key it
    replaced (`previous_keys`, public), signed it (None: none).

    A file there that none of these keys verifies is an error, not a fresh
    start: someone replaced it (or the key was rotated and its public key is
    not named in log_previous_key_files).
    """
    path = directory / "checkpoint"
    try:
        note = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    return Checkpoint.parse(open_note(note, [signer.verifier, *previous_keys]).text)


def _same_tree(kept: str, note: str) -> bool:
    """Does `kept` state the tree `note` signs? After a key rotation with no leaf
    since the old key's last checkpoint, the new key signs that same tree: its
    note differs, the tree does not (the old note stays under its size, the new
    one becomes the latest). Not checked here: `checkpoint()` proved `note`."""
    if kept == note:
        return True
    try:
        old, new = Checkpoint.parse(note_text(kept)), Checkpoint.parse(note_text(note))
    except (NoteError, CheckpointError):
        return False
    return (old.size, old.root_hash) == (new.size, new.root_hash)


# Checkpoints are public (they are shipped off the host for anyone to verify
# against): readable by all, so the job that ships them need not run as the
# reconciler's user. The directory's mode still decides who can reach them.
CHECKPOINT_MODE = 0o644


@dataclass(frozen=True)
class Published:
    """Where `publish` wrote a checkpoint (`checkpoint.<size>`), and its size."""

    path: Path
    size: int


def publish(note: str, directory: Path) -> Published:
    """Write `checkpoint.<size>` (never replaced) and `checkpoint` (the latest, atomically).

    The size is the one the note states: a size read before signing can be
    stale (another reconciler's sequencer appended in between, and
    `checkpoint.2` held a note signed at size 4).
    """
    tree_size = Checkpoint.parse(note_text(note)).size
    directory.mkdir(parents=True, exist_ok=True)
    numbered = directory / f"checkpoint.{tree_size}"
    if numbered.exists():
        if not _same_tree(numbered.read_text("utf-8"), note):
            # the same size signed twice over different trees cannot happen
            # after checkpoint()'s checks; a differing file is kept as found
            raise LogForked(f"{numbered} exists with another note: kept, not replaced")
    else:
        write_atomically(numbered, note.encode("utf-8"), CHECKPOINT_MODE)
    write_atomically(directory / "checkpoint", note.encode("utf-8"), CHECKPOINT_MODE)
    return Published(numbered, tree_size)


__all__ = [
    "Appended",
    "HashCache",
    "KeyFileError",
    "LogCorrupt",
    "LogForked",
    "checkpoint",
    "consistency_problem",
    "current_rows",
    "head",
    "load_previous_keys",
    "load_signer",
    "publish",
    "published",
    "sequence",
    "sequence_all",
]
