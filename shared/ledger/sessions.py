"""Operator console sessions (`console_sessions`, migration 014): stored as digests.

The browser holds a random 256-bit secret; the database its sha256 only, as
for API tokens (a 256-bit secret needs no slow hash). A session belongs to the
operator token that opened it: an agent, unknown or revoked token opens none,
and revoking the token ends its sessions. Expiry is judged in SQL against
jw_now(), idle and absolute.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from shared.db.connect import Executor
from shared.db.queries import q


def session_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_session_secret() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class LiveSession:
    token_id: str
    caller: str
    expires_at: datetime


async def open_session(
    db: Executor, token_id: str, *, lifetime_s: float, idle_s: float, purge: int
) -> tuple[str, datetime] | None:
    """A new session for a live operator token: (secret, expires_at), or None.

    First removes up to `purge` expired sessions, so the table never grows.
    """
    await db.execute(q("console_sessions_purge"), idle_s, purge)
    secret = new_session_secret()
    row = await db.fetchrow(q("console_session_open"), session_digest(secret), token_id, lifetime_s)
    return None if row is None else (secret, row["expires_at"])


async def touch_session(db: Executor, secret: str, *, idle_s: float) -> LiveSession | None:
    """The live session with this secret, its last use refreshed; None if none or expired."""
    row = await db.fetchrow(q("console_session_touch"), session_digest(secret), idle_s)
    return None if row is None else LiveSession(row["token_id"], row["caller"], row["expires_at"])


async def live_session(db: Executor, secret: str, *, idle_s: float) -> LiveSession | None:
    """The live session with this secret, not refreshed (a read, for live-update streams)."""
    row = await db.fetchrow(q("console_session_live"), session_digest(secret), idle_s)
    return None if row is None else LiveSession(row["token_id"], row["caller"], row["expires_at"])


async def hold_session(db: Executor, secret: str, *, idle_s: float) -> LiveSession | None:
    """The live session with this secret, its token held unrevoked until the caller's
    transaction ends (None: ended meanwhile). Checked when a request begins, a
    session could lose its token before the decision it carries commits."""
    row = await db.fetchrow(q("console_session_hold"), session_digest(secret), idle_s)
    return None if row is None else LiveSession(row["token_id"], row["caller"], row["expires_at"])


async def end_session(db: Executor, secret: str) -> None:
    await db.execute(q("console_session_end"), session_digest(secret))
