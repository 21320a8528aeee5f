"""Real PostgreSQL for every test, fast.

One server per session (the same selection as `make run`: DATABASE_URL, the
local server, or an embedded one). Migrations are applied once to a template
database, with the shiftable test clock installed over `jw_now()`; each test
gets its own clone (`CREATE DATABASE … TEMPLATE`), so tests never see each
other's rows and never depend on state left by hand.

Clones are made ahead and dropped behind, several at once (`Databases`):
PostgreSQL forces a checkpoint for every DROP DATABASE, so a drop per test
cost more than most tests, while drops in flight together share one.
A clone commits without waiting for its WAL to reach the disk
(`synchronous_commit = off`): what a commit makes visible is the same, only a
crash of the PostgreSQL server itself could lose the last commits, and no
test crashes it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from bench.harness import TestClock, install_test_clock
from shared.db.connect import (
    ResolvedDatabase,
    connect,
    create_pool,
    resolve_database,
    with_database,
)
from shared.db.migrate import apply_migrations

_counter = itertools.count()
# Clones made, and dropped, this many at a time, each on its own connection.
BATCH = 8
# pg_advisory_lock key serializing the workers' template migrations.
MIGRATION_LOCK = 0x6A77_7465_7374  # "jwtest"


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # pytest-xdist's workers (`make test`) start with COLUMNS=80 and LINES=24,
        # which a plain run has not; the commands tests start read them (the
        # demo would fold its settled lines to 80 columns, as on a terminal).
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[ResolvedDatabase]:
    server = resolve_database()
    yield server
    server.stop()


async def _drop(admin_url: str, name: str) -> None:
    conn = await connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest_asyncio.fixture(scope="session")
async def template_db(pg_server: ResolvedDatabase) -> AsyncIterator[str]:
    name = f"jw_tpl_{os.getpid()}"
    await _drop(pg_server.admin_url, name)
    admin = await connect(pg_server.admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        # Roles are the cluster's, not the database's: on a server that has
        # never seen jobwarden, two xdist workers migrating at once would both
        # create them. One migrates at a time (the lock lives in the admin
        # database, which every worker shares); the next finds them made.
        await admin.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
        conn = await connect(with_database(pg_server.admin_url, name))
        try:
            await apply_migrations(conn)
            await install_test_clock(conn)  # jw_now() a test can shift (tests never sleep)
        finally:
            await conn.close()
    finally:
        await admin.close()  # ends the session, and with it the lock
    yield name
    await _drop(pg_server.admin_url, name)


async def clone_database(pg_server: ResolvedDatabase, template: str) -> str:
    name = f"jw_t_{os.getpid()}_{next(_counter)}"
    admin = await connect(pg_server.admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        # A setting of the database, so every role's every connection has it.
        await admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    finally:
        await admin.close()
    return name


class Databases:
    """This session's per-test databases: clones made ahead, dropped behind, in batches.

    Each is used by one test only, as before; only the CREATE and DROP
    statements are grouped (creates in flight together share their WAL
    flushes, drops share their forced checkpoints).
    """

    def __init__(self, pg_server: ResolvedDatabase, template: str) -> None:
        self._pg_server = pg_server
        self._template = template
        self._spare: list[str] = []
        self._used: list[str] = []

    async def take(self) -> str:
        if not self._spare:
            clones = [clone_database(self._pg_server, self._template) for _ in range(BATCH)]
            self._spare = list(await asyncio.gather(*clones))
        return self._spare.pop()

    async def done_with(self, name: str) -> None:
        self._used.append(name)
        if len(self._used) >= BATCH:
            await self._drop_used()

    async def close(self) -> None:
        self._used += self._spare
        self._spare = []
        await self._drop_used()

    async def _drop_used(self) -> None:
        names, self._used = self._used, []
        await asyncio.gather(*(_drop(self._pg_server.admin_url, name) for name in names))


@pytest_asyncio.fixture(scope="session")
async def databases(pg_server: ResolvedDatabase, template_db: str) -> AsyncIterator[Databases]:
    made = Databases(pg_server, template_db)
    yield made
    await made.close()


@pytest_asyncio.fixture
async def db_url(pg_server: ResolvedDatabase, databases: Databases) -> AsyncIterator[str]:
    """A fresh, migrated database for this test only."""
    name = await databases.take()
    yield with_database(pg_server.admin_url, name)
    await databases.done_with(name)


@pytest_asyncio.fixture
async def db(db_url: str) -> AsyncIterator[Any]:
    conn = await connect(db_url)
    yield conn
    await conn.close()


@pytest_asyncio.fixture
async def pool(db_url: str) -> AsyncIterator[Any]:
    p = await create_pool(db_url, min_size=1, max_size=8)
    yield p
    await p.close()


@pytest_asyncio.fixture
async def clock(db: Any) -> TestClock:
    """This test's clock: `await clock.advance(s)` moves Python's and the database's time."""
    return TestClock(db)
