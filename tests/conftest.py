"""Real PostgreSQL for every test, fast.

One server per session (the same selection as `make run`: DATABASE_URL, the
local server, or an embedded one). Migrations are applied once to a template
database, with the shiftable test clock installed over `jw_now()`; each test
gets its own clone (`CREATE DATABASE … TEMPLATE`), so tests never see each
other's rows and never depend on state left by hand.
"""

from __future__ import annotations

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
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    conn = await connect(with_database(pg_server.admin_url, name))
    try:
        await apply_migrations(conn)
        await install_test_clock(conn)  # jw_now() a test can shift (tests never sleep)
    finally:
        await conn.close()
    yield name
    await _drop(pg_server.admin_url, name)


async def clone_database(pg_server: ResolvedDatabase, template: str) -> str:
    name = f"jw_t_{os.getpid()}_{next(_counter)}"
    admin = await connect(pg_server.admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await admin.close()
    return name


@pytest_asyncio.fixture
async def db_url(pg_server: ResolvedDatabase, template_db: str) -> AsyncIterator[str]:
    """A fresh, migrated database for this test only."""
    name = await clone_database(pg_server, template_db)
    yield with_database(pg_server.admin_url, name)
    await _drop(pg_server.admin_url, name)


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
