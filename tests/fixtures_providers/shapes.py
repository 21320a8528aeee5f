"""Provider shapes no preset has, as real apps on loopback (a reviewer's unseen cases).

- `PipelinesFixture`: GitLab CI's pipelines. A create answers 201 with the
  pipeline, and nothing deduplicates it; the only handle a lookup has is the
  pipeline's name (our operation id). The list is paged by a response
  header, `X-Next-Page`, twenty to a page, and other pipelines fill page 1.
- `BatchJobsFixture`: Mistral's batch jobs. Nothing deduplicates a create;
  the job carries our operation id in its metadata, and the list is paged by
  page number (`?page=0&page_size=100`, `{"data": [...], "total": N}`, no
  cursor), oldest first: the jobs of others fill the first pages.
- `RequestReplyFixture`: the asynchronous request-reply pattern. A create
  answers 202 with `Location: /queue/{id}`; the queue answers 200
  `{"status": "running"}` until the job is done, then either 303 See Other
  with `Location:` the result (`done_by = "303"`) or 200 `{"status": "done"}`
  with a pre-signed result link in `Location` (`done_by = "presigned"`),
  whose signature the result endpoint checks.
- `BulkQueryFixture`: Salesforce's Bulk API 2.0 query jobs. The status counts
  the records (`numberRecordsProcessed`); the results are CSV pages of
  `page_size` rows, each but the last with `Sforce-Locator:` the next page's
  locator. A job is aborted by `PATCH` with `{"state": "Aborted"}`; any other
  body is refused with 400 INVALIDJOB, and an abort after the job completed
  (`done_at_cancel`) too.
- `TasksFixture`: Runway's tasks. The only cancel, `DELETE /v1/tasks/{id}`,
  cancels a task still pending or running and deletes one that ended, its
  output included; a deleted task then reads 404, or `CANCELLED`.
- `QueueFixture`: fal.ai's queue. Every job ends `COMPLETED`, a failed one
  too: the failure is told only by the response URL, which answers the
  runner's 422 (`{"detail": [...]}`) or 500 (`X-Fal-Error-Type`).
- `BulkExportFixture`: Shopify's bulk operations, their fields over REST (the
  GraphQL envelope aside): a finished export names its JSONL file in `url`
  and counts its lines in `objectCount` (a string); one that matched
  nothing reads `url: null`, `objectCount: "0"`.
- `ResultsFixture`: Stability AI's v2beta generations. The status URL is the
  result's: `/v2beta/results/{id}` answers 202 while the job runs, then 200
  with the video itself (`finish-reason: SUCCESS`), which may be larger than
  any status answer is read.
- `VideosFixture`: HeyGen's videos. A finished video's status names a
  pre-signed `video_url` minted at each read; a link minted before
  `first_valid_read` has expired (403), as one read long before the fetch has.
- `CancelledOutputFixture`: a job that keeps what it made when cancelled
  (OpenAI's batches do): the cancelled status names its output, CSV served
  three rows a page, the next page's cursor in `Next-Cursor` ("null" on the
  last); `looping` names page 2 again and again. `paging = "url"` names the
  next page by a relative URL in `Next-Page` instead, `"offset"` serves the
  rows at `?offset=&limit=` (an empty page past the end).
- `GraphqlBulkFixture`: Shopify's bulk operations as they are: one GraphQL
  endpoint, a `bulkOperationRunQuery` mutation to start, a `node(id:)` query
  (a POST with the id in its variables) to read, `bulkOperationCancel` to
  cancel; `throttled_reads` answers a 200 carrying only `errors` (THROTTLED).
- `DubbingFixture`: ElevenLabs' dubbing. A dub names its languages as a list
  (`target_languages`), one audio file each at `/audio/{language}`.
- `CrawlFixture`: Firecrawl's crawl status. A finished crawl's status is its
  result, ten documents a page (`data`), each but the last naming the next
  page's absolute URL in `next` (`?skip=10`); `foreign_next` makes page 1's
  `next` that URL instead (another origin). Every page says whether it
  carried our token.
- `DatasetFixture`: Apify's runs and their default dataset. The items are
  served at `/v2/actor-runs/{id}/dataset/items?offset=&limit=` as a JSON
  array, with `X-Apify-Pagination-Total` (and -Offset, -Limit, -Count);
  `pages` lists each fetch's (offset, limit).
- `RunLogsFixture`: GitHub Actions' run logs. `/runs/{id}/logs` answers 302 to
  a same-origin archive link, which answers 302 to a signed blob on another
  origin (`BlobStore`, served apart); `redirect` = "loop" redirects to itself,
  "ftp" to an ftp:// URL. Every request says whether it carried our token.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fixtures_providers.common import Job, Registry, hang, json_response, jsonl

PAGE_SIZE = 20
BATCH_PAGE_SIZE = 100  # Mistral's default page_size
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


BATCH_JOBS: dict[str, Any] = {
    "create": {
        "path": "/v1/batch/jobs",
        "idempotency": "none",
        "job_id": "/id",
        "state": "/status",
        "accepted_statuses": [200],
        "set_body": {"metadata.jobwarden_operation_id": "{operation_id}"},
    },
    "status": {
        "path": "/v1/batch/jobs/{job_id}",
        "state": "/status",
        "state_map": {
            "QUEUED": "pending",
            "RUNNING": "running",
            "SUCCESS": "succeeded",
            "FAILED": "failed",
            "CANCELLED": "cancelled",
        },
    },
    "result": {
        "source": "path",
        "path": "/v1/batch/jobs/{job_id}",
        "expect": {"required_fields": ["/succeeded_requests"]},
    },
    "lookup": {
        "path": "/v1/batch/jobs",
        "list": "/data",
        "match": "/metadata/jobwarden_operation_id",
        "job_id": "/id",
        "page_param": "page",
        "first_page": 0,
        "page_size": BATCH_PAGE_SIZE,
        "total": "/total",
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


# The plainest API a create test needs: a header token, a 201 naming the job,
# a status by path, a lookup by our reference, no result (the create tests).
PLAIN_JOBS: dict[str, Any] = {
    "create": {
        "path": "/v1/jobs",
        "idempotency": "header",
        "accepted_statuses": [201],
        "job_id": "/id",
        "client_reference_field": "ref",
    },
    "status": {"path": "/v1/jobs/{job_id}", "state": "/status", "state_map": {"done": "succeeded"}},
    "lookup": {
        "path": "/v1/jobs",
        "query_param": "ref",
        "list": "/jobs",
        "match": "ref",
        "job_id": "id",
    },
    "result": {"source": "none"},
}


class PipelinesFixture:
    """GitLab-like pipelines; `lose_first_create`: the first create's answer never comes;
    `unlisted`: the list leaves ours out until `list_ours()` (a list that lags)."""

    def __init__(self, *, lose_first_create: bool = False, unlisted: bool = False) -> None:
        self.registry = Registry("")
        self.lose_first_create = lose_first_create
        self.unlisted = unlisted
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
        ordered = [
            p
            for p in self.pipelines.values()
            if not self.unlisted or str(p["name"]).startswith("someone-else")
        ]
        headers = {"X-Page": str(page)}
        if page * PAGE_SIZE < len(ordered):
            headers["X-Next-Page"] = str(page + 1)
        return json_response(ordered[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], headers=headers)

    def list_ours(self) -> None:
        self.unlisted = False

    async def status(self, request: Request) -> Response:
        pid = request.path_params["pid"]
        pipeline = self.pipelines[pid]
        self.reads[pid] += 1
        pipeline["status"] = "success" if self.reads[pid] > READS_TO_FINISH else "running"
        return json_response(pipeline)

    async def report(self, request: Request) -> Response:
        return json_response({"total_count": 3, "success_count": 3})


class BatchJobsFixture:
    """Mistral-like batch jobs behind `others` jobs of other callers.

    `lose_first_create`: the first create is never answered in time; the job
    it made is kept, or with `keep_lost = False` never made (the provider
    failed after reading the request).
    """

    def __init__(
        self, *, others: int, lose_first_create: bool = True, keep_lost: bool = True
    ) -> None:
        self.lose_first_create = lose_first_create
        self.keep_lost = keep_lost
        self.creates = 0
        self.jobs: dict[str, dict[str, Any]] = {}
        for i in range(others):
            self._add({"metadata": {"jobwarden_operation_id": f"op_someone_else_{i}"}})
        self.reads: dict[str, int] = {}
        self.pages: list[int] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/batch/jobs", self.create, methods=["POST"]),
                Route("/v1/batch/jobs", self.listing),
                Route("/v1/batch/jobs/{jid}", self.status),
            ]
        )

    def ours(self, operation_id: str) -> list[str]:
        """The ids of the jobs that carry `operation_id`."""
        return [
            jid
            for jid, job in self.jobs.items()
            if job["metadata"].get("jobwarden_operation_id") == operation_id
        ]

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        jid = f"b{len(self.jobs):05d}"
        job = {"id": jid, "object": "batch", "status": "QUEUED", "metadata": body["metadata"]}
        self.jobs[jid] = job
        return job

    async def create(self, request: Request) -> Response:
        self.creates += 1
        body = await request.json()
        lost = self.lose_first_create and self.creates == 1
        if lost and not self.keep_lost:
            await hang()
            return json_response({"message": "internal error"}, 500)
        job = self._add(body)
        if lost:
            await hang()
        return json_response(job)

    async def listing(self, request: Request) -> Response:
        """Page numbers from 0, oldest first; past the end an empty page."""
        page = int(request.query_params.get("page", "0"))
        size = int(request.query_params.get("page_size", str(BATCH_PAGE_SIZE)))
        self.pages.append(page)
        jobs = list(self.jobs.values())
        return json_response(
            {"data": jobs[page * size : (page + 1) * size], "object": "list", "total": len(jobs)}
        )

    async def status(self, request: Request) -> Response:
        jid = request.path_params["jid"]
        job = self.jobs[jid]
        self.reads[jid] = self.reads.get(jid, 0) + 1
        done = self.reads[jid] > READS_TO_FINISH
        job.update(status="SUCCESS" if done else "RUNNING", succeeded_requests=1 if done else 0)
        return json_response(job)


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


# ------------------------------------------------------------------ Salesforce Bulk API 2.0

BULK_ROWS = [f"001{n:03d},Account {n}" for n in range(6)]
BULK_LOCATOR = "MTAwMDA"


# Salesforce's paging of query results, as a user describes it.
BULK_PAGES = {
    "next_page_token": "header:Sforce-Locator",
    "page_token_param": "locator",
    "end_values": ["null"],
}


def bulk_query(
    cancel_body: dict[str, Any] | None = None, *, paged: bool = False, counts: bool = True
) -> dict[str, Any]:
    """The description a user writes for `BulkQueryFixture` (no item_count: the reviewer's);
    `paged`: with `[result.pages]`; `counts`: with the status's record count."""
    cancel: dict[str, Any] = {"method": "PATCH", "path": "/jobs/query/{job_id}", "state": "/state"}
    if cancel_body is not None:
        cancel["body"] = cancel_body
    described = _bulk_query(cancel)
    if paged:
        described["result"]["pages"] = dict(BULK_PAGES)
    if not counts:
        del described["status"]["counts_total"]
    return described


def _bulk_query(cancel: dict[str, Any]) -> dict[str, Any]:
    return {
        "create": {
            "path": "/jobs/query",
            "idempotency": "none",
            "job_id": "/id",
            "accepted_statuses": [200],
            "set_body": {"operation": "query"},
            "error_code": "/0/errorCode",
            "error_message": "/0/message",
        },
        "status": {
            "path": "/jobs/query/{job_id}",
            "state": "/state",
            "state_map": {
                "UploadComplete": "pending",
                "InProgress": "running",
                "JobComplete": "succeeded",
                "Failed": "failed",
                "Aborted": "cancelled",
            },
            "counts_total": "/numberRecordsProcessed",
        },
        "cancel": cancel,
        "result": {
            "source": "path",
            "path": "/jobs/query/{job_id}/results",
            "format": "csv",
            "csv": {"required_columns": ["Id"]},
        },
    }


class BulkQueryFixture:
    """Query jobs that finish after `reads_to_finish` reads, results paged by locator."""

    def __init__(
        self,
        *,
        reads_to_finish: int = READS_TO_FINISH,
        page_size: int = 3,
        done_at_cancel: bool = False,
        unreadable_after_cancel: int = 0,
        busy_results: int = 0,
        error_reads_after_done: int = 0,
        locator_loops: bool = False,
        lose_first_create: bool = False,
        busy_later_pages: int = 0,
        odd_state_after_done: str | None = None,
    ) -> None:
        # the reads after the first that showed the job complete name this state instead
        self.odd_state_after_done = odd_state_after_done
        # this many fetches of a page after the first answer 503
        self.busy_later_pages = busy_later_pages
        # every page names the same next page (a provider's paging bug)
        self.locator_loops = locator_loops
        self.registry = Registry("750")
        # this many result fetches answer 503 (the collection then reads the status afresh)
        self.busy_results = busy_results
        # this many status reads after the first that showed the job complete answer
        # 200 with an error body naming no state (GraphQL's `errors`, a throttle)
        self.error_reads_after_done = error_reads_after_done
        self.error_reads_served = 0
        # the first create makes its job, its answer never comes in time
        self.lose_first_create = lose_first_create
        self.reads_to_finish = reads_to_finish
        self.page_size = page_size
        self.done_at_cancel = done_at_cancel
        # this many status reads after a cancel arrived answer 503 (set when all have)
        self.unreadable_after_cancel = unreadable_after_cancel
        self.unreadable_served = asyncio.Event()
        self.cancel_bodies: list[Any] = []
        self.locators: list[str | None] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/jobs/query", self.create, methods=["POST"]),
                Route("/jobs/query/{jid}", self.status, methods=["GET"]),
                Route("/jobs/query/{jid}", self.abort, methods=["PATCH"]),
                Route("/jobs/query/{jid}/results", self.results),
            ]
        )

    async def create(self, request: Request) -> Response:
        self.registry.count("create")
        job = self.registry.add("query", await request.json(), dict(request.headers))
        job.extra["state"] = "UploadComplete"
        if self.lose_first_create and self.registry.calls["create"] == 1:
            await hang()
        return json_response({"id": job.job_id, "operation": "query", "state": "UploadComplete"})

    async def status(self, request: Request) -> Response:
        self.registry.count("status")
        job = self.registry.jobs.get(request.path_params["jid"])
        if job is None:  # Salesforce's answer for a job id it does not know
            return json_response(
                [{"errorCode": "NOT_FOUND", "message": "The requested resource does not exist"}],
                404,
            )
        if self.cancel_bodies and self.unreadable_after_cancel:
            self.unreadable_after_cancel -= 1
            if not self.unreadable_after_cancel:
                self.unreadable_served.set()
            return json_response({"errorCode": "SERVER_UNAVAILABLE"}, 503)
        job.reads += 1
        if job.extra["state"] == "JobComplete" and self.odd_state_after_done:
            return json_response({"id": job.job_id, "state": self.odd_state_after_done})
        if job.extra["state"] == "JobComplete" and self.error_reads_after_done:
            self.error_reads_after_done -= 1
            self.error_reads_served += 1
            return json_response({"errors": [{"message": "Internal error", "code": "INTERNAL"}]})
        if job.extra["state"] in ("UploadComplete", "InProgress"):
            done = job.reads > self.reads_to_finish
            job.extra["state"] = "JobComplete" if done else "InProgress"
        processed = len(BULK_ROWS) if job.extra["state"] == "JobComplete" else 0
        return json_response(
            {"id": job.job_id, "state": job.extra["state"], "numberRecordsProcessed": processed}
        )

    async def abort(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["jid"]]
        raw = await request.body()
        body = json.loads(raw) if raw else None
        self.cancel_bodies.append(body)
        if not isinstance(body, dict) or body.get("state") != "Aborted":
            return _invalid_job("Invalid job state: null")
        if self.done_at_cancel:
            job.extra["state"] = "JobComplete"
            return _invalid_job("Job is already complete")
        job.extra["state"] = "Aborted"
        return json_response({"id": job.job_id, "state": "Aborted"})

    async def results(self, request: Request) -> Response:
        if self.busy_results:
            self.busy_results -= 1
            return json_response({"errorCode": "SERVER_UNAVAILABLE"}, 503)
        locator = request.query_params.get("locator")
        self.locators.append(locator)
        if locator is not None and self.busy_later_pages:
            self.busy_later_pages -= 1
            return json_response({"errorCode": "SERVER_UNAVAILABLE"}, 503)
        start = 0 if locator is None else int(locator == BULK_LOCATOR) * self.page_size
        rows = BULK_ROWS[start : start + self.page_size]
        more = self.locator_loops or start + self.page_size < len(BULK_ROWS)
        body = "Id,Name\n" + "".join(f"{row}\n" for row in rows)
        headers = {"Sforce-Locator": BULK_LOCATOR if more else "null"}
        return Response(body, media_type="text/csv", headers=headers)


