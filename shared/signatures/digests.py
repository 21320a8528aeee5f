"""HMAC computation, signature decoding and constant-time matching."""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Sequence

HMAC_ALGORITHMS: frozenset[str] = frozenset({"sha256", "sha512", "sha1"})

# Senders put one signature per active secret in a header (two during a
# rotation); 16 leaves ample room while bounding the verification work an
# attacker can cause with one oversized header (Ed25519 checks are not free).
MAX_SIGNATURES_PER_HEADER = 16

_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


def hmac_digest(algorithm: str, key: bytes, content: bytes) -> bytes:
    """The raw HMAC of `content`; `algorithm` must be one of HMAC_ALGORITHMS."""
    return keyed_hmac(algorithm, key)(content)


def keyed_hmac(algorithm: str, key: bytes) -> Callable[[bytes], bytes]:
    """`content -> ` the raw HMAC of `content` under `key`, keyed once.

    Keying (the OpenSSL digest fetch and the padded key blocks) is about a
    third of one HMAC of a webhook body; a copy of the keyed state skips it.
    The keyed state is never updated, only copied, so the function is pure.
    """
    if algorithm not in HMAC_ALGORITHMS:
        raise ValueError(f"unsupported HMAC algorithm {algorithm!r}")
    keyed = hmac.new(key, None, getattr(hashlib, algorithm))

    def digest(content: bytes) -> bytes:
        mac = keyed.copy()
        mac.update(content)
        return mac.digest()

    return digest


def decode_hex(value: str) -> bytes | None:
    """Raw bytes of a hex signature, or None when it is not hex."""
    if _HEX.fullmatch(value) is None:
        return None
    return bytes.fromhex(value)


def decode_base64(value: str, *, pad: bool = False) -> bytes | None:
    """Raw bytes of a standard-alphabet base64 value, or None when it is not one.

    `pad` tolerates missing trailing `=`, as secrets are often pasted unpadded.
    """
    if pad:
        value += "=" * (-len(value) % 4)
    try:
        # What `base64.b64decode(value, validate=True)` does, minus its
        # argument juggling: it runs on every signature of every delivery.
        return binascii.a2b_base64(value.encode("ascii"), strict_mode=True)
    except ValueError:  # binascii.Error, or UnicodeEncodeError for non-ASCII text
        return None


def any_match(expected: Iterable[bytes], presented: Sequence[bytes]) -> bool:
    """True when any presented signature equals any expected one.

    Raw bytes are compared, never text: `hmac.compare_digest` rejects non-ASCII
    strings with a TypeError, which an attacker could otherwise trigger.
    """
    # Plain loops, not a generator in any(): the same comparisons in the same
    # order, without a generator frame per delivery.
    for digest in expected:
        for candidate in presented:
            if hmac.compare_digest(candidate, digest):
                return True
    return False
