"""A Google API fixture whose method returns google.longrunning.Operation (AIP-151/155).

The method is POST /v1/projects/p/locations/l/widgets:build; the scenario is
the body's `displayName`:

- happy   running (proto3 JSON leaves `done: false` out) -> done with `response`;
- failed  done with error {code: 3, status: INVALID_ARGUMENT};
- slow    running until cancelled, then done with error {code: 1} (CANCELLED);
- lost    like happy, but the first create answer never arrives in time.

Creates are deduplicated by `requestId` as AIP-155 prescribes: the same id
returns the same operation.
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

ACCESS_TOKEN = "ya29.test-token"
PARENT = "projects/p/locations/l"
CREATE_PATH = f"/v1/{PARENT}/widgets:build"


class GoogleLROFixture:
    def __init__(self) -> None:
        self.registry = Registry(f"{PARENT}/operations/op-")
        self.by_request_id: dict[str, Job] = {}
        self.request_ids: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(CREATE_PATH, self.create, methods=["POST"]),
                Route(f"/v1/{PARENT}/operations/{{rest}}", self.operation, methods=["GET", "POST"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        if not authorized(request, "authorization", f"Bearer {ACCESS_TOKEN}"):
            return _status(401, 16, "UNAUTHENTICATED", "Request had invalid credentials.")
        self.registry.count("create")
        body = await read_json(request)
        request_id = body.get("requestId")
        if request_id is not None:
            self.request_ids.append(request_id)
            known = self.by_request_id.get(request_id)
            if known is not None:  # AIP-155: a retry returns the original operation
                return json_response(self.operation_body(known))
        scenario = str(body.get("displayName", "happy"))
        job = self.registry.add(scenario, body, dict(request.headers))
        if request_id is not None:
            self.by_request_id[request_id] = job
        if scenario == "lost" and len(self.registry.jobs) == 1:
            await hang()
        return json_response(self.operation_body(job))

    async def operation(self, request: Request) -> Response:
        rest = request.path_params["rest"]
        cancel = request.method == "POST"
        if cancel != rest.endswith(":cancel"):
            return _status(404, 5, "NOT_FOUND", "unknown method")
        job = self.registry.jobs.get(f"{PARENT}/operations/{rest.removesuffix(':cancel')}")
        if job is None:
            return _status(404, 5, "NOT_FOUND", "operation not found")
        if cancel:
            self.registry.count("cancel")
            job.cancel_requested = True
            return json_response({})
        self.registry.count("get")
        job.reads += 1
        return json_response(self.operation_body(job))

    def operation_body(self, job: Job) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": job.job_id,
            "metadata": {
                "@type": "type.googleapis.com/google.cloud.example.v1.OperationMetadata",
                "createTime": "2025-01-01T00:00:00Z",
                "target": f"{PARENT}/widgets/w-1",
            },
        }
        if job.cancel_requested and job.reads >= 1:
            body["done"] = True
            body["error"] = {
                "code": 1,
                "message": "Operation was cancelled.",
                "status": "CANCELLED",
            }
        elif job.reads < 2 or job.scenario == "slow":
            pass  # running: proto3 JSON omits `done: false`
        elif job.scenario == "failed":
            body["done"] = True
            body["error"] = {
                "code": 3,
                "message": "widget size out of range",
                "status": "INVALID_ARGUMENT",
            }
        else:
            body["done"] = True
            body["response"] = {
                "@type": "type.googleapis.com/google.cloud.example.v1.Widget",
                "name": f"{PARENT}/widgets/w-1",
                "displayName": job.request.get("displayName"),
            }
        return body


def _status(http: int, code: int, status: str, message: str) -> Response:
    return json_response({"error": {"code": http, "message": message, "status": status}}, http)