def _invalid_job(message: str) -> Response:
    return json_response([{"errorCode": "INVALIDJOB", "message": message}], 400)


# ------------------------------------------------------------------ GitHub run logs

LOGS_ZIP = b"PK\x03\x04 run logs, zipped"
BLOB_SIGNATURE = "c2lnbmVkLWJsb2I"


def run_logs(*, follow_redirects: bool) -> dict[str, Any]:
    """The description a user writes for `RunLogsFixture` (token in GH_TOKEN)."""
    return {
        "auth": {"secret_env": "GH_TOKEN"},
        "create": {
            "path": "/runs",
            "idempotency": "none",
            "job_id": "/id",
            "accepted_statuses": [201],
        },
        "status": {
            "path": "/runs/{job_id}",
            "state": "/status",
            "state_map": {"queued": "pending", "in_progress": "running", "completed": "succeeded"},
        },
        "result": {
            "source": "path",
            "path": "/runs/{job_id}/logs",
            "format": "binary",
            "follow_redirects": follow_redirects,
        },
    }


class BlobStore:
    """The storage origin a signed link points to: it checks the signature, not a token."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/blob/{name}", self.blob)])

    async def blob(self, request: Request) -> Response:
        self.seen.append((request.url.path, request.headers.get("authorization")))
        if request.query_params.get("sig") != BLOB_SIGNATURE:
            return json_response({"error": "SignatureDoesNotMatch"}, 403)
        return Response(LOGS_ZIP, media_type="application/zip")


class RunLogsFixture:
    """Workflow runs whose logs are a redirect away (`blob_url`: the BlobStore's base URL)."""

    def __init__(
        self, blob_url: str, redirect: Literal["archive", "loop", "ftp"] = "archive"
    ) -> None:
        self.blob_url = blob_url
        self.redirect = redirect
        self.registry = Registry("")
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/runs", self.create, methods=["POST"]),
                Route("/runs/{rid}", self.status),
                Route("/runs/{rid}/logs", self.logs),
                Route("/runs/{rid}/logs/archive", self.archive),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("run", await request.json(), dict(request.headers))
        return json_response({"id": job.job_id, "status": "queued"}, 201)

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["rid"]]
        job.reads += 1
        done = job.reads > READS_TO_FINISH
        return json_response({"id": job.job_id, "status": "completed" if done else "queued"})

    async def logs(self, request: Request) -> Response:
        self.seen.append((request.url.path, request.headers.get("authorization")))
        rid = request.path_params["rid"]
        if self.redirect == "loop":
            return Response(status_code=302, headers={"Location": f"/runs/{rid}/logs"})
        if self.redirect == "ftp":
            return Response(status_code=302, headers={"Location": f"ftp://files.test/{rid}.zip"})
        return Response(status_code=302, headers={"Location": "logs/archive"})

    async def archive(self, request: Request) -> Response:
        self.seen.append((request.url.path, request.headers.get("authorization")))
        rid = request.path_params["rid"]
        link = f"{self.blob_url}/blob/{rid}.zip?sig={BLOB_SIGNATURE}&expires=60"
        return Response(status_code=302, headers={"Location": link})


