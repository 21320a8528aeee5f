"""Long-polls a client abandoned end at once, and one token holds a bounded number.

Before: a wait never noticed its client had gone, so ~1,100 connections
opened and closed by one agent token held uvicorn's whole concurrency limit
(and re-read the database every 15 s) for max_wait, and /healthz, webhooks and
every other agent got 503. Everything here is real: uvicorn on loopback, raw
TCP connections closed by the client, PostgreSQL. The tests wait on the
server's own counts (signalled at every change), never on sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette

from receiver.api import params
from receiver.api.operations import OperationsApi
from shared.serve import serve_app
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.integration.mcp_support import SIGNAL_TIMEOUT_SECONDS, ApiTracker

JOB = {"provider": "sim", "kind": "export", "request": {"body": {"month": "2025-02"}}}


@dataclass
class Served:
    url: str
    ops: OperationsApi
    tracker: ApiTracker


@contextlib.asynccontextmanager
async def served(db_url: str) -> AsyncIterator[Served]:
    async with receiver_pool(db_url) as pool:
        ops = OperationsApi(sim_settings(), pool)
        tracker = ApiTracker(Starlette(routes=ops.routes()))
        async with serve_app(tracker) as url:
            yield Served(url, ops, tracker)


async def submit(url: str, token: str) -> str:
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.post(
            "/v1/operations", json=JOB, headers={"Authorization": f"Bearer {token}"}
        )
    assert response.status_code == 202, response.text
    return str(response.json()["operation_id"])


async def open_wait(url: str, operation_id: str, token: str) -> asyncio.StreamWriter:
    """A five-minute long-poll on its own TCP connection, as a raw client sends it."""
    parts = urlsplit(url)
    _reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        (
            f"GET /v1/operations/{operation_id}:wait?max_wait=300 HTTP/1.1\r\n"
            f"Host: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    return writer


async def hang_up(writers: list[asyncio.StreamWriter]) -> None:
    for writer in writers:
        writer.close()
    for writer in writers:
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_abandoned_waits_end_as_soon_as_their_clients_go(db: Any, db_url: str) -> None:
    token = await make_token(db, "bot")
    async with served(db_url) as api:
        operation_id = await submit(api.url, token)
        writers = [await open_wait(api.url, operation_id, token) for _ in range(8)]
        await api.tracker.until(lambda: api.tracker.waits_in_flight == 8)
        await hang_up(writers)
        # Before the fix each handler ran on for max_wait (300 s): this timed out.
        await api.tracker.until(lambda: api.tracker.waits_in_flight == 0)
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await api.ops.wait_slots.until(lambda running: running == 0)
        assert api.ops.hub.waiters == 0


async def test_one_token_holds_at_most_the_cap_and_others_are_unaffected(
    db: Any, db_url: str
) -> None:
    bot, other = await make_token(db, "bot"), await make_token(db, "other")
    cap = params.MAX_WAITS_PER_CALLER
    async with served(db_url) as api, httpx.AsyncClient(base_url=api.url) as http:
        mine, theirs = await submit(api.url, bot), await submit(api.url, other)
        writers = [await open_wait(api.url, mine, bot) for _ in range(cap)]
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await api.ops.wait_slots.until(lambda running: running == cap)

        refused = await http.get(
            f"/v1/operations/{mine}:wait",
            params={"max_wait": "0.1"},
            headers={"Authorization": f"Bearer {bot}"},
        )
        assert refused.status_code == 429, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["retry-after"] == str(params.WAIT_RETRY_AFTER_SECONDS)
        assert refused.json()["type"] == "urn:jobwarden:problem:too-many-waits"

        # Another token's waits and reads are not touched by this one's cap.
        answered = await http.get(
            f"/v1/operations/{theirs}:wait",
            params={"max_wait": "0.1"},
            headers={"Authorization": f"Bearer {other}"},
        )
        assert answered.status_code == 200 and answered.json()["done"] is False

        await hang_up(writers)
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await api.ops.wait_slots.until(lambda running: running == 0)
        again = await http.get(
            f"/v1/operations/{mine}:wait",
            params={"max_wait": "0.1"},
            headers={"Authorization": f"Bearer {bot}"},
        )
        assert again.status_code == 200, again.text


async def open_stream(url: str, operation_id: str, token: str) -> asyncio.StreamWriter:
    """An event stream on its own TCP connection, left open, as a raw client sends it."""
    parts = urlsplit(url)
    _reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        (
            f"GET /v1/operations/{operation_id}/events HTTP/1.1\r\n"
            f"Host: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    return writer


async def test_event_streams_hold_the_same_slots_and_give_them_back(db: Any, db_url: str) -> None:
    """A stream stays open while the job runs (hours): uncapped, one token's streams
    filled the server's connections as its abandoned long-polls once did (a
    reviewer's second read)."""
    bot = await make_token(db, "bot")
    cap = params.MAX_WAITS_PER_CALLER
    async with served(db_url) as api, httpx.AsyncClient(base_url=api.url) as http:
        mine = await submit(api.url, bot)
        writers = [await open_stream(api.url, mine, bot) for _ in range(cap)]
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await api.ops.wait_slots.until(lambda running: running == cap)
        refused = await http.get(
            f"/v1/operations/{mine}/events", headers={"Authorization": f"Bearer {bot}"}
        )
        assert refused.status_code == 429, refused.text
        assert refused.json()["type"] == "urn:jobwarden:problem:too-many-waits"
        await hang_up(writers)
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await api.ops.wait_slots.until(lambda running: running == 0)
