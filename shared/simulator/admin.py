"""Provider-side admin endpoints (`/_sim/...`): what tests assert on.

A real provider would never expose these; they let a test prove facts only
the provider can see ("the job was created once", "polls never overlapped").
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.simulator.payloads import error_body, rfc3339
from shared.simulator.runtime import Simulation
from shared.simulator.state import Job


def internal_view(job: Job, now: float) -> dict[str, Any]:
    def stamp(monotonic: float | None) -> str | None:
        return None if monotonic is None else rfc3339(job.wall(monotonic))

    return {
        "job_id": job.job_id,
        "script": job.script.value,
        "params": asdict(job.params),
        "state": job.state(now).value,
        "client_reference": job.client_reference,
        "idempotency_key": job.idempotency_key,
        "webhook_url": job.webhook_url,
        "input": job.input,
        "status_reads": job.status_reads,
        "limited_reads_served": job.limited_reads_served,
        "created_at": stamp(job.created_at),
        "cancel_requested_at": stamp(job.cancel_requested_at),
        "finished_at": stamp(job.finished_at),
        "notified": job.notified,
    }


class AdminApi:
    def __init__(self, simulation: Simulation) -> None:
        self._sim = simulation

    def routes(self) -> list[Route]:
        return [
            Route("/_sim/stats", self.stats, methods=["GET"]),
            Route("/_sim/requests", self.requests, methods=["GET"]),
            Route("/_sim/reset", self.reset, methods=["POST"]),
            Route("/_sim/jobs/{job_id}", self.job, methods=["GET"]),
        ]

    async def stats(self, request: Request) -> Response:
        return JSONResponse(self._sim.store.stats.snapshot())

    async def requests(self, request: Request) -> Response:
        """Every public-API request received since the last reset (admin calls excluded)."""
        return JSONResponse(self._sim.store.requests.snapshot())

    async def reset(self, request: Request) -> Response:
        self._sim.reset()
        return JSONResponse({"reset": True})

    async def job(self, request: Request) -> Response:
        job = self._sim.store.jobs.get(request.path_params["job_id"])
        if job is None:
            return JSONResponse(error_body("not_found", "no such job"), status_code=404)
        self._sim.touch(job)
        return JSONResponse(internal_view(job, self._sim.now()))
