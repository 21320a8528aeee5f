"""A shared secret sent verbatim in a header we chose (AssemblyAI-style).

Some providers let the caller name a header and a value at job creation and
echo them on the webhook. Nothing is signed: the value is a bearer token, so
anyone who sees one request (logs, a proxy) can forge any later request, the
body is not protected, and there is no event id or replay window. Use only
where the provider offers nothing better, over HTTPS, and treat the event as
a hint that triggers a status read.

The comparison is between SHA-256 digests of the presented and the configured
value: `hmac.compare_digest` returns early on a length mismatch, so comparing
the raw values would leak the secret's length; digests are always 32 bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from .digests import any_match
from .errors import SignatureError
from .headers import HeaderView
from .options import header_name, reject_unknown
from .verified import Verified

SCHEME = "static_header"


def check_options(options: Mapping[str, object]) -> None:
    """`header` (required) names the header carrying the secret."""
    reject_unknown(SCHEME, options, ("header",))
    header_name(SCHEME, options, "header", required=True)


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int,
) -> Verified:
    """Authenticate one request; the body, `now` and the tolerance are unused."""
    name = options["header"]
    assert isinstance(name, str)  # checked by dispatch.verify (check_options) first
    presented = _fingerprint(headers.require(name))
    if not any_match((_fingerprint(secret) for secret in secrets), [presented]):
        raise SignatureError("bad_signature")
    return Verified(scheme=SCHEME, event_id=None, id_signed=False, timestamp=None)


def _fingerprint(value: str) -> bytes:
    # surrogatepass: a mapping from any source may hold lone surrogates, and an
    # encoding error must not turn a forged request into a crash.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()
