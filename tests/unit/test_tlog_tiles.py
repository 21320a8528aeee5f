"""C2SP tlog-tiles paths and the tiles of a tree (pure)."""

from __future__ import annotations

import pytest

from shared.tlog import tiles
from shared.tlog.merkle import stored_hash_index


@pytest.mark.parametrize(
    ("n", "encoded"),
    [(0, "000"), (5, "005"), (999, "999"), (1000, "x001/000"), (1234067, "x001/x234/067")],
)
def test_an_index_is_written_in_groups_of_three_digits(n: int, encoded: str) -> None:
    assert tiles.encode_index(n) == encoded


def test_full_and_partial_tiles_are_named_as_the_spec_names_them() -> None:
    assert tiles.Tile(0, 1234067, 256).path == "tile/0/x001/x234/067"
    assert tiles.Tile(1, 2, 17).path == "tile/1/002.p/17"


def test_the_tiles_of_a_tree_cover_every_level() -> None:
    # 70,000 leaves: 273 full level-0 tiles and one of 112; level 1 has
    # 70,000 >> 8 = 273 hashes (one full tile, one of 17); level 2 has 1.
    got = [(t.level, t.index, t.width) for t in tiles.tiles_for(70_000)]
    level0 = [g for g in got if g[0] == 0]
    assert len(level0) == 274 and level0[-1] == (0, 273, 112)
    assert [g for g in got if g[0] == 1] == [(1, 0, 256), (1, 1, 17)]
    assert [g for g in got if g[0] == 2] == [(2, 0, 1)]
    assert list(tiles.tiles_for(0)) == []
    assert [(t.level, t.width) for t in tiles.tiles_for(256)] == [(0, 256), (1, 1)]


def test_a_tiles_hashes_are_its_levels_stored_hashes() -> None:
    tile = tiles.Tile(1, 2, 3)
    assert tile.hash_indexes() == [stored_hash_index(8, 512 + k) for k in range(3)]


def test_a_tile_file_must_hold_exactly_its_width() -> None:
    tile = tiles.Tile(0, 0, 2)
    assert tiles.split(b"a" * 32 + b"b" * 32, tile) == [b"a" * 32, b"b" * 32]
    with pytest.raises(ValueError, match="63 bytes"):
        tiles.split(b"a" * 63, tile)
