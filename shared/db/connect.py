"""Finding a PostgreSQL to use, and connecting to it.

Selection order (README, "Database"): `DATABASE_URL` if set; otherwise the
server on JW_LOCAL_PG_HOST:JW_LOCAL_PG_PORT (127.0.0.1:5432) if one answers;
otherwise an embedded PostgreSQL 16 (the `pgserver` wheel, the
`jobwarden[embedded]` extra) under a project-local folder, stopped on exit --
but only where the caller allows it (`Embedded`): `make run` and `make test`
fall back to it, operator commands and daemons only when asked (`--embedded`
or JW_FORCE_EMBEDDED=1), because an embedded database is private to one
working directory and nobody backs it up.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import json
import logging
import os
import socket
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from shared.db import pgjson
from shared.db.errors import DatabaseProblem, server_of

APP_DATABASE = "jobwarden"
# `make run`'s own database: never the `jobwarden` database of a server that
# happens to answer on 127.0.0.1:5432.
DEMO_DATABASE = "jobwarden_demo"
# A connect probe must not hang a start-up: a local server answers in
# microseconds, a firewalled port would otherwise block for the TCP timeout.
PROBE_TIMEOUT_SECONDS = 1.0


class Executor(Protocol):
    """What the ledger needs of a connection or a pool (asyncpg ships no types)."""

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...
    async def fetchrow(self, query: str, *args: Any) -> Any: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...
    async def execute(self, query: str, *args: Any) -> str: ...
    async def executemany(self, query: str, args: Any) -> None: ...


class Embedded(enum.Enum):
    """When an embedded PostgreSQL may be started for want of a server."""

    NEVER = "never"  # operator commands, daemons: no server is an error naming what to set
    FALLBACK = "fallback"  # make run, make test, benchmarks: when no server answers
    ALWAYS = "always"  # asked for (--embedded, JW_FORCE_EMBEDDED=1): even if one answers


@dataclass
class ResolvedDatabase:
    """A server we can use: `admin_url` reaches the `postgres` database of it."""

    admin_url: str
    source: str  # "DATABASE_URL" | "local" | "embedded"
    app_url: str
    # Where the server is and how it was chosen, for messages (no credentials).
    server: str
    _stop: Callable[[], None] | None = field(default=None, repr=False)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None


def with_database(url: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))


def redact_url(url: str) -> str:
    """A URL safe for logs and error messages (password removed)."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def local_server_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_SECONDS):
            return True
    except OSError:
        return False


def default_embedded_dir() -> Path:
    return Path(os.environ.get("JW_EMBEDDED_PGDATA", Path.cwd() / ".pgdata"))


