"""Files a reader never sees half of: results, checkpoints, tiles."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(target: Path, data: bytes) -> None:
    """`target` holds `data` whole or keeps what it held (a temporary file beside
    it, fsync, rename): a crash mid-write leaves no half file under the name."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
