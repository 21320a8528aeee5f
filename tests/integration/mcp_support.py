"""Helpers for the MCP tests: the SDK's own client over stdio and Streamable HTTP.

Everything here is real: the API served by uvicorn on loopback (or called in
process by the mounted MCP endpoint), PostgreSQL, the MCP server as a
subprocess for stdio. `ApiTracker` counts the API requests an `await` holds
open, so a test can wait for "the wait has started" and "the wait has ended"
as signals instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from receiver.api import api_routes
from receiver.app import build_app
from shared.agents.mcp.http import McpHttpEndpoint
from shared.serve import serve_app
from tests.integration.agent_support import receiver_pool, sim_settings

REPO = Path(__file__).resolve().parents[2]
# Replies come in milliseconds; anything waiting is bounded by its own max_wait.
SIGNAL_TIMEOUT_SECONDS = 15.0
SERVER_MODULE = "shared.agents.mcp"


class ApiTracker:
    """The agent API app, counting the event streams and long-polls in flight."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self.waits_in_flight = 0
        self.waits_started = 0
        self._watchers: list[tuple[Callable[[], bool], asyncio.Event]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path.endswith("/events") or path.endswith(":wait")):
            await self._app(scope, receive, send)
            return
        self._moved(+1)
        try:
            await self._app(scope, receive, send)
        finally:
            self._moved(-1)

    def _moved(self, step: int) -> None:
        self.waits_in_flight += step
        self.waits_started += max(step, 0)
        for predicate, event in self._watchers:
            if predicate():
                event.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds (checked at every change), or fail the test."""
        event = asyncio.Event()
        watcher = (predicate, event)
        self._watchers.append(watcher)
        try:
            if not predicate():
                async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                    await event.wait()
        finally:
            self._watchers.remove(watcher)


@dataclass
class Api:
    url: str
    tracker: ApiTracker
    pool: Any


@contextlib.asynccontextmanager
async def served_api(db_url: str) -> AsyncIterator[Api]:
    """The agent API on loopback, with the receiver's database privileges."""
    async with receiver_pool(db_url) as pool:
        tracker = ApiTracker(Starlette(routes=api_routes(sim_settings(), pool)))
        async with serve_app(tracker) as url:
            yield Api(url, tracker, pool)


@dataclass
class Mounted:
    """The receiver app with the agent API and the MCP endpoint, on loopback."""

    url: str
    tracker: ApiTracker
    pool: Any

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"


@contextlib.asynccontextmanager
async def mounted_receiver(db_url: str) -> AsyncIterator[Mounted]:
    """As `receiver.main.run_receiver` assembles it, with the API tracked."""
    settings = sim_settings()
    async with receiver_pool(db_url) as pool:
        api = api_routes(settings, pool)
        tracker = ApiTracker(Starlette(routes=api))
        endpoint = McpHttpEndpoint(tracker, pool, acquire_timeout=settings.db_acquire_timeout)
        app = endpoint.around(build_app(settings, pool, extra_routes=[*api, *endpoint.routes]))
        async with serve_app(app) as url:
            yield Mounted(url, tracker, pool)


class ProgressLog:
    """A progress callback that records what it hears and signals each arrival."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, str | None]] = []
        self._arrived = asyncio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message))
        self._arrived.set()

    async def until(self, predicate: Callable[[list[tuple[float, str | None]]], bool]) -> None:
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            while not predicate(self.seen):
                self._arrived.clear()
                await self._arrived.wait()


def server_env(api_url: str | None, token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JW_API_")}
    if api_url is not None and token is not None:
        env.update({"JW_API_URL": api_url, "JW_API_TOKEN": token})
    return env


@dataclass
class Connected:
    session: ClientSession
    dispatcher: JSONRPCDispatcher[Any]


@contextlib.asynccontextmanager
async def stdio_session(
    api_url: str | None, token: str | None, *, modern: bool = False
) -> AsyncIterator[Connected]:
    """`python -m shared.agents.mcp` under the SDK's stdio client, connected."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", SERVER_MODULE],
        env=server_env(api_url, token),
        cwd=str(REPO),
    )
    async with stdio_client(params) as (read, write), _session(read, write, modern) as connected:
        yield connected


@contextlib.asynccontextmanager
async def http_session(
    url: str, token: str | None, *, modern: bool = False
) -> AsyncIterator[Connected]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30.0, read=600.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        _session(read, write, modern) as connected,
    ):
        yield connected


@contextlib.asynccontextmanager
async def _session(read: Any, write: Any, modern: bool) -> AsyncIterator[Connected]:
    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
    async with ClientSession(dispatcher=dispatcher) as session:
        if modern:
            await session.discover()
        else:
            await session.initialize()
        yield Connected(session, dispatcher)


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    payload: dict[str, Any] = result.structured_content
    text = result.content[0]
    assert isinstance(text, types.TextContent) and json.loads(text.text) == payload
    return payload


# A job that runs until the test moves it: what `start` submits in these tests.
EXPORT = {"provider": "sim", "kind": "export", "request": {"body": {"m": 2}}}


def awaiting(
    connected: Connected, operation_id: str
) -> tuple[ProgressLog, asyncio.Task[types.CallToolResult]]:
    """A long `await` in flight (10 minutes at most), with its progress notifications."""
    log = ProgressLog()
    waiting = asyncio.create_task(
        connected.session.call_tool(
            "await", {"operation_id": operation_id, "max_wait": 600}, progress_callback=log
        )
    )
    return log, waiting


async def call(connected: Connected, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool call whose structured answer validates against the tool's outputSchema."""
    result = await connected.session.call_tool(tool, arguments)
    assert not result.is_error, result
    payload = structured(result)
    tools = {t.name: t for t in (await connected.session.list_tools()).tools}
    schema = tools[tool].output_schema
    assert schema is not None
    jsonschema.validate(payload, schema)
    return payload


async def create_task(
    connected: Connected, tool: str, arguments: dict[str, Any]
) -> types.CreateTaskResult:
    """A task-augmented tools/call.

    The SDK's ClientSession validates every tools/call answer as a
    CallToolResult, which a CreateTaskResult is not (SDK 2.x dropped client
    task support), so this one request goes through the session's own
    JSON-RPC dispatcher; everything else uses the session's typed methods.
    """
    raw = await connected.dispatcher.send_raw_request(
        "tools/call", {"name": tool, "arguments": arguments, "task": {"ttl": 3_600_000}}
    )
    return types.CreateTaskResult.model_validate(raw)


async def get_task(connected: Connected, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await connected.session.send_request(request, types.GetTaskResult)


async def task_result(connected: Connected, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await connected.session.send_request(request, types.CallToolResult)


async def cancel_task(connected: Connected, task_id: str) -> types.CancelTaskResult:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await connected.session.send_request(request, types.CancelTaskResult)


async def list_tasks(connected: Connected) -> types.ListTasksResult:
    return await connected.session.send_request(types.ListTasksRequest(), types.ListTasksResult)


def kill_server_processes() -> int:
    """SIGKILL this test process's MCP server children (no chance to flush anything)."""
    killed = 0
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == me and SERVER_MODULE.encode() in cmdline:
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
    return killed
