"""Helpers for the MCP tests: the SDK's own client over stdio and Streamable HTTP.

Everything here is real: the API served by uvicorn on loopback (or called in
process by the mounted MCP endpoint), PostgreSQL, the MCP server as a
subprocess for stdio. `ApiTracker` counts the API requests an `await` holds
open, so a test can wait for "the wait has started" and "the wait has ended"
as signals instead of sleeping.

A stdio server takes seconds to start (the SDK's import alone), so a test
module shares one (`shared_stdio_server`): its API address is a `Switchboard`
that each test plugs its own API into, over the test's own database, and its
token is minted once and stored in each test's database. The server itself
keeps no state between calls: everything it answers is read from the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import jsonschema
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from receiver.api import api_routes
from receiver.app import build_app
from shared.agents.mcp.http import McpHttpEndpoint
from shared.ledger import tokens
from shared.serve import serve_app
from tests.integration.agent_support import receiver_pool, sim_settings

REPO = Path(__file__).resolve().parents[2]
# Replies come in milliseconds; anything waiting is bounded by its own max_wait.
SIGNAL_TIMEOUT_SECONDS = 15.0
T = TypeVar("T")
SERVER_MODULE = "shared.agents.mcp"
# Set in a test's server's environment (the server ignores it), so that one
# server can be killed while the module's shared one lives on.
TAG_VARIABLE = "JW_TEST_MCP_SERVER"


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


def server_env(api_url: str | None, token: str | None, tag: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JW_API_")}
    if api_url is not None and token is not None:
        env.update({"JW_API_URL": api_url, "JW_API_TOKEN": token})
    if tag is not None:
        env[TAG_VARIABLE] = tag
    return env


@dataclass
class Connected:
    session: ClientSession
    dispatcher: JSONRPCDispatcher[Any]


@contextlib.asynccontextmanager
async def stdio_session(
    api_url: str | None, token: str | None, *, modern: bool = False, tag: str | None = None
) -> AsyncIterator[Connected]:
    """`python -m shared.agents.mcp` under the SDK's stdio client, connected.

    `tag`: what `kill_server_processes(tag)` finds this server by.
    """
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", SERVER_MODULE],
        env=server_env(api_url, token, tag),
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


def kill_server_processes(tag: str) -> int:
    """SIGKILL this test process's MCP server children started with `tag` (no
    chance to flush anything); any other server (a module's shared one) lives on."""
    killed = 0
    me = os.getpid()
    marker = f"{TAG_VARIABLE}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == me and SERVER_MODULE.encode() in cmdline and marker in environ:
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
    return killed


def new_tag() -> str:
    return uuid.uuid4().hex


class Switchboard:
    """One address for a module's stdio server; each test plugs in its own API.

    The stdio server reads JW_API_URL once, when it starts: pointing it here
    lets one server process serve many tests, each with its own database.
    """

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # nothing to start: the tests' apps have no lifespan
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        app = self.app
        if app is None:  # between tests: no API to answer with
            await PlainTextResponse("no test is running", status_code=503)(scope, receive, send)
            return
        await app(scope, receive, send)

    @contextlib.contextmanager
    def plugged(self, app: ASGIApp) -> Iterator[None]:
        assert self.app is None, "another test's API is still plugged in"
        self.app = app
        try:
            yield
        finally:
            self.app = None


@dataclass
class SharedServer:
    """A module's stdio server: its API address and token stay, the API behind them changes."""

    switchboard: Switchboard
    url: str
    token: tokens.MintedToken
    agent: Connected


@contextlib.asynccontextmanager
async def shared_stdio_server() -> AsyncIterator[SharedServer]:
    """One `python -m shared.agents.mcp`, connected, for the tests of a module.

    Entered and left in a task of its own (`held_open`): the SDK's client keeps
    anyio task groups, which must be left by the task that entered them, and
    pytest-asyncio sets a fixture up and tears it down in different tasks.
    """

    @contextlib.asynccontextmanager
    async def started() -> AsyncIterator[SharedServer]:
        switchboard, minted = Switchboard(), tokens.mint_token()
        async with (
            serve_app(switchboard) as url,
            stdio_session(url, minted.secret) as agent,
        ):
            yield SharedServer(switchboard, url, minted, agent)

    async with held_open(started()) as shared:
        yield shared


@contextlib.asynccontextmanager
async def plugged_api(shared: SharedServer, db: Any, db_url: str) -> AsyncIterator[Api]:
    """This test's API, over its own database, behind the shared server's address;
    the shared token is stored in this database (the agent "claude")."""
    await tokens.create_token(db, shared.token, caller="claude", scope="agent", created_by="test")
    async with receiver_pool(db_url) as pool:
        tracker = ApiTracker(Starlette(routes=api_routes(sim_settings(), pool)))
        with shared.switchboard.plugged(tracker):
            yield Api(shared.url, tracker, pool)


@contextlib.asynccontextmanager
async def held_open(manager: contextlib.AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
    """`manager` entered and exited by one task of its own, held open in between."""
    entered: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    leave = asyncio.Event()

    async def hold() -> None:
        try:
            async with manager as value:
                entered.set_result(value)
                await leave.wait()
        except BaseException as exc:
            if entered.done():
                raise
            entered.set_exception(exc)

    holder = asyncio.create_task(hold())
    try:
        yield await entered
    finally:
        leave.set()
        await holder
