"""The C2SP tlog-checkpoint note text: a log's origin, tree size and root hash.

A checkpoint is what a log signs (see `note`), so its text has exactly one
spelling: `parse` refuses anything `text` would not have written, and a
`Checkpoint` that could not be written cannot be constructed.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from .merkle import HASH_SIZE

# Tree sizes are unsigned 64-bit integers in every checkpoint implementation
# (Go's tlog, transparency-dev/formats), so a larger one is no real log's.
MAX_SIZE = 2**64 - 1

_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")
# A note may hold no ASCII control character but newline, and a line none at all.
_CONTROL = re.compile(r"[\x00-\x1f]")


class CheckpointError(ValueError):
    """The text is not a checkpoint, or the values cannot be written as one."""


@dataclass(frozen=True)
class Checkpoint:
    """One tree head of the log named `origin`; extension lines are opaque and optional."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "origin")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise CheckpointError(f"tree size must be an int, not {type(self.size).__name__}")
        if not 0 <= self.size <= MAX_SIZE:
            raise CheckpointError(f"tree size {self.size} is outside 0..2**64-1")
        if not isinstance(self.root_hash, bytes) or len(self.root_hash) != HASH_SIZE:
            raise CheckpointError(f"root hash must be {HASH_SIZE} bytes")
        if not isinstance(self.extensions, tuple):
            raise CheckpointError("extensions must be a tuple of lines")
        for line in self.extensions:
            _check_line(line, "extension line")

    def text(self) -> str:
        """The note text: origin, size, base64 root hash and extension lines, each newline-ended."""
        root = base64.b64encode(self.root_hash).decode("ascii")
        lines = (self.origin, str(self.size), root, *self.extensions)
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """Read a checkpoint note text (the text of an opened note, without its signatures)."""
        if not text.endswith("\n"):
            raise CheckpointError("checkpoint text must end with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise CheckpointError(f"checkpoint has {len(lines)} lines, want at least 3")
        origin, size, root, *extensions = lines
        if not _SIZE.fullmatch(size):
            raise CheckpointError("tree size must be decimal digits without leading zeros")
        return cls(origin, int(size), _decode_root(root), tuple(extensions))


def _check_line(line: str, what: str) -> None:
    if not isinstance(line, str) or not line:
        raise CheckpointError(f"{what} must be a non-empty string")
    if _CONTROL.search(line):
        raise CheckpointError(f"{what} holds a newline or another control character")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CheckpointError(f"{what} is not valid Unicode text") from exc


def _decode_root(line: str) -> bytes:
    try:
        root = base64.b64decode(line, validate=True)
    except ValueError as exc:  # binascii.Error, or a non-ASCII character
        raise CheckpointError("root hash is not valid base64") from exc
    if len(root) != HASH_SIZE:
        raise CheckpointError(f"root hash is {len(root)} bytes, want {HASH_SIZE}")
    if base64.b64encode(root).decode("ascii") != line:
        # Spare bits set in the last character: another spelling of the same bytes.
        raise CheckpointError("root hash is not canonical base64")
    return root