# ------------------------------------------------------------------ Runway tasks

TASK_OUTPUT = ["https://cdn.example.test/task-output.mp4"]


def runway_tasks(*, read_first: bool, idempotent: bool = False) -> dict[str, Any]:
    """The description a user writes for `TasksFixture` (`read_first`: the key under test)."""
    cancel: dict[str, Any] = {
        "method": "DELETE",
        "path": "/v1/tasks/{job_id}",
        "accepted_statuses": [204],
        "idempotent": idempotent,
    }
    if read_first:
        cancel["read_first"] = True
    return {
        "create": {"path": "/v1/image_to_video", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/tasks/{job_id}",
            "state": "/status",
            "error": "/failure",
            "state_map": {
                "PENDING": "pending",
                "THROTTLED": "pending",
                "RUNNING": "running",
                "SUCCEEDED": "succeeded",
                "FAILED": "failed",
                "CANCELLED": "cancelled",
            },
        },
        "cancel": cancel,
        "result": {"source": "inline", "inline": "/output"},
    }


class TasksFixture:
    """Tasks that run until the test ends them; DELETE cancels or deletes them.

    `requests` lists (method, the task's status when it arrived) in arrival
    order; `deleted` the tasks a DELETE destroyed after they ended.
    """

    def __init__(
        self, *, deleted_reads_as: Literal["404", "CANCELLED"] = "404", busy_deletes: int = 0
    ) -> None:
        self.registry = Registry("task-")
        self.deleted_reads_as = deleted_reads_as
        # this many DELETEs answer 503 without acting (an uncertain cancel)
        self.busy_deletes = busy_deletes
        self.requests: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        # set by a test: the task succeeds right after answering its next read
        self.end_after_next_read = False
        # set by a test: a DELETE deletes a running task too (Luma's generations)
        self.deletes_running = False

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/image_to_video", self.create, methods=["POST"]),
                Route("/v1/tasks/{tid}", self.status, methods=["GET"]),
                Route("/v1/tasks/{tid}", self.delete, methods=["DELETE"]),
            ]
        )

    def finish(self) -> None:
        """The only task succeeds (its output is ready, and billed)."""
        self.registry.only().extra["status"] = "SUCCEEDED"

    async def create(self, request: Request) -> Response:
        job = self.registry.add("task", await request.json(), dict(request.headers))
        job.extra["status"] = "RUNNING"
        self.requests.append(("POST", "RUNNING"))
        return json_response({"id": job.job_id})

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["tid"]]
        status = job.extra["status"]
        self.requests.append(("GET", status))
        if status == "DELETED":
            if self.deleted_reads_as == "404":
                return json_response({"error": "Task not found"}, 404)
            status = "CANCELLED"
        body: dict[str, Any] = {"id": job.job_id, "status": status}
        if status == "SUCCEEDED":
            body["output"] = TASK_OUTPUT
        if status == "RUNNING" and self.end_after_next_read:
            self.end_after_next_read = False
            job.extra["status"] = "SUCCEEDED"  # after this answer: the window
        return json_response(body)

    async def delete(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["tid"]]
        status = job.extra["status"]
        self.requests.append(("DELETE", status))
        if self.busy_deletes:
            self.busy_deletes -= 1
            return json_response({"error": "Service unavailable"}, 503)
        if status in ("PENDING", "THROTTLED", "RUNNING") and not self.deletes_running:
            job.extra["status"] = "CANCELLED"
        elif status != "DELETED":
            job.extra["status"] = "DELETED"  # the task and its output, gone
            self.deleted.append(job.job_id)
        return Response(status_code=204)


