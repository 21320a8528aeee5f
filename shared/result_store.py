"""Durable storage for collected results: content-addressed files.

A result's bytes are written once under `<root>/<sha[:2]>/<sha>` (atomically:
temp file + fsync + rename), so the same result fetched twice is stored once
and a crash mid-write leaves no half file under the final name. The database
keeps the reference and the integrity data; small JSON is also kept inline so
agents can read it without file access.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from shared.atomic_file import write_atomically

# Results up to this size are also stored inline (as JSON) in the results row.
INLINE_MAX_BYTES = 64 * 1024


class ResultStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def put(self, content: bytes) -> tuple[str, str]:
        """Store bytes; returns (sha256 hex, reference)."""
        digest = hashlib.sha256(content).hexdigest()
        final = self.path_for(digest)
        if not final.exists():
            final.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(final, content)
        return digest, f"file:{final}"
