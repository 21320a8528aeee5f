"""Console sessions: an operator token signs in once, a cookie carries the session.

The browser holds a random 256-bit session secret in an HttpOnly cookie; the
database holds only its sha256 (shared/ledger/sessions.py), bound to the
operator token that opened it, so a database reader cannot take a session
over and revoking the token ends its sessions. The CSRF token of a session is
derived from the same secret (a keyed hash under a fixed label): it is bound to
the session, differs from anything stored, and needs no storage of its own.
Expiry is judged in SQL against jw_now(): idle and absolute.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from shared.ledger import sessions as ledger_sessions
from shared.ledger.tokens import requested_by

COOKIE = "jw_console"
# The sign-in form's own CSRF cookie: a random value that exists before any
# session does, so a cross-site page cannot sign a victim in to its session.
SIGNIN_COOKIE = "jw_console_signin"
COOKIE_PATH = "/console"
# An operator who steps away for half an hour signs in again: short enough
# that an unlocked, unattended browser is not a standing key to the inbox.
IDLE_SECONDS = 30 * 60
# A working day plus slack: a stolen cookie is worthless by the next morning.
ABSOLUTE_SECONDS = 12 * 3600
# Expired sessions removed per sign-in: bounded, so a sign-in never waits on a
# large purge; each sign-in adds one session and may remove a hundred, so
# expired rows cannot pile up.
PURGE_BATCH = 100
# A session secret is 43 characters; a longer cookie is not one of ours.
MAX_SECRET_LENGTH = 100
_CSRF_LABEL = b"jobwarden console csrf v1"
_SIGNIN_LABEL = b"jobwarden console sign-in csrf v1"


def csrf_for(secret: str) -> str:
    """The synchronizer token of the session (or sign-in cookie) whose secret this is."""
    return hmac.new(secret.encode("utf-8"), _CSRF_LABEL, hashlib.sha256).hexdigest()


def signin_csrf_for(secret: str) -> str:
    return hmac.new(secret.encode("utf-8"), _SIGNIN_LABEL, hashlib.sha256).hexdigest()


def csrf_matches(expected: str, sent: str | None) -> bool:
    return sent is not None and hmac.compare_digest(expected.encode(), sent.encode())


@dataclass(frozen=True)
class Session:
    secret: str
    token_id: str
    caller: str
    expires_at: datetime

    @property
    def actor(self) -> str:
        """Who the ledger records for this operator's decisions: `operator:<token name>`."""
        return requested_by(self.caller, "operator")

    @property
    def csrf(self) -> str:
        return csrf_for(self.secret)

    def __repr__(self) -> str:
        return f"Session(token_id={self.token_id!r}, caller={self.caller!r}, secret=<redacted>)"


def new_secret() -> str:
    return ledger_sessions.new_session_secret()


async def open_session(conn: Any, token_id: str) -> tuple[str, datetime] | None:
    """A new session for a live operator token: (secret, expires_at), or None."""
    return await ledger_sessions.open_session(
        conn,
        token_id,
        lifetime_s=float(ABSOLUTE_SECONDS),
        idle_s=float(IDLE_SECONDS),
        purge=PURGE_BATCH,
    )


async def current(conn: Any, request: Request) -> Session | None:
    """The request's live session (refreshed), or None: none, expired, or its token revoked."""
    secret = request.cookies.get(COOKIE)
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        return None
    live = await ledger_sessions.touch_session(conn, secret, idle_s=float(IDLE_SECONDS))
    if live is None:
        return None
    return Session(secret, live.token_id, live.caller, live.expires_at)


async def still_live(conn: Any, request: Request) -> bool:
    """Whether the request's session is live, without counting this as a use."""
    secret = request.cookies.get(COOKIE)
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        return False
    live = await ledger_sessions.live_session(conn, secret, idle_s=float(IDLE_SECONDS))
    return live is not None


async def hold(conn: Any, session: Session) -> bool:
    """Whether `session` is still live, its token kept from revocation until the
    transaction `conn` is in ends: what a decision is recorded under."""
    live = await ledger_sessions.hold_session(conn, session.secret, idle_s=float(IDLE_SECONDS))
    return live is not None


async def end_session(conn: Any, secret: str) -> None:
    await ledger_sessions.end_session(conn, secret)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        secure=_secure(request),
        httponly=True,
        samesite="strict",
    )


def clear_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(
        name, path=COOKIE_PATH, secure=_secure(request), httponly=True, samesite="strict"
    )
