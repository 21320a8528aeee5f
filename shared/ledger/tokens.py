"""API bearer tokens: minted once, shown once, stored only as a digest.

A token carries 256 random bits, so a plain sha256 is the right digest: there
is nothing to brute-force that a slow hash would protect, and a lookup by
digest (a unique index) needs no secret-dependent comparison in Python.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from shared.db.connect import Executor
from shared.db.queries import q

Scope = Literal["agent", "operator"]

# Mirrors the api_tokens.caller CHECK: it becomes part of `requested_by`, so it
# stays short and free of separators.
CALLER_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
TOKEN_PREFIX = "jw_"  # noqa: S105 (a prefix that makes leaked tokens greppable, not a secret)


@dataclass(frozen=True)
class MintedToken:
    token_id: str
    secret: str  # shown to the operator once, never stored
    digest: str

    def __repr__(self) -> str:
        return f"MintedToken(token_id={self.token_id!r}, secret=<redacted>)"


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def mint_token() -> MintedToken:
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return MintedToken("tok_" + secrets.token_hex(8), secret, token_digest(secret))


def requested_by(caller: str, scope: Scope) -> str:
    """The `requested_by` of operations this caller submits."""
    return f"{'operator' if scope == 'operator' else 'agent'}:{caller}"


@dataclass(frozen=True)
class Authenticated:
    token_id: str
    caller: str
    scope: Scope


async def authenticate(db: Executor, secret: str) -> Authenticated | None:
    """The live token with this secret, or None; refreshes its last use (at most once a minute)."""
    row = await db.fetchrow(q("api_authenticate"), token_digest(secret))
    if row is None:
        return None
    return Authenticated(row["token_id"], row["caller"], row["scope"])


async def is_live(db: Executor, token_id: str) -> bool:
    """Whether the token is still live (not revoked); for requests that outlast one check."""
    return bool(await db.fetchval(q("token_live"), token_id))


async def create_token(
    db: Executor, minted: MintedToken, *, caller: str, scope: Scope, created_by: str
) -> Any:
    """Store a minted token's digest (never its secret); returns the stored row."""
    return await db.fetchrow(
        q("token_insert"), minted.token_id, caller, scope, minted.digest, created_by
    )


async def revoke_token(db: Executor, token_id: str) -> Any:
    """Revoke at once (idempotent); returns the row, or None for an unknown token."""
    return await db.fetchrow(q("token_revoke"), token_id)
