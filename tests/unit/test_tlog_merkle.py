"""Merkle trees: published probe vectors, real Certificate Transparency proofs, and a naive model.

The model is RFC 9162's own recursive definitions (MTH, PATH, SUBPROOF),
written as literally as possible; the library's stored-hash provers and its
step-by-step verifiers must agree with it on every tree up to 300 leaves.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from shared.tlog import (
    EMPTY_ROOT,
    ProofError,
    RootAccumulator,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    split_stored_hash_index,
    stored_hash_count,
    stored_hash_index,
    stored_hashes,
    tree_hash,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).resolve().parents[3] / "shared" / "test-vectors" / "transparency-log"
MISSING = f"test vectors not found at {VECTORS} (the shared/ checkout beside the repository)"
PROBES = VECTORS / "transparency_dev_merkle.json"
MAX_LEAVES = 300


def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        pytest.skip(MISSING)
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _probes(kind: str) -> list[Any]:
    """One test per probe file; a single skipped placeholder when the vectors are absent."""
    if not PROBES.is_file():
        return [pytest.param(None, id="missing", marks=pytest.mark.skip(reason=MISSING))]
    probes = json.loads(PROBES.read_text(encoding="utf-8"))[kind]
    return [pytest.param(p, id=p["file"].removeprefix(f"testdata/{kind}/")) for p in probes]


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def _hashes(values: Sequence[str] | None) -> list[bytes]:
    return [_b64(v) for v in values or ()]  # the probes write an empty proof as null


def _flip(value: bytes, bit: int = 0) -> bytes:
    changed = bytearray(value)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


# -- the naive model: RFC 9162 section 2.1, over a list of leaf hashes --------


def _split_point(n: int) -> int:
    """The largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = _split_point(len(leaves))
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = _split_point(len(leaves))
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


def subproof(m: int, leaves: Sequence[bytes], complete: bool) -> list[bytes]:
    if m == len(leaves):
        return [] if complete else [mth(leaves)]
    k = _split_point(len(leaves))
    if m <= k:
        return [*subproof(m, leaves[:k], complete), mth(leaves[k:])]
    return [*subproof(m - k, leaves[k:], False), mth(leaves[:k])]


# -- a log kept in memory with Go's stored-hash layout ------------------------


class MemoryLog:
    """A dict of stored hashes, filled by `stored_hashes` exactly as a database table would be."""

    def __init__(self) -> None:
        self.stored: dict[int, bytes] = {}
        self.leaves: list[bytes] = []
        self.counts = [0]  # len(stored) after each append

    def read(self, indexes: Sequence[int]) -> list[bytes]:
        # Go's tests hold the provers to increasing indexes, which keeps range reads possible.
        assert list(indexes) == sorted(set(indexes)), indexes
        return [self.stored[i] for i in indexes]

    def append(self, data: bytes) -> None:
        n = len(self.leaves)
        hashes = stored_hashes(n, leaf_hash(data), self.read)
        start = stored_hash_index(0, n)
        assert start == len(self.stored)
        self.stored.update((start + i, h) for i, h in enumerate(hashes))
        self.leaves.append(hashes[0])
        self.counts.append(len(self.stored))

    def root(self, size: int) -> bytes:
        return tree_hash(size, self.read)


@pytest.fixture(scope="module")
def log() -> MemoryLog:
    memory = MemoryLog()
    for i in range(MAX_LEAVES):
        memory.append(b"leaf %d" % i)
    return memory


def _pairs(limit: int, exhaustive_to: int, samples: int, *, strict: bool) -> list[tuple[int, int]]:
    """Every (a, b), a < b (or a <= b), up to `exhaustive_to`; then seeded random ones."""
    low = 0 if strict else 1
    pairs = [
        (a, b) for b in range(1, exhaustive_to + 1) for a in range(low, b if strict else b + 1)
    ]
    rng = random.Random(9162)
    for _ in range(samples):
        b = rng.randint(exhaustive_to + 1, limit)
        pairs.append((rng.randrange(low, b if strict else b + 1), b))
    return pairs


# -- hashing ------------------------------------------------------------------


