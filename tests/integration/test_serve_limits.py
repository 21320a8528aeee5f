"""The bounds every server gets from shared/serve.py (shared/http_limits.py), over real sockets.

Each test starts a server through `serve_app` on loopback, on httptools (what
production runs) and on h11 (the fallback), and talks raw HTTP/1.1 to it: the
cases are requests no well-behaved client library would send. Nothing waits
on time passing: a test waits for the server's answer or its end of stream,
with a bound far above the injected limit, and a deadline's passing is seen
as another connection's being closed by it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from starlette.types import Receive, Scope, Send

from shared import serve
from shared.http_limits import MAX_HEAD_BYTES, UVICORN_ERROR_LOGGER, ServerLimits
from shared.serve import serve_app

# Bound on waiting for an answer or an end of stream the test set up; far
# above every injected deadline, generous for a loaded CI box.
WAIT_SECONDS = 10.0
# A deadline short enough to keep the tests quick; the waits are 50x longer.
SHORT_DEADLINE = 0.2
# Bytes sent past the cap: a server that enforces it answers without them.
MARGIN = 4096
INVALID = "Invalid HTTP request received."


@pytest.fixture(params=["httptools", "h11"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which HTTP parser the servers of the test use (h11: as if httptools were missing)."""
    name: str = request.param
    if name == "h11":
        monkeypatch.setattr(serve, "_installed", lambda module: False)
    return name


@dataclass
class Held:
    """Requests to /hold wait in the app until `release`; `arrived` is set once
    `expected` of them are in."""

    expected: int = 1
    count: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


class App:
    """/hold: waits for the test's signal; anything else: 200, the body's length."""

    def __init__(self, held: Held | None = None) -> None:
        self.held = held or Held()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return
        size = 0
        more = True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        if scope["path"] == "/hold":
            self.held.count += 1
            if self.held.count == self.held.expected:
                self.held.arrived.set()
            await self.held.release.wait()
        body = str(size).encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


class Client:
    """One raw connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> Response:
        """The next response on the connection (its body by Content-Length, or
        up to the end of stream: h11's own refusals have none)."""
        async with asyncio.timeout(WAIT_SECONDS):
            head = await self.reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.decode("latin-1").split("\r\n")[:-2]
            headers = {}
            for line in lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if "content-length" in headers:
                body = await self.reader.readexactly(int(headers["content-length"]))
            else:
                assert headers.get("connection") == "close", headers
                body = await self.reader.read()
        return Response(int(status_line.split()[1]), headers, body)

    async def eof(self) -> bytes:
        """What the server sends until it closes the connection."""
        async with asyncio.timeout(WAIT_SECONDS):
            return await self.reader.read()

    async def closed_after(self) -> Response:
        """The one response before the server closes the connection."""
        answer = await self.response()
        assert answer.headers.get("connection") == "close"
        assert await self.eof() == b""
        return answer


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Client]:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        yield Client(reader, writer)
    finally:
        writer.close()


def _get(path: str = "/", extra: bytes = b"") -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nhost: t\r\n" + extra + b"\r\n"


def _post(body: bytes, extra: bytes = b"") -> bytes:
    length = b"content-length: %d\r\n" % len(body)
    return b"POST / HTTP/1.1\r\nhost: t\r\n" + length + extra + b"\r\n" + body


def _padding(size: int) -> bytes:
    """A header line of `size` bytes in all (CRLF included)."""
    return b"x-pad: " + b"a" * (size - 9) + b"\r\n"


class Lines(logging.Handler):
    """The records uvicorn's protocol logger (and the budget's report) reach."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.reported = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if "not logged" in record.getMessage():
            self.reported.set()  # emitted on the server's (this) event loop

    def invalid(self) -> int:
        return sum(record.getMessage() == INVALID for record in self.records)

    def suppressed(self) -> list[int]:
        return [int(r.getMessage().split()[0]) for r in self.records if "not logged" in r.msg]


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger(UVICORN_ERROR_LOGGER)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


# ------------------------------------------------------------------ head size


@pytest.mark.parametrize("shape", ["url", "header"])
async def test_a_head_past_the_cap_is_refused_before_more_is_sent(parser: str, shape: str) -> None:
    """The reviewer's 200 MB unfinished head: answered within the cap plus a margin."""
    start = b"GET /" if shape == "url" else b"GET / HTTP/1.1\r\nhost: t\r\nx-big: "
    async with serve_app(App()) as url, connect(url) as client:
        await client.send(start + b"a" * (MAX_HEAD_BYTES + MARGIN - len(start)))
        answer = await client.closed_after()  # nothing more is sent: the server must act
    assert answer.status == 431


