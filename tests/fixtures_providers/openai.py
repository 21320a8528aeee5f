"""An OpenAI Batch API fixture: /v1/batches, /v1/files/{id}/content, in the documented shapes.

The scenario is chosen by the create body's `input_file_id` ("file-<scenario>"),
as a real batch is chosen by its input file:

- happy    validating -> in_progress -> completed, 3/3 requests, one output file;
- partial  completed with 2 of 3 requests, the third in the error file;
- expired  the window ran out after 1 of 4 requests: 3 `batch_expired` error lines;
- failed   the input file failed validation (errors.data);
- slow     in_progress until cancelled, then cancelling -> cancelled with 1 of 3 done;
- lost     like happy, but the create answer never arrives in time, and 120 other
           batches are created right after ours (so finding it takes a second page);
- held     in_progress until the test releases it, then completed at the next read
           (webhook tests);
- lagging  like lost, but the list does not show the new batch on the first look
           (a list that lags behind a create it has already accepted).

Ids the document allows but no URL can carry (".", "..", control characters)
are given by `OpenAIFixture(job_id=...)` (the next batch's id) and
`file_id_suffix` (appended to every output and error file id).
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
    jsonl,
    read_json,
)

API_KEY = "sk-test-openai"
MAX_PAGE = 100  # OpenAI's documented maximum `limit`
DEFAULT_PAGE = 20
FILLER_BATCHES = 120


class OpenAIFixture:
    def __init__(
        self, *, job_id: str | None = None, file_id_suffix: str = "", final_newline: bool = True
    ) -> None:
        self.registry = Registry("batch_")
        self.final_newline = final_newline  # False: each file's last line ends without one
        # Newest first, as GET /v1/batches lists them.
        self.listing: list[str] = []
        self.files: dict[str, bytes] = {}
        self.job_id = job_id
        self.file_id_suffix = file_id_suffix

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/batches", self.create, methods=["POST"]),
                Route("/v1/batches", self.list_batches, methods=["GET"]),
                Route("/v1/batches/{batch_id}", self.retrieve, methods=["GET"]),
                Route("/v1/batches/{batch_id}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/files/{file_id}/content", self.file_content, methods=["GET"]),
            ]
        )

    # ------------------------------------------------------------------ endpoints

    async def create(self, request: Request) -> Response:
        if not authorized(request, "authorization", f"Bearer {API_KEY}"):
            return _error(401, "invalid_api_key", "Incorrect API key provided")
        self.registry.count("create")
        body = await read_json(request)
        scenario = str(body.get("input_file_id", "file-happy")).removeprefix("file-")
        if scenario == "bad":
            return _error(400, "invalid_request_error", "input_file_id does not exist")
        job = self.registry.add(scenario, body, dict(request.headers))
        if self.job_id is not None:
            del self.registry.jobs[job.job_id]
            job.job_id, self.job_id = self.job_id, None
            self.registry.jobs[job.job_id] = job
        job.hold = scenario == "held"
        self.listing.insert(0, job.job_id)
        if scenario == "lagging":
            job.extra["hidden_from_lists"] = 1
            await hang()
        if scenario == "lost":
            for _ in range(FILLER_BATCHES):
                filler = self.registry.add("filler", {"metadata": {"owner": "someone else"}}, {})
                self.listing.insert(0, filler.job_id)
            await hang()
        return json_response(self.batch(job, advance=False))

    async def retrieve(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["batch_id"])
        if job is None:
            return _error(404, "not_found", "No batch found")
        self.registry.count("retrieve")
        return json_response(self.batch(job, advance=True))

    async def cancel(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["batch_id"])
        if job is None:
            return _error(404, "not_found", "No batch found")
        self.registry.count("cancel")
        job.cancel_requested = True
        job.extra["cancel_at_read"] = job.reads
        return json_response(self.batch(job, advance=False))

    async def list_batches(self, request: Request) -> Response:
        self.registry.count("list")
        limit = min(int(request.query_params.get("limit", DEFAULT_PAGE)), MAX_PAGE)
        visible = [i for i in self.listing if not self._hidden(self.registry.jobs[i])]
        after = request.query_params.get("after")
        start = 0 if after is None else visible.index(after) + 1
        page = visible[start : start + limit]
        return json_response(
            {
                "object": "list",
                "data": [self.batch(self.registry.jobs[i], advance=False) for i in page],
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
                "has_more": start + limit < len(visible),
            }
        )

    def _hidden(self, job: Job) -> bool:
        """A lagging job is missing from this many list calls after its creation."""
        hidden_for: int = job.extra.get("hidden_from_lists", 0)
        return self.registry.calls["list"] <= hidden_for

    async def file_content(self, request: Request) -> Response:
        content = self.files.get(request.path_params["file_id"])
        if content is None:
            return _error(404, "not_found", "No such File object")
        self.registry.count("file")
        return Response(content, media_type="application/octet-stream")

    # ------------------------------------------------------------------ batch objects

    def batch(self, job: Job, *, advance: bool) -> dict[str, Any]:
        if advance:
            job.reads += 1
        status, counts, files = self._phase(job)
        body: dict[str, Any] = {
            "id": job.job_id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": job.request.get("input_file_id"),
            "completion_window": "24h",
            "status": status,
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "created_at": 1_700_000_000,
            "metadata": job.request.get("metadata"),
            "request_counts": counts,
        }
        if status == "failed":
            body["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_json_line", "message": "line 2 is not JSON", "line": 2}],
            }
        if files:
            ok, bad = files
            body["output_file_id"] = self._file(f"file-out-{job.job_id}", ok)
            body["error_file_id"] = self._file(f"file-err-{job.job_id}", bad)
        return body

    def _file(self, file_id: str, lines: list[dict[str, Any]]) -> str | None:
        if not lines:
            return None
        file_id += self.file_id_suffix
        content = jsonl(lines)
        self.files[file_id] = content if self.final_newline else content.rstrip(b"\n")
        return file_id

    def _phase(
        self, job: Job
    ) -> tuple[str, dict[str, int], tuple[list[dict[str, Any]], list[dict[str, Any]]] | None]:
        scenario, reads = job.scenario, job.reads
        if scenario == "filler":
            return "completed", _counts(1, 1, 0), None
        if job.cancel_requested:
            if reads <= job.extra["cancel_at_read"] + 1:
                return "cancelling", _counts(3, 1, 0), None
            return "cancelled", _counts(3, 1, 2), (_ok(1), _cut(2, 3, "batch_cancelled"))
        if scenario == "held":  # in progress until the test releases it, then done
            if job.hold:
                return "in_progress", _counts(3, 1, 0), None
            return "completed", _counts(3, 3, 0), (_ok(3), [])
        if reads == 0:
            return "validating", _counts(0, 0, 0), None
        if scenario == "failed":
            return "failed", _counts(0, 0, 0), None
        if scenario in ("slow",) or job.hold or reads == 1:
            return "in_progress", _counts(3, 1, 0), None
        if scenario == "partial":
            return "completed", _counts(3, 2, 1), (_ok(2), [_http_error(3)])
        if scenario == "expired":
            return "expired", _counts(4, 1, 3), (_ok(1), _cut(2, 4, "batch_expired"))
        return "completed", _counts(3, 3, 0), (_ok(3), [])


def _counts(total: int, completed: int, failed: int) -> dict[str, int]:
    return {"total": total, "completed": completed, "failed": failed}


def _ok(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"batch_req_{i}",
            "custom_id": f"request-{i}",
            "response": {
                "status_code": 200,
                "request_id": f"req_{i}",
                "body": {"choices": [{"message": {"content": f"answer {i}"}}]},
            },
            "error": None,
        }
        for i in range(1, n + 1)
    ]


def _cut(first: int, last: int, code: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"batch_req_{i}",
            "custom_id": f"request-{i}",
            "response": None,
            "error": {"code": code, "message": "This request was not executed."},
        }
        for i in range(first, last + 1)
    ]


def _http_error(i: int) -> dict[str, Any]:
    return {
        "id": f"batch_req_{i}",
        "custom_id": f"request-{i}",
        "response": {
            "status_code": 400,
            "request_id": f"req_{i}",
            "body": {"error": {"code": "context_length_exceeded", "message": "too long"}},
        },
        "error": None,
    }


def _error(status: int, code: str, message: str) -> Response:
    return json_response({"error": {"code": code, "message": message, "type": code}}, status)
