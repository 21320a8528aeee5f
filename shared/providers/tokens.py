"""The form in which our idempotency token travels to a provider.

Our tokens are ``idem_<32 hex>`` (37 characters). Some APIs accept only a
UUID: Google's AIP-155 ``request_id`` must be a UUID (and at most 36
characters), many Azure services expect a GUID ``Operation-Id``. For those the
token is sent as a UUID derived from it. The derivation is deterministic, so
every retry of one operation sends the same UUID (that is what makes the
retry safe), and 122 bits of SHA-256 keep distinct tokens distinct. The
ledger keeps the token as minted; the UUID can always be recomputed from it.
"""

from __future__ import annotations

import hashlib
import uuid

from shared.providers.description import CreateSpec, TokenFormat


def wire_token(token: str, fmt: TokenFormat) -> str:
    """`token` as the provider must see it."""
    if fmt is TokenFormat.TOKEN:
        return token
    digest = hashlib.sha256(token.encode("utf-8")).digest()[:16]
    # version=4 sets the version and variant bits, so strict UUIDv4 validators accept it.
    return str(uuid.UUID(bytes=digest, version=4))


def create_token(spec: CreateSpec, token: str) -> str:
    return wire_token(token, spec.idempotency_format)
