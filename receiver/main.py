"""`jobwarden receiver`: the webhook receiver as a long-running service.

uvicorn owns the signals: SIGTERM/SIGINT make it stop accepting, finish the
requests in flight, then run the app's lifespan shutdown, which commits every
queued event before the process exits. systemd hears READY=1 once the socket
accepts connections, STOPPING=1 when the drain begins, and WATCHDOG=1 from the
event loop itself, so a wedged loop gets the process restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from receiver.app import build_app
from receiver.console.base import close_decision_pools
from receiver.webhooks import ingest
from shared import heap, sdnotify, telemetry
from shared.agents.mcp.http import mcp_endpoint
from shared.db.connect import create_pool
from shared.serve import serve_forever
from shared.settings import Settings

logger = logging.getLogger(__name__)

# Connections in all: the group-commit writers' own (ingest.WRITERS), then the
# shared pool's, one of them for readiness probes, the rest for agent-API
# routes and the console.
POOL_MAX_SIZE = 10
# How often to probe our own socket while waiting to announce READY=1; startup
# takes milliseconds, so this adds no visible delay.
LISTEN_PROBE_SECONDS = 0.05


async def run_receiver(
    settings: Settings,
    database_url: str,
    *,
    make_routes: Callable[[Any], Sequence[BaseRoute]] | None = None,
    reuse_port: bool = False,
    settle_heap: bool = False,
) -> None:
    """Serve webhooks until SIGTERM/SIGINT (or cancellation), then drain and stop.

    `make_routes(pool)` supplies extra routes (the agent API) sharing the pool;
    with them comes the MCP endpoint, which serves agents through that API.
    `reuse_port`: one of several workers sharing the port (receiver/workers.py).
    `settle_heap`: this process is the receiver (`jobwarden receiver`): once
    started, what start-up made leaves the collector's walks (shared/heap.py).
    Not for a receiver inside another program (a test, the demo): it would
    freeze that program's objects too.
    """
    telemetry.configure("jobwarden-receiver")  # only if OTEL_EXPORTER_OTLP_*ENDPOINT is set
    async with contextlib.AsyncExitStack() as closing:  # each closes, whatever the others do
        # last, after the lifespan's drain: exports the spans still batched
        closing.push_async_callback(telemetry.shutdown)
        # min_size=0: the receiver starts even while PostgreSQL is down, answering
        # 503 (so providers retry) and not-ready until the database is back.
        writers = await ingest.create_writer_pool(database_url)
        closing.push_async_callback(writers.close)
        shared_size = max(2, POOL_MAX_SIZE - writers.get_max_size())
        pool = await create_pool(database_url, min_size=0, max_size=shared_size)
        closing.push_async_callback(pool.close)
        # the console's own login's, if it opened one
        closing.push_async_callback(close_decision_pools, pool)
        extra = list(make_routes(pool)) if make_routes is not None else []
        # MCP over Streamable HTTP at /mcp, reaching the ledger through these API routes.
        mcp = mcp_endpoint(settings, pool, extra) if extra else None
        routes = [*extra, *mcp.routes] if mcp else extra
        app: ASGIApp = build_app(settings, pool, extra_routes=routes, writer_pool=writers)
        app = mcp.around(app) if mcp else app
        server = asyncio.create_task(
            serve_forever(
                _lifespan_hooks(app, on_started=heap.settle if settle_heap else None),
                settings.receiver_host,
                settings.receiver_port,
                reuse_port=reuse_port,
            ),
            name="receiver-server",
        )
        helpers = [
            asyncio.create_task(_announce_ready(settings, server)),
            asyncio.create_task(_watchdog()),
        ]
        try:
            await asyncio.shield(server)
        except asyncio.CancelledError:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
            raise
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
    logger.info("receiver stopped")


async def _announce_ready(settings: Settings, server: asyncio.Task[None]) -> None:
    host = _probe_host(settings.receiver_host)
    while not server.done():
        try:
            _, writer = await asyncio.open_connection(host, settings.receiver_port)
        except OSError:
            await asyncio.sleep(LISTEN_PROBE_SECONDS)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        sdnotify.notify("READY=1")
        logger.info(
            "receiver listening",
            extra={"ctx": {"host": settings.receiver_host, "port": settings.receiver_port}},
        )
        return


async def _watchdog() -> None:
    interval = sdnotify.watchdog_interval_seconds()
    if interval is None:
        return
    while True:
        sdnotify.notify("WATCHDOG=1")
        await asyncio.sleep(interval)


def _probe_host(host: str) -> str:
    """Where to connect to reach a server bound to `host` (wildcards mean loopback)."""
    if host in ("", "0.0.0.0"):  # noqa: S104 -- compared, not bound
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _lifespan_hooks(app: ASGIApp, *, on_started: Callable[[], None] | None) -> ASGIApp:
    """`on_started()` once the lifespan's start-up is complete (uvicorn imported, the
    writers and the MCP session manager running), just before uvicorn hears it;
    STOPPING=1 when uvicorn starts the lifespan shutdown (the drain)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return

        async def receive_and_watch() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                sdnotify.notify("STOPPING=1")
                logger.info("receiver stopping: draining queued events")
            return message

        async def send_and_watch(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete" and on_started is not None:
                on_started()
            await send(message)

        await app(scope, receive_and_watch, send_and_watch)

    return wrapped
