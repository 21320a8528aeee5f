"""Hash tiles of the C2SP tlog-tiles layout: the tree's hashes as static files.

A tile at level L holds up to 256 consecutive hashes of tree level 8L: level 0
the leaf hashes, level 1 the roots of full 256-leaf subtrees, and so on (Go's
sumdb/tlog, tile height 8). Its path is `tile/<L>/<N>`, the index N written in
groups of three digits, all but the last prefixed with `x` (1234067 is
`x001/x234/067`); a tile that is not full yet is `tile/<L>/<N>.p/<W>`, W its
width. Full tiles never change, so a directory of them can be shipped off the
host and kept by rsync; anyone can recompute a checkpoint's root from them.

Entry bundles (`tile/entries/...`) are not written: a leaf's data is
recomputed from its row (shared/ledger/leaves.py), and the rows are in the
database or an archive.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shared.tlog.merkle import stored_hash_index

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
HASH_SIZE = 32


@dataclass(frozen=True)
class Tile:
    level: int
    index: int
    width: int  # hashes in it: TILE_WIDTH when full

    @property
    def path(self) -> str:
        """Its path under the log's prefix, as C2SP tlog-tiles names it."""
        partial = "" if self.width == TILE_WIDTH else f".p/{self.width}"
        return f"tile/{self.level}/{encode_index(self.index)}{partial}"

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    def hash_indexes(self) -> list[int]:
        """The stored-hash indexes of its hashes, in order (merkle.stored_hash_index)."""
        level = self.level * TILE_HEIGHT
        first = self.index * TILE_WIDTH
        return [stored_hash_index(level, first + k) for k in range(self.width)]


def encode_index(n: int) -> str:
    """1234067 -> 'x001/x234/067'; 5 -> '005'."""
    if n < 0:
        raise ValueError("a tile index is not negative")
    groups = [f"{n % 1000:03d}"]
    n //= 1000
    while n:
        groups.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(groups))


def tiles_for(size: int) -> Iterator[Tile]:
    """Every tile of the tree of `size` leaves, level by level, left to right.

    Level L has size >> 8L hashes (complete subtrees of 256**L leaves): that
    many // 256 full tiles, and a partial one for the rest, if any.
    """
    if size < 0:
        raise ValueError("a tree size is not negative")
    level = 0
    hashes = size
    while hashes:
        for index in range(hashes // TILE_WIDTH):
            yield Tile(level, index, TILE_WIDTH)
        if hashes % TILE_WIDTH:
            yield Tile(level, hashes // TILE_WIDTH, hashes % TILE_WIDTH)
        level += 1
        hashes >>= TILE_HEIGHT


def split(data: bytes, tile: Tile) -> list[bytes]:
    """A tile file's hashes; ValueError unless it holds exactly `tile.width` of them."""
    if len(data) != tile.width * HASH_SIZE:
        raise ValueError(f"{tile.path}: {len(data)} bytes, not {tile.width} hashes")
    return [data[k : k + HASH_SIZE] for k in range(0, len(data), HASH_SIZE)]
