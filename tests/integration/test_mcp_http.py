"""MCP over Streamable HTTP, mounted in the receiver, driven by the SDK's own client.

The endpoint is the one `receiver.main.run_receiver` mounts: the receiver app
with the agent API and /mcp, served by uvicorn on loopback; the MCP server
reaches the API in process, with each caller's own token. The last test runs
`run_receiver` itself, as systemd would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import MCPError
from mcp_types import INVALID_PARAMS
from starlette.applications import Starlette

from receiver.api import api_routes
from receiver.main import run_receiver
from shared.agents.mcp.http import McpHttpEndpoint
from shared.ledger import tokens
from shared.ledger.states import LocalState as S
from tests.integration.agent_support import advance, finish_with_result, make_token, sim_settings
from tests.integration.mcp_support import (
    EXPORT,
    SIGNAL_TIMEOUT_SECONDS,
    Mounted,
    awaiting,
    call,
    create_task,
    get_task,
    http_session,
    mounted_receiver,
    structured,
    task_result,
)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest_asyncio.fixture
async def receiver(db_url: str) -> AsyncIterator[Mounted]:
    async with mounted_receiver(db_url) as mounted:
        yield mounted


@pytest_asyncio.fixture
async def token(db: Any) -> str:
    return await make_token(db, "claude")


async def _initialize(url: str, authorization: str | None) -> httpx.Response:
    headers = {**ACCEPT, **({"Authorization": authorization} if authorization else {})}
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=INITIALIZE, headers=headers)


async def test_a_missing_wrong_or_revoked_token_is_refused(receiver: Mounted, db: Any) -> None:
    minted = tokens.mint_token()
    await tokens.create_token(db, minted, caller="gone", scope="agent", created_by="test")
    await tokens.revoke_token(db, minted.token_id)
    for authorization in (None, "Bearer jw_not-a-token", f"Bearer {minted.secret}", "Basic x"):
        answer = await _initialize(receiver.mcp_url, authorization)
        assert answer.status_code == 401, authorization
        assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    with pytest.raises(BaseExceptionGroup) as refused:  # the SDK client gets no session
        async with http_session(receiver.mcp_url, "jw_not-a-token"):
            pass
    assert isinstance(_leaf(refused.value), MCPError)


async def test_operator_tokens_are_refused_agents_only(receiver: Mounted, db: Any) -> None:
    operator = await make_token(db, "alice", scope="operator")
    answer = await _initialize(receiver.mcp_url, f"Bearer {operator}")
    assert answer.status_code == 403
    assert answer.json()["error"] == "insufficient_scope"
    assert "operators use the CLI" in answer.json()["error_description"]
    agent = await make_token(db, "claude")
    assert (await _initialize(receiver.mcp_url, f"Bearer {agent}")).status_code == 200


async def test_a_session_answers_only_the_token_that_opened_it(receiver: Mounted, db: Any) -> None:
    mine, theirs = await make_token(db, "claude"), await make_token(db, "other")
    opened = await _initialize(receiver.mcp_url, f"Bearer {mine}")
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    headers = {**ACCEPT, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient() as client:
        stolen = await client.post(
            receiver.mcp_url, json=listing, headers={**headers, "Authorization": f"Bearer {theirs}"}
        )
    assert stolen.status_code == 404


async def test_an_agent_works_over_http(receiver: Mounted, token: str, db: Any) -> None:
    async with http_session(receiver.mcp_url, token) as agent:
        assert agent.session.protocol_version == "2025-11-25"
        started = await call(agent, "start", **EXPORT, client_reference="h1")
        op_id = started["operation_id"]
        row = await db.fetchrow(
            "SELECT requested_by FROM operations WHERE operation_id = $1", op_id
        )
        assert row["requested_by"] == "agent:claude"  # the caller's identity, from its token
        log, waiting = awaiting(agent, op_id)
        await log.until(bool)
        assert (await call(agent, "check", operation_id=op_id))["status"] == "running"
        await advance(db, op_id, S.OBSERVING)
        await log.until(lambda seen: any("-> observing" in (m or "") for _, m in seen))
        await finish_with_result(db, op_id, total=5)
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            waited = structured(await waiting)
        assert waited["status"] == "succeeded" and waited["counts"]["total"] == 5
        body = json.loads(
            (await agent.session.read_resource(waited["result_uri"])).contents[0].text  # type: ignore[union-attr]
        )
        assert body["result"] == {"rows": 5}
        unknown = await call(agent, "check", operation_id="op_00000000000000000000000000")
        assert unknown["status"] == "not_found"


async def test_agents_see_only_their_own_operations(receiver: Mounted, db: Any) -> None:
    mine, theirs = await make_token(db, "claude"), await make_token(db, "other")
    async with http_session(receiver.mcp_url, theirs) as stranger:
        op_id = (await call(stranger, "start", **EXPORT))["operation_id"]
    async with http_session(receiver.mcp_url, mine) as agent:
        assert (await call(agent, "check", operation_id=op_id))["status"] == "not_found"
        assert (await call(agent, "pending"))["count"] == 0
        with pytest.raises(MCPError) as hidden:
            await agent.session.read_resource(f"jobwarden://operations/{op_id}")
        assert hidden.value.error.code == INVALID_PARAMS


async def test_cancelling_an_await_over_http_ends_it_at_once(receiver: Mounted, token: str) -> None:
    async with http_session(receiver.mcp_url, token) as agent:
        op_id = (await call(agent, "start", **EXPORT))["operation_id"]
        log, waiting = awaiting(agent, op_id)
        await log.until(bool)
        assert receiver.tracker.waits_in_flight == 1
        waiting.cancel()  # notifications/cancelled, POSTed to the session
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        # The API request the await held (in process) ends with it, not after 600 s.
        await receiver.tracker.until(lambda: receiver.tracker.waits_in_flight == 0)
        assert (await call(agent, "check", operation_id=op_id))["status"] == "running"


async def test_tasks_over_http(receiver: Mounted, token: str, db: Any) -> None:
    async with http_session(receiver.mcp_url, token) as agent:
        task_id = (await create_task(agent, "start", EXPORT)).task.task_id
    await finish_with_result(db, task_id, total=1)
    async with http_session(receiver.mcp_url, token) as agent:  # a new session, same token
        assert (await get_task(agent, task_id)).status == "completed"
        assert structured(await task_result(agent, task_id))["status"] == "succeeded"


async def test_the_2026_revision_over_http(receiver: Mounted, token: str) -> None:
    async with http_session(receiver.mcp_url, token, modern=True) as agent:
        assert agent.session.protocol_version == "2026-07-28"
        started = await call(agent, "start", **EXPORT)
        checked = await call(agent, "check", operation_id=started["operation_id"])
        assert checked["status"] == "running"


async def test_run_receiver_serves_mcp_and_stops_cleanly(
    db: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = replace(sim_settings(), receiver_host="127.0.0.1", receiver_port=port)
    token = await make_token(db, "claude")
    service = asyncio.create_task(
        run_receiver(settings, db_url, make_routes=lambda pool: api_routes(settings, pool))
    )
    try:
        assert await _next_message(notify) == "READY=1"
        async with http_session(f"http://127.0.0.1:{port}/mcp", token) as agent:
            op_id = (await call(agent, "start", **EXPORT))["operation_id"]
            assert (await call(agent, "check", operation_id=op_id))["status"] == "running"
            log, waiting = awaiting(agent, op_id)
            await log.until(bool)
            # Shutting down with an await in flight: the sessions are stopped, the
            # pool closes, the service ends (uvicorn's 5 s drain is the bound).
            service.cancel()
            async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                (ended,) = await asyncio.gather(service, return_exceptions=True)
            assert isinstance(ended, asyncio.CancelledError)  # stopped, not crashed
            await asyncio.gather(waiting, return_exceptions=True)
    finally:
        service.cancel()
        await asyncio.gather(service, return_exceptions=True)
    assert await _next_message(notify) == "STOPPING=1"
    notify.close()


class _DatabaseDown:
    async def acquire(self, *, timeout: float) -> Any:
        raise ConnectionRefusedError("connection refused")


async def test_a_database_outage_is_503_with_retry_after() -> None:
    endpoint = McpHttpEndpoint(Starlette(), _DatabaseDown(), acquire_timeout=0.1)
    transport = httpx.ASGITransport(app=endpoint.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as client:
        headers = {**ACCEPT, "Authorization": "Bearer jw_anything"}
        answer = await client.post("/mcp", json=INITIALIZE, headers=headers)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def _next_message(sock: socket.socket) -> str:
    loop = asyncio.get_running_loop()
    data = await asyncio.wait_for(loop.sock_recv(sock, 1024), SIGNAL_TIMEOUT_SECONDS)
    return data.decode()
