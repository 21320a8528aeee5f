"""A transparency log, without storage or transport: Merkle trees, checkpoints, signed notes.

`merkle` hashes leaves into RFC 9162 trees, lays out their stored hashes as
Go's sumdb/tlog does and proves and verifies inclusion and consistency;
`checkpoint` writes and reads the C2SP tree head text; `note` signs it and
opens signed notes (C2SP signed-note, Ed25519 and witness cosignatures). The
database and the command line build on these; nothing here does I/O.
"""

from __future__ import annotations

from .checkpoint import MAX_SIZE, Checkpoint, CheckpointError
from .merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    HashReader,
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
from .note import (
    ALG_COSIGNATURE_V1,
    ALG_ED25519,
    MAX_SIGNATURES,
    BadSignature,
    CosignatureSigner,
    NoteError,
    NoteSignature,
    OpenedNote,
    Signer,
    UnverifiedNote,
    VerifiedSignature,
    Verifier,
    compute_key_id,
    cosign,
    generate_cosignature_key,
    generate_key,
    is_valid_name,
    note_text,
    open_note,
    sign,
)

__all__ = [
    "ALG_COSIGNATURE_V1",
    "ALG_ED25519",
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MAX_SIGNATURES",
    "MAX_SIZE",
    "BadSignature",
    "Checkpoint",
    "CheckpointError",
    "CosignatureSigner",
    "HashReader",
    "NoteError",
    "NoteSignature",
    "OpenedNote",
    "ProofError",
    "RootAccumulator",
    "Signer",
    "UnverifiedNote",
    "VerifiedSignature",
    "Verifier",
    "compute_key_id",
    "consistency_proof",
    "cosign",
    "generate_cosignature_key",
    "generate_key",
    "inclusion_proof",
    "is_valid_name",
    "leaf_hash",
    "node_hash",
    "note_text",
    "open_note",
    "sign",
    "split_stored_hash_index",
    "stored_hash_count",
    "stored_hash_index",
    "stored_hashes",
    "tree_hash",
    "verify_consistency",
    "verify_inclusion",
]
