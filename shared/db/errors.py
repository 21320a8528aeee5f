"""Database errors as operators need to read them: SQLSTATE, constraint, message.

"CheckViolationError" alone says nothing about which rule a row broke. The
context below names it without the row's values (PostgreSQL puts those in
`detail`, which can hold provider data or secrets, so it is left out).
"""

from __future__ import annotations

import asyncpg


def db_error_context(exc: BaseException) -> dict[str, str]:
    """What a log line should say about `exc`; only the type for non-database errors."""
    context = {"error": type(exc).__name__}
    if isinstance(exc, asyncpg.PostgresError):
        for field in ("sqlstate", "constraint_name", "table_name", "column_name", "message"):
            value = getattr(exc, field, None)
            if value:
                context[field] = str(value)
    return context


def db_error_reason(exc: BaseException) -> str:
    """A short, value-free reason for a refused row: SQLSTATE and constraint."""
    context = db_error_context(exc)
    parts = [context.get("sqlstate", context["error"])]
    if "constraint_name" in context:
        parts.append(context["constraint_name"])
    elif "column_name" in context:
        parts.append(context["column_name"])
    return ":".join(parts)