FAL_IMAGES = {"images": [{"url": "https://cdn.example/1.png", "width": 1024}], "seed": 7}
FAL_VALIDATION = {
    "detail": [{"loc": ["body", "prompt"], "msg": "field required", "type": "value_error.missing"}]
}
FalOutcome = Literal["ok", "422", "500"]


def fal_queue(*, failed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The description a user writes for `QueueFixture` (`failed`: `[result.failed]`)."""
    result: dict[str, Any] = {
        "source": "path",
        "path": "/fal-ai/flux/requests/{job_id}",
        "expect": {"required_fields": ["/images"]},
    }
    if failed is not None:
        result["failed"] = failed
    return {
        "create": {"path": "/fal-ai/flux", "idempotency": "none", "job_id": "/request_id"},
        "status": {
            "path": "/fal-ai/flux/requests/{job_id}/status",
            "state": "/status",
            "state_map": {
                "IN_QUEUE": "pending",
                "IN_PROGRESS": "running",
                "COMPLETED": "succeeded",
            },
        },
        "result": result,
    }


class QueueFixture:
    """fal.ai's queue: a job reads IN_PROGRESS once, then COMPLETED, whatever its
    outcome (the body's `outcome`: "ok", "422" or "500"); the response URL tells it.
    `responses` counts the response URL's answers."""

    def __init__(self) -> None:
        self.registry = Registry("req-")
        self.responses = 0
        # while set, the response URL answers 503 (an outage of the result store)
        self.busy = False
        # this many status reads answer a 200 naming no state (a throttle in the body)
        self.blank_reads = 0
        # this many response fetches meet a proxy's HTML 500 (not fal's own answer)
        self.proxy_errors = 0
        # this many submits answer 429 with Retry-After (whether a job was made: unsaid)
        self.throttled_submits = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/fal-ai/flux", self.submit, methods=["POST"]),
                Route("/fal-ai/flux/requests/{rid}/status", self.status, methods=["GET"]),
                Route("/fal-ai/flux/requests/{rid}", self.response, methods=["GET"]),
            ]
        )

    async def submit(self, request: Request) -> Response:
        body = await request.json()
        if self.throttled_submits:
            self.throttled_submits -= 1
            return json_response({"detail": "Too many requests"}, 429, {"Retry-After": "30"})
        job = self.registry.add("queue", body, dict(request.headers))
        base = f"{request.base_url}fal-ai/flux/requests/{job.job_id}"
        return json_response(
            {
                "request_id": job.job_id,
                "response_url": base,
                "status_url": f"{base}/status",
                "cancel_url": f"{base}/cancel",
            }
        )

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["rid"]]
        if self.blank_reads:
            self.blank_reads -= 1
            return json_response({"detail": "Rate limited, try again"})
        job.reads += 1
        if job.reads == 1:
            return json_response({"status": "IN_PROGRESS", "logs": None})
        return json_response({"status": "COMPLETED", "metrics": {"inference_time": 1.2}})

    async def response(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["rid"]]
        self.responses += 1
        if self.busy:
            return json_response({"detail": "Service Unavailable"}, 503)
        if self.proxy_errors:
            self.proxy_errors -= 1
            page = b"<html><body><h1>500 Internal Server Error</h1></body></html>"
            return Response(page, 500, media_type="text/html")
        outcome: FalOutcome = job.request.get("outcome", "ok")
        if outcome == "422":
            return json_response(FAL_VALIDATION, 422)
        if outcome == "500":
            return json_response(
                {"detail": "CUDA out of memory", "error_type": "runner_server_error"},
                500,
                {"X-Fal-Error-Type": "runner_server_error"},
            )
        return json_response(FAL_IMAGES)


