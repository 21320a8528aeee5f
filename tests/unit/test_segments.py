"""Responses leave as one segment (shared/segments.py).

The transport below records what reaches "the wire"; the protocol in the
last tests is uvicorn's own (httptools and h11), as the project serves.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from uvicorn.server import ServerState

from shared.segments import MAX_PENDING_BYTES, OneSegment
from shared.serve import _http_protocol, stack_of


class Wire:
    """A transport that keeps each write as one segment."""

    def __init__(self) -> None:
        self.segments: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.segments.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def write_eof(self) -> None:
        self.segments.append(b"<eof>")

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _next_step() -> None:
    await asyncio.sleep(0)


async def test_writes_of_one_step_leave_together_and_in_order() -> None:
    wire = Wire()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"HTTP/1.1 200 OK\r\n\r\n")
    out.write(b"")
    out.write(bytearray(b"{}"))
    assert wire.segments == []  # nothing held past this step, nothing sent during it
    assert out.get_write_buffer_size() == 21
    await _next_step()
    assert wire.segments == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    out.write(b"next")
    await _next_step()
    assert wire.segments[1:] == [b"next"]


async def test_close_sends_what_is_pending_first_and_abort_drops_it() -> None:
    wire = Wire()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"last words")
    out.close()
    assert wire.segments == [b"last words"] and wire.closed
    await _next_step()  # the scheduled flush finds nothing left
    assert wire.segments == [b"last words"]

    wire = Wire()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"never")
    out.abort()
    await _next_step()
    assert wire.segments == [] and wire.aborted


async def test_the_end_of_the_stream_comes_after_what_was_written() -> None:
    wire = Wire()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"body")
    out.write_eof()
    assert wire.segments == [b"body", b"<eof>"]


async def test_a_large_body_goes_out_without_waiting_for_the_step() -> None:
    wire = Wire()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"head")
    out.write(b"x" * MAX_PENDING_BYTES)
    assert wire.segments == [b"head" + b"x" * MAX_PENDING_BYTES]
    assert out.get_write_buffer_size() == 0


async def test_nothing_is_written_to_a_transport_already_closing() -> None:
    wire = Wire()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(b"too late")
    wire.aborted = True  # the peer went away before the step ended
    await _next_step()
    assert wire.segments == []


async def _json(request: Request) -> Response:
    await request.body()
    return JSONResponse({"status": "stored", "matched": False})


async def _stream(request: Request) -> Response:
    async def chunks() -> Any:
        for part in (b"one,", b"two,", b"three"):
            yield part
            await asyncio.sleep(0)

    return StreamingResponse(chunks(), media_type="text/plain")


APP = Starlette(routes=[Route("/x", _json, methods=["POST"]), Route("/s", _stream)])


async def _serve(http: str, request: bytes, until: bytes) -> list[bytes]:
    """One connection of uvicorn's own `http` protocol, as shared/serve.py builds it."""
    config = uvicorn.Config(APP, http=_http_protocol(http), log_config=None, lifespan="off")
    config.load()
    assert str(stack_of(config)).startswith(http)  # the stack still names uvicorn's parser
    protocol = config.http_protocol_class(config, ServerState(), {})
    wire = Wire()
    protocol.connection_made(wire)
    protocol.data_received(request)
    async with asyncio.timeout(5):
        while not b"".join(wire.segments).endswith(until):
            await _next_step()
    protocol.connection_lost(None)
    return wire.segments


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_response_with_a_body_is_one_segment(http: str) -> None:
    body = b'{"job_id":"job_1"}'
    request = (
        b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    segments = await _serve(http, request, b'"matched":false}')
    assert len(segments) == 1
    assert segments[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert segments[0].endswith(b'\r\n\r\n{"status":"stored","matched":false}')


async def test_a_peers_end_of_stream_sends_what_this_step_wrote_first() -> None:
    """A client that half-closes after its request: the real transport may close
    itself once the protocol hears the end, so the pending answer leaves before."""
    config = uvicorn.Config(APP, http=_http_protocol("httptools"), log_config=None)
    config.load()
    protocol = config.http_protocol_class(config, ServerState(), {})
    wire = Wire()
    protocol.connection_made(wire)
    protocol.transport.write(b"HTTP/1.1 200 OK\r\n\r\n")  # written in this step
    protocol.eof_received()
    assert wire.segments == [b"HTTP/1.1 200 OK\r\n\r\n"]
    protocol.connection_lost(None)


async def test_a_failing_flush_still_closes_the_real_transport() -> None:
    class Broken(Wire):
        def write(self, data: bytes) -> None:
            raise RuntimeError("the socket is gone")

    wire = Broken()
    out = OneSegment(wire, asyncio.get_running_loop())  # type: ignore[arg-type]
    out.write(memoryview(b"abcd").cast("B"))
    assert out.get_write_buffer_size() == 4
    with pytest.raises(RuntimeError):
        out.close()
    assert wire.closed


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_streamed_body_still_goes_out_as_it_is_produced(http: str) -> None:
    segments = await _serve(http, b"GET /s HTTP/1.1\r\nhost: t\r\n\r\n", b"0\r\n\r\n")
    assert len(segments) >= 3  # each chunk leaves in the step that produced it
    assert b"".join(segments).endswith(b"5\r\nthree\r\n0\r\n\r\n")
