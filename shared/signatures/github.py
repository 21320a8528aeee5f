"""GitHub-style signatures: `X-Hub-Signature-256: sha256=<hex>` over the raw body.

HMAC-SHA256 keyed with the secret's UTF-8 bytes. Only the body is signed.

What that means for replay: no timestamp is signed, so there is no replay
window at all, and `X-GitHub-Delivery` (returned as `event_id`) is not signed
either (`id_signed=False`). Replay protection therefore rests entirely on
deduplicating the delivery id, and an attacker who captured one request can
resend its body with a fresh delivery id and it will verify. Mitigations:
restrict the endpoint to the sender's published IP ranges (GitHub's `/meta`
hooks list), make event handling idempotent on ids found *inside* the body,
and treat webhook events as hints that trigger a status read, never as the
final word (which jobwarden does anyway: events are observations).

A missing `X-GitHub-Delivery` is not an error (it proves nothing either way):
`event_id` is then None and the caller falls back to ids in the body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .digests import any_match, decode_hex, hmac_digest
from .errors import SignatureError
from .headers import HeaderView
from .options import reject_unknown
from .verified import Verified

SCHEME = "github"
SIGNATURE_HEADER = "x-hub-signature-256"
DELIVERY_HEADER = "x-github-delivery"
_PREFIX = "sha256="


def check_options(options: Mapping[str, object]) -> None:
    """The format is fixed by GitHub: no options (use generic_hmac for variants)."""
    reject_unknown(SCHEME, options, ())


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int,
) -> Verified:
    """Authenticate one request; `now` and the tolerance are unused (nothing is timed)."""
    header = headers.require(SIGNATURE_HEADER)
    if not header.startswith(_PREFIX):
        raise SignatureError("malformed_header")
    signature = decode_hex(header[len(_PREFIX) :])
    if signature is None:
        raise SignatureError("malformed_header")
    expected = (hmac_digest("sha256", secret.encode(), body) for secret in secrets)
    if not any_match(expected, [signature]):
        raise SignatureError("bad_signature")
    return Verified(
        scheme=SCHEME, event_id=headers.get(DELIVERY_HEADER), id_signed=False, timestamp=None
    )


def sign_github(secret: str, body: bytes) -> str:
    """A complete `X-Hub-Signature-256` header value (sender side)."""
    return _PREFIX + hmac_digest("sha256", secret.encode(), body).hex()
