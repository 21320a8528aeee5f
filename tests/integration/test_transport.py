"""How long one provider call may take, against a real server that answers slowly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from reconciler.calls import send
from reconciler.lanes import Lane
from shared.providers import HttpRequest
from shared.serve import serve_app

CHUNKS = 5
GAP = 0.2  # each gap is under the timeout; all of them together are not
TRACE = "0" * 31 + "1"


def slow_app(arrived: asyncio.Event | None = None) -> Starlette:
    """A body in CHUNKS pieces GAP apart; `arrived` is set as each request comes in."""

    async def trickle(_: Request) -> StreamingResponse:
        if arrived is not None:
            arrived.set()

        async def body() -> AsyncIterator[bytes]:
            for _ in range(CHUNKS):
                await asyncio.sleep(GAP)  # the server's pace, not a wait of the test
                yield b"x" * 10

        return StreamingResponse(body(), media_type="application/octet-stream")

    return Starlette(routes=[Route("/slow", trickle)])


APP = slow_app()


async def test_a_call_is_bounded_as_a_whole_not_per_read() -> None:
    async with serve_app(APP) as url, Lane(4) as lane:
        req = HttpRequest("status", "GET", f"{url}/slow", {}, timeout=0.5)
        sent = await send(lane, req, TRACE)
    assert sent.response is None
    assert sent.error_category == "timeout"  # may have been delivered: a read is safe to repeat
    assert 400 <= sent.duration_ms < 900


async def test_a_result_download_may_take_longer_while_data_keeps_flowing() -> None:
    async with serve_app(APP) as url, Lane(4) as lane:
        req = HttpRequest("result", "GET", f"{url}/slow", {}, timeout=0.5)
        sent = await send(lane, req, TRACE)
    assert sent.response is not None and sent.response.status_code == 200
    assert sent.response.body == b"x" * 10 * CHUNKS


async def test_a_create_bounded_before_it_left_is_known_never_sent() -> None:
    """Waiting for a pooled connection is not delivery: the create may be retried freely."""
    arrived = asyncio.Event()
    async with serve_app(slow_app(arrived)) as url, Lane(1) as lane:  # one connection only
        busy = asyncio.ensure_future(
            send(lane, HttpRequest("result", "GET", f"{url}/slow", {}, timeout=5), TRACE)
        )
        await asyncio.wait_for(arrived.wait(), 5)  # the only connection is busy downloading
        create = HttpRequest("create", "POST", f"{url}/slow", {}, json={"n": 1}, timeout=0.3)
        sent = await send(lane, create, TRACE)
        await busy
    assert sent.response is None
    assert sent.error_category == "connect"


async def test_a_create_bounded_after_it_left_may_have_been_delivered() -> None:
    async with serve_app(APP) as url, Lane(1) as lane:
        create = HttpRequest("create", "GET", f"{url}/slow", {}, timeout=0.5)
        sent = await send(lane, create, TRACE)
    assert sent.response is None
    assert sent.error_category == "timeout"
