"""Run an ASGI app on a real uvicorn server inside the current event loop.

Tests and the demo need *real* HTTP on loopback (the failure modes we care about
— timeouts, dropped responses, concurrent calls — do not exist in an in-process
transport), but they also need to know the port before talking to it and to
stop the server deterministically. Binding the socket ourselves gives the port
up front; polling `server.started` replaces "sleep and hope".
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import ASGIApp

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


class ServerStartError(RuntimeError):
    """The server stopped before it started listening (bad app startup, port in use)."""


def _config(app: ASGIApp, *, host: str, port: int, log_level: str) -> uvicorn.Config:
    # log_config=None: keep the host process's logging setup (JSON logs, pytest
    # capture) instead of letting uvicorn install its own handlers.
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


async def _run(server: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
    # uvicorn reports startup failure with sys.exit(); inside a task that
    # SystemExit would tear through the whole event loop, so make it an error.
    try:
        await server.serve(sockets=sockets)
    except SystemExit as exc:
        raise ServerStartError(f"server exited during startup (code {exc.code})") from exc


async def _wait_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    async with asyncio.timeout(STARTUP_TIMEOUT_SECONDS):
        while not server.started:
            if task.done():
                task.result()  # re-raises the startup error
                raise ServerStartError("server stopped before it started listening")
            await asyncio.sleep(STARTUP_POLL_SECONDS)


@asynccontextmanager
async def serve_app(app: ASGIApp, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve `app` for the duration of the block and yield its base URL.

    Port 0 picks a free ephemeral port, so parallel test runs never collide.
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

    server = uvicorn.Server(_config(app, host=host, port=bound_port, log_level="warning"))
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


async def serve_forever(app: ASGIApp, host: str, port: int, *, log_level: str = "info") -> None:
    """Serve `app` until SIGINT/SIGTERM (handled by uvicorn) or until cancelled.

    On cancellation the server is asked to stop and is awaited, so the port and
    in-flight requests are released before the cancellation propagates.
    """
    server = uvicorn.Server(_config(app, host=host, port=port, log_level=log_level))
    task = asyncio.create_task(_run(server))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        server.should_exit = True
        await task
        raise
