"""Standard Webhooks (standardwebhooks.com): `v1` HMAC-SHA256 and `v1a` Ed25519.

Signed content is `{webhook-id}.{webhook-timestamp}.{body}`, so the id and the
timestamp are authenticated: the id is a sound dedupe key and the timestamp a
sound replay window. `webhook-signature` is a space-separated list of
`<version>,<base64>` entries (several during a secret rotation); any entry
matching any configured secret passes. Unknown versions are ignored so a
sender can add new ones; an entry of a version we check that is not valid
base64 makes the header malformed.

Secrets say what they are by prefix: `whsec_<base64>` is an HMAC key (checks
`v1`), `whpk_<base64 32 bytes>` an Ed25519 public key (checks `v1a`). A secret
of one kind is never tried against the other version. `whsk_` private keys
belong to the sender (our simulator) and are not accepted for verification.

The signature is checked before the timestamp window, so `stale_timestamp` and
`future_timestamp` only ever describe authentic requests (a replay or a clock
skew worth alerting on), never random garbage.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .digests import MAX_SIGNATURES_PER_HEADER, any_match, decode_base64, hmac_digest
from .errors import SignatureError
from .headers import HeaderView
from .options import reject_unknown
from .timestamps import check_freshness, parse_unix_seconds
from .verified import Verified

SCHEME = "standard_webhooks"

HMAC_SECRET_PREFIX = "whsec_"  # noqa: S105 -- a format prefix, not a secret
PUBLIC_KEY_PREFIX = "whpk_"
PRIVATE_KEY_PREFIX = "whsk_"

_ED25519_KEY_BYTES = 32


def check_options(options: Mapping[str, object]) -> None:
    """The scheme is fully defined by the spec: it takes no options."""
    reject_unknown(SCHEME, options, ())


def check_secret(secret: str) -> None:
    """Raise ValueError (never quoting the secret) unless it is a usable key."""
    if secret.startswith(PRIVATE_KEY_PREFIX):
        raise ValueError(
            f"{SCHEME}: a {PRIVATE_KEY_PREFIX} private key does not belong on the receiver; "
            f"configure the matching {PUBLIC_KEY_PREFIX} public key"
        )
    if secret.startswith(HMAC_SECRET_PREFIX):
        if _hmac_key(secret) is None:
            raise ValueError(f"{SCHEME}: {HMAC_SECRET_PREFIX} secret is not non-empty base64")
        return
    if secret.startswith(PUBLIC_KEY_PREFIX):
        if _public_key(secret) is None:
            raise ValueError(
                f"{SCHEME}: {PUBLIC_KEY_PREFIX} key is not base64 of a 32-byte Ed25519 public key"
            )
        return
    raise ValueError(
        f"{SCHEME}: secret must start with {HMAC_SECRET_PREFIX} or {PUBLIC_KEY_PREFIX}"
    )


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int,
) -> Verified:
    """Authenticate one request; see the module docstring for the rules."""
    hmac_keys = [key for key in map(_hmac_key, secrets) if key is not None]
    public_keys = [key for key in map(_public_key, secrets) if key is not None]
    if not hmac_keys and not public_keys:
        raise SignatureError("no_secret")

    msg_id = headers.require("webhook-id")
    raw_timestamp = headers.require("webhook-timestamp")
    signature_header = headers.require("webhook-signature")
    timestamp = parse_unix_seconds(raw_timestamp)
    hmac_sigs, ed25519_sigs = _parse_signatures(signature_header)

    content = _signed_content(msg_id, raw_timestamp, body)
    expected = (hmac_digest("sha256", key, content) for key in hmac_keys)
    if not (
        any_match(expected, hmac_sigs) or _any_ed25519_valid(public_keys, ed25519_sigs, content)
    ):
        raise SignatureError("bad_signature")
    check_freshness(timestamp, now, tolerance_seconds)
    return Verified(scheme=SCHEME, event_id=msg_id, id_signed=True, timestamp=timestamp)


def sign_standard_webhooks(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """A `v1,<base64>` signature entry for a `whsec_` secret (sender side)."""
    key = _hmac_key(secret)
    if key is None:
        raise ValueError(f"{SCHEME}: signing needs a valid {HMAC_SECRET_PREFIX} secret")
    digest = hmac_digest("sha256", key, _signed_content(msg_id, str(timestamp), body))
    return "v1," + base64.b64encode(digest).decode("ascii")


def sign_standard_webhooks_ed25519(
    private_key_secret: str, msg_id: str, timestamp: int, body: bytes
) -> str:
    """A `v1a,<base64>` signature entry for a `whsk_` private seed (sender side)."""
    seed = _prefixed_bytes(private_key_secret, PRIVATE_KEY_PREFIX)
    if seed is None or len(seed) != _ED25519_KEY_BYTES:
        raise ValueError(
            f"{SCHEME}: signing needs a {PRIVATE_KEY_PREFIX} key (base64 of a 32-byte seed)"
        )
    private_key = Ed25519PrivateKey.from_private_bytes(seed)
    signature = private_key.sign(_signed_content(msg_id, str(timestamp), body))
    return "v1a," + base64.b64encode(signature).decode("ascii")


def generate_ed25519_keypair() -> tuple[str, str]:
    """A fresh (`whsk_` private seed, `whpk_` public key) pair."""
    private_key = Ed25519PrivateKey.generate()
    seed = private_key.private_bytes_raw()
    public = private_key.public_key().public_bytes_raw()
    return (
        PRIVATE_KEY_PREFIX + base64.b64encode(seed).decode("ascii"),
        PUBLIC_KEY_PREFIX + base64.b64encode(public).decode("ascii"),
    )


def _signed_content(msg_id: str, raw_timestamp: str, body: bytes) -> bytes:
    # surrogatepass: a header mapping from an arbitrary source must not be able
    # to turn verification into an encoding crash.
    return f"{msg_id}.{raw_timestamp}.".encode("utf-8", "surrogatepass") + body


def _parse_signatures(header: str) -> tuple[list[bytes], list[bytes]]:
    """Split `webhook-signature` into decoded v1 and v1a signatures."""
    entries = header.split()
    if len(entries) > MAX_SIGNATURES_PER_HEADER:
        raise SignatureError("malformed_header")
    hmac_sigs: list[bytes] = []
    ed25519_sigs: list[bytes] = []
    for entry in entries:
        version, comma, encoded = entry.partition(",")
        if not comma or not version:
            raise SignatureError("malformed_header")
        if version not in ("v1", "v1a"):
            continue
        decoded = decode_base64(encoded)
        if decoded is None:
            raise SignatureError("malformed_header")
        (hmac_sigs if version == "v1" else ed25519_sigs).append(decoded)
    return hmac_sigs, ed25519_sigs


def _any_ed25519_valid(
    public_keys: Sequence[Ed25519PublicKey], signatures: Sequence[bytes], content: bytes
) -> bool:
    for public_key in public_keys:
        for signature in signatures:
            try:
                public_key.verify(signature, content)
            except InvalidSignature:
                continue
            return True
    return False


def _prefixed_bytes(secret: str, prefix: str) -> bytes | None:
    if not secret.startswith(prefix):
        return None
    return decode_base64(secret[len(prefix) :], pad=True)


def _hmac_key(secret: str) -> bytes | None:
    """The HMAC key of a `whsec_` secret; None for other kinds or invalid ones."""
    return _prefixed_bytes(secret, HMAC_SECRET_PREFIX) or None


def _public_key(secret: str) -> Ed25519PublicKey | None:
    """The Ed25519 key of a `whpk_` secret; None for other kinds or invalid ones."""
    raw = _prefixed_bytes(secret, PUBLIC_KEY_PREFIX)
    if raw is None or len(raw) != _ED25519_KEY_BYTES:
        return None
    return Ed25519PublicKey.from_public_bytes(raw)