def test_hashes_are_rfc_9162() -> None:
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    # The leaf hash of the empty leaf, the first leaf of RFC 6962's reference tree.
    assert leaf_hash(b"").hex() == (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    )
    left, right = leaf_hash(b"a"), leaf_hash(b"b")
    assert node_hash(left, right) != node_hash(right, left)
    assert leaf_hash(b"\x01" + left + right) != node_hash(left, right)


def test_accumulator_streams_the_tree_head(log: MemoryLog) -> None:
    accumulator = RootAccumulator()
    assert (accumulator.size, accumulator.root()) == (0, EMPTY_ROOT)
    for n, leaf in enumerate(log.leaves, start=1):
        accumulator.append(leaf)
        assert accumulator.size == n
        assert accumulator.root() == log.root(n) == mth(log.leaves[:n]), n
    again = RootAccumulator()
    again.extend(log.leaves)
    assert again.root() == accumulator.root()


# -- stored hash layout -------------------------------------------------------


def _go_stored_hash_index(level: int, n: int) -> int:
    """Go's StoredHashIndex loop, line for line, to hold the closed form to it."""
    for _ in range(level):
        n = 2 * n + 1
    i = 0
    while n > 0:
        i += n
        n >>= 1
    return i + level


def test_stored_hash_layout() -> None:
    # Record 0; record 1 and the (1, 0) subtree; record 2; record 3, (1, 1) and (2, 0); record 4.
    layout = [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3), (1, 1), (2, 0), (0, 4)]
    assert [stored_hash_index(level, n) for level, n in layout] == list(range(8))
    for level in range(12):
        for n in range(300):
            index = stored_hash_index(level, n)
            assert index == _go_stored_hash_index(level, n)
            assert split_stored_hash_index(index) == (level, n)
    for index in range(5000):
        assert stored_hash_index(*split_stored_hash_index(index)) == index


def test_stored_hash_count(log: MemoryLog) -> None:
    assert [stored_hash_count(n) for n in range(MAX_LEAVES + 1)] == log.counts
    assert stored_hash_count(2**40) == 2 * 2**40 - 1  # a complete tree stores every node once


def test_hash_reader_must_answer_what_was_asked(log: MemoryLog) -> None:
    with pytest.raises(ProofError, match="returned 1 hashes for 2 indexes"):
        tree_hash(3, lambda indexes: [log.stored[0]])
    with pytest.raises(ProofError, match="stored hash 2 is 31 bytes"):
        tree_hash(3, lambda indexes: [b"\x00" * 31 if i == 2 else log.stored[i] for i in indexes])


# -- published probes (transparency-dev/merkle testdata) -----------------------


def test_probe_file_is_complete() -> None:
    probes = _load(PROBES)
    for kind in ("inclusion", "consistency"):
        assert len(probes[kind]) == 98
        assert sum(not p["wantErr"] for p in probes[kind]) == 6


@pytest.mark.parametrize("probe", _probes("inclusion"))
def test_inclusion_probe(probe: dict[str, Any]) -> None:
    args = (probe["leafIdx"], probe["treeSize"], _b64(probe["leafHash"]))
    proof, root = _hashes(probe["proof"]), _b64(probe["root"])
    if probe["wantErr"]:
        with pytest.raises(ProofError):
            verify_inclusion(*args, proof, root)
    else:
        verify_inclusion(*args, proof, root)


@pytest.mark.parametrize("probe", _probes("consistency"))
def test_consistency_probe(probe: dict[str, Any]) -> None:
    args = (probe["size1"], probe["size2"], _b64(probe["root1"]), _b64(probe["root2"]))
    proof = _hashes(probe["proof"])
    if probe["wantErr"]:
        with pytest.raises(ProofError):
            verify_consistency(*args, proof)
    else:
        verify_consistency(*args, proof)


# -- real Certificate Transparency data (Google's argon2020 log) ---------------


@pytest.fixture(scope="module")
def argon() -> dict[str, Any]:
    return _load(VECTORS / "go_sumdb_argon2020.json")