async def test_a_finished_head_past_the_cap_is_refused(parser: str) -> None:
    async with serve_app(App()) as url, connect(url) as client:
        await client.send(_get(extra=_padding(MAX_HEAD_BYTES + MARGIN)))
        answer = await client.closed_after()
    assert answer.status == 431


async def test_heads_under_the_cap_are_served_with_bodies_sharing_their_reads(parser: str) -> None:
    """A big head, its body in the same write, and a pipelined request behind it:
    only head bytes count, however the reads split them."""
    big_head = _padding(MAX_HEAD_BYTES - 1024)
    body = b"b" * (256 * 1024)
    async with serve_app(App()) as url, connect(url) as client:
        await client.send(_post(body, big_head) + _post(body, big_head) + _get(extra=big_head))
        answers = [await client.response() for _ in range(3)]
    assert [(a.status, a.body) for a in answers] == [(200, b"262144")] * 2 + [(200, b"0")]


# ------------------------------------------------------------------ head deadline


async def test_an_unfinished_head_is_answered_408_at_the_deadline(parser: str) -> None:
    limits = ServerLimits(head_timeout=SHORT_DEADLINE)
    async with serve_app(App(), limits=limits) as url, connect(url) as client:
        await client.send(b"GET / HTTP/1.1\r\nhost: t\r\nx-slow: ")
        answer = await client.closed_after()
    assert answer.status == 408


async def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(parser: str) -> None:
    limits = ServerLimits(head_timeout=SHORT_DEADLINE)
    async with serve_app(App(), limits=limits) as url, connect(url) as client:
        assert await client.eof() == b""


async def test_the_next_head_on_a_kept_alive_connection_has_the_same_deadline(
    parser: str,
) -> None:
    limits = ServerLimits(head_timeout=SHORT_DEADLINE)
    async with serve_app(App(), limits=limits) as url, connect(url) as client:
        await client.send(_get())
        first = await client.response()
        await client.send(b"GET / HTTP/1.1\r\nho")
        second = await client.closed_after()
    assert (first.status, second.status) == (200, 408)


async def test_a_request_the_app_is_still_answering_outlives_the_deadline(parser: str) -> None:
    """The held request's connection stays open past the deadline: a probe
    connection opened after it was closed by the same deadline first."""
    app = App()
    limits = ServerLimits(head_timeout=SHORT_DEADLINE)
    async with serve_app(app, limits=limits) as url, connect(url) as held:
        await held.send(_get("/hold"))
        async with asyncio.timeout(WAIT_SECONDS):
            await app.held.arrived.wait()
        async with connect(url) as probe:
            assert await probe.eof() == b""  # the deadline has passed
        app.held.release.set()
        answer = await held.response()
        await held.send(_get())  # and the connection still serves
        again = await held.response()
    assert (answer.status, again.status) == (200, 200)


# ------------------------------------------------------------------ body deadline


