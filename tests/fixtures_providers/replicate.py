"""A Replicate predictions fixture: /v1/predictions in the documented shapes.

The scenario is `input.scenario` of the create body:

- happy    starting -> processing -> succeeded, output a list of file URLs;
- failed   -> failed with an error string;
- slow     processing until cancelled, then canceled;
- aborted  the Cancel-After deadline passed before it ran: aborted;
- removed  succeeded, but read after the hour: output removed (`data_removed`);
- lost     like happy, but the create answer never arrives in time;
- held     processing until the test releases it (webhook tests).

A `Cancel-After` under the document's minimum (5 s) is refused with a 422
problem, as an input the document does not allow.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import (
    Job,
    Registry,
    authorized,
    hang,
    json_response,
    read_json,
)

API_TOKEN = "r8_test_token"
# "The minimum allowed duration is 5 seconds"; durations like 1h30m45s, bare numbers are seconds.
CANCEL_AFTER_MINIMUM_SECONDS = 5
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")
OUTPUT = ["https://replicate.delivery/pbxt/abc/out-0.png"]


class ReplicateFixture:
    def __init__(self, output: Any = None) -> None:
        self.registry = Registry("pred")
        # what a succeeded prediction's `output` is (a model's files: URLs)
        self.output = OUTPUT if output is None else output

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/predictions", self.create, methods=["POST"]),
                Route("/v1/predictions/{pid}", self.get, methods=["GET"]),
                Route("/v1/predictions/{pid}/cancel", self.cancel, methods=["POST"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        if not authorized(request, "authorization", f"Bearer {API_TOKEN}"):
            return _problem(401, "Unauthenticated", "You did not pass a valid token")
        self.registry.count("create")
        body = await read_json(request)
        scenario = str(body.get("input", {}).get("scenario", "happy"))
        if "version" not in body:
            return _problem(422, "Input validation failed", "version is required")
        cancel_after = request.headers.get("cancel-after")
        if cancel_after is not None and not _allowed_duration(cancel_after):
            return _problem(422, "Invalid Cancel-After", "the minimum duration is 5 seconds")
        job = self.registry.add(scenario, body, dict(request.headers))
        job.hold = scenario == "held"
        if scenario == "lost":
            await hang()
        return json_response(self.prediction(job), status=201)

    async def get(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["pid"])
        if job is None:
            return _problem(404, "Not found", "prediction not found")
        self.registry.count("get")
        job.reads += 1
        return json_response(self.prediction(job))

    async def cancel(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["pid"])
        if job is None:
            return _problem(404, "Not found", "prediction not found")
        self.registry.count("cancel")
        job.cancel_requested = True
        return json_response(self.prediction(job))

    def prediction(self, job: Job) -> dict[str, Any]:
        status, output, error, removed = self._phase(job)
        return {
            "id": job.job_id,
            "model": "acme/hello",
            "version": job.request.get("version"),
            "input": job.request.get("input"),
            "logs": "",
            "output": output,
            "data_removed": removed,
            "error": error,
            "status": status,
            "created_at": "2025-01-01T00:00:00.000Z",
            "urls": {
                "get": f"https://api.replicate.com/v1/predictions/{job.job_id}",
                "cancel": f"https://api.replicate.com/v1/predictions/{job.job_id}/cancel",
            },
        }

    def _phase(self, job: Job) -> tuple[str, Any, str | None, bool]:
        scenario, reads = job.scenario, job.reads
        if job.cancel_requested:
            return "canceled", None, None, False
        if reads == 0:
            return "starting", None, None, False
        if scenario == "aborted":
            return "aborted", None, None, False
        if scenario == "failed":
            return "failed", None, "CUDA out of memory", False
        if scenario == "slow" or job.hold or reads == 1:
            return "processing", None, None, False
        if scenario == "removed":
            return "succeeded", None, None, True
        return "succeeded", self.output, None, False


def _allowed_duration(value: str) -> bool:
    match = _DURATION.fullmatch(value)
    if match is None or not value:
        return False
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds >= CANCEL_AFTER_MINIMUM_SECONDS


def _problem(status: int, title: str, detail: str) -> Response:
    return json_response({"title": title, "detail": detail, "status": status}, status)
