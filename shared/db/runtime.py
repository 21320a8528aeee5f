"""Opening the configured database for a command or a daemon."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping

from shared.db.connect import APP_DATABASE, ResolvedDatabase, ensure_database, resolve_database


@contextlib.asynccontextmanager
async def app_database(env: Mapping[str, str] | None = None) -> AsyncIterator[ResolvedDatabase]:
    """Resolve the server, make sure the app database exists, stop an embedded one on exit."""
    env = os.environ if env is None else env
    resolved = resolve_database(env)
    try:
        if resolved.source != "DATABASE_URL":
            await ensure_database(resolved.admin_url, APP_DATABASE)
        yield resolved
    finally:
        resolved.stop()
