"""Database errors as operators need to read them: SQLSTATE, constraint, message.

"CheckViolationError" alone says nothing about which rule a row broke. The
context below names it without the row's values (PostgreSQL puts those in
`detail`, which can hold provider data or secrets, so it is left out).

`DatabaseProblem` is the other half: a database that cannot be used at all
(no server, refused connection, missing database, unmigrated schema), said in
one line with the fix, for the command line and the daemons' start-up.
"""

from __future__ import annotations

import socket
from urllib.parse import parse_qsl, unquote, urlsplit

import asyncpg

# What says the database cannot be reached or the connection itself is gone
# (refused, reset, closed, terminated), as opposed to the database refusing a
# statement: the callers answer 503, retry, or keep what they hold elsewhere.
DATABASE_DOWN = (asyncpg.InterfaceError, asyncpg.PostgresConnectionError, OSError)
# What a new connection can be refused with once the server answers: the
# database was dropped or renamed, the login was removed or its password
# changed, the server is full or starting. At a pool's acquire these mean the
# same as DATABASE_DOWN to a caller (503, retry later), but they are
# PostgresErrors raised by the server, so DATABASE_DOWN does not catch them.
CONNECT_REFUSED = (
    asyncpg.InvalidCatalogNameError,
    asyncpg.InvalidPasswordError,
    asyncpg.InvalidAuthorizationSpecificationError,
    asyncpg.TooManyConnectionsError,
    asyncpg.CannotConnectNowError,
)
# Either: the handlers that acquire a pooled connection catch this.
DATABASE_UNREACHABLE = (*DATABASE_DOWN, *CONNECT_REFUSED)


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


# ------------------------------------------------------------------ problems a person fixes


class DatabaseProblem(Exception):
    """A database that cannot be used as it is, said so an operator can act on it.

    Raised where the database is chosen and opened (not deep in a query), so
    the message can name the server and the hint can name the fix: one line
    each, never a traceback. `code` is stable, for scripts (`--json`).
    """

    def __init__(self, code: str, message: str, hint: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def server_of(url: str) -> str:
    """host:port (or the socket directory) a PostgreSQL URL points at: no user, no password."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    try:
        port = parts.port or query.get("port") or 5432
    except ValueError:  # a port that is not a number: asyncpg will say so
        port = "?"
    host = parts.hostname or query.get("host") or "localhost"
    if host.startswith("/"):
        return f"the socket in {host}"
    return f"{host}:{port}"


def database_of(url: str) -> str:
    """The database a PostgreSQL URL names (PostgreSQL's default: the user's name)."""
    parts = urlsplit(url)
    return unquote(parts.path.lstrip("/")) or unquote(parts.username or "") or "postgres"


def connect_problem(
    exc: BaseException, url: str, server: str, missing_hint: str
) -> DatabaseProblem | None:
    """What a failed connect to `url` means for the operator; None if it is not about connecting.

    `server` describes where `url` points (and how it was chosen); `missing_hint`
    says how to create the database, which depends on how it was chosen.
    """
    name = database_of(url)
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return DatabaseProblem(
            "database_missing", f'database "{name}" does not exist on {server}', missing_hint
        )
    if isinstance(
        exc, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError
    ):
        return DatabaseProblem(
            "authentication_failed",
            f"PostgreSQL on {server} refused the login: {exc}",
            "check the user and password in DATABASE_URL (or ~/.pgpass)",
        )
    if isinstance(exc, asyncpg.TooManyConnectionsError | asyncpg.CannotConnectNowError):
        return DatabaseProblem(
            "database_busy",
            f"PostgreSQL on {server} is not accepting connections now: {exc}",
            "try again in a moment; if it lasts, check the server (max_connections, recovery)",
        )
    if isinstance(exc, socket.gaierror):
        return DatabaseProblem(
            "host_unknown",
            f"cannot connect to PostgreSQL on {server}: host not found",
            "check the host name in DATABASE_URL",
        )
    if isinstance(exc, TimeoutError):
        return DatabaseProblem(
            "connect_timeout",
            f"cannot connect to PostgreSQL on {server}: no answer in time",
            "check the host and port in DATABASE_URL, and that no firewall drops the connection",
        )
    if isinstance(exc, ConnectionRefusedError | FileNotFoundError):
        return DatabaseProblem(
            "connection_refused",
            f"cannot connect to PostgreSQL on {server}: connection refused",
            "is the server running there? Check the host and port in DATABASE_URL",
        )
    if isinstance(exc, OSError):
        return DatabaseProblem(
            "connection_failed",
            f"cannot connect to PostgreSQL on {server}: {exc.strerror or exc}",
            "check the host and port in DATABASE_URL",
        )
    return None


def query_problem(exc: BaseException) -> DatabaseProblem | None:
    """A command's query refused for a reason the operator fixes (schema, grants, connection).

    Anything else (a constraint, a bug) is not translated: its traceback is
    what a developer needs.
    """
    if isinstance(
        exc,
        asyncpg.UndefinedTableError | asyncpg.UndefinedColumnError | asyncpg.UndefinedFunctionError,
    ):
        return DatabaseProblem(
            "schema_outdated",
            f"the database's schema does not match this jobwarden: {exc}",
            "run `jobwarden migrate` (as the schema owner), then try again",
        )
    if isinstance(exc, asyncpg.DeadlockDetectedError | asyncpg.SerializationError):
        return DatabaseProblem(
            "conflict",
            "the database undid this command: another one changed the same operation at once",
            "look at the operation again (`jobwarden show`), then retry if it still applies",
        )
    if isinstance(exc, asyncpg.InsufficientPrivilegeError):
        return DatabaseProblem(
            "permission_denied",
            f"the database refused: {exc}",
            "operator commands need a login in the jobwarden_operator group "
            "(deploy/sql/create_login_roles.sql)",
        )
    if isinstance(exc, asyncpg.ConnectionDoesNotExistError | ConnectionResetError):
        return DatabaseProblem(
            "connection_lost",
            f"the connection to PostgreSQL was lost: {exc}",
            "check that the server is running, then try again",
        )
    return None
