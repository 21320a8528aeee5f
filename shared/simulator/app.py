"""Assemble the simulated provider as a Starlette app, and serve it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.serve import serve_forever
from shared.simulator.admin import AdminApi
from shared.simulator.api import ProviderApi
from shared.simulator.clock import Clock
from shared.simulator.runtime import Simulation
from shared.simulator.settings import SimulatorSettings
from shared.simulator.state import new_id

# Create bodies are small JSON documents; refuse anything larger than this.
MAX_BODY_BYTES = 1024 * 1024


class RequestIdMiddleware:
    """Stamp every response with a provider request id, as real providers do.

    Plain ASGI rather than BaseHTTPMiddleware: it must not buffer or cancel
    the deliberately hanging create of lost_create_response.
    """

    def __init__(self, app: ASGIApp, header: str = "X-Request-Id") -> None:
        self.app = app
        self.header = header

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = new_id("req")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append(self.header, request_id)
            await send(message)

        await self.app(scope, receive, send_with_id)


def build_app(settings: SimulatorSettings, clock: Clock | None = None) -> Starlette:
    """The provider as an ASGI app; pass a `clock` to move its time by hand (tests)."""
    simulation = Simulation(settings, clock)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with simulation.running():
            yield

    app = Starlette(
        routes=[*ProviderApi(simulation).routes(), *AdminApi(simulation).routes()],
        middleware=[Middleware(RequestIdMiddleware, header=settings.shape.request_id_header)],
        lifespan=lifespan,
        max_body_size=MAX_BODY_BYTES,
    )
    app.state.simulation = simulation
    return app


async def main_async(host: str, port: int, settings: SimulatorSettings) -> None:
    """Serve the simulated provider until SIGINT/SIGTERM or cancellation."""
    await serve_forever(build_app(settings), host, port)
