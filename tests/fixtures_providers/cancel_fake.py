"""A provider in the simulator preset's shape whose cancel answers as a test says.

For cancellation faults driven through the real reconciler (and, when asked,
the real receiver): `Fake.on_cancel` decides each cancel's answer (taken, taken
while the job ends anyway, refused as already finished, never answered), and
`Fake.jobs` holds each job's state as the provider tells it. Job ids are
random, so rigs sharing a database never name one twice.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.clock import SYSTEM_CLOCK, Clock
from shared.db.queries import q
from shared.signatures import sign_standard_webhooks
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.harness import WEBHOOK_SECRET

ITEMS = [{"n": 1}, {"n": 2}]
# What a cancel answers, given the job (a dict the handler may change).
CancelAnswer = Callable[[dict[str, Any]], Awaitable[Response]]


class Fake:
    """A provider in the simulator preset's shape whose cancel answers as a test says.

    `on_cancel` answers each cancel (by default: taken, the job `cancelling`);
    `cancels` lists the job id of every cancel that reached it, answered or not.
    `create_gate`, when set, holds every create's answer until it is set (the
    job is on record at once, or, with `land_late`, only once the gate opens:
    a create the provider had not yet acted on when the client gave up).
    """

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.cancels: list[str] = []
        self.on_cancel: CancelAnswer = self.taken
        self.create_gate: asyncio.Event | None = None
        self.land_late = False

    @staticmethod
    async def taken(job: dict[str, Any]) -> Response:
        job["state"] = "cancelling"
        return JSONResponse({"job_id": job["job_id"], "state": "cancelling"}, status_code=202)

    async def create(self, request: Request) -> Response:
        body = await request.json()
        job_id = f"job-{uuid.uuid4().hex[:12]}"
        job = {
            "job_id": job_id,
            "state": "running",
            "client_reference": body.get("client_reference"),
        }
        if not self.land_late:
            self.jobs[job_id] = job
        if self.create_gate is not None:
            await self.create_gate.wait()
        self.jobs[job_id] = job
        return JSONResponse({"job_id": job_id, "state": "queued"}, status_code=202)

    async def status(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = self.jobs.get(job_id)
        if job is None:
            return JSONResponse({"error": {"code": "not_found"}}, status_code=404)
        out = {"job_id": job_id, "state": job["state"]}
        if job["state"] == "succeeded":
            out["result_url"] = f"{str(request.base_url).rstrip('/')}/results/{job_id}"
        return JSONResponse(out)

    async def lookup(self, request: Request) -> Response:
        ref = request.query_params.get("client_reference")
        return JSONResponse(
            {"jobs": [j for j in self.jobs.values() if j["client_reference"] == ref]}
        )

    async def cancel(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        self.cancels.append(job_id)
        job = self.jobs.get(job_id)
        if job is None:
            return JSONResponse({"error": {"code": "not_found"}}, status_code=404)
        return await self.on_cancel(job)

    async def result(self, _request: Request) -> Response:
        body = json.dumps({"items": ITEMS}).encode()
        digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
        return Response(
            body, media_type="application/json", headers={"Content-Digest": f"sha-256=:{digest}:"}
        )

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/jobs", self.create, methods=["POST"]),
                Route("/v1/jobs", self.lookup, methods=["GET"]),
                Route("/v1/jobs/{job_id}", self.status, methods=["GET"]),
                Route("/v1/jobs/{job_id}/cancel", self.cancel, methods=["POST"]),
                Route("/results/{job_id}", self.result, methods=["GET"]),
            ]
        )

    def only(self) -> dict[str, Any]:
        (job,) = self.jobs.values()
        return job


def fake_rig(
    pool: Any,
    tmp_path: Path,
    fx: Fake,
    *,
    clock: Clock = SYSTEM_CLOCK,
    with_receiver: bool = False,
    **overrides: Any,
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    """The fake described by the simulator preset (`overrides` merged key by key),
    the real reconciler, and the real receiver when asked (signed webhooks)."""
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset="simulator",
        name="sim",
        env={"JW_SIM_WEBHOOK_SECRET": WEBHOOK_SECRET},
        overrides=overrides or None,
        with_receiver=with_receiver,
        clock=clock,
    )


async def agent_row(r: PresetRig, op_id: str) -> Any:
    """The operation as the agent API shows it (the agent views' row)."""
    return await r.pool.fetchrow(q("api_operation"), op_id, None)


async def causes(r: PresetRig, op_id: str) -> list[tuple[str, str]]:
    """Each history row's (to_state, cause), in order."""
    rows = await r.pool.fetch(
        "SELECT to_state::text, cause FROM history WHERE operation_id = $1 ORDER BY seq", op_id
    )
    return [(row[0], row[1]) for row in rows]


async def post_hook(
    r: PresetRig, event_id: str, payload: dict[str, Any], secret: str = WEBHOOK_SECRET
) -> httpx.Response:
    """A Standard Webhooks delivery to the rig's receiver, signed with `secret`."""
    body = json.dumps(payload).encode()
    now = int(time.time())
    headers = {
        "content-type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(now),
        "webhook-signature": sign_standard_webhooks(secret, event_id, now, body),
    }
    async with httpx.AsyncClient() as client:
        return await client.post(r.hook_url, content=body, headers=headers)
