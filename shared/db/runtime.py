"""Opening the configured database for a command or a daemon.

Every failure a person fixes (no server, refused connection, missing
database, unmigrated schema) surfaces here as a `DatabaseProblem` naming the
server and the fix, before a command runs its first query.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import asyncpg

from shared.db.connect import (
    APP_DATABASE,
    Embedded,
    ResolvedDatabase,
    connect,
    ensure_database,
    resolve_database,
)
from shared.db.errors import DatabaseProblem, connect_problem, database_of
from shared.db.migrate import MigrationError, pending_migrations

# Which databases `app_database` creates when missing: none (operator commands
# and daemons: a missing database is a mistake to report), those on a server
# DATABASE_URL did not name (`jobwarden migrate` on a local or embedded
# server; a configured server's database is created by its administrator), or
# any (`jobwarden demo`: a database of its own).
Create = Literal["never", "unless_configured", "always"]


@dataclass(frozen=True)
class DatabaseChoice:
    """The command line's global database flags: `--embedded`, `--database NAME`."""

    embedded: bool = False
    database: str | None = None


# Set by `jobwarden`'s main for the command it runs. A context variable rather
# than arguments: commands of every module (audit, operator, daemons) open the
# database through the same helpers without threading the flags through.
_CHOICE: ContextVar[DatabaseChoice | None] = ContextVar("jobwarden_database", default=None)


@contextlib.contextmanager
def chosen(choice: DatabaseChoice) -> Iterator[None]:
    """Apply the command line's database flags for the duration of one command."""
    token = _CHOICE.set(choice)
    try:
        yield
    finally:
        _CHOICE.reset(token)


def current_choice() -> DatabaseChoice:
    return _CHOICE.get() or DatabaseChoice()


def _missing_hint(resolved: ResolvedDatabase) -> str:
    """How to get the missing database: who creates it depends on who chose the server."""
    if resolved.source == "DATABASE_URL":
        return (
            "create it (as a superuser: CREATE DATABASE ... OWNER ...), then run "
            "`jobwarden migrate`; or fix the database name in DATABASE_URL"
        )
    flags = " --embedded" if resolved.source == "embedded" else ""
    name = database_of(resolved.app_url)
    named = f" --database {name}" if name != APP_DATABASE else ""
    return f"create and migrate it with `jobwarden{flags}{named} migrate`"


async def _open(url: str, resolved: ResolvedDatabase) -> Any:
    """A connection to `url`, or the DatabaseProblem that explains why not."""
    try:
        return await connect(url)
    except (OSError, asyncpg.PostgresError) as exc:
        problem = connect_problem(exc, url, resolved.server, _missing_hint(resolved))
        if problem is None:
            raise
        raise problem from None


async def _prepare(resolved: ResolvedDatabase, create: Create) -> None:
    """Create the database if this command may, then check it can be opened."""
    if create == "always" or (create == "unless_configured" and resolved.source != "DATABASE_URL"):
        admin = await _open(resolved.admin_url, resolved)
        await admin.close()
        name = database_of(resolved.app_url)
        try:
            await ensure_database(resolved.admin_url, name)
        except asyncpg.InsufficientPrivilegeError as exc:
            raise DatabaseProblem(
                "cannot_create_database",
                f'cannot create database "{name}" on {resolved.server}: {exc}',
                "create it as a superuser (CREATE DATABASE ... OWNER ...), or use a role "
                "with CREATEDB",
            ) from None
    conn = await _open(resolved.app_url, resolved)
    await conn.close()


@contextlib.asynccontextmanager
async def app_database(
    env: Mapping[str, str] | None = None,
    *,
    create: Create = "never",
    fallback: bool = False,
    database: str | None = None,
) -> AsyncIterator[ResolvedDatabase]:
    """Resolve the server, check the app database opens, stop an embedded one on exit.

    An embedded server is started only if the command line asked for it, or
    with `fallback` (the demo) when no server answers. `database` replaces the
    database name (the demo's own); else `--database`, else the configured one.
    """
    env = os.environ if env is None else env
    choice = current_choice()
    policy = (
        Embedded.ALWAYS if choice.embedded else Embedded.FALLBACK if fallback else Embedded.NEVER
    )
    resolved = resolve_database(env, embedded=policy, database=database or choice.database)
    try:
        await _prepare(resolved, create)
        yield resolved
    finally:
        resolved.stop()


async def require_migrated(conn: Any, resolved: ResolvedDatabase) -> None:
    """Refuse to run a command against a schema this code does not match.

    A role that may not read schema_migrations (the operator role) is let
    through: the table's existence is still checked, and a query that meets
    an older schema is reported by the command line all the same.
    """
    where = f'database "{database_of(resolved.app_url)}" on {resolved.server}'
    try:
        pending = await pending_migrations(conn)
    except asyncpg.InsufficientPrivilegeError:
        return
    except MigrationError as exc:
        raise DatabaseProblem(
            "schema_mismatch",
            f"{where} does not match this jobwarden: {exc}",
            "run the jobwarden version that migrated it, or restore the migration file",
        ) from None
    if pending:
        shown = ", ".join(pending[:3]) + (", ..." if len(pending) > 3 else "")
        raise DatabaseProblem(
            "migrations_pending",
            f"{where} is not migrated: {len(pending)} migration(s) pending ({shown})",
            "run `jobwarden migrate` (as the schema owner), then try again",
        )


@contextlib.asynccontextmanager
async def migrated_connection() -> AsyncIterator[Any]:
    """One connection to the configured, migrated database, for an operator command."""
    async with app_database() as resolved:
        conn = await _open(resolved.app_url, resolved)
        try:
            await require_migrated(conn, resolved)
            yield conn
        finally:
            await conn.close()
