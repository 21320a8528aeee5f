"""The seed's four CI scenarios, through the tool wrapper, against a real server.

The API runs on uvicorn (127.0.0.1, ephemeral port); a background task plays
the reconciler, driving each operation through the ledger with recorded
evidence, slowly, the way a real job progresses.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio
from starlette.types import ASGIApp, Receive, Scope, Send

from shared.agents import tools as agent_tools
from shared.agents.client import AsyncJobwardenClient, JobwardenClient
from shared.agents.tools import ToolResult
from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.integration.agent_support import (
    advance,
    api_app,
    fail_remotely,
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)
from tests.support import observe

S = LocalState
REQUEST = {"body": {"month": "2025-02", "format": "csv"}}
# Simulated time between two steps of a job: slow enough that the wrapper
# really sees intermediate states, short enough for a fast suite.
STEP_SECONDS = 0.05


class CountingApp:
    """Counts requests per path kind, to prove the wrapper does not poll in a loop."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.calls: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            self.calls["wait" if path.endswith(":wait") else scope["method"] + " " + path] += 1
        await self.app(scope, receive, send)


@dataclass
class Server:
    url: str
    token: str
    app: CountingApp

    def client(self) -> AsyncJobwardenClient:
        return AsyncJobwardenClient(self.url, self.token)


@pytest_asyncio.fixture
async def server(db: Any, db_url: str) -> AsyncIterator[Server]:
    async with receiver_pool(db_url) as pool:
        app = CountingApp(api_app(sim_settings(), pool))
        async with serve_app(app) as url:
            yield Server(url, await make_token(db, "agent1"), app)


async def operation_for(db: Any, ref: str) -> str:
    """The operation the wrapper recorded under `ref` (waits for it, bounded)."""
    async with asyncio.timeout(5):
        while True:
            op_id = await db.fetchval(
                "SELECT operation_id FROM operations WHERE client_reference = $1", ref
            )
            if op_id:
                return str(op_id)
            await asyncio.sleep(0.01)


async def run_slowly(db: Any, op_id: str, polls: int) -> None:
    """accepted -> observing -> several 'running' reads with progress."""
    await advance(db, op_id, S.OBSERVING)
    for done in range(1, polls + 1):
        await asyncio.sleep(STEP_SECONDS)
        await observe(db, op_id, "running")
        await db.execute(
            "UPDATE operations SET remote_state = 'running', progress_completed = $2,"
            " progress_total = $3 WHERE operation_id = $1",
            op_id,
            done,
            polls + 1,
        )


# ------------------------------------------------------------------ 1. slow job


async def test_slow_job_ends_succeeded_with_its_result(server: Server, db: Any) -> None:
    async def reconciler() -> None:
        op_id = await operation_for(db, "slow-1")
        await run_slowly(db, op_id, polls=4)
        await finish_with_result(db, op_id, total=20, inline={"url": "https://cdn/feb.csv"})

    async with server.client() as client:
        result, _ = await asyncio.gather(
            agent_tools.start_and_await_async(
                client, "sim", REQUEST, 20, kind="export", client_reference="slow-1"
            ),
            reconciler(),
        )
    assert result.status == "succeeded" and result.done
    assert result.operation_id and result.job_id == f"job_{result.operation_id[-8:]}"
    assert result.result == {"url": "https://cdn/feb.csv"}
    assert result.counts == {"total": 20, "succeeded": 20, "failed": 0}
    assert result.message.startswith("Finished successfully")
    # One long-poll saw the whole job: intermediate transitions do not answer it.
    assert server.app.calls["wait"] <= 2


async def test_slow_job_through_the_blocking_client(server: Server, db: Any) -> None:
    async def reconciler() -> None:
        op_id = await operation_for(db, "slow-sync")
        await run_slowly(db, op_id, polls=2)
        await finish_with_result(db, op_id, total=5)

    def blocking() -> ToolResult:
        with JobwardenClient(server.url, server.token) as client:
            return agent_tools.start_and_await(
                client, "sim", REQUEST, 20, kind="export", client_reference="slow-sync"
            )

    result, _ = await asyncio.gather(asyncio.to_thread(blocking), reconciler())
    assert result.status == "succeeded" and result.counts == {
        "total": 5,
        "succeeded": 5,
        "failed": 0,
    }


async def test_partial_result_is_completed_with_errors(server: Server, db: Any) -> None:
    async def reconciler() -> None:
        op_id = await operation_for(db, "import-1")
        failures = [(f"row-{i}", "invalid", "bad email") for i in range(140)]
        await finish_with_result(db, op_id, total=20000, failed_items=failures)

    async with server.client() as client:
        result, _ = await asyncio.gather(
            agent_tools.start_and_await_async(
                client, "sim", REQUEST, 20, kind="import", client_reference="import-1"
            ),
            reconciler(),
        )
        assert result.status == "completed_with_errors"
        assert result.counts == {"total": 20000, "succeeded": 19860, "failed": 140}
        assert "140 of 20000 items failed" in result.message
        assert result.operation_id is not None
        page = await client.failed_items(result.operation_id, page_size=10)
    assert len(page["items"]) == 10 and page["next_page_token"]


# ------------------------------------------------------------------ 2. late failure