def start_embedded(data_dir: Path, database: str = APP_DATABASE) -> ResolvedDatabase:
    """Start (or join) the embedded server in `data_dir`."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers), harmless
    # here: as pgserver's module is imported (its class body asks for the runtime
    # dir) and as the server starts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from pgserver.postgres_server import get_server  # lazily: an optional extra
        except ImportError:
            raise DatabaseProblem(
                "embedded_not_installed",
                "the embedded PostgreSQL is not installed (the jobwarden[embedded] extra)",
                "pip install 'jobwarden[embedded]' (make setup does), or set DATABASE_URL "
                "to a server",
            ) from None
        data_dir.mkdir(parents=True, exist_ok=True)
        # pgserver narrates each step at INFO, at exit too (its atexit hook, when the
        # streams may be closed: a "Logging error" traceback); its warnings still show
        logging.getLogger("pgserver").setLevel(logging.WARNING)
        server = get_server(str(data_dir), cleanup_mode="stop")
    admin = str(server.get_uri())
    return ResolvedDatabase(
        admin_url=admin,
        source="embedded",
        app_url=with_database(admin, database),
        server=f"the embedded PostgreSQL in {data_dir}",
        _stop=server.cleanup,
    )


def embedded_installed() -> bool:
    """Whether the embedded extra (the pgserver wheel) can be imported: only then
    is `--embedded` worth offering in a hint. Looked up, not imported (slow)."""
    return importlib.util.find_spec("pgserver") is not None


def no_server(host: str, port: int) -> DatabaseProblem:
    """Nothing configured and nothing answering: say how to point at a database."""
    hint = "set DATABASE_URL=postgresql://USER@HOST:PORT/DATABASE"
    if embedded_installed():
        hint += (
            ", or pass --embedded (jobwarden --embedded COMMAND) for a throwaway embedded"
            " PostgreSQL in ./.pgdata"
        )
    else:  # a wheel installed without [embedded]: --embedded would only fail again
        hint += " for a running server (--embedded needs jobwarden's embedded extra, not installed)"
    return DatabaseProblem(
        "no_database",
        f"no PostgreSQL to use: DATABASE_URL is not set and nothing answers on {host}:{port}",
        hint,
    )


def _local_address(env: Mapping[str, str]) -> tuple[str, int]:
    host = env.get("JW_LOCAL_PG_HOST", "127.0.0.1")
    text = env.get("JW_LOCAL_PG_PORT", "5432")
    if not text.isascii() or not text.isdigit():
        raise DatabaseProblem(
            "bad_setting", f"JW_LOCAL_PG_PORT={text!r} is not a port number", "unset it or fix it"
        )
    return host, int(text)


def resolve_database(
    env: Mapping[str, str] | None = None,
    *,
    embedded: Embedded = Embedded.FALLBACK,
    database: str | None = None,
) -> ResolvedDatabase:
    """The server to use, started if embedded; `database` replaces the database name.

    The default, FALLBACK, is the test suite's and the benchmarks' (they run
    on a fresh machine); the command line passes NEVER, or ALWAYS for
    `--embedded`, which DATABASE_URL contradicts. JW_FORCE_EMBEDDED=1 is
    ALWAYS for whoever has no DATABASE_URL. Raises DatabaseProblem when
    nothing may be used.
    """
    env = os.environ if env is None else env
    url = env.get("DATABASE_URL")
    if url:
        if embedded is Embedded.ALWAYS:  # asked on the command line: ambiguous, say so
            raise DatabaseProblem(
                "conflicting_choice",
                "both DATABASE_URL and --embedded say which database to use",
                "unset DATABASE_URL for the embedded PostgreSQL, or drop --embedded",
            )
        return ResolvedDatabase(
            admin_url=with_database(url, "postgres"),
            source="DATABASE_URL",
            app_url=with_database(url, database) if database else url,
            server=f"{server_of(url)} (from DATABASE_URL)",
        )
    if env.get("JW_FORCE_EMBEDDED") == "1":  # an environment's standing choice, below DATABASE_URL
        embedded = Embedded.ALWAYS
    host, port = _local_address(env)
    if embedded is not Embedded.ALWAYS and local_server_answers(host, port):
        admin = f"postgresql://postgres@{host}:{port}/postgres"
        return ResolvedDatabase(
            admin_url=admin,
            source="local",
            app_url=with_database(admin, database or APP_DATABASE),
            server=f"{host}:{port} (the local server; DATABASE_URL is not set)",
        )
    if embedded is Embedded.NEVER:
        raise no_server(host, port)
    data_dir = Path(env["JW_EMBEDDED_PGDATA"]) if "JW_EMBEDDED_PGDATA" in env else None
    return start_embedded(data_dir or default_embedded_dir(), database or APP_DATABASE)


async def ensure_database(admin_url: str, dbname: str) -> None:
    """CREATE DATABASE if it does not exist (tolerating a concurrent creator)."""
    conn = await asyncpg.connect(admin_url)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", dbname)
        if not exists:
            with contextlib.suppress(asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
                await conn.execute(f'CREATE DATABASE "{dbname}"')
    finally:
        await conn.close()


async def _init_connection(conn: asyncpg.Connection) -> None:
    # pgjson.dumps: a provider's NUL or lone surrogate inside an error message
    # or escalation detail must not make the row unstorable (jsonb refuses both).
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(
            typename, encoder=pgjson.dumps, decoder=json.loads, schema="pg_catalog"
        )


# Settings every connection of ours starts with. JIT compilation is for long
# analytical queries; ours are short, and PostgreSQL decides to compile by
# estimated cost, which tables without statistics (autovacuum off, a fresh
# table) inflate: the operator inbox spent 1.1-2.0 s compiling, and the
# check run after each status read with webhooks about 8 ms, on 200,000
# operations never analyzed (EXPLAIN ANALYZE, one-off).
SERVER_SETTINGS: dict[str, str] = {"jit": "off"}


async def connect(url: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(url, server_settings=SERVER_SETTINGS)
    await _init_connection(conn)
    return conn


@contextlib.asynccontextmanager
async def connection(url: str) -> AsyncIterator[Any]:
    """One connection (json codecs set) for a command; closed whatever happens."""
    conn = await connect(url)
    try:
        yield conn
    finally:
        await conn.close()


async def create_pool(url: str, *, min_size: int = 1, max_size: int = 10, **kwargs: Any) -> Any:
    """A pool whose connections decode json/jsonb to Python values, with SERVER_SETTINGS
    (and any `server_settings` given, which add to them)."""
    settings = {**SERVER_SETTINGS, **kwargs.pop("server_settings", {})}
    return await asyncpg.create_pool(
        url,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        server_settings=settings,
        **kwargs,
    )
