"""C2SP signed notes with Ed25519 signatures and Ed25519 witness cosignatures.

A note is text followed by signature lines. Its text means nothing until a
trusted key's signature over it checks, so `open_note` hands the text out only
together with the verifiers that vouched for it. Keys and notes are spelled
exactly as Go's golang.org/x/mod/sumdb/note spells them, so Go's tools and
witnesses read ours and we read theirs.

Ed25519 keys (signature type 0x01) sign the note text; cosigner keys (type
0x04, C2SP tlog-cosignature) sign "cosignature/v1", the time and the text, and
their signature carries that time.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Self

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .checkpoint import Checkpoint, CheckpointError

ALG_ED25519 = 0x01
ALG_COSIGNATURE_V1 = 0x04

# Go's limit. Each known signature costs a verification, so an unbounded note
# would let whoever hands us one choose our work; the spec requires at least 16.
MAX_SIGNATURES = 100
# The cosignature timestamp is a u64 that the spec caps at 2**63 - 1.
MAX_TIMESTAMP = 2**63 - 1

_DASH = "\u2014 "  # em dash and space open every signature line
_PRIVATE = "PRIVATE+KEY+"
_SEED_SIZE = 32
_PUBLIC_KEY_SIZE = 32
_SIGNATURE_SIZE = 64
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # control characters other than newline
_KEY_ID = re.compile(r"[0-9a-f]{8}")


class NoteError(ValueError):
    """A malformed note or key, or a known key whose signature failed."""


class UnverifiedNote(NoteError):
    """The note is well formed but no known key signed it: its text must be ignored."""


class BadSignature(NoteError):
    """A known key's signature does not verify: the note is refused as a whole."""


def compute_key_id(name: str, algorithm: int, public_key: bytes) -> int:
    """SHA-256(name || "\\n" || algorithm byte || public key)[:4], big-endian."""
    data = name.encode("utf-8") + b"\n" + bytes([algorithm]) + public_key
    return int.from_bytes(hashlib.sha256(data).digest()[:4], "big")


def is_valid_name(name: str) -> bool:
    """Non-empty UTF-8 with no Unicode space, control character or plus."""
    if not name or "+" in name or _CONTROL.search(name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(c.isspace() for c in name)


@dataclass(frozen=True)
class Verifier:
    """A public key by its name: checks signatures of one algorithm, 0x01 or 0x04."""

    name: str
    algorithm: int
    public_key: bytes = field(repr=False)
    key_id: int = field(init=False)
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not is_valid_name(self.name):
            raise NoteError("key name must be non-empty UTF-8 without spaces or '+'")
        if self.algorithm not in (ALG_ED25519, ALG_COSIGNATURE_V1):
            raise NoteError(f"unknown signature algorithm 0x{self.algorithm:02x}")
        if len(self.public_key) != _PUBLIC_KEY_SIZE:
            raise NoteError(f"Ed25519 public key is {len(self.public_key)} bytes, want 32")
        key_id = compute_key_id(self.name, self.algorithm, self.public_key)
        object.__setattr__(self, "key_id", key_id)
        object.__setattr__(self, "_key", Ed25519PublicKey.from_public_bytes(self.public_key))

    @classmethod
    def from_key(cls, vkey: str) -> Verifier:
        """Parse a verifier key, `<name>+<hex key id>+<base64(algorithm || public key)>`."""
        if vkey.startswith("PRIVATE+"):
            raise NoteError("this is a private signer key; a verifier takes the public key")
        parts = vkey.split("+", 2)
        if len(parts) != 3:
            raise NoteError("verifier key must be <name>+<key id>+<key>")
        name, key_id, material = parts
        raw = _decode_key(name, key_id, material, "verifier key")
        verifier = cls(name, raw[0], raw[1:])
        _check_key_id(verifier, key_id)
        return verifier

    @property
    def vkey(self) -> str:
        """The verifier key string, as `from_key` reads it."""
        return _key_string(self.name, self.key_id, self.algorithm, self.public_key)

    def _check(self, text: bytes, signature: bytes) -> VerifiedSignature:
        """Verify one signature (the bytes after the key id) or raise BadSignature."""
        timestamp: int | None = None
        message = text
        if self.algorithm == ALG_COSIGNATURE_V1:
            if len(signature) != 8 + _SIGNATURE_SIZE:
                raise self._bad()
            timestamp = int.from_bytes(signature[:8], "big")
            if timestamp > MAX_TIMESTAMP:
                raise self._bad()
            message = _cosigned_message(text, timestamp)
            signature = signature[8:]
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            raise self._bad() from None
        return VerifiedSignature(self, timestamp)

    def _bad(self) -> BadSignature:
        return BadSignature(f"invalid signature for key {self.name}+{self.key_id:08x}")


@dataclass(frozen=True)
class VerifiedSignature:
    """A signature that checked; `timestamp` is a cosignature's time (Unix seconds), else None."""

    verifier: Verifier
    timestamp: int | None


@dataclass(frozen=True)
class NoteSignature:
    """One signature line as written: the key's name and id, then the signature bytes."""

    name: str
    key_id: int
    signature: bytes = field(repr=False)

    def line(self) -> str:
        """The signature line, newline included."""
        blob = self.key_id.to_bytes(4, "big") + self.signature
        return f"{_DASH}{self.name} {base64.b64encode(blob).decode('ascii')}\n"


@dataclass(frozen=True)
class OpenedNote:
    """A note whose text at least one known key vouched for."""

    text: str
    signatures: tuple[VerifiedSignature, ...]
    unverified: tuple[NoteSignature, ...]  # lines by keys not given to open_note

    @property
    def verified(self) -> tuple[Verifier, ...]:
        """The verifiers whose signatures checked, in signature-line order."""
        return tuple(s.verifier for s in self.signatures)


class _KeyPair:
    """A private Ed25519 key under a name. Neither repr nor any error shows the key."""

    algorithm = ALG_ED25519

    def __init__(self, name: str, seed: bytes) -> None:
        if len(seed) != _SEED_SIZE:
            raise NoteError(f"Ed25519 private key seed is {len(seed)} bytes, want 32")
        self._private = Ed25519PrivateKey.from_private_bytes(seed)
        public_key = self._private.public_key().public_bytes_raw()
        self.verifier = Verifier(name, self.algorithm, public_key)

    @classmethod
    def from_key(cls, skey: str) -> Self:
        """Parse a signer key, `PRIVATE+KEY+<name>+<hex key id>+<base64(algorithm || seed)>`."""
        if not skey.startswith(_PRIVATE):
            raise NoteError("signer key must start with PRIVATE+KEY+")
        parts = skey[len(_PRIVATE) :].split("+", 2)
        if len(parts) != 3:
            raise NoteError("signer key must be PRIVATE+KEY+<name>+<key id>+<key>")
        name, key_id, material = parts
        raw = _decode_key(name, key_id, material, "signer key")
        if raw[0] != cls.algorithm:
            wanted = f"{cls.__name__} needs 0x{cls.algorithm:02x}"
            raise NoteError(f"signer key algorithm is 0x{raw[0]:02x}, {wanted}")
        signer = cls(name, raw[1:])
        _check_key_id(signer.verifier, key_id)
        return signer

    @property
    def name(self) -> str:
        return self.verifier.name

    @property
    def key_id(self) -> int:
        return self.verifier.key_id

    @property
    def verifier_key(self) -> str:
        """The public verifier key string to hand to verifiers."""
        return self.verifier.vkey

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, key_id={self.key_id:08x})"


