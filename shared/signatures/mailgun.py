"""Mailgun's webhook signature, which travels in the JSON body, not a header.

Mailgun posts `{"signature": {"timestamp": "1529006854", "token": "…",
"signature": "<hex>"}, "event-data": {…}}`, the signature being
HMAC-SHA256, under the account's HTTP webhook signing key, of the timestamp
then the token, hex. Its documentation says so, and to reject a token seen
before.

What this proves, and what not: that Mailgun sent a delivery with this
timestamp and token, once. The event data is NOT signed: a signature copied
from one delivery fits any event data. So the token, which is signed and
single-use, is the event's dedupe key (`Verified.event_id`, `id_signed`):
the first delivery carrying it is stored, and any other carrying it, its
data changed or not, is a duplicate and never read; and the timestamp is
held to the replay window, so a copied signature is useless once the window
has passed even where its delivery was lost. What remains is a copy raced
ahead of the genuine delivery within the window; an event is only a hint
that makes the reconciler read the job's status itself.

Pure: headers are not read at all.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import SignatureError
from .options import reject_unknown
from .timestamps import check_freshness, parse_unix_seconds
from .verified import Verified

SCHEME = "mailgun"
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
# Mailgun's tokens are 50 characters; a bound keeps a dedupe key storable.
MAX_TOKEN_CHARS = 256


def check_options(options: Mapping[str, object]) -> None:
    reject_unknown(SCHEME, options, ())


def verify(body: bytes, secrets: Sequence[str], now: float, tolerance_seconds: int) -> Verified:
    """Authenticate one delivery from its body, or raise SignatureError."""
    timestamp, token, presented = _signature(body)
    signed = (timestamp + token).encode()
    candidates = [
        hmac.new(secret.encode("utf-8", "surrogatepass"), signed, hashlib.sha256).hexdigest()
        for secret in secrets
    ]
    # every candidate is compared: the time taken says nothing of which matched
    if not sum(hmac.compare_digest(c.encode(), presented.lower().encode()) for c in candidates):
        raise SignatureError("bad_signature")
    check_freshness(int(timestamp), now, tolerance_seconds)
    return Verified(scheme=SCHEME, event_id=token, id_signed=True, timestamp=int(timestamp))


def sign(secret: str, timestamp: int, token: str) -> dict[str, str]:
    """The `signature` object Mailgun sends (for tests and the simulator)."""
    digest = hmac.new(secret.encode(), f"{timestamp}{token}".encode(), hashlib.sha256)
    return {"timestamp": str(timestamp), "token": token, "signature": digest.hexdigest()}


def _signature(body: bytes) -> tuple[str, str, str]:
    """(timestamp, token, signature) as the body carries them: missing, a
    `missing_header`; present but unreadable, a `malformed_header` (the reasons
    every scheme uses, here about the body's `signature` object)."""
    try:
        document: Any = json.loads(body)
    except (ValueError, RecursionError):
        raise SignatureError("missing_header") from None
    found = document.get("signature") if isinstance(document, dict) else None
    if not isinstance(found, dict):
        raise SignatureError("missing_header")
    timestamp, token, signature = (found.get(k) for k in ("timestamp", "token", "signature"))
    if timestamp is None or token is None or signature is None:
        raise SignatureError("missing_header")
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        timestamp = str(timestamp)  # sent as a number by some of Mailgun's senders
    if not (
        isinstance(timestamp, str)
        and isinstance(token, str)
        and 0 < len(token) <= MAX_TOKEN_CHARS
        and token.isascii()
        and token.isprintable()
        and isinstance(signature, str)
        and _HEX64.fullmatch(signature)
    ):
        raise SignatureError("malformed_header")
    parse_unix_seconds(timestamp)  # plain digits, or malformed_header
    return timestamp, token, signature
