"""A bounded wait comes back near its max_wait, even from a stalled API (round 52).

A stalled API server accepts connections and never answers (a hung process, a
proxy whose upstream is gone). Every request made for `start_and_await`,
`await_operation` and the MCP `await` had the client's 10 s timeout (a
long-poll its wait plus 10 s), and a claim four of them: `start_and_await(2)`
came back after 10 s, `await_operation(2)` after 12 s, and a success whose
claim stalled after 42 s more. Each request now has the time left plus
`DEADLINE_GRACE_SECONDS`, and none is sent again once max_wait has passed.

Everything is real: a loopback socket that accepts and never answers, the API
on uvicorn with PostgreSQL, the MCP server as a subprocess. Elapsed times are
measured against max_wait with a bound that the old timings miss by seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import Response

from receiver.api.operations import OperationsApi
from shared.agents import tools as agent_tools
from shared.agents.client import AsyncJobwardenClient, JobwardenClient
from shared.agents.mcp import waiting
from shared.agents.tools import DEADLINE_GRACE_SECONDS
from shared.ledger import tokens
from shared.serve import serve_app
from tests.integration.agent_support import (
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)
from tests.integration.mcp_support import SIGNAL_TIMEOUT_SECONDS, stdio_session, structured

JOB = {"body": {"month": "2025-02"}}
UNKNOWN_OP = "op_" + "0" * 26
# What the machine may add to max_wait + grace (a loaded CI host, thread start-up).
SLACK_SECONDS = 2.5


def within_bound(elapsed: float, max_wait: float) -> bool:
    return elapsed <= max_wait + DEADLINE_GRACE_SECONDS + SLACK_SECONDS


class Stalled:
    """A loopback server that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.accepted = threading.Semaphore(0)
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed: done
            while True:
                conn, _ = self.listener.accept()
                self.held.append(conn)  # read nothing, answer nothing
                self.accepted.release()

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@contextlib.contextmanager
def stalled() -> Iterator[Stalled]:
    server = Stalled()
    server.thread.start()
    try:
        yield server
    finally:
        server.close()