BULK_LINES = [{"id": "gid://shopify/Product/1"}, {"id": "gid://shopify/Product/2"}]


def bulk_export(*, empty_without_url: bool) -> dict[str, Any]:
    """The description a user writes for `BulkExportFixture`."""
    result: dict[str, Any] = {
        "source": "url",
        "format": "jsonl",
        "expect": {"item_count": "from_status_counts"},
    }
    if empty_without_url:
        result["empty_without_url"] = True
    return {
        "create": {"path": "/bulk_operations", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/bulk_operations/{job_id}",
            "state": "/status",
            "state_map": {
                "CREATED": "pending",
                "RUNNING": "running",
                "COMPLETED": "succeeded",
                "FAILED": "failed",
                "CANCELED": "cancelled",
            },
            "result_url": "/url",
            "counts_total": "/objectCount",
        },
        "result": result,
    }


class BulkExportFixture:
    """Exports that finish at their second read; the body's `matches` (0 or more)
    says how many lines the export finds. `files` counts the file fetches."""

    def __init__(self) -> None:
        self.registry = Registry("")
        self.files = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bulk_operations", self.create, methods=["POST"]),
                Route("/bulk_operations/{bid}", self.status, methods=["GET"]),
                Route("/files/{bid}.jsonl", self.file, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("bulk", await request.json(), dict(request.headers))
        return json_response({"id": job.job_id, "status": "CREATED"})

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["bid"]]
        job.reads += 1
        if job.reads < READS_TO_FINISH:
            return json_response({"id": job.job_id, "status": "RUNNING", "objectCount": "0"})
        matches = int(job.request.get("matches", len(BULK_LINES)))
        url = f"{request.base_url}files/{job.job_id}.jsonl" if matches else None
        body = {"id": job.job_id, "status": "COMPLETED", "objectCount": str(matches), "url": url}
        return json_response(body)

    async def file(self, request: Request) -> Response:
        self.files += 1
        return Response(jsonl(BULK_LINES), media_type="application/jsonl")


# Past the 8 MiB any other answer is read up to (reconciler.lanes.MAX_ANSWER_BYTES).
VIDEO = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * (9 * 4096)


def stability_results() -> dict[str, Any]:
    """The description a user writes for `ResultsFixture`."""
    return {
        "headers": {"Accept": "video/*"},
        "create": {"path": "/v2beta/image-to-video", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v2beta/results/{job_id}",
            "state": "header:finish-reason",
            "state_map": {"SUCCESS": "succeeded", "CONTENT_FILTERED": "failed"},
            "state_from_http_status": {"202": "running"},
        },
        "result": {
            "source": "path",
            "path": "/v2beta/results/{job_id}",
            "format": "binary",
            "expect": {"content_types": ["video/mp4"]},
        },
    }


