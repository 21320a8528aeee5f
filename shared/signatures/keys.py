"""Turning configured secrets into key material, per key encoding.

HMAC keys (`key_encoding`):
- `raw`: the secret's text as UTF-8 bytes (Stripe, GitHub, Slack, Shopify).
- `base64` / `hex`: the secret is the key's bytes, encoded.
- `whsec`: `whsec_` then base64 (Standard Webhooks, Svix). The prefix is
  required: it is what tells an HMAC key from a `whpk_` public key when both
  kinds are configured side by side.

Public keys (asymmetric schemes):
- `whpk`: `whpk_` then base64 of a raw 32-byte Ed25519 key (Standard Webhooks).
- `base64` / `hex`: a raw key (32 bytes for Ed25519; a 33- or 65-byte SEC1
  point for P-256) or a DER SubjectPublicKeyInfo. The lengths never collide,
  so one option covers what providers publish.
- `base64url`: as `base64`, in the URL-safe alphabet, padding optional: a JWK's
  `x` as a JWKS publishes it (fal.ai's webhook keys).
- `pem`: a PEM SubjectPublicKeyInfo.

A secret that does not decode under the configured encoding yields None, so a
verifier skips it (it could be one of another kind during a migration);
`*_problem` functions say why, for config load, without ever quoting it. A
`whsk_` private key is refused: it belongs to the sender, and holding it here
would let anyone who reads the receiver's config forge events.
"""

from __future__ import annotations

from collections.abc import Callable

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

from .digests import decode_base64
from .ed25519_points import is_safe_public_key

HMAC_KEY_ENCODINGS: frozenset[str] = frozenset({"raw", "base64", "hex", "whsec"})
PUBLIC_KEY_ENCODINGS: frozenset[str] = frozenset({"whpk", "base64", "base64url", "hex", "pem"})

WHSEC_PREFIX = "whsec_"
WHPK_PREFIX = "whpk_"
WHSK_PREFIX = "whsk_"

ED25519_KEY_BYTES = 32

PublicKey = Ed25519PublicKey | ec.EllipticCurvePublicKey


def _text_bytes(text: str) -> bytes:
    # surrogatepass: an odd secret must fail to verify, never crash the verifier.
    return text.encode("utf-8", "surrogatepass")


def _unhex(text: str) -> bytes | None:
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


def prefixed_base64(secret: str, prefix: str) -> bytes | None:
    """The bytes after `prefix`, base64 tolerant of missing padding; None otherwise."""
    if not secret.startswith(prefix):
        return None
    return decode_base64(secret[len(prefix) :], pad=True)


# Text that is a public key (or the sender's private key): an HMAC keyed by it
# is one anyone who holds the published key can compute.
_NOT_HMAC_KEYS = (WHPK_PREFIX, WHSK_PREFIX, "-----BEGIN")


def hmac_key(encoding: str, secret: str) -> bytes | None:
    """The HMAC key a secret stands for, or None when it is not one (or is empty)."""
    if secret.lstrip().startswith(_NOT_HMAC_KEYS):
        return None
    if encoding == "raw":
        key: bytes | None = _text_bytes(secret)
    elif encoding == "base64":
        key = decode_base64(secret.strip(), pad=True)
    elif encoding == "hex":
        key = _unhex(secret.strip())
    else:
        key = prefixed_base64(secret, WHSEC_PREFIX)
    # An empty key is one anyone can compute with: never usable.
    return key or None


def hmac_key_problem(encoding: str, secret: str) -> str | None:
    """Why a secret is no HMAC key in `encoding` (never quoting it), or None."""
    if hmac_key(encoding, secret) is not None:
        return None
    if secret.lstrip().startswith(_NOT_HMAC_KEYS):
        return "a public or private key is no HMAC secret (configure the shared secret)"
    if encoding == "whsec":
        if secret.startswith(WHSEC_PREFIX):
            return f"{WHSEC_PREFIX} secret is not non-empty base64"
        return f"secret must start with {WHSEC_PREFIX} (key_encoding whsec)"
    return f"secret is not non-empty {encoding} (key_encoding {encoding})"


def public_key(algorithm: str, encoding: str, secret: str) -> PublicKey | None:
    """The verification key a secret stands for, or None when it is not one."""
    if algorithm == "ed25519" and encoding == "whpk":
        raw = prefixed_base64(secret, WHPK_PREFIX)
        if raw is None or len(raw) != ED25519_KEY_BYTES:
            return None
        return _ed25519(raw)
    if encoding == "pem":
        try:
            pem = secret.strip().encode("ascii")
        except UnicodeError:  # PEM is ASCII; never quote or crash on the rest
            return None
        return _checked(algorithm, _load(load_pem_public_key, pem))
    data = decode_base64(secret.strip(), pad=True) if encoding == "base64" else None
    if encoding == "base64url":
        data = _base64url(secret.strip())
    if encoding == "hex":
        data = _unhex(secret.strip())
    if not data:
        return None
    if algorithm == "ed25519" and len(data) == ED25519_KEY_BYTES:
        return _ed25519(data)
    if algorithm == "ecdsa_p256" and len(data) in (33, 65):
        try:
            return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), data)
        except ValueError:
            return None
    return _checked(algorithm, _load(load_der_public_key, data))


def public_key_problem(algorithm: str, encoding: str, secret: str) -> str | None:
    """Why a secret is no `algorithm` public key in `encoding` (never quoting it), or None."""
    if secret.startswith(WHSK_PREFIX):
        return (
            f"a {WHSK_PREFIX} private key does not belong on the receiver; "
            f"configure the matching {WHPK_PREFIX} public key"
        )
    if public_key(algorithm, encoding, secret) is not None:
        return None
    if encoding == "whpk":
        if secret.startswith(WHPK_PREFIX):
            return f"{WHPK_PREFIX} key is not base64 of a 32-byte Ed25519 public key"
        return f"secret must start with {WHPK_PREFIX} (key_encoding whpk)"
    return f"secret is not an {algorithm} public key in {encoding} (key_encoding {encoding})"


def _base64url(text: str) -> bytes | None:
    """RFC 4648 §5 (`-` and `_`), padding optional; a `+` or `/` is no such text."""
    if "+" in text or "/" in text:
        return None
    return decode_base64(text.replace("-", "+").replace("_", "/"), pad=True)


def _ed25519(raw: bytes) -> Ed25519PublicKey | None:
    # a small-order or non-canonical key lets anyone compute "valid" signatures
    return Ed25519PublicKey.from_public_bytes(raw) if is_safe_public_key(raw) else None


def _load(loader: Callable[[bytes], object], data: bytes) -> object | None:
    # cryptography raises ValueError or UnsupportedAlgorithm for anything that
    # is not a supported key; neither may escape, and the exception is dropped
    # so no chained traceback can quote key material.
    try:
        return loader(data)
    except (ValueError, UnsupportedAlgorithm):
        return None


def _checked(algorithm: str, key: object | None) -> PublicKey | None:
    """Only a key of the configured algorithm (and curve) is accepted."""
    if algorithm == "ed25519" and isinstance(key, Ed25519PublicKey):
        return _ed25519(key.public_bytes_raw())
    if (
        algorithm == "ecdsa_p256"
        and isinstance(key, ec.EllipticCurvePublicKey)
        and isinstance(key.curve, ec.SECP256R1)
    ):
        return key
    return None