async def test_late_failure_is_reported_as_failed(server: Server, db: Any) -> None:
    async def reconciler() -> None:
        op_id = await operation_for(db, "late-fail")
        await run_slowly(db, op_id, polls=3)
        await fail_remotely(db, op_id, "render_error", "Template 'q1' not found")

    async with server.client() as client:
        result, _ = await asyncio.gather(
            agent_tools.start_and_await_async(
                client, "sim", REQUEST, 20, kind="export", client_reference="late-fail"
            ),
            reconciler(),
        )
    assert result.status == "failed" and result.done
    assert result.error == {"code": "render_error", "message": "Template 'q1' not found"}
    assert result.message == "FAILED: Template 'q1' not found. Do not report success."
    assert result.result is None and result.job_id is not None


# ------------------------------------------------------------------ 3. timeout


async def test_never_finishing_job_times_out_with_its_ids(server: Server, db: Any) -> None:
    async def reconciler() -> None:
        op_id = await operation_for(db, "forever")
        await run_slowly(db, op_id, polls=2)  # and never more

    async with server.client() as client:
        result, _ = await asyncio.gather(
            agent_tools.start_and_await_async(
                client, "sim", REQUEST, 1.0, kind="export", client_reference="forever"
            ),
            reconciler(),
        )
        assert result.status == "timed_out" and not result.done
        op_id = result.operation_id
        assert op_id and result.job_id == f"job_{op_id[-8:]}"
        assert f"operation {op_id} (job {result.job_id}) continues in the background" in (
            result.message
        )
        assert "Do not report success" in result.message
        # The job is still there for the next run to pick up.
        pending = await agent_tools.pending_async(client)
        assert [p.operation_id for p in pending] == [op_id]
        assert pending[0].status == "running"
        checked = await agent_tools.check_async(client, op_id)
    assert checked.status == "running" and checked.job_id == result.job_id


async def test_operation_waiting_for_a_human_is_timed_out_not_failed(
    server: Server, db: Any
) -> None:
    async def reconciler() -> None:
        op_id = await operation_for(db, "conflict")
        await advance(db, op_id, S.NEEDS_ATTENTION)

    async with server.client() as client:
        result, _ = await asyncio.gather(
            agent_tools.start_and_await_async(
                client, "sim", REQUEST, 20, kind="export", client_reference="conflict"
            ),
            reconciler(),
        )
    assert result.status == "timed_out" and result.needs_human
    assert result.outcome == "needs_attention" and result.operation_id
    assert "do not resubmit" in result.message.lower()


# ------------------------------------------------------------------ 4. duplicate completion


async def test_duplicate_completion_makes_the_consumer_act_once(server: Server, db: Any) -> None:
    actions: list[str] = []

    async def agent_run(client: AsyncJobwardenClient) -> ToolResult:
        result = await agent_tools.start_and_await_async(
            client,
            "sim",
            REQUEST,
            20,
            kind="export",
            client_reference="dup-1",
            consumer="send-report",
        )
        if result.status == "succeeded" and result.claimed:
            actions.append(f"sent {result.operation_id}")
        return result

    async def reconciler() -> None:
        op_id = await operation_for(db, "dup-1")
        await run_slowly(db, op_id, polls=1)
        await finish_with_result(db, op_id, total=1)

    async with server.client() as one, server.client() as two:
        first, second, _ = await asyncio.gather(agent_run(one), agent_run(two), reconciler())
        # The success is delivered a third time (a retried webhook, a later poll).
        third = await agent_run(one)
    results = [first, second, third]
    assert {r.operation_id for r in results} == {first.operation_id}
    assert all(r.status == "succeeded" for r in results)
    assert sorted(bool(r.claimed) for r in results) == [False, False, True]
    assert actions == [f"sent {first.operation_id}"]
    assert sum("do NOT act on it again" in r.message for r in results) == 2


# ------------------------------------------------------------------ start / check / cancel


async def test_start_returns_running_and_check_follows(server: Server, db: Any) -> None:
    async with server.client() as client:
        started = await agent_tools.start_async(
            client, "sim", REQUEST, kind="export", client_reference="long-1"
        )
        assert started.status == "running" and not started.done
        assert started.message.startswith("STARTED and NOT complete")
        assert started.operation_id
        await finish_with_result(db, started.operation_id, total=1)
        checked = await agent_tools.check_async(client, started.operation_id)
    assert checked.status == "succeeded"


async def test_cancel_tool_never_says_cancelled(server: Server, db: Any) -> None:
    async with server.client() as client:
        started = await agent_tools.start_async(client, "sim", REQUEST, client_reference="c-1")
        assert started.operation_id
        await advance(db, started.operation_id, S.OBSERVING)
        result = await agent_tools.cancel_async(client, started.operation_id, "wrong month")
    assert result.status == "running" and "NOT yet confirmed" in result.message


async def test_refused_submit_is_failed_and_nothing_started(server: Server, db: Any) -> None:
    async with server.client() as client:
        result = await agent_tools.start_and_await_async(client, "nope", REQUEST, 5)
    assert result.status == "failed" and result.operation_id is None
    assert result.message.startswith("The job was NOT started")
    assert await db.fetchval("SELECT count(*) FROM operations") == 0