class ResultsFixture:
    """Generations done at their second read; `reads` counts the result URL's answers."""

    def __init__(
        self, *, chunk_delay: float = 0.0, gzipped: bool = False, multipart: bool = False
    ) -> None:
        self.registry = Registry("gen-")
        self.reads = 0
        # creates taken as Stability takes them: multipart/form-data with an
        # `image` file, anything else refused (400); `images` the files received
        self.multipart = multipart
        self.images: list[tuple[str | None, str | None, bytes]] = []
        # the video streamed in 8 chunks this far apart (a slow link)
        self.chunk_delay = chunk_delay
        # the video sent gzipped, its Content-Digest over the bytes as sent (RFC 9530)
        self.gzipped = gzipped

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2beta/image-to-video", self.create, methods=["POST"]),
                Route("/v2beta/results/{gid}", self.result, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        if not self.multipart:
            job = self.registry.add("video", await request.json(), dict(request.headers))
            return json_response({"id": job.job_id})
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return json_response({"name": "bad_request", "errors": ["multipart only"]}, 400)
        async with request.form() as form:
            image = form.get("image")
            if not isinstance(image, UploadFile):
                return json_response({"name": "bad_request", "errors": ["image: required"]}, 400)
            self.images.append((image.filename, image.content_type, await image.read()))
            fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        job = self.registry.add("video", fields, dict(request.headers))
        return json_response({"id": job.job_id})

    async def result(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["gid"]]
        job.reads += 1
        self.reads += 1
        if job.reads < READS_TO_FINISH:
            return json_response({"id": job.job_id, "status": "in-progress"}, 202)
        headers = {"finish-reason": "SUCCESS"}
        if self.gzipped:
            sent = gzip.compress(VIDEO)
            digest = base64.b64encode(hashlib.sha256(sent).digest()).decode()
            headers |= {"Content-Encoding": "gzip", "Content-Digest": f"sha-256=:{digest}:"}
            return Response(sent, media_type="video/mp4", headers=headers)
        if not self.chunk_delay:
            return Response(VIDEO, media_type="video/mp4", headers=headers)
        return StreamingResponse(self._slowly(), media_type="video/mp4", headers=headers)

    async def _slowly(self) -> AsyncIterator[bytes]:
        # Real time on purpose: what is under test is the client's wall-clock
        # bound (asyncio.timeout on the loop's clock, which no test clock
        # moves), so the answer must take longer than request_timeout. A slower
        # machine only makes it slower; nothing asserts a duration.
        size = len(VIDEO) // 8 + 1
        for start in range(0, len(VIDEO), size):
            await asyncio.sleep(self.chunk_delay)
            yield VIDEO[start : start + size]


HEYGEN_VIDEO = b"\x00\x00\x00\x18ftypmp42 heygen"


def heygen_videos() -> dict[str, Any]:
    """The description a user writes for `VideosFixture`."""
    return {
        "create": {"path": "/v2/video/generate", "idempotency": "none", "job_id": "/data/video_id"},
        "status": {
            "path": "/v1/videos/{job_id}",
            "state": "/data/status",
            "state_map": {
                "pending": "pending",
                "processing": "running",
                "completed": "succeeded",
                "failed": "failed",
            },
            "result_url": "/data/video_url",
        },
        "result": {"source": "url", "format": "binary"},
    }


class VideosFixture:
    """Videos done at their second read. `fetches` lists each fetch's link read
    number and the answer's status code."""

    def __init__(self, first_valid_read: int = 1) -> None:
        self.registry = Registry("vid")
        self.first_valid_read = first_valid_read
        self.status_reads = 0
        self.fetches: list[tuple[int, int]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/video/generate", self.create, methods=["POST"]),
                Route("/v1/videos/{vid}", self.status, methods=["GET"]),
                Route("/files/{vid}.mp4", self.file, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("video", await request.json(), dict(request.headers))
        return json_response({"error": None, "data": {"video_id": job.job_id}})

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["vid"]]
        job.reads += 1
        self.status_reads += 1
        if job.reads < READS_TO_FINISH:
            return json_response({"code": 100, "data": {"id": job.job_id, "status": "processing"}})
        link = f"{request.base_url}files/{job.job_id}.mp4?Expires={self.status_reads}&Signature=s"
        data = {"id": job.job_id, "status": "completed", "video_url": link}
        return json_response({"code": 100, "data": data})

    async def file(self, request: Request) -> Response:
        minted = int(request.query_params["Expires"])
        if minted < self.first_valid_read:
            self.fetches.append((minted, 403))
            return Response(b"<Error><Code>AccessDenied</Code></Error>", 403)
        self.fetches.append((minted, 200))
        return Response(HEYGEN_VIDEO, media_type="video/mp4")


OUTPUT_ROWS = [f"R{n:03d},Item {n}" for n in range(6)]


OutputPaging = Literal["cursor", "url", "offset"]
OUTPUT_PAGES: dict[str, dict[str, Any]] = {
    "cursor": {
        "next_page_token": "header:Next-Cursor",
        "page_token_param": "cursor",
        "end_values": ["null"],
    },
    "url": {"next_page_url": "header:Next-Page"},
    "offset": {"offset_param": "offset", "page_size": 3, "page_size_param": "limit"},
}


def cancelled_output(paging: OutputPaging = "cursor", *, on_path: bool = False) -> dict[str, Any]:
    """The description a user writes for `CancelledOutputFixture` (`on_path`: the
    output read at the job's own path, as Apify's dataset items, not at the link
    the status names)."""
    if on_path:
        described = cancelled_output(paging)
        del described["status"]["result_url"]
        described["result"] = {
            **described["result"],
            "source": "path",
            "path": "/out/{job_id}",
            "partial_on_cancel": True,
        }
        return described
    return {
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/jobs/{job_id}",
            "state": "/state",
            "result_url": "/output_url",
            "state_map": {
                "running": "running",
                "done": "succeeded",
                "cancelled": "cancelled",
            },
        },
        "cancel": {"method": "POST", "path": "/jobs/{job_id}/cancel", "state": "/state"},
        "result": {"source": "url", "format": "csv", "pages": dict(OUTPUT_PAGES[paging])},
    }


class CancelledOutputFixture:
    """Jobs that run until cancelled; `cursors` lists each output fetch's cursor
    (its page or offset with `paging`)."""

    def __init__(self, *, looping: bool = False, paging: OutputPaging = "cursor") -> None:
        self.registry = Registry("job-")
        self.looping = looping
        self.paging = paging
        self.cursors: list[str | None] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/jobs", self.create, methods=["POST"]),
                Route("/jobs/{jid}", self.status, methods=["GET"]),
                Route("/jobs/{jid}/cancel", self.cancel, methods=["POST"]),
                Route("/out/{jid}", self.output, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("job", await request.json(), dict(request.headers))
        job.extra["state"] = "running"
        return json_response({"id": job.job_id, "state": "running"})

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["jid"]]
        body: dict[str, Any] = {"id": job.job_id, "state": job.extra["state"]}
        if job.extra["state"] == "cancelled":
            body["output_url"] = f"{request.base_url}out/{job.job_id}"
        return json_response(body)

    async def cancel(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["jid"]]
        job.extra["state"] = "cancelled"
        return json_response({"id": job.job_id, "state": "cancelled"})

    async def output(self, request: Request) -> Response:
        if self.paging == "offset":
            offset = int(request.query_params["offset"])
            limit = int(request.query_params["limit"])
            self.cursors.append(str(offset))
            rows = OUTPUT_ROWS[offset : offset + limit]
            return Response(
                "Id,Name\n" + "".join(f"{row}\n" for row in rows), media_type="text/csv"
            )
        if self.paging == "url":
            number = request.query_params.get("page")
            self.cursors.append(number)
            page = int(number or 0)
            rows = OUTPUT_ROWS[page * 3 : (page + 1) * 3]
            # relative: resolved against this page's own URL
            headers = {"Next-Page": "?page=1"} if page == 0 or self.looping else {}
            return Response(
                "Id,Name\n" + "".join(f"{row}\n" for row in rows),
                media_type="text/csv",
                headers=headers,
            )
        cursor = request.query_params.get("cursor")
        self.cursors.append(cursor)
        page = 0 if cursor is None else int(cursor.removeprefix("c"))
        rows = OUTPUT_ROWS[page * 3 : (page + 1) * 3]
        following = "c1" if page == 0 or self.looping else "null"
        return Response(
            "Id,Name\n" + "".join(f"{row}\n" for row in rows),
            media_type="text/csv",
            headers={"Next-Cursor": following},
        )


SHOPIFY_GRAPHQL = "/admin/api/2025-01/graphql.json"
NODE_QUERY = (
    "query($id: ID!) { node(id: $id) { ... on BulkOperation { id status errorCode "
    "objectCount url } } }"
)


def shopify_bulk() -> dict[str, Any]:
    """The description a user writes for `GraphqlBulkFixture` (no plugin)."""
    node = "/data/node"
    return {
        "create": {
            "path": SHOPIFY_GRAPHQL,
            "idempotency": "none",
            "job_id": "/data/bulkOperationRunQuery/bulkOperation/id",
            "accepted_statuses": [200],
        },
        "status": {
            "method": "POST",
            "path": SHOPIFY_GRAPHQL,
            "body": {"query": NODE_QUERY, "variables": {"id": "{job_id}"}},
            "state": f"{node}/status",
            "state_map": {
                "CREATED": "pending",
                "RUNNING": "running",
                "COMPLETED": "succeeded",
                "FAILED": "failed",
                "CANCELING": "running",
                "CANCELED": "cancelled",
            },
            "error_code": f"{node}/errorCode",
            "result_url": f"{node}/url",
            "counts_total": f"{node}/objectCount",
        },
        "cancel": {
            "method": "POST",
            "path": SHOPIFY_GRAPHQL,
            "body": {
                "query": "mutation($id: ID!) { bulkOperationCancel(id: $id) { userErrors "
                "{ message } } }",
                "variables": {"id": "{job_id}"},
            },
            "accepted_statuses": [200],
        },
        "result": {
            "source": "url",
            "format": "jsonl",
            "empty_without_url": True,
            "expect": {"item_count": "from_status_counts"},
        },
    }


class GraphqlBulkFixture:
    """Bulk operations done at their second read; the mutation's query text says how
    many lines the export finds (`matches:N`). `reads` lists each node query's id.
    The first `throttled_reads` reads are THROTTLED (`errors` only), the next
    `stateless_reads` name a node without its status."""

    def __init__(self, *, throttled_reads: int = 0, stateless_reads: int = 0) -> None:
        self.registry = Registry("gid://shopify/BulkOperation/")
        self.throttled_reads = throttled_reads
        self.stateless_reads = stateless_reads
        self.reads: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(SHOPIFY_GRAPHQL, self.graphql, methods=["POST"]),
                Route("/files/{n}.jsonl", self.file, methods=["GET"]),
            ]
        )

    async def graphql(self, request: Request) -> Response:
        body = await request.json()
        query = body["query"]
        if "bulkOperationRunQuery" in query:
            job = self.registry.add("bulk", body, dict(request.headers), status="CREATED")
            operation = {"id": job.job_id, "status": "CREATED"}
            payload = {"bulkOperation": operation, "userErrors": []}
            return json_response({"data": {"bulkOperationRunQuery": payload}})
        job = self.registry.jobs[body["variables"]["id"]]
        if "bulkOperationCancel" in query:
            job.extra["status"] = "CANCELED"
            return json_response({"data": {"bulkOperationCancel": {"userErrors": []}}})
        self.reads.append(job.job_id)
        if self.throttled_reads:
            self.throttled_reads -= 1
            error = {"message": "Throttled", "extensions": {"code": "THROTTLED"}}
            return json_response({"errors": [error]})
        if self.stateless_reads:
            self.stateless_reads -= 1
            return json_response({"data": {"node": {"id": job.job_id}}})
        return json_response({"data": {"node": self._node(request, job)}})

    def _node(self, request: Request, job: Job) -> dict[str, Any]:
        job.reads += 1
        if job.reads >= READS_TO_FINISH and job.extra["status"] == "CREATED":
            job.extra["status"] = "COMPLETED"
        status = job.extra["status"]
        matches = int(job.request["query"].rpartition("matches:")[2].split()[0])
        done = status == "COMPLETED"
        number = job.job_id.rpartition("/")[2]
        url = f"{request.base_url}files/{number}.jsonl" if done and matches else None
        count = str(matches if done else 0)
        return {"id": job.job_id, "status": status, "objectCount": count, "url": url}

    async def file(self, request: Request) -> Response:
        return Response(jsonl(BULK_LINES), media_type="application/jsonl")


