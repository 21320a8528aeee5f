"""A provider's answer outlives the database connection that was to record it.

A step holds one pooled connection across its provider call. When that
connection dies during the call (a restart, pg_terminate_backend, a network
cut), the answer the provider gave was lost with it: for a provider that
cannot deduplicate creates and offers no lookup, the job it created was left
for a human (needs_attention), the seeds' "lost create response" made by us.
Now the answer is kept on another connection and the next claim acts on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.harness import TestClock
from reconciler.context import Context, build_adapters
from reconciler.daemon import POOL_SIZE, close_pool, create_reconciler_pool
from reconciler.lanes import Lanes
from reconciler.worker import ERROR_RETRY_SECONDS, Reconciler
from shared import ledger
from shared.ledger import RequestSpec
from shared.ledger.states import LocalState
from shared.result_store import ResultStore
from shared.serve import serve_app
from shared.settings import Settings
from shared.simulator import SimulatorSettings, build_app
from tests.harness import sim_providers

S = LocalState
SIGNAL_SECONDS = 10.0


class HeldCreates:
    """The simulator, with each create held (arrived) until the test lets it through."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.arrived = asyncio.Event()
        self.go_on = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/v1/jobs":
            self.arrived.set()
            await self.go_on.wait()
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def reconciler_on(
    db_url: str, sim_url: str, tmp_path: Path, clock: TestClock
) -> AsyncIterator[Reconciler]:
    """The daemon's own pool, a provider that cannot deduplicate creates nor look one up."""
    providers = sim_providers(
        sim_url,
        overrides={
            "create": {"idempotency": "none"},
            "lookup": {"supported": False},
            # terminating a pool's worth of backends takes over a second
            "limits": {"request_timeout": 10.0},
        },
    )
    settings = replace(
        Settings(), worker_id="w1", results_dir=tmp_path / "results", providers=providers
    )
    pool = await create_reconciler_pool(db_url)
    try:
        async with Lanes(8) as lanes:
            yield Reconciler(
                Context(
                    pool=pool,
                    settings=settings,
                    lanes=lanes,
                    adapters=build_adapters(providers),
                    store=ResultStore(tmp_path / "results"),
                    clock=clock,
                    database_url=db_url,
                )
            )
    finally:
        await close_pool(pool)  # bounded: a connection may have been left silent


async def test_a_create_answer_survives_its_connection_dropped_during_the_call(
    db_url: str, db: Any, tmp_path: Path, clock: TestClock
) -> None:
    if int(await db.fetchval("SHOW server_version_num")) < 140000:
        pytest.skip("pg_terminate_backend waits for the backend's end from PostgreSQL 14")
    provider = HeldCreates(build_app(SimulatorSettings(), clock=clock))
    async with (
        serve_app(provider) as sim_url,
        reconciler_on(db_url, sim_url, tmp_path, clock) as rec,
    ):
        sub = await ledger.submit_operation(
            db,
            provider="sim",
            kind="export",
            request=RequestSpec("POST", "/v1/jobs", {"script": "success", "params": {}}),
            requested_by="agent:test",
            create_deadline_s=600,
            result_deadline_s=600,
        )
        op = sub.operation_id
        # every other pooled connection is taken (in a failover, steps holding theirs
        # across calls leave none free): the answer is kept on a connection of its own
        pool = rec.ctx.pool
        held = [await pool.acquire() for _ in range(POOL_SIZE - 1)]
        first = asyncio.ensure_future(rec.run_once())
        await asyncio.wait_for(provider.arrived.wait(), SIGNAL_SECONDS)
        # the create is at the provider: every connection of the reconciler's pool dies
        # (this test's own is spared), and is gone before the provider answers
        await db.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        provider.go_on.set()
        counts = await asyncio.wait_for(first, SIGNAL_SECONDS)
        assert counts["error"] + counts["release_failed"] == 1, counts  # it could not go on
        for conn in held:
            await pool.release(conn)

        call = await db.fetchrow(
            "SELECT status_code, remote_job_id, finished_at FROM provider_calls"
            " WHERE operation_id = $1 AND call_kind = 'create'",
            op,
        )
        assert call["finished_at"] is not None and 200 <= call["status_code"] < 300, dict(call)

        await clock.advance(ERROR_RETRY_SECONDS + 1)
        await rec.run_once()  # acts on the answer on record: no second create, no human
        row = await db.fetchrow(
            "SELECT state, remote_job_id FROM operations WHERE operation_id = $1", op
        )
        assert row["state"] in {S.ACCEPTED.value, S.OBSERVING.value}, row["state"]
        assert row["remote_job_id"] == call["remote_job_id"]
        creates = await db.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'create'",
            op,
        )
        assert creates == 1