class Signer(_KeyPair):
    """Signs note texts with an Ed25519 key (signature type 0x01)."""

    algorithm = ALG_ED25519

    def _line(self, text: bytes) -> str:
        return NoteSignature(self.name, self.key_id, self._private.sign(text)).line()


class CosignatureSigner(_KeyPair):
    """A witness: cosigns checkpoints with a timestamp (C2SP tlog-cosignature, type 0x04)."""

    algorithm = ALG_COSIGNATURE_V1

    def _line(self, text: bytes, timestamp: int) -> str:
        signature = self._private.sign(_cosigned_message(text, timestamp))
        blob = timestamp.to_bytes(8, "big") + signature
        return NoteSignature(self.name, self.key_id, blob).line()


def generate_key(name: str) -> tuple[str, str]:
    """A new Ed25519 key pair for `name`: (signer key, verifier key). Keep the first secret."""
    return _generate(name, ALG_ED25519)


def generate_cosignature_key(name: str) -> tuple[str, str]:
    """A new witness key pair (type 0x04) for `name`: (signer key, verifier key)."""
    return _generate(name, ALG_COSIGNATURE_V1)


def sign(text: str, signers: Sequence[Signer]) -> str:
    """The signed note: text, a blank line, then one signature line per signer, in order."""
    body = _text_bytes(text)
    if not 1 <= len(signers) <= MAX_SIGNATURES:
        raise NoteError(f"a note needs at least one signer and at most {MAX_SIGNATURES}")
    return text + "\n" + "".join(s._line(body) for s in signers)


def cosign(note: str, cosigners: Sequence[CosignatureSigner], *, timestamp: int) -> str:
    """Add witness cosignatures made at `timestamp` (Unix seconds) to a signed checkpoint note.

    The existing signature lines stay, except one by the same key, which the
    new cosignature replaces. Checking the log's signature and the
    checkpoint's consistency before cosigning is the caller's duty: a
    cosignature vouches for both.
    """
    text, lines = _split(note)
    try:
        Checkpoint.parse(text)
    except CheckpointError as exc:
        raise NoteError(f"only checkpoints are cosigned: {exc}") from exc
    if isinstance(timestamp, bool) or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteError(f"cosignature timestamp {timestamp} is outside 0..2**63-1")
    if not cosigners:
        raise NoteError("cosign needs at least one cosigner")
    replaced = {(c.name, c.key_id) for c in cosigners}
    kept = [line.line() for line in lines if (line.name, line.key_id) not in replaced]
    if len(kept) + len(cosigners) > MAX_SIGNATURES:
        raise NoteError(f"a note holds at most {MAX_SIGNATURES} signatures")
    body = text.encode("utf-8")
    return text + "\n" + "".join(kept) + "".join(c._line(body, timestamp) for c in cosigners)