def _posting(declared: int, sent: bytes) -> bytes:
    return (b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: %d\r\n\r\n" % declared) + sent


async def test_a_body_that_never_completes_is_answered_408_and_the_connection_closed(
    parser: str,
) -> None:
    """A client declaring more body than it sends held the connection, and the
    handler awaiting the rest, for as long as it kept the socket open."""
    limits = ServerLimits(head_timeout=SHORT_DEADLINE, body_timeout=SHORT_DEADLINE)
    async with serve_app(App(), limits=limits) as url, connect(url) as client:
        await client.send(_posting(100, b'{"job_id":'))
        answer = await client.closed_after()
    assert answer.status == 408


async def test_a_body_that_arrives_within_its_allowance_is_served(parser: str) -> None:
    """Past the head's deadline but within the body's: served (and the head
    clock starts again for the next request on the connection)."""
    limits = ServerLimits(head_timeout=SHORT_DEADLINE, body_timeout=WAIT_SECONDS)
    async with serve_app(App(), limits=limits) as url, connect(url) as client:
        await client.send(_posting(20, b"0123456789"))
        async with connect(url) as probe:
            assert await probe.eof() == b""  # the head's deadline has passed meanwhile
        await client.send(b"0123456789")
        answer = await client.response()
        await client.send(_get())
        again = await client.response()
    assert (answer.status, answer.body, again.status) == (200, b"20", 200)


async def test_a_pipelined_body_waiting_behind_a_held_request_is_not_cut(parser: str) -> None:
    """The second request's body cannot be read while the first is answered
    (httptools pauses reading): it is not late, and neither request is cut.
    (The first version cut the held request and reset the connection.)"""
    app = App()
    limits = ServerLimits(head_timeout=SHORT_DEADLINE, body_timeout=SHORT_DEADLINE)
    async with serve_app(app, limits=limits) as url, connect(url) as client:
        await client.send(_get("/hold") + _posting(200_000, b""))
        async with asyncio.timeout(WAIT_SECONDS):
            await app.held.arrived.wait()
        await client.send(b"a" * 200_000)
        for _ in range(3):  # each closed at the head's deadline: both have passed meanwhile
            async with connect(url) as probe:
                assert await probe.eof() == b""
        app.held.release.set()
        first = await client.response()
        second = await client.response()
    assert (first.status, first.body, second.status, second.body) == (200, b"0", 200, b"200000")


# ------------------------------------------------------------------ connection cap


async def test_past_the_connection_cap_requests_are_answered_503(parser: str) -> None:
    app = App(Held(expected=2))
    limits = ServerLimits(max_concurrency=3)
    async with serve_app(app, limits=limits) as url, connect(url) as one, connect(url) as two:
        await one.send(_get("/hold"))
        await two.send(_get("/hold"))
        async with asyncio.timeout(WAIT_SECONDS):
            await app.held.arrived.wait()
        async with connect(url) as third:
            await third.send(_get())
            refused = await third.closed_after()
        app.held.release.set()
        served = [(await one.response()).status, (await two.response()).status]
    assert refused.status == 503
    assert served == [200, 200]


async def test_the_benchmarks_load_is_never_refused(parser: str) -> None:
    """64 connections (the most a benchmark drives), all in the app at once."""
    connections = 64
    app = App(Held(expected=connections))
    async with serve_app(app) as url:

        async def one() -> int:
            async with connect(url) as client:
                await client.send(_get("/hold"))
                return (await client.response()).status

        requests = [asyncio.create_task(one()) for _ in range(connections)]
        async with asyncio.timeout(WAIT_SECONDS):
            await app.held.arrived.wait()  # all of them in the app, none refused
        app.held.release.set()
        statuses = await asyncio.gather(*requests)
    assert statuses == [200] * connections


# ------------------------------------------------------------------ warning budget


async def _garbage(url: str, times: int) -> None:
    for _ in range(times):
        async with connect(url) as client:
            await client.send(b"NOT HTTP AT ALL\r\n\r\n")
            assert (await client.closed_after()).status == 400


async def test_malformed_requests_log_within_the_budget_then_one_count(
    parser: str, lines: Lines
) -> None:
    limits = ServerLimits(warning_lines=3)  # per minute: all of this in one window
    async with serve_app(App(), limits=limits) as url:
        await _garbage(url, 10)
        logged_while_serving = lines.invalid()
    assert logged_while_serving == 3
    assert lines.suppressed() == [7]  # reported as the server stopped
    assert lines.invalid() == 3


async def test_the_count_of_lines_held_back_is_logged_when_the_window_ends(
    parser: str, lines: Lines
) -> None:
    limits = ServerLimits(warning_lines=2, warning_window=SHORT_DEADLINE)
    async with serve_app(App(), limits=limits) as url:
        await _garbage(url, 6)
        async with asyncio.timeout(WAIT_SECONDS):
            await lines.reported.wait()  # on the window's timer, the server still up
    # However the six fell into windows, each is either logged or counted.
    assert lines.invalid() + sum(lines.suppressed()) == 6
    assert lines.suppressed() and lines.invalid() >= 2
