"""Apify actor runs, Black Forest Labs (FLUX) generations, Mindee's async predictions
and Perplexity's async chat completions, each a real app on loopback answering in
the shapes their public documentation gives (tests/integration/test_unseen_round57.py).
Where the docs leave a behaviour open, the assumption is stated here.

- Apify (bearer token): `POST /v2/acts/{actorId}/runs` (the body is the actor's
  input) answers 201 {"data": run}; run {"id", "actId", "status": READY | RUNNING |
  SUCCEEDED | FAILED | TIMING-OUT | TIMED-OUT | ABORTING | ABORTED, "statusMessage",
  "isStatusMessageTerminal", "startedAt", "finishedAt", "exitCode",
  "defaultDatasetId", "defaultKeyValueStoreId", "meta": {"origin": "API"}, ...};
  `GET /v2/actor-runs/{runId}` {"data": run}; `POST /v2/actor-runs/{runId}/abort`
  200 {"data": run} (ABORTING; a run that ended: "this call does nothing", the run
  as it is); `GET /v2/datasets/{id}/items` and `GET
  /v2/actor-runs/{runId}/dataset/items` a JSON array, paged by `offset` and
  `limit`, with X-Apify-Pagination-Offset/-Limit/-Count/-Total headers; `GET
  /v2/acts/{actorId}/runs?desc=1` {"data": {"total", "offset", "limit", "count",
  "desc", "items": [run summaries: id, status, startedAt, ..., meta.origin]}} (no
  field of the caller's). Errors {"error": {"type", "message"}}. A run writes its
  items as it goes, so an aborted or timed-out run's dataset holds what it wrote.
- Black Forest Labs (`x-key`): `POST /v1/flux-pro-1.1` {"prompt", "width",
  "height", ...} answers 200 {"id", "polling_url"} (the polling URL per request,
  on the cluster that took it: `cluster_url`, an https server, when set);
  `GET polling_url` {"id", "status": Pending | Ready | Error | Failed | Request
  Moderated | Content Moderated | Task not found,
  "result": {"sample": a signed URL valid 10 minutes, "prompt", "seed", ...} | null,
  "progress", "details"}; moderation names its reasons in details["Moderation
  Reasons"] (assumed for both words); an unknown id reads 200 "Task not found"
  (assumed 200, as the status list gives it). No cancel. Errors 422 {"detail":
  [...]}, 403 {"detail": "Not authenticated"} (assumed).
- Mindee v1 async (`Authorization: Token ...`): `POST
  /v1/products/{owner}/{product}/{version}/predict_async` multipart `document`
  answers 202 {"api_request": {...}, "job": {"id", "issued_at", "status": "waiting"}};
  `GET .../documents/queue/{job_id}` 200 {"job": {"status": waiting | processing}},
  failed 200 {"job": {"status": "failed", "error": {"code", "message"}}} (assumed),
  and completed 302, `Location: .../documents/{document_id}`, a body naming
  nothing (assumed); `GET .../documents/{document_id}` {"api_request", "document":
  {"id", "name", "n_pages", "inference": {"prediction", "pages"}}}. Errors
  {"api_request": {"error": {"code", "message", "details"}, "status": "failure",
  "status_code"}}. No cancel, no list of jobs.
- Perplexity (bearer): `POST /async/chat/completions` {"request": {"model",
  "messages", ...}} answers 200 {"id", "model", "created_at", "status": "CREATED",
  "started_at", "completed_at", "response": null, "failed_at", "error_message"};
  `GET /async/chat/completions/{id}` the same, status CREATED | IN_PROGRESS |
  COMPLETED | FAILED, "response" the chat completion once COMPLETED,
  "error_message" and "failed_at" once FAILED; `GET /async/chat/completions`
  {"requests": [{"id", "model", "status", "created_at", ...}], "next_token"} (no
  field of the caller's). Errors {"error": {"message", "type", "code"}}. No cancel.

Scripts: in the create body's `script` (Apify's input, BFL's body, Perplexity's
request) or the fixture's `script` (Mindee): "fail", "timeout" (Apify),
"moderated" (BFL), "slow" (runs until the test ends it), anything else completes
after a few reads.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created, _Storage

# --- Apify -------------------------------------------------------------------------

AP_TOKEN = "apify_api_0123456789abcdefABCDEF"
AP_ACTOR = "apify~website-content-crawler"
AP_ITEMS = [{"url": f"https://example.com/p{n}", "text": f"page {n}"} for n in range(5)]
AP_FAILURE = "The Actor process failed: Error: Navigation timed out after 60 seconds."
AP_TIMED_OUT = "The Actor run timed out after 300 seconds."
AP_HOOK_TOKEN = "apify-hook-token-7f3a9c2e5b1d"


class ApifyFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("HG7ML7M8z78Yc", **kwargs)
        self.item_reads: list[tuple[str | None, str | None]] = []  # (offset, limit)
        self.list_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/acts/{actor}/runs", self.create, methods=["POST"]),
                Route("/v2/acts/{actor}/runs", self.list_runs, methods=["GET"]),
                Route("/v2/actor-runs/{rid}", self.get, methods=["GET"]),
                Route("/v2/actor-runs/{rid}/abort", self.abort, methods=["POST"]),
                Route("/v2/actor-runs/{rid}/dataset/items", self.run_items, methods=["GET"]),
                Route("/v2/datasets/{did}/items", self.items, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: int, kind: str, message: str) -> Response:
        return json_response({"error": {"type": kind, "message": message}}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {AP_TOKEN}":
            return self._error(401, "token-not-provided", "Authentication token was not provided")
        return None

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        ended = state in ("SUCCEEDED", "FAILED", "TIMED-OUT", "ABORTED")
        message = {
            "READY": None,
            "RUNNING": "Crawling: 2 of 5 pages",
            "SUCCEEDED": "Finished! Total 5 requests: 5 succeeded, 0 failed.",
            "FAILED": AP_FAILURE,
            "TIMING-OUT": "Crawling: 3 of 5 pages",
            "TIMED-OUT": AP_TIMED_OUT,
            "ABORTING": "Crawling: 2 of 5 pages",
            "ABORTED": "The Actor run was aborted.",
        }[state]
        return {
            "id": job["id"],
            "actId": "moJRLRc85AitArpNN",
            "userId": "wRsJZtadYvn4mBZmm",
            "startedAt": "2026-12-06T10:00:00.000Z",
            "finishedAt": "2026-12-06T10:04:00.000Z" if ended else None,
            "status": state,
            "statusMessage": message,
            "isStatusMessageTerminal": ended or None,
            "meta": {"origin": "API"},
            "exitCode": 1 if state == "FAILED" else (0 if ended else None),
            "defaultKeyValueStoreId": f"kvs{job['id']}",
            "defaultDatasetId": job["dataset"],
            "defaultRequestQueueId": f"rq{job['id']}",
            "buildNumber": "0.3.52",
            "usageTotalUsd": 0.012,
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if request.path_params["actor"] != AP_ACTOR:
            return self._error(404, "record-not-found", "Actor was not found")
        body = await read_json(request)
        if not isinstance(body, dict):
            return self._error(400, "invalid-input", "Input is not a JSON object")
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "body": body,
            "state": "READY",
            "reads": 0,
            "script": body.get("script"),
            "dataset": f"ds{rid}",
            "items": [],
        }
        await _created(self)
        return json_response({"data": self.run(self.jobs[rid])}, 201)

    async def list_runs(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        runs = list(self.jobs.values())
        if request.query_params.get("desc") == "1":
            runs.reverse()
        keys = ("id", "actId", "status", "startedAt", "finishedAt", "meta", "defaultDatasetId")
        items = [{k: self.run(j)[k] for k in keys} for j in runs]
        data = {"total": len(items), "offset": 0, "limit": 1000, "count": len(items)}
        return json_response({"data": data | {"desc": True, "items": items}})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "record-not-found", "Actor run was not found")
        self.reads += 1
        if job["state"] == "ABORTING":
            job["state"] = "ABORTED"
        elif job["state"] == "TIMING-OUT":
            job["state"] = "TIMED-OUT"
        else:
            script = job["script"]
            end = {"fail": "FAILED", "timeout": "TIMING-OUT"}.get(script or "", "SUCCEEDED")
            _advance(job, ["READY", "RUNNING"], end)
        # a run writes its items as it goes: two while running, all once done
        wrote = {"RUNNING": 2, "SUCCEEDED": 5, "TIMING-OUT": 3}.get(job["state"])
        if wrote is not None:
            job["items"] = AP_ITEMS[:wrote]
        return json_response({"data": self.run(job)})

    async def abort(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "record-not-found", "Actor run was not found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("READY", "RUNNING"):
            job["state"] = "ABORTING"
        return json_response({"data": self.run(job)})

    def _page(self, request: Request, items: list[dict[str, Any]]) -> Response:
        offset_text = request.query_params.get("offset")
        limit_text = request.query_params.get("limit")
        self.item_reads.append((offset_text, limit_text))
        offset = int(offset_text or 0)
        limit = min(int(limit_text or 250_000), 250_000)
        page = items[offset : offset + limit]
        headers = {
            "X-Apify-Pagination-Offset": str(offset),
            "X-Apify-Pagination-Limit": str(limit),
            "X-Apify-Pagination-Count": str(len(page)),
            "X-Apify-Pagination-Total": str(len(items)),
        }
        return json_response(page, headers=headers)

    async def run_items(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "record-not-found", "Actor run was not found")
        return self._page(request, job["items"])

    async def items(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        found = [j for j in self.jobs.values() if j["dataset"] == request.path_params["did"]]
        if not found:
            return self._error(404, "record-not-found", "Dataset was not found")
        return self._page(request, found[0]["items"])

    def finish(self, rid: str) -> None:
        self.jobs[rid]["state"] = "SUCCEEDED"
        self.jobs[rid]["items"] = list(AP_ITEMS)

    async def deliver(self, url: str, rid: str, *, token: str = AP_HOOK_TOKEN) -> int:
        """The actor's webhook for run `rid` (its default payload), the token in the
        header its headers template names; the answer's code."""
        run = self.run(self.jobs[rid])
        event = {
            "userId": run["userId"],
            "createdAt": "2026-12-06T10:04:01.000Z",
            "eventType": f"ACTOR.RUN.{run['status'].replace('-', '_')}",
            "eventData": {"actorId": run["actId"], "actorRunId": rid},
            "resource": run,
        }
        headers = {
            "Content-Type": "application/json",
            "X-Apify-Webhook": "Mop2mD6uC4qgL2aBc",
            "X-Apify-Webhook-Dispatch-Id": f"dsp{rid}",
            "X-Apify-Webhook-Token": token,
        }
        async with httpx.AsyncClient() as client:
            answer = await client.post(url, content=json.dumps(event), headers=headers)
            return answer.status_code


