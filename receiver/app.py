"""The receiver's Starlette application: webhooks, health, readiness, metrics.

The app owns its group-commit writer (started and drained by the lifespan) and
its metrics registry; the database pool is the caller's. Agent-API routes are
passed in by the caller as `extra_routes` and share the same pool.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from receiver.health import HealthEndpoints
from receiver.metrics import ReceiverMetrics
from receiver.webhooks import ingest, refusals
from receiver.webhooks.endpoint import WebhookEndpoint
from receiver.webhooks.ingest import BatchReport, Ingestor
from shared.settings import Settings
from shared.telemetry import spans

WEBHOOK_PREFIX = "/webhooks/"
# Starlette's patterns for "/webhooks/{provider}" and "/webhooks/{provider}/".
_WEBHOOK_ROUTE = re.compile(r"^/webhooks/([^/]+)/?$")


class ReceiverApp(Starlette):
    """Starlette, with webhook deliveries handed straight to their endpoint.

    A delivery is the one request a provider sends by the thousand, and the
    framework's layers cost about a tenth of its CPU in the receiver
    (`bench.receiver` profile) while doing nothing for it: the endpoint takes
    every method, refuses and answers by itself, and raises no HTTPException.
    So `/webhooks/{provider}` and `/webhooks/{provider}/` skip the middleware
    and the router, matched exactly as their routes match (a non-empty
    segment without `/`). An exception the endpoint lets escape (a bug) is
    answered 500 and logged by the server, as the error middleware would.
    Everything else takes the full stack, and so does every request under a
    `root_path` or once middleware, an exception handler, debug or a body limit
    has been added to the app. The webhook routes are fixed here: the direct
    way calls the endpoint they were built with.
    """

    def __init__(
        self, *, webhooks: ASGIApp, routes: Sequence[BaseRoute], lifespan: Lifespan[Any]
    ) -> None:
        super().__init__(routes=routes, lifespan=lifespan)
        self._webhooks = webhooks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path") and self._bare():
            provider = webhook_provider(scope["path"])
            if provider is not None:
                scope["app"] = self
                scope["endpoint"] = self._webhooks
                scope["path_params"] = {**scope.get("path_params", {}), "provider": provider}
                await self._webhooks(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _bare(self) -> bool:
        """Nothing was added that the full stack would apply to a delivery: middleware,
        exception handlers (the error middleware takes a 500 one), debug pages, a
        body limit."""
        added = self.user_middleware or self.exception_handlers or self.debug
        return not added and self.max_body_size is None


def webhook_provider(path: str) -> str | None:
    """The provider segment of a webhook route's path, or None for any other path.

    The two routes' own patterns in one (`$` included, which also matches
    before a final newline, a decoded `%0A`), so both ways agree on every path.
    """
    if not path.startswith(WEBHOOK_PREFIX):
        return None
    match = _WEBHOOK_ROUTE.match(path)
    return None if match is None else match[1]


def _writers_for(pool: Any, writer_pool: Any) -> int:
    """One writer per connection of the writers' own pool; on a shared pool, as many
    as it can feed while leaving a connection for probes and the agent API."""
    if writer_pool is not None:
        size: int = writer_pool.get_max_size()
        return max(1, size)
    size = pool.get_max_size() if hasattr(pool, "get_max_size") else ingest.WRITERS + 1
    return max(1, min(ingest.WRITERS, size - 1))


def build_app(
    settings: Settings,
    pool: Any,
    *,
    now: Callable[[], float] = time.time,
    extra_routes: Sequence[BaseRoute] = (),
    writer_pool: Any = None,
) -> ReceiverApp:
    """The receiver app; `now` (unix seconds) is the clock of the replay window.

    `writer_pool`: the group-commit writers' own connections
    (`ingest.create_writer_pool`, as `jobwarden receiver` runs); without it
    the writers share `pool`.
    """
    webhook_providers = [n for n, d in settings.providers.items() if d.webhooks is not None]
    metrics = ReceiverMetrics(webhook_providers)

    def on_batch(report: BatchReport) -> None:
        metrics.batch_size.observe(report.size)
        metrics.commit_seconds.observe(report.seconds)

    def on_db_error(kind: str) -> None:
        metrics.db_errors.labels(kind).inc()

    ingestor = Ingestor(
        pool if writer_pool is None else writer_pool,
        acquire_timeout=settings.db_acquire_timeout,
        writers=_writers_for(pool, writer_pool),
        on_batch=on_batch,
        on_db_error=on_db_error,
    )
    metrics.queue_depth.set_function(lambda: ingestor.queued)
    refused = refusals.RefusalRecorder(
        pool,
        acquire_timeout=settings.db_acquire_timeout,
        now=now,
        flush_seconds=refusals.FLUSH_SECONDS,
    )
    webhooks = WebhookEndpoint(
        settings.providers,
        ingestor,
        metrics,
        refused,
        max_body_bytes=settings.max_body_bytes,
        now=now,
        public_url=settings.public_webhook_url,
    )
    health = HealthEndpoints(
        pool, ingestor, metrics, settings.db_acquire_timeout, writer_pool=writer_pool
    )
    receipts = spans.webhook_receipts(webhooks)  # `webhooks` itself unless tracing is on

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ingestor.start()
        refused.start()
        try:
            yield
        finally:
            # uvicorn has stopped accepting and finished in-flight requests by
            # now; whatever is still queued gets committed before we exit.
            try:
                await ingestor.close()
            finally:
                await refused.close()

    routes: list[BaseRoute] = [
        # Both spellings are the same endpoint (no redirect: providers do not
        # follow one). Every method reaches it, so a wrong one is refused,
        # counted and logged like any other delivery (405).
        Route("/webhooks/{provider}", receipts),
        Route("/webhooks/{provider}/", receipts),
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", health.readyz, methods=["GET"]),
        Route("/metrics", health.metrics, methods=["GET"]),
        *extra_routes,
    ]
    app = ReceiverApp(webhooks=receipts, routes=routes, lifespan=lifespan)
    app.state.metrics = metrics
    app.state.ingestor = ingestor
    app.state.refusals = refused
    return app
