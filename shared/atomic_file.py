"""Files a reader never sees half of: results, checkpoints, tiles."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(target: Path, data: bytes, mode: int | None = None) -> None:
    """`target` holds `data` whole or keeps what it held (a temporary file beside
    it, fsync, rename, the directory fsynced): a crash mid-write leaves no half
    file under the name, and once this returns the name survives a power loss.

    The file is 0600 (mkstemp's) unless `mode` says otherwise: a result may
    hold what only the reconciler's user should read. Public files (signed
    checkpoints) pass their mode, set before the rename so the name never
    shows the file with another.
    """
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    # the rename itself: durable only once the directory holding the name is
    # (a power loss could otherwise keep a database row naming a file that is not)
    fsync_directory(target.parent)


def fsync_directory(path: Path) -> None:
    """Make the names in directory `path` durable (its entries, not the files' bytes)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