# --- Black Forest Labs -------------------------------------------------------------

BFL_KEY = "bfl-0123456789abcdef0123456789abcdef"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
BFL_MODERATION = ["Derivative Works Filter"]


class BflFixture(_Jobs, _Storage):
    """`expire_first`: the first signed link of each image answers 403, as a link
    past its ten minutes does (S3's AccessDenied)."""

    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "", **kwargs)
        _Storage.__init__(self)
        self.bodies: list[dict[str, Any]] = []
        self.expire_first = False
        self.expired: set[str] = set()
        self.signed = 0
        # where the polling URLs point (another cluster's origin), when not here
        self.cluster_url: str | None = None
        self.cluster_keys: list[str | None] = []  # the x-key each cluster read carried
        self.storage_keys: list[str | None] = []  # the x-key each CDN read carried

    def new_id(self) -> str:
        return str(uuid.UUID(int=0xBF1 << 96 | len(self.jobs) + 1))

    def storage(self) -> Starlette:
        """The delivery CDN: each read's x-key kept (a signed link wants none)."""
        return Starlette(routes=[Route("/bucket/{key:path}", self.deliver, methods=["GET"])])

    async def deliver(self, request: Request) -> Response:
        self.storage_keys.append(request.headers.get("x-key"))
        return await self.get(request)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/flux-pro-1.1", self.create, methods=["POST"]),
                Route("/v1/get_result", self.poll, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        if request.headers.get("x-key") != BFL_KEY:
            return json_response({"detail": "Not authenticated"}, 403)
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("prompt"):
            detail = [{"loc": ["body", "prompt"], "msg": "Field required", "type": "missing"}]
            return json_response({"detail": detail}, 422)
        self.bodies.append(body)
        rid = self.new_id()
        self.jobs[rid] = {"id": rid, "body": body, "state": "Pending", "reads": 0}
        self.jobs[rid]["script"] = body.get("script")
        await _created(self)
        # the polling URL names the request, on the cluster that took it
        here = self.cluster_url or str(request.base_url).rstrip("/")
        polling = f"{here}/v1/get_result?id={rid}"
        return json_response({"id": rid, "polling_url": polling, "cost": 4.0})

    def result(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        out: dict[str, Any] = {
            "id": job["id"],
            "status": state,
            "result": None,
            "progress": 0.5 if state == "Pending" else None,
            "details": None,
            "preview": None,
        }
        if state == "Ready":
            self.signed += 1
            key = f"{job['id']}/sample-{self.signed}.png"
            link = self.put(key, PNG, "image/png")
            if self.expire_first and job["id"] not in self.expired:
                self.expired.add(job["id"])
                self.objects.pop(key)  # gone: answered as S3 answers an expired link
            out["result"] = {
                "sample": link,
                "prompt": job["body"]["prompt"],
                "seed": 1234,
                "start_time": 1765015200.1,
                "end_time": 1765015206.4,
                "duration": 6.3,
            }
        if state in ("Request Moderated", "Content Moderated"):
            out["details"] = {"Moderation Reasons": BFL_MODERATION}
        if state == "Error":
            out["details"] = {"error": "Internal generation error"}
        return out

    async def poll(self, request: Request) -> Response:
        key = request.headers.get("x-key")
        status, body = self.read(request.query_params.get("id") or "", key)
        return json_response(body, status)

    def read(self, rid: str, key: str | None) -> tuple[int, dict[str, Any]]:
        """A get_result read of `rid` carrying `key`: its HTTP status and body."""
        if key != BFL_KEY:
            return 403, {"detail": "Not authenticated"}
        job = self.jobs.get(rid)
        if job is None:
            return 200, {"id": rid, "status": "Task not found", "result": None}
        self.reads += 1
        end = {"fail": "Error", "moderated": "Content Moderated"}.get(job["script"] or "", "Ready")
        _advance(job, ["Pending"], end)
        return 200, self.result(job)

    async def cluster(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Another cluster's get_result (an https server of its own), read as here."""
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()
            return
        fields = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
        key = next((v for k, v in fields.items() if k.lower() == "x-key"), None)
        self.cluster_keys.append(key)
        query = parse_qs(urlsplit(head[0].split(" ")[1]).query)
        status, body = self.read(query.get("id", [""])[0], key)
        text = json.dumps(body)
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(text)}\r\n\r\n{text}".encode()
        )
        await writer.drain()
        writer.close()


# --- Mindee ------------------------------------------------------------------------

MI_KEY = "mindee-api-key-0123456789abcdef"
MI_PRODUCT = "/v1/products/mindee/invoices/v4"
MI_FAILURE = "Could not process the document: the file is password protected."
MI_PREDICTION = {
    "invoice_number": {"value": "INV-0042", "confidence": 0.99},
    "total_amount": {"value": 123.45, "confidence": 0.98},
    "supplier_name": {"value": "ACME Corp", "confidence": 0.97},
}


class MindeeFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("76c90710-3a1b-4b91-8a39-31a6543e", **kwargs)
        self.script: str | None = None  # the next job's: "fail", "slow" or None
        self.uploads: list[tuple[str, bytes]] = []
        self.document_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"{MI_PRODUCT}/predict_async", self.create, methods=["POST"]),
                Route(f"{MI_PRODUCT}/documents/queue/{{jid}}", self.queue, methods=["GET"]),
                Route(f"{MI_PRODUCT}/documents/{{did}}", self.document, methods=["GET"]),
            ]
        )

    @staticmethod
    def _api_request(request: Request, status: int, error: dict[str, Any] | None) -> Any:
        return {
            "error": error or {},
            "resources": ["job"] if status < 400 else [],
            "status": "failure" if error else "success",
            "status_code": status,
            "url": str(request.url),
        }

    def _error(self, request: Request, status: int, code: str, message: str) -> Response:
        error = {"code": code, "message": message, "details": message}
        return json_response({"api_request": self._api_request(request, status, error)}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Token {MI_KEY}":
            return self._error(request, 401, "Unauthorized", "Authorization required")
        return None

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:04d}"

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": job["id"],
            "issued_at": "2026-12-06T10:00:00.000000",
            "available_at": "2026-12-06T10:00:05.000000" if job["state"] == "completed" else None,
            "status": job["state"],
        }
        if job["state"] == "failed":
            out["error"] = {"code": "FileProtected", "message": MI_FAILURE}
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        async with request.form() as form:
            document = form.get("document")
            if document is None or isinstance(document, str):
                return self._error(request, 400, "BadRequest", "document is required")
            self.uploads.append((str(document.filename), await document.read()))
        jid = self.new_id()
        self.jobs[jid] = {
            "id": jid,
            "state": "waiting",
            "reads": 0,
            "script": self.script,
            "document": f"a1b2c3d4-0000-4000-8000-{len(self.jobs) + 1:012d}",
        }
        await _created(self)
        body = {"api_request": self._api_request(request, 202, None)}
        return json_response(body | {"job": self.job(self.jobs[jid])}, 202)

    async def queue(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(request, 404, "NotFound", "Job not found")
        self.reads += 1
        _advance(
            job, ["waiting", "processing"], "failed" if job["script"] == "fail" else "completed"
        )
        if job["state"] == "completed":
            return Response(
                status_code=302,
                headers={"Location": f"{MI_PRODUCT}/documents/{job['document']}"},
            )
        body = {"api_request": self._api_request(request, 200, None)}
        return json_response(body | {"job": self.job(job)})

    async def document(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        found = [j for j in self.jobs.values() if j["document"] == request.path_params["did"]]
        if not found or found[0]["state"] != "completed":
            return self._error(request, 404, "NotFound", "Document not found")
        self.document_reads += 1
        document = {
            "id": found[0]["document"],
            "name": self.uploads[0][0] if self.uploads else "invoice.pdf",
            "n_pages": 1,
            "inference": {
                "product": {"name": "mindee/invoices", "version": "4.11"},
                "prediction": MI_PREDICTION,
                "pages": [{"id": 0, "prediction": MI_PREDICTION}],
            },
        }
        body = {"api_request": self._api_request(request, 200, None), "document": document}
        return json_response(body)

    def finish(self, jid: str) -> None:
        self.jobs[jid]["state"] = "completed"


# --- Perplexity --------------------------------------------------------------------

PX_KEY = "pplx-0123456789abcdef0123456789abcdef"
PX_FAILURE = "Request failed: the research budget was exhausted before an answer."
PX_ANSWER = "Solid-state batteries trade energy density against manufacturing cost [1]."


class PerplexityFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.list_reads = 0

    def new_id(self) -> str:
        return str(uuid.UUID(int=0x9E7 << 96 | len(self.jobs) + 1))

    def app(self) -> Starlette:
        root = "/async/chat/completions"
        return Starlette(
            routes=[
                Route(root, self.create, methods=["POST"]),
                Route(root, self.list_requests, methods=["GET"]),
                Route(f"{root}/{{rid}}", self.get, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {PX_KEY}":
            error = {"message": "Invalid API key", "type": "invalid_api_key", "code": 401}
            return json_response({"error": error}, 401)
        return None

    def completion(self, job: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": f"cmpl-{job['id'][-6:]}",
            "model": "sonar-deep-research",
            "created": 1765015260,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": PX_ANSWER},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 840, "total_tokens": 852},
            "citations": ["https://example.com/batteries"],
            "search_results": [
                {"title": "Batteries", "url": "https://example.com/batteries", "date": "2026-11-02"}
            ],
        }

    def request(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        return {
            "id": job["id"],
            "model": job["body"]["request"].get("model"),
            "created_at": 1765015200,
            "status": state,
            "started_at": None if state == "CREATED" else 1765015201,
            "completed_at": 1765015260 if state == "COMPLETED" else None,
            "response": self.completion(job) if state == "COMPLETED" else None,
            "failed_at": 1765015230 if state == "FAILED" else None,
            "error_message": PX_FAILURE if state == "FAILED" else None,
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        inner = body.get("request") if isinstance(body, dict) else None
        if not isinstance(inner, dict) or "messages" not in inner:
            detail = [{"loc": ["body", "request"], "msg": "Field required", "type": "missing"}]
            return json_response({"detail": detail}, 422)
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "body": body,
            "state": "CREATED",
            "reads": 0,
            "script": inner.get("script"),
        }
        await _created(self)
        return json_response(self.request(self.jobs[rid]))

    async def list_requests(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        keys = ("id", "model", "status", "created_at", "started_at", "completed_at", "failed_at")
        found = [{k: self.request(j)[k] for k in keys} for j in self.jobs.values()]
        return json_response({"requests": found, "next_token": None})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            error = {"message": "Request not found", "type": "not_found", "code": 404}
            return json_response({"error": error}, 404)
        self.reads += 1
        _advance(
            job, ["CREATED", "IN_PROGRESS"], "FAILED" if job["script"] == "fail" else "COMPLETED"
        )
        return json_response(self.request(job))
