"""`python -m shared.mcp_server` as a subprocess, spoken to in JSON-RPC over stdio."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from shared.ledger.states import LocalState as S
from shared.serve import serve_app
from tests.integration.agent_support import (
    advance,
    api_app,
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)

# A reply comes in milliseconds; a tool call that waits is bounded by its own
# max_wait, well under this.
REPLY_TIMEOUT_SECONDS = 15.0


class McpProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = itertools.count(1)

    async def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
            line = await self.proc.stdout.readline()
        assert line, "the MCP server closed stdout"
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        msg_id = next(self._ids)
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})
        reply = await self.reply()
        assert reply["id"] == msg_id and reply["jsonrpc"] == "2.0"
        return reply

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = await self.request("tools/call", {"name": tool, "arguments": arguments})
        result: dict[str, Any] = reply["result"]
        return result


async def spawn(env: dict[str, str]) -> McpProcess:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shared.agents.mcp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    return McpProcess(proc)


async def stop(mcp: McpProcess) -> int:
    assert mcp.proc.stdin is not None
    mcp.proc.stdin.close()
    async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
        return await mcp.proc.wait()


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("JW_API_")}


@pytest_asyncio.fixture
async def mcp(db: Any, db_url: str) -> AsyncIterator[McpProcess]:
    async with receiver_pool(db_url) as pool, serve_app(api_app(sim_settings(), pool)) as url:
        env = {**base_env(), "JW_API_URL": url, "JW_API_TOKEN": await make_token(db, "claude")}
        process = await spawn(env)
        await process.request("initialize", {"protocolVersion": "2025-06-18"})
        await process.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield process
        assert await stop(process) == 0


async def test_initialize_announces_tools() -> None:
    process = await spawn(base_env())
    reply = await process.request(
        "initialize",
        {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t"}},
    )
    result = reply["result"]
    assert result["protocolVersion"] == "2025-03-26"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "jobwarden"
    assert "NOT completion" in result["instructions"]
    await process.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (await process.request("ping"))["result"] == {}  # the notification got no reply
    assert await stop(process) == 0


async def test_tools_are_described_for_models(mcp: McpProcess) -> None:
    tools = (await mcp.request("tools/list"))["result"]["tools"]
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == {"start", "check", "await", "cancel", "pending"}
    assert "STARTED IS NOT DONE" in by_name["start"]["description"]
    assert "does NOT mean the job is cancelled" in by_name["cancel"]["description"]
    assert by_name["await"]["inputSchema"]["required"] == ["operation_id"]
    assert all(t["inputSchema"]["type"] == "object" for t in tools)


async def test_start_then_await_a_job_that_finishes(mcp: McpProcess, db: Any) -> None:
    started = await mcp.call(
        "start", provider="sim", kind="export", request={"body": {"m": 2}}, client_reference="r1"
    )
    assert started["isError"] is False
    state = started["structuredContent"]
    assert state["status"] == "running" and state["message"].startswith("STARTED and NOT")
    assert json.loads(started["content"][0]["text"]) == state
    op_id = state["operation_id"]
    await finish_with_result(db, op_id, total=3)
    waited = (await mcp.call("await", operation_id=op_id, max_wait=10))["structuredContent"]
    assert waited["status"] == "succeeded" and waited["counts"]["total"] == 3
    pending = (await mcp.call("pending"))["structuredContent"]
    assert pending == {"operations": [], "count": 0}


async def test_await_times_out_with_the_ids(mcp: McpProcess, db: Any) -> None:
    started = (await mcp.call("start", provider="sim", kind="export", request={"body": {}}))[
        "structuredContent"
    ]
    op_id = started["operation_id"]
    await advance(db, op_id, S.OBSERVING)
    waited = (await mcp.call("await", operation_id=op_id, max_wait=0.5))["structuredContent"]
    assert waited["status"] == "timed_out" and waited["operation_id"] == op_id
    assert waited["job_id"] == f"job_{op_id[-8:]}"
    assert "continues in the background" in waited["message"]
    cancelled = (await mcp.call("cancel", operation_id=op_id, reason="not needed"))[
        "structuredContent"
    ]
    assert cancelled["status"] == "running" and "NOT yet confirmed" in cancelled["message"]
    listed = (await mcp.call("pending"))["structuredContent"]
    assert [o["operation_id"] for o in listed["operations"]] == [op_id]


async def test_bad_tool_arguments_are_tool_errors(mcp: McpProcess) -> None:
    result = await mcp.call("check")
    assert result["isError"] is True and "operation_id is required" in result["content"][0]["text"]
    result = await mcp.call("await", operation_id="op_x", max_wait=-1)
    assert result["isError"] is True
    result = await mcp.call("teleport")
    assert result["isError"] is True and "unknown tool" in result["content"][0]["text"]


async def test_protocol_errors_are_json_rpc_errors(mcp: McpProcess) -> None:
    assert (await mcp.request("resources/list"))["error"]["code"] == -32601
    await mcp.send("{not json")
    assert (await mcp.reply())["error"]["code"] == -32700
    await mcp.send({"id": 9, "method": "ping"})  # no jsonrpc member
    assert (await mcp.reply())["error"]["code"] == -32600


async def test_without_api_settings_tools_say_what_is_missing() -> None:
    process = await spawn(base_env())
    await process.request("initialize", {"protocolVersion": "2025-06-18"})
    result = (await process.request("tools/call", {"name": "pending", "arguments": {}}))["result"]
    assert result["isError"] is True and "JW_API_URL" in result["content"][0]["text"]
    assert await stop(process) == 0
