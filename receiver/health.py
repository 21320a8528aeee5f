"""Liveness, readiness and metrics endpoints.

`/healthz` says only that the process answers (a restart is the cure when it
does not). `/readyz` says whether a load balancer should send webhooks here:
the database answers, on the shared pool and on the group-commit writers' own
connections, its schema is the one this code expects, and the receiver is not
shutting down. The writers' connections are probed only while no writer holds
one: a writer at work has its own answer every batch, and a probe waiting
for its connection under load would report a busy receiver as unready.
Neither endpoint names a host, a database or a migration file: they are often
reachable by more people than operators.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from receiver.metrics import CONTENT_TYPE_LATEST, ReceiverMetrics
from receiver.webhooks.ingest import Ingestor
from shared.db.migrate import MigrationError, NewerSchema, pending_migrations
from shared.db.queries import q
from shared.failure_streak import FailureStreak

logger = logging.getLogger(__name__)

# A readiness probe must answer before the prober's own timeout (often 1-5 s),
# whatever state the database is in.
READY_QUERY_TIMEOUT_SECONDS = 2.0


class HealthEndpoints:
    def __init__(
        self,
        pool: Any,
        ingestor: Ingestor,
        metrics: ReceiverMetrics,
        acquire_timeout: float,
        *,
        writer_pool: Any = None,
    ) -> None:
        self._pool = pool
        self._writer_pool = writer_pool
        self._ingestor = ingestor
        self._metrics = metrics
        self._acquire_timeout = acquire_timeout
        self._newer_schema = FailureStreak(
            logger,
            "the database was migrated by a newer jobwarden: upgrade this receiver",
            logging.WARNING,
        )

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        problem = await self._problem()
        if problem is not None:
            return JSONResponse({"status": "not_ready", "reason": problem}, status_code=503)
        return JSONResponse({"status": "ready"})

    async def metrics(self, request: Request) -> Response:
        return Response(self._metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def _pending(self, conn: Any) -> list[str]:
        """The migrations pending; none when a newer jobwarden migrated the database
        (a rolling upgrade: the schema goes first, and this receiver's webhooks
        still land), said once as the condition starts (and once a minute)."""
        try:
            pending = await pending_migrations(conn)
        except NewerSchema as exc:
            self._newer_schema.failed(ctx={"problem": str(exc)})
            return []
        self._newer_schema.succeeded()
        return pending

    async def _problem(self) -> str | None:
        if not self._ingestor.accepting:
            return "not_accepting"
        try:
            async with asyncio.timeout(self._acquire_timeout + READY_QUERY_TIMEOUT_SECONDS):
                async with self._pool.acquire() as conn:
                    pending = await self._pending(conn)
                if self._writer_pool is not None and not self._ingestor.writing:
                    async with self._writer_pool.acquire() as conn:
                        await conn.fetchval(q("receiver_writer_ping"))
        except MigrationError:
            logger.error("a migration file changed after it was applied")
            return "schema_mismatch"
        except Exception as exc:  # any failure to read the schema means "not ready"
            logger.warning(
                "readiness check: database unreachable",
                extra={"ctx": {"error": type(exc).__name__}},
            )
            return "database_unreachable"
        if pending:
            return "migrations_pending"
        return None