def open_note(note: str | bytes, verifiers: Sequence[Verifier]) -> OpenedNote:
    """Parse a signed note and check the signatures of the known verifiers.

    Lines by unknown keys (no verifier with that name and key id) are ignored,
    as the spec requires; a known key's failing signature refuses the whole
    note (BadSignature); no known signature at all raises UnverifiedNote.
    Repeated lines by one known key are checked once, as Go does.
    """
    text, lines = _split(note)
    known: dict[tuple[str, int], Verifier] = {}
    ambiguous: set[tuple[str, int]] = set()
    for verifier in verifiers:
        ident = (verifier.name, verifier.key_id)
        if known.setdefault(ident, verifier) != verifier:
            ambiguous.add(ident)
    body = text.encode("utf-8")
    checked: list[VerifiedSignature] = []
    unverified: list[NoteSignature] = []
    seen: set[tuple[str, int]] = set()
    for line in lines:
        ident = (line.name, line.key_id)
        match = known.get(ident)
        if match is None:
            if line not in unverified:
                unverified.append(line)
            continue
        if ident in ambiguous:
            raise NoteError(f"two different verifiers share the key {line.name}+{line.key_id:08x}")
        if ident not in seen:
            seen.add(ident)
            checked.append(match._check(body, line.signature))
    if not checked:
        raise UnverifiedNote("note has no signature by a known key")
    return OpenedNote(text, tuple(checked), tuple(unverified))


def note_text(note: str | bytes) -> str:
    """The text a well-formed note signs, its signatures parsed but not checked
    (NoteError if it is not a note): for a reader who holds no key."""
    return _split(note)[0]


def _split(note: str | bytes) -> tuple[str, list[NoteSignature]]:
    """The text (with its final newline) and the parsed signature lines of a note."""
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError("note is not valid UTF-8") from exc
    _check_text(note, "note")
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block.endswith("\n"):
        raise NoteError("note must end with a newline-terminated signature line")
    raw_lines = block[:-1].split("\n")
    if len(raw_lines) > MAX_SIGNATURES:
        raise NoteError(f"note has {len(raw_lines)} signatures, more than {MAX_SIGNATURES}")
    return text, [_parse_line(line) for line in raw_lines]


def _parse_line(line: str) -> NoteSignature:
    if not line.startswith(_DASH):
        raise NoteError("signature line must start with an em dash and a space")
    name, _, encoded = line[len(_DASH) :].partition(" ")
    if not is_valid_name(name):
        raise NoteError("signature line has an invalid key name")
    blob = _b64decode(encoded, "signature")
    if len(blob) < 5:
        raise NoteError("signature is shorter than a key id and one byte")
    return NoteSignature(name, int.from_bytes(blob[:4], "big"), blob[4:])


def _text_bytes(text: str) -> bytes:
    if not text.endswith("\n"):
        raise NoteError("note text must end with a newline")
    _check_text(text, "note text")
    return text.encode("utf-8")


def _check_text(text: str, what: str) -> None:
    if _CONTROL.search(text):
        raise NoteError(f"{what} holds a control character other than newline")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NoteError(f"{what} is not valid Unicode text") from exc


def _cosigned_message(text: bytes, timestamp: int) -> bytes:
    return b"cosignature/v1\ntime %d\n" % timestamp + text


def _b64decode(encoded: str, what: str) -> bytes:
    """Strict standard base64, refusing other spellings of the same bytes: notes stay canonical."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:  # binascii.Error, or a non-ASCII character
        raise NoteError(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise NoteError(f"{what} is not canonical base64")
    return raw


def _decode_key(name: str, key_id: str, material: str, what: str) -> bytes:
    """The algorithm byte and key of a key string, after checking its name and id syntax."""
    if not is_valid_name(name):
        raise NoteError(f"{what} name must be non-empty UTF-8 without spaces or '+'")
    if not _KEY_ID.fullmatch(key_id):
        raise NoteError(f"{what} id must be 8 lowercase hex digits")
    raw = _b64decode(material, f"{what} material")  # never echo it: it may be secret
    if len(raw) < 2:
        raise NoteError(f"{what} material is too short")
    return raw


def _check_key_id(verifier: Verifier, key_id: str) -> None:
    if int(key_id, 16) != verifier.key_id:
        raise NoteError(f"key id {key_id} does not match the key of {verifier.name}")


def _key_string(name: str, key_id: int, algorithm: int, key: bytes) -> str:
    return f"{name}+{key_id:08x}+{base64.b64encode(bytes([algorithm]) + key).decode('ascii')}"


def _generate(name: str, algorithm: int) -> tuple[str, str]:
    seed = os.urandom(_SEED_SIZE)
    public_key = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    verifier = Verifier(name, algorithm, public_key)
    return _PRIVATE + _key_string(name, verifier.key_id, algorithm, seed), verifier.vkey
