"""Who is calling: a bearer token, looked up by its digest.

The token's caller name becomes the `requested_by` of what it submits, so the
ledger's record of who asked is the authenticated identity, never a field the
caller filled in. Agent tokens see only their own operations; operator tokens
see all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from receiver.api.problems import unauthenticated
from shared.ledger import tokens
from shared.ledger.tokens import Scope, requested_by

# A bearer token is ~46 characters; anything far longer is not one of ours and
# is refused before hashing.
MAX_TOKEN_LENGTH = 200


@dataclass(frozen=True)
class Caller:
    token_id: str
    name: str
    scope: Scope

    @property
    def requested_by(self) -> str:
        return requested_by(self.name, self.scope)

    @property
    def is_operator(self) -> bool:
        return self.scope == "operator"

    @property
    def owner_filter(self) -> str | None:
        """The requested_by this caller is limited to; None = sees everything."""
        return None if self.is_operator else self.requested_by


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization")
    if not header:
        raise unauthenticated(
            "Send 'Authorization: Bearer <token>' (an operator creates one with "
            "`jobwarden tokens create NAME`)."
        )
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        raise unauthenticated("The Authorization header must be 'Bearer <token>'.")
    return token


async def authenticate(conn: Any, request: Request) -> Caller:
    token = bearer_token(request)
    found = await tokens.authenticate(conn, token)
    if found is None:
        raise unauthenticated("The token is not valid (unknown or revoked).")
    return Caller(found.token_id, found.caller, found.scope)


async def still_live(conn: Any, caller: Caller) -> None:
    """Refuse a caller whose token was revoked after it authenticated.

    A long-poll (up to 300 s) or an event stream (hours) authenticates once,
    when it begins; it asks again at every re-read, so a revocation ends it
    with a 401 instead of answering the operation to a token no longer valid.
    """
    if not await tokens.is_live(conn, caller.token_id):
        raise unauthenticated("The token is not valid (revoked while this request waited).")
