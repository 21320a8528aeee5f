"""Provider shapes no preset has, as real apps on loopback (a reviewer's unseen cases).

- `PipelinesFixture`: GitLab CI's pipelines. A create answers 201 with the
  pipeline, and nothing deduplicates it; the only handle a lookup has is the
  pipeline's name (our operation id). The list is paged by a response
  header, `X-Next-Page`, twenty to a page, and other pipelines fill page 1.
- `RequestReplyFixture`: the asynchronous request-reply pattern. A create
  answers 202 with `Location: /queue/{id}`; the queue answers 200
  `{"status": "running"}` until the job is done, then either 303 See Other
  with `Location:` the result (`done_by = "303"`) or 200 `{"status": "done"}`
  with a pre-signed result link in `Location` (`done_by = "presigned"`),
  whose signature the result endpoint checks.
"""

from __future__ import annotations

from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import Registry, hang, json_response

PAGE_SIZE = 20
# A pipeline or request-reply job is done after this many status reads.
READS_TO_FINISH = 2
SIGNATURE = "c2lnbmF0dXJl"

PIPELINES: dict[str, Any] = {
    "create": {
        "path": "/projects/42/pipeline",
        "idempotency": "none",
        "job_id": "/id",
        "state": "/status",
        "accepted_statuses": [201],
        "set_body": {"ref": "main", "inputs.jw_ref": "{operation_id}"},
    },
    "status": {
        "path": "/projects/42/pipelines/{job_id}",
        "state": "/status",
        "state_map": {
            "created": "pending",
            "running": "running",
            "success": "succeeded",
            "failed": "failed",
            "canceled": "cancelled",
        },
    },
    "result": {
        "source": "path",
        "path": "/projects/42/pipelines/{job_id}/test_report",
        "expect": {"required_fields": ["/total_count"]},
    },
    "lookup": {
        "kind": "list",
        "path": "/projects/42/pipelines",
        "list": "",
        "match": "/name",
        "job_id": "/id",
        "next_page_token": "header:X-Next-Page",
        "page_token_param": "page",
    },
}


def request_reply(done_by: Literal["303", "presigned"]) -> dict[str, Any]:
    """The description a user writes for `RequestReplyFixture`."""
    return {
        "create": {
            "path": "/render",
            "idempotency": "header",
            "job_id": "header:Location",
            "status_url": "header:Location",
            "accepted_statuses": [202],
        },
        "status": {
            "use_status_url": True,
            "state": "/status",
            "result_url": "header:Location",
            "state_map": {"running": "running", "done": "succeeded", "failed": "failed"},
            **({"state_from_http_status": {"303": "succeeded"}} if done_by == "303" else {}),
        },
        "result": {"source": "url", "expect": {"required_fields": ["/frames"]}},
    }


class PipelinesFixture:
    """GitLab-like pipelines; `lose_first_create`: the first create's answer never comes."""

    def __init__(self, *, lose_first_create: bool = False) -> None:
        self.registry = Registry("")
        self.lose_first_create = lose_first_create
        self.pipelines: dict[str, dict[str, Any]] = {
            str(900 + i): {"id": 900 + i, "name": f"someone-else-{i}", "status": "success"}
            for i in range(PAGE_SIZE)
        }
        self.reads: dict[str, int] = {}
        self.pages: list[int] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/projects/42/pipeline", self.create, methods=["POST"]),
                Route("/projects/42/pipelines", self.listing),
                Route("/projects/42/pipelines/{pid}", self.status),
                Route("/projects/42/pipelines/{pid}/test_report", self.report),
            ]
        )

    async def create(self, request: Request) -> Response:
        body = await request.json()
        self.registry.count("create")
        pid = str(1000 + self.registry.calls["create"])
        self.pipelines[pid] = {
            "id": int(pid),
            "name": body["inputs"]["jw_ref"],
            "status": "created",
        }
        self.reads[pid] = 0
        if self.lose_first_create and self.registry.calls["create"] == 1:
            await hang()
        return json_response(self.pipelines[pid], 201)

    async def listing(self, request: Request) -> Response:
        """Oldest first: the pipelines of others fill page 1, ours come after."""
        page = int(request.query_params.get("page", "1"))
        self.pages.append(page)
        ordered = list(self.pipelines.values())
        headers = {"X-Page": str(page)}
        if page * PAGE_SIZE < len(ordered):
            headers["X-Next-Page"] = str(page + 1)
        return json_response(ordered[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], headers=headers)

    async def status(self, request: Request) -> Response:
        pid = request.path_params["pid"]
        pipeline = self.pipelines[pid]
        self.reads[pid] += 1
        pipeline["status"] = "success" if self.reads[pid] > READS_TO_FINISH else "running"
        return json_response(pipeline)

    async def report(self, request: Request) -> Response:
        return json_response({"total_count": 3, "success_count": 3})


class RequestReplyFixture:
    """202 + Location, a queue resource to poll, the result behind a link."""

    def __init__(self, done_by: Literal["303", "presigned"]) -> None:
        self.done_by = done_by
        self.registry = Registry("j")
        self.result_queries: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/render", self.create, methods=["POST"]),
                Route("/queue/{jid}", self.queue),
                Route("/results/{jid}", self.result),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("render", await request.json(), dict(request.headers))
        return Response(status_code=202, headers={"Location": f"/queue/{job.job_id}"})

    async def queue(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["jid"]]
        job.reads += 1
        if job.reads <= READS_TO_FINISH:
            return json_response({"status": "running"})
        if self.done_by == "303":
            return Response(status_code=303, headers={"Location": f"/results/{job.job_id}"})
        link = f"/results/{job.job_id}?X-Amz-Signature={SIGNATURE}&X-Amz-Expires=60"
        return json_response({"status": "done"}, headers={"Location": link})

    async def result(self, request: Request) -> Response:
        self.result_queries.append(request.url.query)
        if self.done_by == "presigned" and request.query_params.get("X-Amz-Signature") != SIGNATURE:
            return json_response({"error": "SignatureDoesNotMatch"}, 403)
        return json_response({"frames": [1, 2, 3]})
