"""Handing a pooled connection back once the work on it is over."""

from __future__ import annotations

import logging
from typing import Any

from shared.db.errors import db_error_context

logger = logging.getLogger(__name__)


async def release(pool: Any, conn: Any, *, reset_seconds: float | None = None) -> None:
    """Give `conn` back to `pool`; a reset that fails is logged, never raised.

    By now the work on the connection committed or rolled back, and asyncpg
    closes a connection it cannot reset (the pool opens another). Raising
    here would only turn a finished request into an error: a 503 for a
    submit that committed invites the retry that makes a second operation.
    """
    try:
        await pool.release(conn, timeout=reset_seconds)
    except Exception as exc:
        logger.warning(
            "could not return a database connection to the pool",
            extra={"ctx": db_error_context(exc)},
        )