def dub_audio(language: str) -> bytes:
    return b"ID3\x04\x00" + language.encode() * 64


def elevenlabs_dubbing() -> dict[str, Any]:
    """The description a user writes for `DubbingFixture`."""
    return {
        "create": {"path": "/v1/dubbing", "idempotency": "none", "job_id": "/dubbing_id"},
        "status": {
            "path": "/v1/dubbing/{job_id}",
            "state": "/status",
            "state_map": {"dubbing": "running", "dubbed": "succeeded", "failed": "failed"},
            "error": "/error",
        },
        "result": {
            "source": "files",
            "path": "/v1/dubbing/{job_id}/audio/{file_id}",
            "file_ids": "/target_languages",
            "format": "binary",
        },
    }


class DubbingFixture:
    """Dubs done at their second read, into the body's `target_langs` (a list)."""

    def __init__(self) -> None:
        self.registry = Registry("dub")
        self.audio_fetches: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/dubbing", self.create, methods=["POST"]),
                Route("/v1/dubbing/{did}", self.status, methods=["GET"]),
                Route("/v1/dubbing/{did}/audio/{lang}", self.audio, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("dub", await request.json(), dict(request.headers))
        return json_response({"dubbing_id": job.job_id, "expected_duration_sec": 30})

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["did"]]
        job.reads += 1
        status = "dubbed" if job.reads >= READS_TO_FINISH else "dubbing"
        languages = job.request["target_langs"]
        return json_response(
            {"dubbing_id": job.job_id, "status": status, "target_languages": languages}
        )

    async def audio(self, request: Request) -> Response:
        language = request.path_params["lang"]
        self.audio_fetches.append(language)
        return Response(dub_audio(language), media_type="audio/mpeg")


