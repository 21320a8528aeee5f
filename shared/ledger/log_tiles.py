"""The evidence log's hashes exported as C2SP tlog-tiles, beside its checkpoint.

`export_tiles` writes every hash tile of the tree at a signed checkpoint's
size (shared/tlog/tiles.py) under a directory, with that checkpoint as
`checkpoint`: the layout tlog tooling reads. Full tiles never change, so a
later export only adds the new ones (and the new partial tiles) and the
directory can be shipped off the host incrementally. `audit archive` exports
them under its archive root, so an archive is its rows, its receipts and the
tiles of the tree they prove against; `check_tiles` recomputes the
checkpoint's root from a directory of tiles alone, no database.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.atomic_file import write_atomically
from shared.db.queries import q
from shared.tlog import RootAccumulator, tiles

# Tiles whose hashes one query reads.
TILES_PER_READ = 32
CHECKPOINT_FILE = "checkpoint"


@dataclass
class TilesWritten:
    size: int = 0
    written: int = 0
    kept: int = 0  # full tiles already there (they never change)


async def export_tiles(conn: Any, root: Path, size: int, note: str) -> TilesWritten:
    """Every tile of the tree of `size` leaves under `root`, and `note` (its signed
    checkpoint) as root/checkpoint, written last: a reader never finds a
    checkpoint whose tiles are not all there."""
    result = TilesWritten(size=size)
    batch: list[tiles.Tile] = []
    for tile in tiles.tiles_for(size):
        if tile.full and (root / tile.path).is_file():
            result.kept += 1
            continue
        batch.append(tile)
        if len(batch) == TILES_PER_READ:
            result.written += await _write_batch(conn, root, batch)
            batch = []
    if batch:
        result.written += await _write_batch(conn, root, batch)
    _write_file(root / CHECKPOINT_FILE, note.encode("utf-8"))
    return result


async def _write_batch(conn: Any, root: Path, batch: list[tiles.Tile]) -> int:
    indexes = [i for tile in batch for i in tile.hash_indexes()]
    rows = await conn.fetch(q("log_read_hashes"), indexes)
    hashes = {r["hash_index"]: bytes(r["hash"]) for r in rows}
    missing = [i for i in indexes if i not in hashes]
    if missing:
        raise LookupError(f"the log has no stored hash {missing[0]} (of {len(missing)})")
    for tile in batch:
        _write_file(root / tile.path, b"".join(hashes[i] for i in tile.hash_indexes()))
    return len(batch)


# Tiles are public, as checkpoints are (shared/ledger/log.py CHECKPOINT_MODE):
# anyone may fetch them to check a proof, so they are readable by all.
TILE_MODE = 0o644


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data, TILE_MODE)


def tiles_root(root: Path, size: int) -> bytes:
    """The root hash of the tree of `size` leaves, from the tiles under `root` alone.

    The level-0 tiles' leaf hashes are folded into the root; every hash of a
    higher level must be the root of the full tile it stands for one level
    down. A missing tile, a short one, or one that disagrees with the level
    below is a ValueError. Streaming: memory holds one level's tile roots.
    """
    acc = RootAccumulator()
    expected: list[bytes] = []  # roots of the previous level's full tiles, in order
    roots: list[bytes] = []  # roots of this level's full tiles
    level = 0
    for tile in tiles.tiles_for(size):
        if tile.level != level:
            expected, roots, level = roots, [], tile.level
        hashes = tiles.split(_read(root, tile), tile)
        if tile.level == 0:
            acc.extend(hashes)
        else:
            first = tile.index * tiles.TILE_WIDTH
            for k, value in enumerate(hashes):
                if first + k >= len(expected) or expected[first + k] != value:
                    raise ValueError(f"{tile.path}: hash {k} is not the root of its tile below")
        if tile.full:
            roots.append(_subtree_root(hashes))
    return acc.root()


def _subtree_root(hashes: list[bytes]) -> bytes:
    """The root of a full tile's 256 hashes: the tree they make as its leaves' hashes."""
    acc = RootAccumulator()
    acc.extend(hashes)
    return acc.root()


def _read(root: Path, tile: tiles.Tile) -> bytes:
    try:
        return (root / tile.path).read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{tile.path}: missing") from None
