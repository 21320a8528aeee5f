"""Stripe-style signatures: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`.

Signed content is `{t}.{body}`, HMAC-SHA256 keyed with the secret's UTF-8
bytes, hex encoded. Several `v1` entries appear while a secret is being
rotated; any entry matching any configured secret passes. Other schemes
(`v0`, test-mode extras) are ignored.

The event id is not in a header: it is the `id` field of the (signed) body,
so `Verified.event_id` is None and `id_signed` is True -- the caller takes the
id from the body after verification and may trust it as a dedupe key.

As in Stripe's own libraries, the signature is checked before the timestamp
window, so a stale/future reason always describes an authentic request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .digests import MAX_SIGNATURES_PER_HEADER, any_match, decode_hex, hmac_digest
from .errors import SignatureError
from .headers import HeaderView
from .options import reject_unknown
from .timestamps import check_freshness, parse_unix_seconds
from .verified import Verified

SCHEME = "stripe"
HEADER = "stripe-signature"


def check_options(options: Mapping[str, object]) -> None:
    """The format is fixed by Stripe: no options."""
    reject_unknown(SCHEME, options, ())


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int,
) -> Verified:
    """Authenticate one request; see the module docstring for the rules."""
    raw_timestamp, signatures = _parse_header(headers.require(HEADER))
    timestamp = parse_unix_seconds(raw_timestamp)
    content = _signed_content(raw_timestamp, body)
    expected = (hmac_digest("sha256", secret.encode(), content) for secret in secrets)
    if not any_match(expected, signatures):
        raise SignatureError("bad_signature")
    check_freshness(timestamp, now, tolerance_seconds)
    return Verified(scheme=SCHEME, event_id=None, id_signed=True, timestamp=timestamp)


def sign_stripe(secret: str, timestamp: int, body: bytes) -> str:
    """A complete `Stripe-Signature` header value (sender side)."""
    content = _signed_content(str(timestamp), body)
    return f"t={timestamp},v1={hmac_digest('sha256', secret.encode(), content).hex()}"


def _signed_content(raw_timestamp: str, body: bytes) -> bytes:
    return f"{raw_timestamp}.".encode() + body


def _parse_header(header: str) -> tuple[str, list[bytes]]:
    """The raw `t` value and the decoded `v1` signatures.

    Exactly one `t` is required: with two, which one was signed would depend
    on the parser, an ambiguity an attacker could exploit.
    """
    items = header.split(",")
    if len(items) > MAX_SIGNATURES_PER_HEADER + 1:
        raise SignatureError("malformed_header")
    timestamps: list[str] = []
    signatures: list[bytes] = []
    for item in items:
        key, equals, value = item.strip().partition("=")
        if not equals or not key:
            raise SignatureError("malformed_header")
        if key == "t":
            timestamps.append(value)
        elif key == "v1":
            decoded = decode_hex(value)
            if decoded is None:
                raise SignatureError("malformed_header")
            signatures.append(decoded)
    if len(timestamps) != 1:
        raise SignatureError("malformed_header")
    return timestamps[0], signatures
