"""RFC 9162 (= RFC 6962) Merkle tree hashes, proofs and their verification.

Two ways to a tree head. `RootAccumulator` folds a stream of leaf hashes in
O(log n) memory, so an auditor can recompute a log's root from its leaves
without holding them. The stored-hash functions are Go's
golang.org/x/mod/sumdb/tlog ported algorithm for algorithm: a log stores every
complete subtree hash once, at a dense index, and then any tree head or proof
costs one batched read of O(log n) hashes (a `HashReader`).

The verifiers follow the RFC's own verification steps and share no code with
the provers, so a mistake in one is caught by the other rather than mirrored.
Every refusal, bad argument or failed proof alike, is a `ProofError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

HashReader = Callable[[Sequence[int]], Sequence[bytes]]
"""Reads stored hashes by index, returning them in the order asked."""


class ProofError(ValueError):
    """A proof did not verify, or the sizes, indexes or hashes given cannot describe a tree."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data): the prefix keeps a leaf from passing for an interior node."""
    digest = hashlib.sha256(b"\x00")
    digest.update(data)
    return digest.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right) of two 32-byte child hashes."""
    _check_hash(left, "left hash")
    _check_hash(right, "right hash")
    return _node(left, right)


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes, want {HASH_SIZE}")


def _check_count(value: int, what: str) -> None:
    if value < 0:
        raise ProofError(f"{what} is {value}, want a non-negative integer")


class RootAccumulator:
    """The tree head of a stream of leaf hashes, in O(log n) memory.

    The stack holds the roots of the complete subtrees the leaves so far make,
    largest first: one per set bit of `size`. Appending a leaf merges it with
    the stack top once per trailing one bit of the old size.
    """

    __slots__ = ("_size", "_stack")

    def __init__(self) -> None:
        self._size = 0
        self._stack: list[bytes] = []

    @property
    def size(self) -> int:
        """How many leaves have been appended."""
        return self._size

    def append(self, leaf_hash: bytes) -> None:
        """Add the next leaf, given as its leaf hash (see `leaf_hash`)."""
        _check_hash(leaf_hash, "leaf hash")
        merged, n = leaf_hash, self._size
        while n & 1:
            merged = _node(self._stack.pop(), merged)
            n >>= 1
        self._stack.append(merged)
        self._size += 1

    def extend(self, hashes: Iterable[bytes]) -> None:
        """Append each leaf hash in order."""
        for value in hashes:
            self.append(value)

    def root(self) -> bytes:
        """The root hash of the tree of the leaves appended so far."""
        if not self._stack:
            return EMPTY_ROOT
        root = self._stack[-1]
        for i in range(len(self._stack) - 2, -1, -1):
            root = _node(self._stack[i], root)
        return root


# Stored hashes, in the order of Crosby and Wallach's "Efficient Data Structures
# for Tamper-Evident Logging" (section 3.3), as Go's sumdb/tlog lays them out.


def stored_hash_index(level: int, n: int) -> int:
    """Where the hash of the n'th complete subtree of 2**level leaves is stored.

    Record n's leaf hash comes first, then the hashes of the subtrees it
    completes, smallest first; the layout is dense and append-only.
    """
    _check_count(level, "level")
    _check_count(n, "n")
    # Level L's n'th hash is stored right after level L+1's (2n+1)'th hash:
    # walk down to the level-0 record that completes the subtree.
    record = (n << level) | ((1 << level) - 1)
    # Level 0's m'th hash sits at m + m/2 + m/4 + ... = 2m - popcount(m).
    return 2 * record - record.bit_count() + level


def split_stored_hash_index(index: int) -> tuple[int, int]:
    """(level, n) for a stored hash index: the inverse of `stored_hash_index`."""
    _check_count(index, "stored hash index")
    # stored_hash_index(0, n) < 2n, so the record that stored `index` is in
    # [index/2, index/2 + log2(index)].
    n = index // 2
    index_n = stored_hash_index(0, n)
    while True:
        # Each record n adds 1 + trailing_zeros(n + 1) hashes.
        after = index_n + 1 + _trailing_zeros(n + 1)
        if after > index:
            break
        n += 1
        index_n = after
    # The hash was stored with record n: one of (0, n), (1, n/2), (2, n/4), ...
    level = index - index_n
    return level, n >> level


def stored_hash_count(n: int) -> int:
    """How many hashes a tree of n records stores."""
    _check_count(n, "record count")
    if n == 0:
        return 0
    count = stored_hash_index(0, n - 1) + 1
    # Plus one hash per subtree the last record completes: a trailing one bit
    # of n - 1 each, that is a trailing zero bit of n.
    return count + _trailing_zeros(n)


def stored_hashes(n: int, leaf_hash: bytes, reader: HashReader) -> list[bytes]:
    """The hashes to store, from index `stored_hash_index(0, n)` on, when appending record n.

    The leaf hash and then one hash per subtree that record n completes: one
    or two on average, at most 1 + log2(n). Reads up to log2(n) earlier hashes.
    """
    _check_count(n, "record index")
    _check_hash(leaf_hash, "leaf hash")
    # Each trailing one bit of n completes a subtree whose left half is stored.
    completes = _trailing_zeros(n + 1)
    indexes = [stored_hash_index(i, (n >> i) - 1) for i in range(completes - 1, -1, -1)]
    lefts = _read(reader, indexes)
    hashes = [leaf_hash]
    merged = leaf_hash
    for left in reversed(lefts):
        merged = _node(left, merged)
        hashes.append(merged)
    return hashes


def tree_hash(n: int, reader: HashReader) -> bytes:
    """The root hash of the tree of the first n records: one read of at most 1 + log2(n) hashes."""
    _check_count(n, "tree size")
    if n == 0:
        return EMPTY_ROOT
    hashes = iter(_read(reader, _subtree_index(0, n, [])))
    return _subtree_hash(0, n, hashes)


def inclusion_proof(index: int, size: int, reader: HashReader) -> list[bytes]:
    """The audit path proving record `index` is in the tree of `size` records (Go's ProveRecord)."""
    if not 0 <= index < size:
        raise ProofError(f"index {index} is not in a tree of size {size}")
    hashes = iter(_read(reader, _leaf_proof_index(0, size, index, [])))
    return _leaf_proof(0, size, index, hashes)


def consistency_proof(old_size: int, new_size: int, reader: HashReader) -> list[bytes]:
    """The proof that the tree of `new_size` records extends that of `old_size` (Go's ProveTree)."""
    if not 1 <= old_size <= new_size:
        raise ProofError(f"no consistency proof from size {old_size} to size {new_size}")
    hashes = iter(_read(reader, _tree_proof_index(0, new_size, old_size, [])))
    return _tree_proof(0, new_size, old_size, hashes)


def _read(reader: HashReader, indexes: list[int]) -> list[bytes]:
    if not indexes:
        return []
    hashes = list(reader(indexes))
    if len(hashes) != len(indexes):
        raise ProofError(f"hash reader returned {len(hashes)} hashes for {len(indexes)} indexes")
    for index, value in zip(indexes, hashes, strict=True):
        _check_hash(value, f"stored hash {index}")
    return hashes


def _trailing_zeros(x: int) -> int:
    return (x & -x).bit_length() - 1


def _maxpow2(n: int) -> tuple[int, int]:
    """(k, log2 k) for k the largest power of two smaller than n, n >= 2."""
    level = (n - 1).bit_length() - 1
    return 1 << level, level


def _subtree_index(lo: int, hi: int, need: list[int]) -> list[int]:
    """Append the indexes `_subtree_hash(lo, hi)` reads: the complete subtrees covering [lo, hi)."""
    while lo < hi:
        k, level = _maxpow2(hi - lo + 1)
        need.append(stored_hash_index(level, lo >> level))
        lo += k
    return need


def _subtree_hash(lo: int, hi: int, hashes: Iterator[bytes]) -> bytes:
    """The hash of leaves [lo, hi), consuming the hashes `_subtree_index` asked for."""
    parts: list[bytes] = []
    while lo < hi:
        k, _ = _maxpow2(hi - lo + 1)
        parts.append(next(hashes))
        lo += k
    merged = parts[-1]
    for i in range(len(parts) - 2, -1, -1):
        merged = _node(parts[i], merged)
    return merged


def _leaf_proof_index(lo: int, hi: int, n: int, need: list[int]) -> list[int]:
    if lo + 1 == hi:
        return need
    k, _ = _maxpow2(hi - lo)
    if n < lo + k:
        _leaf_proof_index(lo, lo + k, n, need)
        _subtree_index(lo + k, hi, need)
    else:
        _subtree_index(lo, lo + k, need)
        _leaf_proof_index(lo + k, hi, n, need)
    return need


def _leaf_proof(lo: int, hi: int, n: int, hashes: Iterator[bytes]) -> list[bytes]:
    """Walk down towards leaf n, recording the hash of each side not taken (RFC 9162 PATH)."""
    if lo + 1 == hi:
        return []  # The verifier has the leaf hash itself.
    k, _ = _maxpow2(hi - lo)
    if n < lo + k:
        proof = _leaf_proof(lo, lo + k, n, hashes)
        proof.append(_subtree_hash(lo + k, hi, hashes))
    else:
        sibling = _subtree_hash(lo, lo + k, hashes)
        proof = _leaf_proof(lo + k, hi, n, hashes)
        proof.append(sibling)
    return proof


def _tree_proof_index(lo: int, hi: int, n: int, need: list[int]) -> list[int]:
    if n == hi:
        return need if lo == 0 else _subtree_index(lo, hi, need)
    k, _ = _maxpow2(hi - lo)
    if n <= lo + k:
        _tree_proof_index(lo, lo + k, n, need)
        _subtree_index(lo + k, hi, need)
    else:
        _subtree_index(lo, lo + k, need)
        _tree_proof_index(lo + k, hi, n, need)
    return need


def _tree_proof(lo: int, hi: int, n: int, hashes: Iterator[bytes]) -> list[bytes]:
    """The part of the consistency proof for leaves [lo, hi) (RFC 9162 SUBPROOF)."""
    if n == hi:
        # Common ground. At lo == 0 this subtree is the old tree, whose hash the verifier has.
        return [] if lo == 0 else [_subtree_hash(lo, hi, hashes)]
    k, _ = _maxpow2(hi - lo)
    if n <= lo + k:
        proof = _tree_proof(lo, lo + k, n, hashes)
        proof.append(_subtree_hash(lo + k, hi, hashes))
    else:
        sibling = _subtree_hash(lo, lo + k, hashes)
        proof = _tree_proof(lo + k, hi, n, hashes)
        proof.append(sibling)
    return proof


def _shift_to_odd(fn: int, sn: int) -> tuple[int, int]:
    """Right-shift both until fn is odd or 0: skip the levels where the node has no sibling."""
    while fn and not fn & 1:
        fn >>= 1
        sn >>= 1
    return fn, sn


def verify_inclusion(
    index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Raise ProofError unless `proof` shows the leaf at `index` in the tree of `size` and `root`.

    RFC 9162 section 2.1.3.2, step for step.
    """
    if not 0 <= index < size:
        raise ProofError(f"index {index} is not in a tree of size {size}")
    _check_hash(leaf_hash, "leaf hash")
    _check_hash(root, "root hash")
    for i, value in enumerate(proof):
        _check_hash(value, f"proof[{i}]")
    fn, sn = index, size - 1
    calculated = leaf_hash
    for value in proof:
        if sn == 0:
            raise ProofError(f"inclusion proof has {len(proof)} hashes, more than the path holds")
        if fn & 1 or fn == sn:
            calculated = _node(value, calculated)
            fn, sn = _shift_to_odd(fn, sn)
        else:
            calculated = _node(calculated, value)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"inclusion proof has {len(proof)} hashes, fewer than the path needs")
    if calculated != root:
        raise ProofError("inclusion proof does not lead to the root hash")


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Raise ProofError unless `proof` shows (new_size, new_root) extends (old_size, old_root).

    RFC 9162 section 2.1.4.2. A proof from the empty tree is refused, as Go's
    CheckTree and transparency-dev's verifier do: every tree extends it, so
    there is nothing to prove and callers should not ask. Equal sizes need an
    empty proof and identical roots.
    """
    if old_size < 1:
        raise ProofError(
            f"no consistency proof from size {old_size}: all trees extend the empty one"
        )
    if new_size < old_size:
        raise ProofError(f"new size {new_size} is smaller than old size {old_size}")
    if old_size == new_size:
        if proof:
            raise ProofError("trees of equal size need an empty consistency proof")
        if old_root != new_root:
            raise ProofError(f"two different roots for the same size {old_size}")
        return
    _check_hash(old_root, "old root hash")
    _check_hash(new_root, "new root hash")
    for i, value in enumerate(proof):
        _check_hash(value, f"proof[{i}]")
    if not proof:
        raise ProofError(f"empty consistency proof from size {old_size} to size {new_size}")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)  # The old tree is a complete subtree: the proof leaves it out.
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    old_calculated = new_calculated = path[0]
    for value in path[1:]:
        if sn == 0:
            raise ProofError(f"consistency proof has {len(proof)} hashes, more than it needs")
        if fn & 1 or fn == sn:
            old_calculated = _node(value, old_calculated)
            new_calculated = _node(value, new_calculated)
            fn, sn = _shift_to_odd(fn, sn)
        else:
            new_calculated = _node(new_calculated, value)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError(f"consistency proof has {len(proof)} hashes, fewer than it needs")
    if old_calculated != old_root:
        raise ProofError("consistency proof does not lead to the old root hash")
    if new_calculated != new_root:
        raise ProofError("consistency proof does not lead to the new root hash")
