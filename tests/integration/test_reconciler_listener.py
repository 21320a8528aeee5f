"""The reconciler daemon's LISTEN connection, and its shutdown, when the database goes away.

The daemon runs in-process over a real PostgreSQL and the simulated provider
over real HTTP; its sweep tick is an hour, so a prompt read of an operation
can only come from a NOTIFY heard or the sweep run on reconnecting. Tests wait
on what the daemon signals (a LISTEN connection opened, a sweep or an
operation finished), each with a timeout far below that hour.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import reconciler.daemon as reconciler_daemon
from bench.pgproxy import PgProxy
from reconciler.context import Context
from reconciler.daemon import Daemon, create_reconciler_pool
from reconciler.sequencer import LogSettings, SequencerProcess
from reconciler.worker import Reconciler
from shared.db.connect import ResolvedDatabase, connection, create_pool
from shared.ledger import Operation
from shared.ledger.states import LocalState
from tests.harness import Rig, rig

# Longer than any test: a read within SIGNAL_SECONDS is never the tick's.
SWEEP_INTERVAL = 3600.0
# How long a test waits for a signal: the reconnect backoff starts at 0.5 s.
SIGNAL_SECONDS = 10.0


class WatchedReconciler(Reconciler):
    """The reconciler, reporting each sweep's counts and each operation it processed."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.swept: asyncio.Queue[Counter[str]] = asyncio.Queue()
        self.processed: asyncio.Queue[str] = asyncio.Queue()

    async def run_once(self, limit: int | None = None) -> Counter[str]:
        counts = await super().run_once(limit)
        self.swept.put_nowait(counts)
        return counts

    async def process(
        self,
        op: Operation,
        lease_until: float | None = None,
        *,
        read_marked: bool = False,
        db_offset: timedelta = timedelta(0),
    ) -> str:
        outcome = await super().process(
            op, lease_until, read_marked=read_marked, db_offset=db_offset
        )
        self.processed.put_nowait(op.operation_id)
        return outcome


class WatchedDaemon(Daemon):
    """The daemon, reporting each LISTEN connection it opens (its server pid) and
    each attempt that failed (the exception's type)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connected: asyncio.Queue[int] = asyncio.Queue()
        self.refused: asyncio.Queue[str] = asyncio.Queue()

    async def listen(self) -> None:
        try:
            await super().listen()
        except Exception as exc:
            self.refused.put_nowait(type(exc).__name__)
            raise
        self.connected.put_nowait(self.listener.get_server_pid())


class ChildlessSequencer(SequencerProcess):
    """No sequencer child (not what these tests are about); ends when told to stop,
    so a test sees whether shutdown still waited for it."""

    async def supervise(self) -> None:
        await self.stopped.wait()


@dataclass
class Running:
    daemon: WatchedDaemon
    reconciler: WatchedReconciler
    task: asyncio.Task[None]


async def _next(queue: asyncio.Queue[Any], what: str) -> Any:
    try:
        return await asyncio.wait_for(queue.get(), SIGNAL_SECONDS)
    except TimeoutError:
        raise AssertionError(f"no {what} within {SIGNAL_SECONDS} s") from None


@contextlib.asynccontextmanager
async def running_daemon(
    r: Rig, database_url: str, tmp_path: Path, daemon_class: type[WatchedDaemon] = WatchedDaemon
) -> AsyncIterator[Running]:
    """The daemon over `r`'s context, started and past its first sweep; stopped after."""
    settings = replace(r.ctx.settings, sweep_interval=SWEEP_INTERVAL, shutdown_grace=5.0)
    watched = WatchedReconciler(replace(r.ctx, settings=settings))
    sequencer = ChildlessSequencer(LogSettings(1.0, tmp_path / "checkpoints"), database_url)
    daemon = daemon_class(watched, settings, database_url, sequencer)
    task = asyncio.create_task(daemon.run())
    try:
        await _next(daemon.connected, "LISTEN connection at start")
        await _next(watched.swept, "first sweep")  # the one every start runs
        yield Running(daemon, watched, task)
    finally:
        daemon.stopping.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, SIGNAL_SECONDS)


async def _accepted_and_not_due(r: Rig) -> str:
    """An operation whose job runs at the provider, its next read an hour away."""
    op_id = await r.submit("slow", duration=3600.0)
    await r.reconciler.run_once()
    assert await r.state(op_id) is LocalState.ACCEPTED
    await r.pool.execute(
        "UPDATE operations SET next_poll_at = jw_now() + interval '1 hour' WHERE operation_id = $1",
        op_id,
    )
    return op_id


async def _status_reads(db: Any, op_id: str) -> int:
    return int(
        await db.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'status'",
            op_id,
        )
    )


async def _terminate(db: Any, pid: int) -> None:
    # with a timeout, returns once the backend is gone: nobody listens any more
    assert await db.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


