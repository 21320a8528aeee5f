"""Whose wake-ups the reconciler acts on, when senders come and go (reconciler/wakeups.py).

A new operator's review: 1 in 6 `jobwarden submit` runs and 1 in 5 `psql -c
"NOTIFY …"` as an operator login were logged "wake-up ignored", because the
sender had disconnected before the reconciler looked it up, and that verdict
was kept for the pid; one agent session was warned about twice.

The daemon's wake-up handling runs over a real PostgreSQL, with real sessions
(an operator's psql process, an agent's login). A notification is heard on a
LISTEN connection of the test's own and handed to the daemon's `on_notify`
only once the test has made the state it is about certain (the sender's
backend gone, or two wake-ups heard together): the daemon's own listener
would look the sender up while it may still be there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
import pytest_asyncio

from reconciler.daemon import WAKEUP_CHANNEL, Daemon
from shared.db.connect import ResolvedDatabase, connect
from tests.integration.console_support import as_login

SIGNAL_SECONDS = 10.0
IGNORED = "wake-up ignored: its sender may not read operations (an agent?)"


class WakeRecordingDaemon(Daemon):
    """The daemon's wake-up handling alone: each wake it would start is counted."""

    def __init__(self, pool: Any) -> None:
        reconciler = SimpleNamespace(ctx=SimpleNamespace(pool=pool))
        super().__init__(cast(Any, reconciler), cast(Any, None), "", cast(Any, None))
        self.woken: asyncio.Queue[None] = asyncio.Queue()

    def _wake(self) -> None:
        self.woken.put_nowait(None)

    async def heard(self, *pids: int) -> None:
        """Hand wake-ups from `pids` to the daemon, and wait for every look."""
        for pid in pids:
            self.on_notify(None, pid, WAKEUP_CHANNEL, "x")
        await asyncio.gather(*self.checks)


@pytest_asyncio.fixture
async def logins(pg_server: ResolvedDatabase) -> AsyncIterator[dict[str, str]]:
    """An operator's and an agent's login roles, unique to this run."""
    suffix = uuid.uuid4().hex[:12]
    names = {"operator": f"jw_operator_{suffix}", "agent": f"jw_agent_{suffix}"}
    admin = await connect(pg_server.admin_url)
    try:
        if not await admin.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
            pytest.skip("the test server's admin role is not a superuser: cannot create roles")
        for group, name in names.items():
            await admin.execute(f'CREATE ROLE "{name}" LOGIN')
            await admin.execute(f'GRANT "jobwarden_{group}" TO "{name}"')
        yield names
    finally:
        for name in names.values():
            await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        await admin.close()


@pytest_asyncio.fixture
async def heard(db_url: str) -> AsyncIterator[asyncio.Queue[int]]:
    """The pid of every wake-up sent, as a LISTEN connection hears it."""
    pids: asyncio.Queue[int] = asyncio.Queue()
    listener = await connect(db_url)
    await listener.add_listener(WAKEUP_CHANNEL, lambda _c, pid, _ch, _p: pids.put_nowait(pid))
    yield pids
    await listener.close()


async def _next(pids: asyncio.Queue[int]) -> int:
    return await asyncio.wait_for(pids.get(), SIGNAL_SECONDS)


async def _gone(db: Any, pid: int) -> None:
    """Return once backend `pid` has left: terminated and waited for, or gone already."""
    await db.execute("SET client_min_messages = error")  # 'not a backend': gone already
    await db.fetchval("SELECT pg_terminate_backend($1, $2)", pid, int(SIGNAL_SECONDS * 1000))
    assert not await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)


def _ignored(caplog: pytest.LogCaptureFixture) -> int:
    return sum(record.getMessage() == IGNORED for record in caplog.records)


async def test_an_operators_psql_wake_up_is_acted_on_after_it_disconnected(
    pool: Any,
    db: Any,
    db_url: str,
    logins: dict[str, str],
    heard: asyncio.Queue[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The reviewer's `psql -U jw_operator_… -c "NOTIFY jobwarden_wakeup,'x'"`: psql
    exits at once, and a sender already gone is unknown, not an agent. The
    wake-up is acted on, with no warning, and nothing is kept about the pid."""
    caplog.set_level(logging.WARNING, "jobwarden.reconciler")
    notify = f"NOTIFY {WAKEUP_CHANNEL}, 'x'"
    subprocess.run(
        ["psql", "-X", "-q", as_login(db_url, logins["operator"]), "-c", notify],
        check=True,
        timeout=SIGNAL_SECONDS,
        env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
    )
    pid = await _next(heard)
    await _gone(db, pid)
    daemon = WakeRecordingDaemon(pool)
    await daemon.heard(pid)
    assert daemon.woken.qsize() == 1
    assert _ignored(caplog) == 0
    assert daemon.senders.cached(pid) is None  # a later session on this pid is looked at anew


async def test_an_agent_is_warned_about_once_and_its_wake_ups_stay_ignored(
    pool: Any,
    db_url: str,
    logins: dict[str, str],
    heard: asyncio.Queue[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two wake-ups of one agent session heard together used to start two looks
    and two warnings; one warning per sender, as the README says, and still
    none of its wake-ups acted on while its session is there to be seen."""
    caplog.set_level(logging.WARNING, "jobwarden.reconciler")
    daemon = WakeRecordingDaemon(pool)
    agent = await connect(as_login(db_url, logins["agent"]))
    try:
        await agent.execute(f"NOTIFY {WAKEUP_CHANNEL}, 'a'")
        await agent.execute(f"NOTIFY {WAKEUP_CHANNEL}, 'b'")
        pids = [await _next(heard), await _next(heard)]
        assert set(pids) == {await agent.fetchval("SELECT pg_backend_pid()")}
        await daemon.heard(*pids)
        await daemon.heard(pids[0])  # later: looked at again (not cached), not warned again
    finally:
        await agent.close()
    assert _ignored(caplog) == 1
    assert daemon.woken.empty()


async def test_a_receiver_sender_is_trusted_and_cached(
    pool: Any, db_url: str, heard: asyncio.Queue[int]
) -> None:
    """A pool connection that stays (the receiver's) is looked up once: its
    next wake-ups are acted on without a query."""
    daemon = WakeRecordingDaemon(pool)
    sender = await connect(db_url)
    try:
        await sender.execute(f"NOTIFY {WAKEUP_CHANNEL}, 'x'")
        pid = await _next(heard)
        await daemon.heard(pid)
        assert daemon.senders.cached(pid) is True
        daemon.on_notify(None, pid, WAKEUP_CHANNEL, "x")
        assert not daemon.checks  # acted on at once
    finally:
        await sender.close()
    assert daemon.woken.qsize() == 2