CRAWL_DOCUMENTS = [{"markdown": f"# Page {n}", "metadata": {"n": n}} for n in range(25)]
CRAWL_PAGE = 10  # documents a crawl status page holds


def crawl_documents(version: int) -> list[dict[str, Any]]:
    """The crawl's documents as its `version`th rewrite serves them (0: as first run)."""
    if version == 0:
        return CRAWL_DOCUMENTS
    return [{**doc, "markdown": f"{doc['markdown']} (v{version})"} for doc in CRAWL_DOCUMENTS]


def firecrawl_crawl(**pages: Any) -> dict[str, Any]:
    """The description a user writes for `CrawlFixture` (token in FC_TOKEN)."""
    return {
        "auth": {"secret_env": "FC_TOKEN"},
        "create": {"path": "/v1/crawl", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/crawl/{job_id}",
            "state": "/status",
            "state_map": {
                "scraping": "running",
                "completed": "succeeded",
                "failed": "failed",
                "cancelled": "cancelled",
            },
            "counts_total": "/total",
        },
        "result": {
            "source": "path",
            "path": "/v1/crawl/{job_id}",
            "format": "json",
            "items": "/data",
            "pages": {"next_page_url": "/next", **pages},
        },
    }


class CrawlFixture:
    """Firecrawl's crawls: `skips` lists each status page's `?skip=` (None: none),
    `tokens` whether each carried our token; `limited_pages`: that many reads of
    a further page (with a skip of at least `limited_from`) answer 429,
    Firecrawl's rate limit; `rewrites`: that many of those 429s come as the crawl
    is run again, its documents rewritten (`version` counts the rewrites: each
    document's markdown says which version it is from, the count stays)."""

    def __init__(
        self,
        *,
        foreign_next: str | None = None,
        limited_pages: int = 0,
        limited_from: int = 1,
        rewrites: int = 0,
    ) -> None:
        self.registry = Registry("crawl-")
        self.foreign_next = foreign_next
        self.limited_pages = limited_pages
        self.limited_from = limited_from
        self.rewrites = rewrites
        self.version = 0
        self.skips: list[str | None] = []
        self.tokens: list[bool] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/crawl", self.create, methods=["POST"]),
                Route("/v1/crawl/{cid}", self.status, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("crawl", await request.json(), dict(request.headers))
        return json_response(
            {"success": True, "id": job.job_id, "url": f"{request.base_url}v1/crawl/{job.job_id}"}
        )

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["cid"]]
        job.reads += 1
        total = len(CRAWL_DOCUMENTS)
        if job.reads < READS_TO_FINISH:
            return json_response({"status": "scraping", "total": total, "completed": 3})
        skip = request.query_params.get("skip")
        if skip and int(skip) >= self.limited_from and self.limited_pages > 0:
            self.limited_pages -= 1
            if self.rewrites > 0:
                self.rewrites -= 1
                self.version += 1
            return json_response({"success": False, "error": "Rate limit exceeded"}, 429)
        self.skips.append(skip)
        self.tokens.append(request.headers.get("authorization") == "Bearer fc-test")
        start = int(skip or 0)
        body: dict[str, Any] = {
            "status": "completed",
            "total": total,
            "completed": total,
            "creditsUsed": total,
            "expiresAt": "2030-01-01T00:00:00.000Z",
            "data": crawl_documents(self.version)[start : start + CRAWL_PAGE],
        }
        if start + CRAWL_PAGE < total:
            body["next"] = f"{request.base_url}v1/crawl/{job.job_id}?skip={start + CRAWL_PAGE}"
            if self.foreign_next is not None and start == 0:
                body["next"] = self.foreign_next
        return json_response(body)


DATASET_ITEMS = [{"url": f"https://shop.example/p/{n}", "price": n} for n in range(25)]


def apify_dataset(**pages: Any) -> dict[str, Any]:
    """The description a user writes for `DatasetFixture`: the run's default
    dataset, ten items a page by offset."""
    return {
        "create": {
            "path": "/v2/acts/shop~crawler/runs",
            "idempotency": "none",
            "job_id": "/data/id",
            "accepted_statuses": [201],
        },
        "status": {
            "path": "/v2/actor-runs/{job_id}",
            "state": "/data/status",
            "state_map": {
                "READY": "pending",
                "RUNNING": "running",
                "SUCCEEDED": "succeeded",
                "FAILED": "failed",
                "TIMED-OUT": "failed",
                "ABORTED": "cancelled",
            },
        },
        "result": {
            "source": "path",
            "path": "/v2/actor-runs/{job_id}/dataset/items?format=json&clean=true",
            "format": "json",
            "items": "",
            "pages": {
                "offset_param": "offset",
                "page_size": 10,
                "page_size_param": "limit",
                **pages,
            },
        },
    }


class DatasetFixture:
    """Apify's actor runs: `pages` lists each dataset fetch's (offset, limit)."""

    def __init__(self, items: int = len(DATASET_ITEMS)) -> None:
        self.registry = Registry("run")
        self.items = DATASET_ITEMS[:items]
        self.pages: list[tuple[int, int]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/acts/{actor}/runs", self.create, methods=["POST"]),
                Route("/v2/actor-runs/{rid}", self.status, methods=["GET"]),
                Route("/v2/actor-runs/{rid}/dataset/items", self.dataset, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        job = self.registry.add("run", await request.json(), dict(request.headers))
        return json_response({"data": {"id": job.job_id, "status": "READY"}}, status=201)

    async def status(self, request: Request) -> Response:
        job = self.registry.jobs[request.path_params["rid"]]
        job.reads += 1
        status = "SUCCEEDED" if job.reads >= READS_TO_FINISH else "RUNNING"
        return json_response({"data": {"id": job.job_id, "status": status}})

    async def dataset(self, request: Request) -> Response:
        offset = int(request.query_params["offset"])
        limit = int(request.query_params["limit"])
        self.pages.append((offset, limit))
        page = self.items[offset : offset + limit]
        headers = {
            "X-Apify-Pagination-Total": str(len(self.items)),
            "X-Apify-Pagination-Offset": str(offset),
            "X-Apify-Pagination-Limit": str(limit),
            "X-Apify-Pagination-Count": str(len(page)),
        }
        return json_response(page, headers=headers)