async def test_a_wake_after_the_listener_was_terminated_is_heard_on_the_new_connection(
    pool: Any, db: Any, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobwarden.reconciler")
    async with rig(pool, tmp_path) as r:
        op_id = await _accepted_and_not_due(r)
        async with running_daemon(r, db_url, tmp_path) as run:
            first = run.daemon.listener.get_server_pid()
            await _terminate(db, first)
            second = await _next(run.daemon.connected, "LISTEN connection after the loss")
            assert second != first
            # the sweep run on reconnecting finds nothing due; after it only a
            # NOTIFY heard on the new connection can explain a read
            assert (await _next(run.reconciler.swept, "sweep on reconnecting"))["claimed"] == 0
            reads = await _status_reads(db, op_id)
            await db.execute("SELECT jw_request_wake($1)", op_id)
            assert await _next(run.reconciler.processed, "read of the woken operation") == op_id
            assert await _status_reads(db, op_id) == reads + 1
    messages = _messages(caplog)
    assert "wake-up listener connection lost; connecting again" in messages
    assert any(m.startswith("wake-up listener connected again") for m in messages)


class ListenerBugOnce(WatchedDaemon):
    """keep_listening meets an unexpected error the first time it watches its connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watching: asyncio.Queue[int] = asyncio.Queue()
        self.watches = 0

    async def _until_listener_lost(self) -> str:
        self.watches += 1
        self.watching.put_nowait(self.watches)
        if self.watches == 1:
            raise RuntimeError("a bug in the listener's loop")
        return await super()._until_listener_lost()


async def test_a_listener_loop_ended_by_an_error_is_logged_and_started_again(
    pool: Any, db: Any, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """It ended without a word: wake-ups then went unheard until a restart (a
    long-run review's suspicion, confirmed here)."""
    caplog.set_level(logging.INFO, logger="jobwarden.reconciler")
    async with rig(pool, tmp_path) as r:
        op_id = await _accepted_and_not_due(r)
        async with running_daemon(r, db_url, tmp_path, ListenerBugOnce) as run:
            daemon = run.daemon
            assert isinstance(daemon, ListenerBugOnce)
            assert await _next(daemon.watching, "the loop's first watch") == 1
            assert await _next(daemon.watching, "its watch after the restart") == 2
            await db.execute("SELECT jw_request_wake($1)", op_id)
            assert await _next(run.reconciler.processed, "read of the woken operation") == op_id
    assert any(m.startswith("wake-up listener stopped unexpectedly") for m in _messages(caplog))


async def test_a_wake_sent_while_nobody_listened_is_read_on_reconnecting(
    pool: Any,
    db: Any,
    db_url: str,
    pg_server: ResolvedDatabase,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobwarden.reconciler")
    database = await db.fetchval("SELECT current_database()")  # the URL may carry a query
    async with rig(pool, tmp_path) as r, connection(pg_server.admin_url) as admin:
        op_id = await _accepted_and_not_due(r)
        async with running_daemon(r, db_url, tmp_path) as run:
            # the database refuses new connections (superusers' too): the
            # daemon cannot listen again until it is allowed back
            await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            try:
                await _terminate(db, run.daemon.listener.get_server_pid())
                reads = await _status_reads(db, op_id)
                await db.execute("SELECT jw_request_wake($1)", op_id)  # NOTIFY to nobody
                await _next(run.daemon.refused, "refused attempt to listen again")
            finally:
                await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
            await _next(run.daemon.connected, "LISTEN connection after the outage")
            assert await _next(run.reconciler.processed, "read of the woken operation") == op_id
            assert await _status_reads(db, op_id) == reads + 1
    assert "wake-up listener: could not connect" in _messages(caplog)


async def test_shutdown_with_the_database_unreachable_ends_cleanly(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobwarden.reconciler")
    async with PgProxy.from_url(db_url) as proxy:
        via_proxy = proxy.url_for(db_url)
        proxied = await create_reconciler_pool(via_proxy)
        try:
            async with (
                rig(proxied, tmp_path) as r,
                running_daemon(r, via_proxy, tmp_path) as run,
            ):
                await proxy.aclose()  # every connection cut, new ones refused
                run.daemon.stopping.set()  # SIGTERM
                await asyncio.wait_for(run.task, SIGNAL_SECONDS)  # raises what run() raised
                assert run.daemon.sequencing is not None and run.daemon.sequencing.done()
                assert run.daemon.listening is not None and run.daemon.listening.done()
                assert run.daemon.listener.is_closed()
        finally:
            proxied.terminate()
    messages = _messages(caplog)
    assert "shutdown: could not hand leases back" in messages
    assert "reconciler stopped" in messages
    ours = [rec for rec in caplog.records if rec.name.startswith("jobwarden")]
    assert not [rec for rec in ours if rec.exc_info], "no traceback is logged"


async def test_closing_the_pool_does_not_wait_for_a_connection_never_given_back(
    db_url: str,
) -> None:
    pool = await create_pool(db_url, min_size=1, max_size=2)
    held = await pool.acquire()  # a task stuck on a silent database would hold one so
    try:
        await asyncio.wait_for(reconciler_daemon.close_pool(pool, 0.2), SIGNAL_SECONDS)
        with pytest.raises(asyncpg.InterfaceError, match="released back to the pool"):
            await held.fetchval("SELECT 1")  # taken back: its connection was dropped
    finally:
        pool.terminate()
