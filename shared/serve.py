"""Run an ASGI app on a real uvicorn server inside the current event loop.

Tests and the demo need *real* HTTP on loopback (the failure modes we care about
— timeouts, dropped responses, concurrent calls — do not exist in an in-process
transport), but they also need to know the port before talking to it and to
stop the server deterministically. Binding the socket ourselves gives the port
up front; polling `server.started` replaces "sleep and hope".

Every server and daemon runs on the fast stack production gets from
`uvicorn[standard]`: the httptools parser and the uvloop event loop (`run`).
Both are chosen here, once, so tests, benchmarks and deployments all measure
the same thing; each server says at startup which parser and loop it uses.
uvicorn is imported only where a server is built: the operator's short
commands go through `run` too and should not pay for it.

Every server also gets the bounds uvicorn leaves out (shared/http_limits.py):
a cap on a request head's size, a deadline for receiving it, a cap on
connections, and a budget for the warnings clients can make it log.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.types import ASGIApp

if TYPE_CHECKING:
    import uvicorn

    from shared.http_limits import ServerLimits

logger = logging.getLogger(__name__)

T = TypeVar("T")

# uvicorn's HTTP/1.1 parsers: httptools (C, llhttp) is what `uvicorn[standard]`
# installs; h11 (pure Python) is uvicorn's fallback, at about half the req/s.
HTTP_FAST, HTTP_FALLBACK = "httptools", "h11"
LOOP_FAST, LOOP_FALLBACK = "uvloop", "asyncio"

# How long `serve_app` waits for lifespan startup + listen before giving up.
# Startup is milliseconds on loopback; five seconds only absorbs a loaded CI box.
STARTUP_TIMEOUT_SECONDS = 5.0
# Poll interval while waiting for `server.started`: short enough to add no
# noticeable latency to a test, long enough not to spin the loop.
STARTUP_POLL_SECONDS = 0.005
# A request still running at shutdown (e.g. a simulated create that hangs on
# purpose) is cancelled after this long, so tearing a server down never blocks
# a test run for the full length of such a request.
GRACEFUL_SHUTDOWN_SECONDS = 5
# uvicorn's own default, for sockets we bind ourselves.
LISTEN_BACKLOG = 2048


class ServerStartError(RuntimeError):
    """The server stopped before it started listening (bad app startup, port in use)."""


@dataclass(frozen=True)
class Stack:
    """The HTTP parser and event loop something ran on.

    Throughput depends on both (httptools serves about twice h11's req/s), so
    a figure means little without them, and two figures compare only when
    they ran on the same stack.
    """

    http: str
    loop: str

    def __str__(self) -> str:
        return f"{self.http} on {self.loop}"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def http_parser() -> str:
    """The parser uvicorn is told to use: httptools when installed, else h11.

    Named explicitly rather than uvicorn's "auto", so the choice is ours,
    logged, and the same in every server of the project.
    """
    return HTTP_FAST if _installed(HTTP_FAST) else HTTP_FALLBACK


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """ "uvloop" or "asyncio": which implementation `loop` (default: the running one) is."""
    current = loop if loop is not None else asyncio.get_running_loop()
    return LOOP_FAST if type(current).__module__.startswith("uvloop") else LOOP_FALLBACK


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's default loop) with a warning if missing.

    uvloop is a dependency (through uvicorn[standard]); a missing one means a
    slower deployment, worth a line in the log, not a refusal to start.
    """
    try:
        import uvloop
    except ImportError:
        logger.warning(
            "uvloop is not installed: running on the asyncio event loop "
            "(install uvicorn[standard] for the fast stack)"
        )
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, on uvloop when installed: every command's event loop.

    `asyncio.Runner` with a loop factory is what `uvloop.run` does too; with
    no factory it is exactly `asyncio.run`.
    """
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)


def stack_of(config: uvicorn.Config) -> Stack:
    """The parser a loaded uvicorn config serves with, and the running loop.

    Read from the protocol class uvicorn actually loaded
    (uvicorn.protocols.http.httptools_impl -> "httptools"), not from what
    was asked for.
    """
    module = _uvicorn_base(config.http_protocol_class).__module__.rsplit(".", 1)[-1]
    return Stack(module.removesuffix("_impl"), loop_name())


def _uvicorn_base(cls: type) -> type:
    """The uvicorn protocol class `cls` is (or extends: `segments.one_segment_protocol`)."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("uvicorn.protocols.http."):
            return klass
    return cls


def _http_protocol(http: str) -> type:
    """uvicorn's protocol class for parser `http`, with the limits of
    shared/http_limits.py, writing each response as one segment (shared/segments.py)."""
    from shared.http_limits import limited_protocol
    from shared.segments import one_segment_protocol

    return one_segment_protocol(limited_protocol(http))


def _config(
    app: ASGIApp, *, host: str, port: int, log_level: str, limits: ServerLimits | None = None
) -> uvicorn.Config:
    from shared.http_limits import LimitedConfig, ServerLimits

    http = http_parser()
    if http != HTTP_FAST:
        logger.warning("httptools is not installed: uvicorn parses HTTP with h11 (slower)")
    # log_config=None: keep the host process's logging setup (JSON logs, pytest
    # capture) instead of letting uvicorn install its own handlers. `loop` only
    # matters to uvicorn.run (we serve inside a running loop); it names that loop.
    return LimitedConfig(
        app,
        limits if limits is not None else ServerLimits(),
        host=host,
        port=port,
        http=_http_protocol(http),
        loop=loop_name(),
        log_config=None,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def _server(
    app: ASGIApp, *, host: str, port: int, log_level: str, limits: ServerLimits | None = None
) -> uvicorn.Server:
    """A uvicorn server, its config loaded, after a startup line naming its stack."""
    import uvicorn

    config = _config(app, host=host, port=port, log_level=log_level, limits=limits)
    config.load()
    stack = stack_of(config)
    logger.info(
        "serving HTTP with %s",
        stack,
        extra={"ctx": {"host": host, "port": port, "http": stack.http, "loop": stack.loop}},
    )
    return uvicorn.Server(config)


async def _run(server: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
    # uvicorn reports startup failure with sys.exit(); inside a task that
    # SystemExit would tear through the whole event loop, so make it an error.
    from shared.http_limits import close_budget

    try:
        await server.serve(sockets=sockets)
    except SystemExit as exc:
        raise ServerStartError(f"server exited during startup (code {exc.code})") from exc
    finally:
        close_budget(server.config)  # the count of warnings held back, before we go


async def _wait_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    async with asyncio.timeout(STARTUP_TIMEOUT_SECONDS):
        while not server.started:
            if task.done():
                task.result()  # re-raises the startup error
                raise ServerStartError("server stopped before it started listening")
            await asyncio.sleep(STARTUP_POLL_SECONDS)


@asynccontextmanager
async def serve_app(
    app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, limits: ServerLimits | None = None
) -> AsyncIterator[str]:
    """Serve `app` for the duration of the block and yield its base URL.

    Port 0 picks a free ephemeral port, so parallel test runs never collide.
    `limits` replaces shared/http_limits.py's (tests make them small).
    """
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets
    # whose proto says TCP, and proto 0 would leave Nagle + delayed ACK adding
    # ~40 ms to every keep-alive request.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    bound_port: int = sock.getsockname()[1]

    server = _server(app, host=host, port=bound_port, log_level="warning", limits=limits)
    task = asyncio.create_task(_run(server, [sock]))
    try:
        await _wait_started(server, task)
        yield f"http://{host}:{bound_port}"
    finally:
        server.should_exit = True
        try:
            await task
        finally:
            sock.close()


async def serve_forever(
    app: ASGIApp, host: str, port: int, *, log_level: str = "info", reuse_port: bool = False
) -> None:
    """Serve `app` until SIGINT/SIGTERM (handled by uvicorn) or until cancelled.

    On cancellation the server is asked to stop and is awaited, so the port and
    in-flight requests are released before the cancellation propagates.
    `reuse_port` binds with SO_REUSEPORT, so several processes share the port
    and the kernel spreads connections among them (receiver/workers.py).
    """
    server = _server(app, host=host, port=port, log_level=log_level)
    sockets = [_reuse_port_socket(host, port)] if reuse_port else None
    task = asyncio.create_task(_run(server, sockets))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        server.should_exit = True
        await task
        raise


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
