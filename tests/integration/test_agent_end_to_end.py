"""Seed 003's four CI scenarios through the tool wrapper, with every real part:
the simulated provider, the reconciler, the API in a uvicorn server, the client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from receiver.api import api_routes
from shared.agents.client import AsyncJobwardenClient
from shared.agents.tools import start_and_await_async
from shared.serve import serve_app
from tests.harness import Rig, rig, webhook_rig
from tests.integration.agent_support import make_token


@contextlib.asynccontextmanager
async def agent_stack(r: Rig, pool: Any) -> AsyncIterator[AsyncJobwardenClient]:
    """The API over the rig's database, and the reconciler running as the daemon would."""

    async def daemon() -> None:
        while True:
            await r.reconciler.run_once()
            await asyncio.sleep(0.02)

    app = Starlette(routes=api_routes(r.ctx.settings, pool))
    token = await make_token(pool, "wrapper")
    task = asyncio.create_task(daemon())
    try:
        async with serve_app(app) as url, AsyncJobwardenClient(url, token) as client:
            yield client
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def job(script: str, **params: Any) -> dict[str, Any]:
    return {"method": "POST", "target": "/v1/jobs", "body": {"script": script, "params": params}}


async def test_slow_job_returns_the_result(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r, agent_stack(r, pool) as client:
        result = await start_and_await_async(client, "sim", job("success", duration=1.0), 20)
    assert result.status == "succeeded" and result.done
    assert result.operation_id and result.job_id and result.result_ref


async def test_late_failure_is_reported_as_failure(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r, agent_stack(r, pool) as client:
        result = await start_and_await_async(client, "sim", job("late_failure", duration=0.8), 20)
    assert result.status == "failed"
    assert result.error and result.error.get("code") == "worker_crashed"


async def test_timeout_returns_the_job_id_and_no_false_success(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r, agent_stack(r, pool) as client:
        result = await start_and_await_async(client, "sim", job("never_finishes"), 1.5)
    assert result.status == "timed_out" and not result.done
    assert result.operation_id and result.job_id
    assert "NOT" in result.message or "not" in result.message


async def test_duplicate_completion_triggers_the_next_step_once(pool: Any, tmp_path: Path) -> None:
    async with webhook_rig(pool, tmp_path) as r, agent_stack(r, pool) as client:
        first = await start_and_await_async(
            client,
            "sim",
            job("duplicate_webhook", duration=0.5),
            20,
            client_reference="dup-1",
            consumer="mailer",
        )
        again = await start_and_await_async(
            client,
            "sim",
            job("duplicate_webhook", duration=0.5),
            20,
            client_reference="dup-1",
            consumer="mailer",
        )
    assert first.status == again.status == "succeeded"
    assert first.operation_id == again.operation_id
    assert [first.claimed, again.claimed] == [True, False]