class StallClaims:
    """The API, except that a claim is held unanswered until the test ends."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.release = asyncio.Event()
        self.claims = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith(":claim"):
            self.claims += 1
            await self.release.wait()
            await Response(status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def api_stalling_claims(db_url: str) -> AsyncIterator[tuple[str, StallClaims]]:
    async with receiver_pool(db_url) as pool:
        app = StallClaims(Starlette(routes=OperationsApi(sim_settings(), pool).routes()))
        try:
            async with serve_app(app) as url:
                try:
                    yield url, app
                finally:
                    app.release.set()
        finally:
            app.release.set()


async def timed(coro: Any) -> tuple[Any, float]:
    began = time.monotonic()
    async with asyncio.timeout(120):  # a hang fails the test instead of holding it
        result = await coro
    return result, time.monotonic() - began


# ---------------------------------------------------------------- a stalled API


@pytest.mark.parametrize(
    ("blocking", "max_wait"), [(False, 2), (True, 2), (False, 12)], ids=["async", "sync", "12s"]
)
async def test_start_and_await_against_a_stalled_api_ends_near_max_wait(
    blocking: bool, max_wait: float
) -> None:
    """Before: 10 s for max_wait 2 (the submit's 10 s timeout), 21 s for 12 (a
    second submit, 10 s more). The submit's fate is unknown, so the answer is
    timed_out with the client_reference, never "NOT started"."""
    with stalled() as api:
        if blocking:
            with JobwardenClient(api.url, "jw_x") as sync_client:
                result, elapsed = await timed(
                    asyncio.to_thread(
                        agent_tools.start_and_await,
                        sync_client,
                        "sim",
                        JOB,
                        max_wait,
                        client_reference="ref-stall",
                    )
                )
        else:
            async with AsyncJobwardenClient(api.url, "jw_x") as client:
                result, elapsed = await timed(
                    agent_tools.start_and_await_async(
                        client, "sim", JOB, max_wait, client_reference="ref-stall"
                    )
                )
    assert within_bound(elapsed, max_wait), f"{elapsed:.1f}s for max_wait {max_wait}"
    assert elapsed >= max_wait  # the submit was given its time, not abandoned early
    assert result.status == "timed_out" and result.operation_id is None
    assert result.client_reference == "ref-stall" and "NOT started" not in result.message
    assert "Do not report success" in result.message and "ref-stall" in result.message


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
async def test_await_operation_against_a_stalled_api_ends_near_max_wait(blocking: bool) -> None:
    """Before: 12 s for max_wait 2 (the long-poll's wait plus a 10 s margin)."""
    with stalled() as api:
        if blocking:
            with JobwardenClient(api.url, "jw_x") as sync_client:
                result, elapsed = await timed(
                    asyncio.to_thread(agent_tools.await_operation, sync_client, UNKNOWN_OP, 2)
                )
        else:
            async with AsyncJobwardenClient(api.url, "jw_x") as client:
                result, elapsed = await timed(
                    agent_tools.await_operation_async(client, UNKNOWN_OP, 2)
                )
    assert within_bound(elapsed, 2), f"{elapsed:.1f}s for max_wait 2"
    assert result.status == "timed_out" and result.operation_id == UNKNOWN_OP
    assert result.error and result.error["code"] == "unreachable"
    assert "Do not report success" in result.message or "do not report success" in result.message


async def test_the_mcp_await_against_a_stalled_api_ends_near_max_wait() -> None:
    """The MCP server (a subprocess, over stdio) pointed at a stalled API.
    Before: `await` with max_wait 2 answered after 10 s (its first read's
    timeout), and one whose stream failed read again with 10 s more."""
    with stalled() as api:
        async with stdio_session(api.url, "jw_x") as agent:
            result, elapsed = await timed(
                agent.session.call_tool("await", {"operation_id": UNKNOWN_OP, "max_wait": 2})
            )
    assert within_bound(elapsed, 2), f"{elapsed:.1f}s for max_wait 2"
    payload = structured(result)
    assert payload["status"] in ("unknown", "timed_out"), payload
    assert payload["operation_id"] == UNKNOWN_OP


# ---------------------------------------------- a claim stalled after a success


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
async def test_a_claim_stalled_after_a_success_ends_near_max_wait(
    db: Any, db_url: str, blocking: bool
) -> None:
    """The operation succeeded; its claim is never answered. Before: four claims
    of 10 s each and their pauses, 42 s past a max_wait of 2. The claim could
    not be made in time: claimed=None, said so, and do not act yet."""
    token = await make_token(db, "bot")
    async with (
        api_stalling_claims(db_url) as (url, app),
        AsyncJobwardenClient(url, token) as client,
    ):
        started = await agent_tools.start_async(client, "sim", JOB)
        assert started.operation_id
        await finish_with_result(db, started.operation_id, total=1)
        if blocking:
            with JobwardenClient(url, token) as sync_client:
                result, elapsed = await timed(
                    asyncio.to_thread(
                        agent_tools.await_operation,
                        sync_client,
                        started.operation_id,
                        2,
                        consumer="billing",
                    )
                )
        else:
            result, elapsed = await timed(
                agent_tools.await_operation_async(
                    client, started.operation_id, 2, consumer="billing"
                )
            )
    assert within_bound(elapsed, 2), f"{elapsed:.1f}s for max_wait 2"
    assert app.claims >= 1
    assert result.status == "succeeded" and result.claimed is None
    assert "before max_wait ran out" in result.message
    assert "do not act on this result yet" in result.message


async def test_the_mcp_await_whose_claim_stalls_ends_near_max_wait(db: Any, db_url: str) -> None:
    """The same through the MCP server: `await` with a consumer, max_wait 2."""
    token = await make_token(db, "bot")
    async with api_stalling_claims(db_url) as (url, app):
        async with AsyncJobwardenClient(url, token) as client:
            started = await agent_tools.start_async(client, "sim", JOB)
            assert started.operation_id
            await finish_with_result(db, started.operation_id, total=1)
        async with stdio_session(url, token) as agent:
            arguments = {"operation_id": started.operation_id, "max_wait": 2, "consumer": "bill"}
            result, elapsed = await timed(agent.session.call_tool("await", arguments))
    assert within_bound(elapsed, 2), f"{elapsed:.1f}s for max_wait 2"
    payload = structured(result)
    assert app.claims >= 1
    assert payload["status"] == "succeeded" and payload["claimed"] is None, payload
    assert "before max_wait ran out" in payload["message"]


async def test_a_healthy_api_still_answers_a_wait_at_max_wait_with_the_truth(
    db: Any, db_url: str
) -> None:
    """The shorter timeouts leave the server's own answer at max_wait (the
    long-poll ends then) in time: a running job is timed_out with its ids, not
    lost contact."""
    token = await make_token(db, "bot")
    async with (
        api_stalling_claims(db_url) as (url, _app),
        AsyncJobwardenClient(url, token) as client,
    ):
        started = await agent_tools.start_async(client, "sim", JOB)
        assert started.operation_id
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            running = await agent_tools.await_operation_async(client, started.operation_id, 1)
    assert running.status == "timed_out" and running.operation_id == started.operation_id
    assert "Lost contact" not in running.message and running.error is None


# ------------------------- a refused token under the caller's client_reference


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
async def test_a_refused_token_under_a_callers_reference_never_says_not_started(
    db: Any, db_url: str, blocking: bool
) -> None:
    """The first start under "ref-mine" was recorded but its answer was lost
    (here: made, then forgotten), the token revoked, and the agent calls start
    again with the same client_reference, as every unanswered answer tells it
    to. Before: 401 -> `failed`, "The job was NOT started", while the job was
    recorded and runs; the agent, told nothing started, submits again under a
    new token: the duplicate job. A 401 says nothing of an earlier call under
    that reference: timed_out with the reference, saying the token was
    refused. Without a reference of the caller's (a fresh one), nothing could
    be recorded under it, and "NOT started" is still the truth."""
    token = await make_token(db, "bot")
    async with api_stalling_claims(db_url) as (url, _app):
        async with AsyncJobwardenClient(url, token) as client:
            first = await agent_tools.start_async(client, "sim", JOB, client_reference="ref-mine")
        assert first.status == "running" and first.operation_id
        token_id = await db.fetchval("SELECT token_id FROM api_tokens WHERE caller = 'bot'")
        await tokens.revoke_token(db, str(token_id))
        if blocking:  # in a thread: the server runs on this loop
            with JobwardenClient(url, token) as sync_client:
                again = await asyncio.to_thread(
                    agent_tools.start, sync_client, "sim", JOB, client_reference="ref-mine"
                )
                waited = await asyncio.to_thread(
                    agent_tools.start_and_await,
                    sync_client,
                    "sim",
                    JOB,
                    5,
                    client_reference="ref-mine",
                )
                fresh = await asyncio.to_thread(agent_tools.start, sync_client, "sim", JOB)
        else:
            async with AsyncJobwardenClient(url, token) as client:
                again = await agent_tools.start_async(
                    client, "sim", JOB, client_reference="ref-mine"
                )
                waited = await agent_tools.start_and_await_async(
                    client, "sim", JOB, 5, client_reference="ref-mine"
                )
                fresh = await agent_tools.start_async(client, "sim", JOB)
    for result in (again, waited):
        assert result.status == "timed_out" and result.client_reference == "ref-mine", result
        assert "NOT started" not in result.message and "ref-mine" in result.message
        assert "Do not report success" in result.message and "will not help" in result.message
        assert result.error and result.error["code"] == "unauthenticated"
    assert fresh.status == "failed" and "NOT started" in fresh.message


# ------------------------- a refused token as the MCP await's deadline passes


class HoldEvents:
    """The API, except that an event stream is held silent until the test ends
    (a proxy buffering it), so its end comes from the deadline, not the API."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/events"):
            self.arrived.set()
            await self.release.wait()
            await Response(status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def test_a_refused_token_as_the_mcp_await_ends_is_said_to_be_refused(
    db: Any, db_url: str
) -> None:
    """The MCP await follows the event stream until max_wait, then reads the
    operation once. Its token was revoked meanwhile, so that read is a 401.
    Before: any failure at the deadline was "Lost contact with jobwarden ...
    check it later", error `unreachable`, advice a revoked token can never
    make work. It is the refused-token answer: timed_out, `unauthenticated`,
    "will not help"."""
    token = await make_token(db, "bot")
    async with receiver_pool(db_url) as pool:
        app = HoldEvents(Starlette(routes=OperationsApi(sim_settings(), pool).routes()))
        async with serve_app(app) as url, AsyncJobwardenClient(url, token) as client:
            try:
                started = await agent_tools.start_async(client, "sim", JOB)
                assert started.operation_id
                waited = asyncio.ensure_future(
                    waiting.await_operation(client, started.operation_id, 3)
                )
                async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                    await app.arrived.wait()  # following the (silent) stream
                token_id = await db.fetchval("SELECT token_id FROM api_tokens WHERE caller = 'bot'")
                await tokens.revoke_token(db, str(token_id))
                async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                    result = await waited
            finally:
                app.release.set()  # before the server stops: it waits for held requests
    assert result.status == "timed_out" and result.operation_id == started.operation_id
    assert result.error and result.error["code"] == "unauthenticated", result
    assert "Lost contact" not in result.message and "will not help" in result.message