def test_ct_leaf_is_in_the_signed_tree_head(argon: dict[str, Any]) -> None:
    size, root = argon["sth"]["tree_size"], _b64(argon["sth"]["sha256_root_hash"])
    leaf = leaf_hash(_b64(argon["leaf_input"]))
    audit_path = _hashes(argon["audit_path"])
    verify_inclusion(argon["leaf_index"], size, leaf, audit_path, root)

    for bad_leaf in (leaf_hash(_flip(_b64(argon["leaf_input"]), 100)), _flip(leaf)):
        with pytest.raises(ProofError):
            verify_inclusion(argon["leaf_index"], size, bad_leaf, audit_path, root)
    for i in range(len(audit_path)):
        bent = [*audit_path[:i], _flip(audit_path[i], 255), *audit_path[i + 1 :]]
        with pytest.raises(ProofError):
            verify_inclusion(argon["leaf_index"], size, leaf, bent, root)
    with pytest.raises(ProofError):
        verify_inclusion(argon["leaf_index"], size, leaf, audit_path, _flip(root))
    with pytest.raises(ProofError):
        verify_inclusion(argon["leaf_index"] + 1, size, leaf, audit_path, root)


def test_ct_tree_grew_consistently(argon: dict[str, Any]) -> None:
    new_size, new_root = argon["sth"]["tree_size"], _b64(argon["sth"]["sha256_root_hash"])
    old_size, old_root = argon["old_size"], _b64(argon["old_root"])
    proof = _hashes(argon["consistency"])
    verify_consistency(old_size, new_size, old_root, new_root, proof)

    for i in range(len(proof)):
        bent = [*proof[:i], _flip(proof[i], 7), *proof[i + 1 :]]
        with pytest.raises(ProofError):
            verify_consistency(old_size, new_size, old_root, new_root, bent)
    with pytest.raises(ProofError):
        verify_consistency(old_size, new_size, _flip(old_root), new_root, proof)
    with pytest.raises(ProofError):
        verify_consistency(old_size, new_size, old_root, _flip(new_root), proof)
    with pytest.raises(ProofError):
        verify_consistency(old_size + 1, new_size, old_root, new_root, proof)


# -- generated proofs against the model -----------------------------------------


def test_inclusion_proofs(log: MemoryLog) -> None:
    roots = [log.root(n) for n in range(MAX_LEAVES + 1)]
    for index, size in _pairs(MAX_LEAVES, 40, 400, strict=True):
        leaf, root = log.leaves[index], roots[size]
        proof = inclusion_proof(index, size, log.read)
        assert proof == path(index, log.leaves[:size]), (index, size)
        verify_inclusion(index, size, leaf, proof, root)

        for i in range(len(proof)):
            bent = [*proof[:i], _flip(proof[i], 3), *proof[i + 1 :]]
            with pytest.raises(ProofError):
                verify_inclusion(index, size, leaf, bent, root)
        for wrong in {index - 1, index + 1, index ^ 1, size - 1 - index} - {index}:
            if 0 <= wrong < size:
                with pytest.raises(ProofError):
                    verify_inclusion(wrong, size, leaf, proof, root)
        for other in {size - 1, size + 1, 2 * size} - {size}:
            # A proof holds for another tree only if it is that tree's proof too.
            if index < other <= MAX_LEAVES and proof != path(index, log.leaves[:other]):
                with pytest.raises(ProofError):
                    verify_inclusion(index, other, leaf, proof, roots[other])


def test_consistency_proofs(log: MemoryLog) -> None:
    roots = [log.root(n) for n in range(MAX_LEAVES + 1)]

    def model(old: int, new: int) -> list[bytes]:
        return subproof(old, log.leaves[:new], True)

    for old, new in _pairs(MAX_LEAVES, 40, 400, strict=False):
        proof = consistency_proof(old, new, log.read)
        assert proof == model(old, new), (old, new)
        verify_consistency(old, new, roots[old], roots[new], proof)

        for i in range(len(proof)):
            bent = [*proof[:i], _flip(proof[i], 200), *proof[i + 1 :]]
            with pytest.raises(ProofError):
                verify_consistency(old, new, roots[old], roots[new], bent)
        if old != new:
            with pytest.raises(ProofError):
                verify_consistency(old, new, roots[new], roots[old], proof)
        for wrong_old, wrong_new in [
            (old - 1, new),
            (old + 1, new),
            (old, new - 1),
            (old, new + 1),
        ]:
            if 1 <= wrong_old <= wrong_new <= MAX_LEAVES and proof != model(wrong_old, wrong_new):
                with pytest.raises(ProofError):
                    verify_consistency(
                        wrong_old, wrong_new, roots[wrong_old], roots[wrong_new], proof
                    )


