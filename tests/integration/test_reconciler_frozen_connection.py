"""A database connection that goes silent does not stall the reconciler for good.

A failover or a network cut that sends no FIN or RST leaves connections
half-open: a statement on one never returns. Every statement of the
reconciler's pool is bounded (reconciler.daemon.STATEMENT_TIMEOUT_SECONDS): the
statement is cancelled, a connection that answers nothing is dropped and
replaced, and the work goes on over new connections. A proxy stands in for
the network here: it stops relaying on every connection open when it
freezes, while new connections pass.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import reconciler.daemon as reconciler_daemon
from bench.harness import TestClock
from shared import ledger
from shared.db.errors import DATABASE_DOWN
from shared.ledger import RequestSpec
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from tests.integration.test_reconciler_answer_kept import reconciler_on

SIGNAL_SECONDS = 15.0
# The bound this test gives every statement in place of the daemon's minute.
TEST_STATEMENT_SECONDS = 0.5
# Runs allowed to fail on silent connections before one must claim (the pool
# had a handful open when the proxy froze them).
MAX_RUNS = 8


class FreezingProxy:
    """TCP relay to PostgreSQL; `freeze()` silences the connections open at that moment."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._frozen: list[asyncio.Event] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self.port = 0

    async def __aenter__(self) -> FreezingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.transport.abort()
        await self._server.wait_closed()

    def freeze(self) -> None:
        for frozen in self._frozen:
            frozen.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers.append(up_writer)
        frozen = asyncio.Event()
        self._frozen.append(frozen)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._relay(source, sink, frozen))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _relay(
        source: asyncio.StreamReader, sink: asyncio.StreamWriter, frozen: asyncio.Event
    ) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await source.read(65536):
                if frozen.is_set():
                    await asyncio.Event().wait()  # silent from now on: never closed either
                sink.write(data)
                await sink.drain()


def _through(db_url: str, port: int) -> str:
    parts = urlsplit(db_url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


@contextlib.asynccontextmanager
async def proxied(db_url: str) -> AsyncIterator[tuple[FreezingProxy, str]]:
    parts = urlsplit(db_url)
    if parts.hostname is None or parts.port is None:
        pytest.skip("the database is reached by a socket path, not TCP")
    async with FreezingProxy(parts.hostname, parts.port) as proxy:
        yield proxy, _through(db_url, proxy.port)


async def test_statements_on_a_silent_connection_give_way_to_new_connections(
    db_url: str, db: Any, tmp_path: Path, clock: TestClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconciler_daemon, "STATEMENT_TIMEOUT_SECONDS", TEST_STATEMENT_SECONDS)
    sim = build_app(SimulatorSettings(), clock=clock)
    async with (
        proxied(db_url) as (proxy, url),
        serve_app(sim) as sim_url,
        reconciler_on(url, sim_url, tmp_path, clock) as rec,
    ):
        sub = await ledger.submit_operation(
            db,
            provider="sim",
            kind="export",
            request=RequestSpec("POST", "/v1/jobs", {"script": "slow", "params": {}}),
            requested_by="agent:test",
            create_deadline_s=600,
            result_deadline_s=600,
        )
        await rec.run_once()  # created: the pool's connections are open and in use
        assert await db.fetchval(
            "SELECT remote_job_id IS NOT NULL FROM operations WHERE operation_id = $1",
            sub.operation_id,
        )
        proxy.freeze()
        await clock.advance(3600)  # due again

        # A statement on a silent connection fails after the bound and its connection
        # is dropped; each run that fails so took the bound to fail, so a few runs
        # use up the silent connections and one on a new connection claims the row.
        # Before, the first statement on a frozen connection never returned.
        failures: list[str] = []
        for _ in range(MAX_RUNS):
            try:
                counts = await asyncio.wait_for(rec.run_once(), SIGNAL_SECONDS)
            except (TimeoutError, *DATABASE_DOWN) as exc:  # a silent connection's end
                failures.append(type(exc).__name__)
                continue
            assert counts["claimed"] == 1, counts
            break
        else:
            raise AssertionError(f"no run claimed the row: {failures}")
        assert len(failures) < MAX_RUNS
        reads = await db.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1"
            " AND call_kind = 'status' AND finished_at IS NOT NULL",
            sub.operation_id,
        )
        assert reads >= 1
