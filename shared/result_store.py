"""Durable storage for collected results: content-addressed files.

A result's bytes are written once under `<root>/<sha[:2]>/<sha>` (atomically:
temp file + fsync + rename + the directory fsynced), so the same result
fetched twice is stored once and a crash mid-write leaves no half file under
the final name. The database keeps the reference and the integrity data;
small JSON is also kept inline so agents can read it without file access.

A file already under the name is checked before it is trusted (its size and
sha256): one damaged since (a disk error, a hand edit) is written again, not
handed to a new operation as its result. A crash mid-write leaves a hidden
temporary file beside the name; `sweep_temporaries` removes those left long
enough ago that no writer can still be at them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from pathlib import Path

from shared.atomic_file import fsync_directory, write_atomically

log = logging.getLogger("jobwarden.results")

# Results up to this size are also stored inline (as JSON) in the results row.
INLINE_MAX_BYTES = 64 * 1024
# A temporary file this old is a crashed write's: no write of a result (at
# most max_bytes, 50 MiB by default) takes an hour.
TEMPORARY_MAX_AGE_SECONDS = 3600.0
_READ_CHUNK = 1024 * 1024
# The start-up probe: a few blocks, so a full disk refuses it.
_PROBE_BYTES = 64 * 1024


class StoreFailed(Exception):
    """The result could not be written under `results_dir` (disk full, permissions...).

    Its text names the cause as the operating system gave it (never the content).
    """


class ResultStore:
    def __init__(self, root: Path) -> None:
        # absolute: a reference is a full path, whatever directory a reader runs in
        self.root = root.absolute()

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def put(self, content: bytes) -> tuple[str, str]:
        """Store bytes; returns (sha256 hex, reference). StoreFailed when the disk refuses."""
        digest = hashlib.sha256(content).hexdigest()
        final = self.path_for(digest)
        try:
            if not _holds(final, len(content), digest):
                if final.exists():
                    log.warning(
                        "a stored result file no longer matched its name; written again",
                        extra={"ctx": {"path": str(final)}},
                    )
                self._make_shard(final.parent)
                write_atomically(final, content)
        except OSError as exc:
            raise StoreFailed(f"could not be stored under {self.root}: {_cause(exc)}") from None
        return digest, f"file:{final}"

    def check_writable(self) -> None:
        """Raise OSError unless a result could be written now (checked at start-up).

        The probe has a name of its own (reconcilers sharing a results volume
        start together) and holds a block's worth of bytes: an empty file
        needs no free space, so a full disk would pass.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=self.root, prefix=".write-check-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(b"\0" * _PROBE_BYTES)
                out.flush()
                os.fsync(out.fileno())
        finally:
            Path(probe).unlink(missing_ok=True)

    def sweep_temporaries(self, max_age: float = TEMPORARY_MAX_AGE_SECONDS) -> int:
        """Remove crashed writes' temporary files older than `max_age` seconds; how many."""
        removed = 0
        cutoff = time.time() - max_age
        for temp in self.root.glob("??/.*-*"):
            try:
                if temp.is_file() and temp.stat().st_mtime < cutoff:
                    temp.unlink()
                    removed += 1
            except OSError:  # gone meanwhile, or not ours to remove: left
                continue
        return removed

    def _make_shard(self, shard: Path) -> None:
        if shard.is_dir():
            return
        shard.mkdir(parents=True, exist_ok=True)
        fsync_directory(shard.parent)  # the new directory's own name, durable


def _holds(path: Path, size: int, digest: str) -> bool:
    """Whether `path` exists and holds exactly the bytes named `digest`."""
    try:
        if path.stat().st_size != size:
            return False
    except FileNotFoundError:
        return False
    sha = hashlib.sha256()
    with path.open("rb") as stored:
        while chunk := stored.read(_READ_CHUNK):
            sha.update(chunk)
    return sha.hexdigest() == digest


def _cause(exc: OSError) -> str:
    """The operating system's words for `exc`, without the path it may quote."""
    return exc.strerror or type(exc).__name__
