"""An Azure long-running operation fixture, after the Azure REST API guidelines.

POST /widgets:analyze?api-version=... with an `Operation-Id` header starts an
operation; the scenario is the body's `scenario`:

Every 202 that starts an operation carries `Retry-After: 0` (read it now), but:

- happy            202 + Operation-Location; NotStarted -> Running -> Succeeded with `result`;
- silent_accept    like slow, but the 202 carries no Retry-After;
- failed           ... -> Failed with `error`;
- lost             like happy, but the first answer never arrives in time;
- no_retry_after   Running forever, and the reads carry no Retry-After;
- slow             Running forever;
- arm_location     ARM style: 202 + only `Location`; that URL answers 202 (empty) while
                   running and 200 with the resource when done;
- no_monitor       202 with neither Operation-Location, Azure-AsyncOperation nor Location
                   (the guidelines make them SHOULDs): nothing tells where to read the status.

Operation-Id semantics as the guidelines require: the same id with the same
request returns the same operation, with another request a 409.
"""

from __future__ import annotations

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

ACCESS_TOKEN = "eyJ0eXAi.test"
API_VERSION = "2024-01-01"
CREATE_PATH = f"/widgets:analyze?api-version={API_VERSION}"


class AzureFixture:
    def __init__(self) -> None:
        self.registry = Registry("unused-")
        self.operation_ids: list[str | None] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/widgets:analyze", self.create, methods=["POST"]),
                Route("/operations/{oid}", self.status, methods=["GET"]),
                Route("/arm/results/{oid}", self.location, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        if not authorized(request, "authorization", f"Bearer {ACCESS_TOKEN}"):
            return _error(401, "Unauthorized", "Access token is missing or invalid.")
        if request.query_params.get("api-version") != API_VERSION:
            return _error(400, "InvalidApiVersion", "api-version is missing or unsupported")
        self.registry.count("create")
        body = await read_json(request)
        oid = request.headers.get("operation-id")
        self.operation_ids.append(oid)
        if oid is None:
            return _error(400, "MissingOperationId", "this fixture requires Operation-Id")
        known = self.registry.jobs.get(oid)
        if known is not None:
            if known.request != body:
                return _error(409, "Conflict", "Operation-Id already used by another request")
            return self._accepted(request, known)
        job = Job(oid, str(body.get("scenario", "happy")), body, dict(request.headers))
        self.registry.jobs[oid] = job
        if job.scenario == "lost" and len(self.operation_ids) == 1:
            await hang()
        return self._accepted(request, job)

    def _accepted(self, request: Request, job: Job) -> Response:
        base = str(request.base_url).rstrip("/")
        if job.scenario == "arm_location":
            headers = {"Location": f"{base}/arm/results/{job.job_id}", "Retry-After": "0"}
            return Response(status_code=202, headers=headers)
        if job.scenario == "no_monitor":
            return json_response(self.monitor(job), 202, {"Operation-Id": job.job_id})
        headers = {
            "Operation-Location": f"{base}/operations/{job.job_id}?api-version={API_VERSION}",
            "Operation-Id": job.job_id,
        }
        if job.scenario != "silent_accept":
            headers["Retry-After"] = "0"
        return json_response(self.monitor(job), 202, headers)

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["oid"])
        if job is None:
            return _error(404, "NotFound", "operation not found")
        self.registry.count("status")
        job.reads += 1
        body = self.monitor(job)
        terminal = body["status"] in ("Succeeded", "Failed", "Canceled")
        headers = {} if terminal or job.scenario == "no_retry_after" else {"Retry-After": "0"}
        return json_response(body, headers=headers)

    async def location(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["oid"])
        if job is None:
            return _error(404, "NotFound", "operation not found")
        self.registry.count("location")
        job.reads += 1
        if job.reads < 2:
            return Response(status_code=202, headers={"Retry-After": "0"})
        return json_response({"id": f"/arm/widgets/{job.job_id}", "properties": {"size": 10}})

    def monitor(self, job: Job) -> dict[str, Any]:
        body: dict[str, Any] = {"id": job.job_id, "kind": "WidgetAnalysis"}
        if job.reads == 0:
            body["status"] = "NotStarted"
        elif job.reads == 1 or job.scenario in ("slow", "no_retry_after", "silent_accept"):
            body["status"] = "Running"
        elif job.scenario == "failed":
            body["status"] = "Failed"
            body["error"] = {"code": "InvalidWidget", "message": "The widget is not analyzable."}
        else:
            body["status"] = "Succeeded"
            body["result"] = {"widgets": 3, "label": "ok"}
        return body


def _error(status: int, code: str, message: str) -> Response:
    return json_response({"error": {"code": code, "message": message}}, status)