def test_proofs_must_be_exactly_as_long_as_the_path(log: MemoryLog) -> None:
    root = log.root(37)
    proof = inclusion_proof(20, 37, log.read)
    for bad in (proof[:-1], [*proof, proof[0]], [proof[0], *proof], []):
        with pytest.raises(ProofError, match="hashes"):
            verify_inclusion(20, 37, log.leaves[20], bad, root)
    tree_proof = consistency_proof(11, 37, log.read)
    for bad in (tree_proof[:-1], [*tree_proof, root], []):
        with pytest.raises(ProofError):
            verify_consistency(11, 37, log.root(11), root, bad)


def test_equal_sizes_prove_nothing_but_equality(log: MemoryLog) -> None:
    assert consistency_proof(9, 9, log.read) == []
    verify_consistency(9, 9, log.root(9), log.root(9), [])
    with pytest.raises(ProofError, match="two different roots"):
        verify_consistency(9, 9, log.root(9), log.root(8), [])
    with pytest.raises(ProofError, match="empty consistency proof"):
        verify_consistency(9, 9, log.root(9), log.root(9), [log.root(9)])


# -- impossible arguments are ProofErrors, never IndexError or AssertionError ---


def test_impossible_arguments(log: MemoryLog) -> None:
    leaf, root = log.leaves[0], log.root(5)
    proof = inclusion_proof(0, 5, log.read)
    short, long = b"\x00" * 31, b"\x00" * 33
    cases: list[tuple[str, Any]] = [
        ("index 5 is not in a tree of size 5", lambda: inclusion_proof(5, 5, log.read)),
        ("index -1 is not", lambda: inclusion_proof(-1, 5, log.read)),
        ("index 0 is not in a tree of size 0", lambda: inclusion_proof(0, 0, log.read)),
        ("index 5 is not", lambda: verify_inclusion(5, 5, leaf, proof, root)),
        ("index -1 is not", lambda: verify_inclusion(-1, 5, leaf, proof, root)),
        ("leaf hash is 31 bytes", lambda: verify_inclusion(0, 5, short, proof, root)),
        ("root hash is 33 bytes", lambda: verify_inclusion(0, 5, leaf, proof, long)),
        (r"proof\[1\] is 31 bytes", lambda: verify_inclusion(0, 5, leaf, [root, short], root)),
        ("from size 0 to size 5", lambda: consistency_proof(0, 5, log.read)),
        ("from size 6 to size 5", lambda: consistency_proof(6, 5, log.read)),
        ("from size 0", lambda: verify_consistency(0, 5, EMPTY_ROOT, root, [])),
        ("new size 4 is smaller", lambda: verify_consistency(5, 4, root, root, [])),
        ("old root hash is 31", lambda: verify_consistency(2, 5, short, root, [root])),
        ("new root hash is 33", lambda: verify_consistency(2, 5, root, long, [root])),
        (r"proof\[0\] is 33", lambda: verify_consistency(2, 5, root, root, [long])),
        ("level is -1", lambda: stored_hash_index(-1, 0)),
        ("n is -1", lambda: stored_hash_index(0, -1)),
        ("stored hash index is -1", lambda: split_stored_hash_index(-1)),
        ("record count is -1", lambda: stored_hash_count(-1)),
        ("tree size is -1", lambda: tree_hash(-1, log.read)),
        ("record index is -1", lambda: stored_hashes(-1, leaf, log.read)),
        ("leaf hash is 33", lambda: stored_hashes(0, long, log.read)),
        ("leaf hash is 31", lambda: RootAccumulator().append(short)),
        ("right hash is 33", lambda: node_hash(leaf, long)),
    ]
    for message, call in cases:
        with pytest.raises(ProofError, match=message):
            call()
