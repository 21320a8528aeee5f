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


async def trickle(_: Request) -> StreamingResponse:
    """A body in CHUNKS pieces GAP apart. Wall-clock time is the input here: httpx's
    timeouts read the real clock, so the gaps cannot be an injected clock's."""

    async def body() -> AsyncIterator[bytes]:
        for _ in range(CHUNKS):
            await asyncio.sleep(GAP)
            yield b"x" * 10

    return StreamingResponse(body(), media_type="application/octet-stream")


def held_app(arrived: asyncio.Event, release: asyncio.Event) -> Starlette:
    """Sets `arrived` when a request comes in, and answers only once `release` is set."""

    async def held(_: Request) -> StreamingResponse:
        arrived.set()

        async def body() -> AsyncIterator[bytes]:
            await release.wait()
            yield b"done"

        return StreamingResponse(body(), media_type="application/octet-stream")

    return Starlette(routes=[Route("/held", held)])


APP = Starlette(routes=[Route("/slow", trickle)])


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
    arrived, release = asyncio.Event(), asyncio.Event()
    async with serve_app(held_app(arrived, release)) as url, Lane(1) as lane:  # one connection
        busy = asyncio.ensure_future(
            send(lane, HttpRequest("result", "GET", f"{url}/held", {}, timeout=5), TRACE)
        )
        await asyncio.wait_for(arrived.wait(), 5)  # the only connection is busy downloading
        create = HttpRequest("create", "POST", f"{url}/held", {}, json={"n": 1}, timeout=0.3)
        sent = await send(lane, create, TRACE)
        release.set()
        downloaded = await busy
    assert sent.response is None
    assert sent.error_category == "connect"
    assert downloaded.response is not None and downloaded.response.body == b"done"


async def test_a_create_bounded_after_it_left_may_have_been_delivered() -> None:
    async with serve_app(APP) as url, Lane(1) as lane:
        create = HttpRequest("create", "GET", f"{url}/slow", {}, timeout=0.5)
        sent = await send(lane, create, TRACE)
    assert sent.response is None
    assert sent.error_category == "timeout"
