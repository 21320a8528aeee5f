"""An Anthropic Message Batches fixture: /v1/messages/batches in the documented shapes.

The scenario is the prefix of the first request's custom_id ("<scenario>-1"):

- happy      in_progress -> ended, 3 of 3 succeeded;
- mixed      ended, 2 succeeded and 1 errored;
- errored    ended, 0 of 2 succeeded;
- slow       in_progress until cancelled; then canceling -> ended, 1 succeeded, 2 canceled;
- idle       like slow, but nothing had run: ended with every request canceled;
- miscount   ended saying 3 succeeded, but the results file holds 2 lines;
- archived   ended, but the results are gone (404);
- ctrl_url   ended, 3 of 3 succeeded, but its results_url (any string, says the
             document) holds a control character;
- lost       like happy, but the create answer never arrives in time.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import Job, Registry, hang, json_response, jsonl, read_json

API_KEY = "sk-ant-test"
VERSION = "2023-06-01"


class AnthropicFixture:
    def __init__(self) -> None:
        self.registry = Registry("msgbatch_")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages/batches", self.create, methods=["POST"]),
                Route("/v1/messages/batches/{bid}", self.retrieve, methods=["GET"]),
                Route("/v1/messages/batches/{bid}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/messages/batches/{bid}/results", self.results, methods=["GET"]),
            ]
        )

    def _refuse(self, request: Request) -> Response | None:
        if request.headers.get("x-api-key") != API_KEY:
            return _error(401, "authentication_error", "invalid x-api-key")
        if request.headers.get("anthropic-version") != VERSION:
            return _error(400, "invalid_request_error", "anthropic-version header is required")
        return None

    async def create(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        self.registry.count("create")
        body = await read_json(request)
        requests = body.get("requests") or []
        if not requests:
            return _error(400, "invalid_request_error", "requests: at least one is required")
        scenario = str(requests[0]["custom_id"]).rsplit("-", 1)[0]
        job = self.registry.add(scenario, body, dict(request.headers))
        job.extra["base"] = str(request.base_url).rstrip("/")
        if scenario == "lost":
            await hang()
        return json_response(self.batch(job))

    async def retrieve(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        job = self.registry.jobs.get(request.path_params["bid"])
        if job is None:
            return _error(404, "not_found_error", "batch not found")
        self.registry.count("retrieve")
        job.reads += 1
        return json_response(self.batch(job))

    async def cancel(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        job = self.registry.jobs.get(request.path_params["bid"])
        if job is None:
            return _error(404, "not_found_error", "batch not found")
        self.registry.count("cancel")
        job.cancel_requested = True
        job.extra["cancel_at_read"] = job.reads
        return json_response(self.batch(job))

    async def results(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        job = self.registry.jobs.get(request.path_params["bid"])
        if job is None or job.scenario == "archived":
            return _error(404, "not_found_error", "results are no longer available")
        self.registry.count("results")
        outcome = self._phase(job)[1]
        lines = [_line(custom_id, kind) for custom_id, kind in outcome]
        if job.scenario == "miscount":
            lines = lines[:-1]
        return Response(jsonl(lines), media_type="application/binary")

    def batch(self, job: Job) -> dict[str, Any]:
        status, outcome = self._phase(job)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if status == "ended":
            for _, kind in outcome:
                counts[kind] += 1
        else:
            counts["processing"] = len(job.request["requests"])
        return {
            "id": job.job_id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": "2025-01-01T00:00:00Z",
            "expires_at": "2025-01-02T00:00:00Z",
            "ended_at": "2025-01-01T01:00:00Z" if status == "ended" else None,
            "cancel_initiated_at": "2025-01-01T00:30:00Z" if job.cancel_requested else None,
            "archived_at": None,
            "results_url": self._results_url(job) if status == "ended" else None,
        }

    def _results_url(self, job: Job) -> str:
        url = f"{job.extra['base']}/v1/messages/batches/{job.job_id}/results"
        return url + "\x01" if job.scenario == "ctrl_url" else url

    def _phase(self, job: Job) -> tuple[str, list[tuple[str, str]]]:
        ids = [str(r["custom_id"]) for r in job.request["requests"]]
        scenario = job.scenario
        if job.cancel_requested:
            if job.reads <= job.extra["cancel_at_read"] + 1:
                return "canceling", []
            done = 1 if scenario == "slow" else 0
            return "ended", [
                (c, "succeeded" if i < done else "canceled") for i, c in enumerate(ids)
            ]
        if job.reads < 2 or scenario in ("slow", "idle"):
            return "in_progress", []
        if scenario == "mixed":
            return "ended", [
                (c, "errored" if i == len(ids) - 1 else "succeeded") for i, c in enumerate(ids)
            ]
        if scenario == "errored":
            return "ended", [(c, "errored") for c in ids]
        return "ended", [(c, "succeeded") for c in ids]


def _line(custom_id: str, kind: str) -> dict[str, Any]:
    if kind == "succeeded":
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer to {custom_id}"}],
        }
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": message}}
    if kind == "errored":
        error = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "max_tokens: too large"},
        }
        return {"custom_id": custom_id, "result": {"type": "errored", "error": error}}
    return {"custom_id": custom_id, "result": {"type": kind}}


def _error(status: int, kind: str, message: str) -> Response:
    return json_response({"type": "error", "error": {"type": kind, "message": message}}, status)
