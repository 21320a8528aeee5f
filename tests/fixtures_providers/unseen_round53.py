"""MiniMax's video tasks, DashScope's asynchronous tasks, Gemini's Batch API, Adobe
PDF Services and Mux's assets, each a real app on loopback answering in the shapes
their public documentation gives (tests/integration/test_unseen_round53.py).

- MiniMax (platform.minimax.io, Video Generation): `POST /v1/video_generation`
  (bearer) answers 200 {"task_id", "base_resp": {"status_code": 0, "status_msg":
  "success"}}, and a refusal is 200 too, no task_id, a non-zero
  base_resp.status_code (1026 "input new_sensitive"); `GET
  /v1/query/video_generation?task_id=` {"task_id", "status": Queueing | Preparing |
  Processing | Success | Fail, "file_id"? (Success), "video_width"?,
  "video_height"?, "base_resp"}; `GET /v1/files/retrieve?file_id=` {"file":
  {"file_id", "bytes", "created_at", "filename", "purpose": "video_generation",
  "download_url"}, "base_resp"}, the video one hop further at download_url. No
  cancel, no list of tasks.
- DashScope (Alibaba Cloud Model Studio, asynchronous calls and task management):
  `POST /api/v1/services/aigc/video-generation/video-synthesis` (bearer,
  `X-DashScope-Async: enable` required: 403 AccessDenied "current user api does
  not support synchronous calls" without it) answers 200 {"output": {"task_id",
  "task_status": "PENDING"}, "request_id"}; `GET /api/v1/tasks/{id}` {"request_id",
  "output": {"task_id", "task_status": PENDING | RUNNING | SUCCEEDED | FAILED |
  CANCELED | UNKNOWN, "submit_time", "scheduled_time"?, "end_time"?,
  "video_url"? (SUCCEEDED), "code"?, "message"? (FAILED)}, "usage"?} (UNKNOWN: "the
  task does not exist or its status is unknown", e.g. past its 24 hours); `POST
  /api/v1/tasks/{id}/cancel` {"request_id"} for a PENDING task, else 400
  {"request_id", "code": "UnsupportedOperation", "message"}.
- Gemini Batch API (ai.google.dev/api/batch-api): `POST
  /v1beta/models/{model}:batchGenerateContent` (`x-goog-api-key`, JSON {"batch":
  {"display_name", "input_config": {"requests": {"requests": [{"request",
  "metadata": {"key"}}]}}}}) answers 200 an Operation {"name": "batches/…",
  "metadata": {"@type": "…GenerateContentBatch", "name", "displayName", "model",
  "state": BATCH_STATE_PENDING, "batchStats"}}; `GET /v1beta/batches/{id}` the same
  Operation, "done" once it ended, then "response": {"@type":
  "…GenerateContentBatchOutput", "inlinedResponses": {"inlinedResponses":
  [{"response"| "error", "metadata"}]}} or "error" (google.rpc.Status); `GET
  /v1beta/batches?pageToken=` {"operations", "nextPageToken"?}; `POST
  /v1beta/batches/{id}:cancel` {} (400 FAILED_PRECONDITION once it ended). Errors
  {"error": {"code", "message", "status"}}.
- Adobe PDF Services (developer.adobe.com/document-services/docs/apis): `POST
  /operation/compresspdf` (`Authorization: Bearer <token>` and `x-api-key: <client
  id>` on every call) answers 201 with no body, the job's status URL in the
  `location` header (`x-request-id` too); `GET` that URL {"status": "in progress"} |
  {"status": "done", "asset": {"metadata": {"type", "size"}, "downloadUri",
  "assetID"}} | {"status": "failed", "error": {"code", "message", "status"}}. No
  cancel, no list of jobs.
- Mux Video (docs.mux.com/api-reference): `POST /video/v1/assets` (HTTP basic)
  answers 201 {"data": {"id", "status": "preparing", "playback_ids", "passthrough",
  ...}}; `GET /video/v1/assets/{id}` {"data": {…, "status": preparing | ready |
  errored, "errors"? {"type", "messages"}}}; `GET /video/v1/assets?limit=&page=`
  {"data": [assets, newest first]}; `DELETE /video/v1/assets/{id}` 204 (gone after:
  404 {"error": {"type": "not_found", "messages"}}). Webhooks {"type":
  "video.asset.ready", "id", "object": {"type": "asset", "id"}, "data": asset,
  "created_at"}, signed `Mux-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
  "t.body">`.

Scripts: the create body's `script` ("fail", "slow": runs until the test ends it;
"queued": DashScope's task stays PENDING; "expire": DashScope's task reads UNKNOWN,
Gemini's batch EXPIRED; "refuse": MiniMax's 200 refusal; anything else succeeds
after a few reads).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json
from tests.fixtures_providers.unseen_media import MP4, _Jobs

MINIMAX_KEY = "minimax-test-key"
DASHSCOPE_KEY = "sk-dashscope-test"
GEMINI_KEY = "gemini-test-key"
ADOBE_TOKEN = "adobe-access-token"
ADOBE_CLIENT_ID = "adobe-client-id-0123"
MUX_BASIC = base64.b64encode(b"mux-token-id:mux-token-secret").decode()
MUX_SECRET = "mux-webhook-signing-secret"
PDF = b"%PDF-1.7\n" + bytes(32) + b"\n%%EOF\n"
MINIMAX_SENSITIVE = "input new_sensitive"
DASHSCOPE_FAILURE = "Input data may contain inappropriate content."
GEMINI_FAILURE = "Batch failed: the input file could not be read"
ADOBE_FAILURE = "The input file is not a valid PDF"
MUX_FAILURE = "The input file could not be downloaded: 404 Not Found"


def _script(job: dict[str, Any]) -> str | None:
    body = job["input"]
    return body.get("script") if isinstance(body, dict) else None


def _advance(job: dict[str, Any], steps: list[str], final: str) -> None:
    """One more read of `job`: through `steps`, then to `final` unless it is slow."""
    job["reads"] += 1
    if job["state"] not in steps:
        return
    at = steps.index(job["state"])
    if at + 1 < len(steps):
        job["state"] = steps[at + 1]
    elif _script(job) != "slow":
        job["state"] = final


# --- MiniMax -----------------------------------------------------------------------


class MiniMaxFixture(_Jobs):
    """`downloads`: the reads of each file's download_url, served by `cdn()` at
    `cdn_url` (MiniMax's storage: another server; the API's own when None), each
    read's Authorization in `download_auth`. `expired`: download reads answered 403
    "Request has expired" before one is served. `no_link`: the file record names no
    download_url (as MiniMax's 200 with base_resp 1013 names no file)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("10649", **kwargs)
        self.retrieves = 0
        self.downloads: dict[str, int] = {}
        self.download_auth: list[str | None] = []
        self.download_urls: list[str] = []
        self.cdn_url: str | None = None
        self.expired = 0
        self.no_link = False

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/video_generation", self.create, methods=["POST"]),
                Route("/v1/query/video_generation", self.status, methods=["GET"]),
                Route("/v1/files/retrieve", self.retrieve, methods=["GET"]),
                Route("/download/{fid}.mp4", self.download, methods=["GET"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/download/{fid}.mp4", self.download, methods=["GET"])])

    @staticmethod
    def _base(code: int = 0, message: str = "success") -> dict[str, Any]:
        return {"base_resp": {"status_code": code, "status_msg": message}}

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {MINIMAX_KEY}"

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return json_response(self._base(1004, "login fail: Please carry the API secret key"))
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("model"):
            return json_response(self._base(2013, "invalid params, model is required"))
        if body.get("script") == "refuse":  # refused, and still HTTP 200
            return json_response({"task_id": "", **self._base(1026, MINIMAX_SENSITIVE)})
        tid = self.new_id()
        self.jobs[tid] = {"id": tid, "input": body, "state": "Queueing", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"task_id": tid, **self._base()})

    async def status(self, request: Request) -> Response:
        if not self._authorized(request):
            return json_response(self._base(1004, "login fail"))
        job = self.jobs.get(request.query_params.get("task_id", ""))
        if job is None:
            return json_response(self._base(2013, "invalid params, task_id not found"))
        self.reads += 1
        _advance(job, ["Queueing", "Preparing", "Processing"], "Success")
        if job["state"] == "Success" and _script(job) == "fail":
            job["state"] = "Fail"
        answer: dict[str, Any] = {"task_id": job["id"], "status": job["state"], **self._base()}
        if job["state"] == "Success":
            # file_id is an integer (int64 in MiniMax's OpenAPI), task_id a string
            file_id = int(f"2{job['id']}")
            answer |= {"file_id": file_id, "video_width": 1366, "video_height": 768}
        return json_response(answer)

    async def retrieve(self, request: Request) -> Response:
        if not self._authorized(request):
            return json_response(self._base(1004, "login fail"))
        fid = request.query_params.get("file_id", "")
        if not any(f"2{tid}" == fid for tid in self.jobs):
            return json_response(self._base(1013, "file not found"))
        self.retrieves += 1
        base = self.cdn_url or str(request.base_url).rstrip("/")
        # signed, as MiniMax's links are: a new signature on each retrieve
        signed = f"{base}/download/{fid}.mp4?Expires=1765003600&Signature=s{self.retrieves}"
        file = {
            "file_id": int(fid),
            "bytes": len(MP4),
            "created_at": 1765000000,
            "filename": "output.mp4",
            "purpose": "video_generation",
        }
        if not self.no_link:
            file["download_url"] = signed
        return json_response({"file": file, **self._base()})

    async def download(self, request: Request) -> Response:
        fid = request.path_params["fid"]
        self.download_auth.append(request.headers.get("authorization"))
        self.download_urls.append(str(request.url))
        if self.expired:
            self.expired -= 1
            expired = (
                b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
            )
            return Response(expired, 403, media_type="application/xml")
        self.downloads[fid] = self.downloads.get(fid, 0) + 1
        return Response(MP4, media_type="video/mp4")


# --- DashScope ---------------------------------------------------------------------


class DashScopeFixture(_Jobs):
    """`videos`: the reads of each task's video URL."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("0385dc79-5ff8-4d82-bcb6-5610", **kwargs)
        self.videos: dict[str, int] = {}
        self.async_headers: list[str | None] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(
                    "/api/v1/services/aigc/video-generation/video-synthesis",
                    self.create,
                    methods=["POST"],
                ),
                Route("/api/v1/tasks/{tid}", self.status, methods=["GET"]),
                Route("/api/v1/tasks/{tid}/cancel", self.cancel, methods=["POST"]),
                Route("/oss/{tid}.mp4", self.video, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: str, message: str, status: int) -> Response:
        return json_response({"request_id": "req-err", "code": code, "message": message}, status)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {DASHSCOPE_KEY}"

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("InvalidApiKey", "Invalid API-key provided.", 401)
        self.async_headers.append(request.headers.get("x-dashscope-async"))
        if request.headers.get("x-dashscope-async") != "enable":
            return self._error(
                "AccessDenied", "current user api does not support synchronous calls", 403
            )
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("model"):
            return self._error("InvalidParameter", "Model not exist.", 400)
        tid = self.new_id()
        self.jobs[tid] = {"id": tid, "input": body, "state": "PENDING", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response(
            {"output": {"task_id": tid, "task_status": "PENDING"}, "request_id": "req-create"}
        )

    def _output(self, request: Request, job: dict[str, Any]) -> dict[str, Any]:
        output: dict[str, Any] = {
            "task_id": job["id"],
            "task_status": job["state"],
            "submit_time": "2026-12-06 13:00:00.000",
        }
        if job["state"] == "SUCCEEDED":
            output |= {
                "end_time": "2026-12-06 13:05:00.000",
                "video_url": f"{request.base_url}oss/{job['id']}.mp4?Expires=1765100000",
                "orig_prompt": job["input"].get("input", {}).get("prompt", ""),
            }
        elif job["state"] == "FAILED":
            output |= {"code": "DataInspectionFailed", "message": DASHSCOPE_FAILURE}
        return output

    async def status(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("InvalidApiKey", "Invalid API-key provided.", 401)
        job = self.jobs.get(request.path_params["tid"])
        if job is None:  # an id it never made, or one past its 24 hours
            output = {"task_id": request.path_params["tid"], "task_status": "UNKNOWN"}
            return json_response({"request_id": "req-read", "output": output})
        self.reads += 1
        if _script(job) != "queued":
            _advance(job, ["PENDING", "RUNNING"], "SUCCEEDED")
        if job["state"] == "SUCCEEDED" and _script(job) == "fail":
            job["state"] = "FAILED"
        if _script(job) == "expire" and job["reads"] >= 2:
            job["state"] = "UNKNOWN"
        answer: dict[str, Any] = {"request_id": "req-read", "output": self._output(request, job)}
        if job["state"] == "SUCCEEDED":
            answer["usage"] = {"video_duration": 5, "video_ratio": "1280*720", "video_count": 1}
        return json_response(answer)

    async def cancel(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("InvalidApiKey", "Invalid API-key provided.", 401)
        job = self.jobs.get(request.path_params["tid"])
        if job is None:
            return self._error("InvalidParameter", "task not found", 400)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] != "PENDING":
            return self._error(
                "UnsupportedOperation",
                "Failed to cancel the task, please confirm if the task is in PENDING status.",
                400,
            )
        job["state"] = "CANCELED"
        return json_response({"request_id": "req-cancel"})

    async def video(self, request: Request) -> Response:
        tid = request.path_params["tid"]
        self.videos[tid] = self.videos.get(tid, 0) + 1
        return Response(MP4, media_type="video/mp4")


# --- Gemini Batch API --------------------------------------------------------------

GEMINI_ANSWERS = [
    {
        "response": {
            "candidates": [{"content": {"parts": [{"text": f"answer {n}"}], "role": "model"}}],
            "modelVersion": "gemini-2.5-flash",
        },
        "metadata": {"key": f"request-{n}"},
    }
    for n in (1, 2)
] + [
    {
        "error": {"code": 3, "message": "Request contains an invalid argument."},
        "metadata": {"key": "request-3"},
    }
]


GEMINI_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1main."


class GeminiFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("batches/lvqmq1vf0xgrt6q1ibkr", **kwargs)
        self.list_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1beta/models/{call}", self.create, methods=["POST"]),
                Route("/v1beta/batches", self.list, methods=["GET"]),
                Route("/v1beta/batches/{bid}", self.status, methods=["GET"]),
                Route("/v1beta/batches/{call}", self.cancel, methods=["POST"]),
            ]
        )

    @staticmethod
    def _error(code: int, status: str, message: str) -> Response:
        return json_response({"error": {"code": code, "message": message, "status": status}}, code)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("x-goog-api-key") == GEMINI_KEY

    def _operation(self, job: dict[str, Any]) -> dict[str, Any]:
        requests = job["input"]["batch"]["input_config"]["requests"]["requests"]
        done = job["state"] not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING")
        succeeded = job["state"] == "BATCH_STATE_SUCCEEDED"
        op: dict[str, Any] = {
            "name": job["id"],
            "metadata": {
                "@type": f"{GEMINI_TYPES}GenerateContentBatch",
                "model": "models/gemini-2.5-flash",
                "displayName": job["input"]["batch"].get("display_name", ""),
                "createTime": "2026-12-06T03:00:00.000000Z",
                "updateTime": "2026-12-06T03:00:00.000000Z",
                "batchStats": {
                    "requestCount": str(len(requests)),
                    "pendingRequestCount": "0" if done else str(len(requests)),
                },
                "state": job["state"],
                "name": job["id"],
            },
        }
        if done:
            op["done"] = True
        if succeeded:
            op["response"] = {
                "@type": f"{GEMINI_TYPES}GenerateContentBatchOutput",
                "inlinedResponses": {"inlinedResponses": GEMINI_ANSWERS},
            }
        elif job["state"] == "BATCH_STATE_FAILED":
            op["error"] = {"code": 13, "message": GEMINI_FAILURE}
        return op

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(
                403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers"
            )
        _model, _, verb = request.path_params["call"].partition(":")
        if verb != "batchGenerateContent":
            return self._error(404, "NOT_FOUND", f"unknown method {verb}")
        body = await read_json(request)
        if not isinstance(body, dict) or "batch" not in body:
            return self._error(400, "INVALID_ARGUMENT", "batch is required")
        bid = self.new_id()
        self.jobs[bid] = {"id": bid, "input": body, "state": "BATCH_STATE_PENDING", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response(self._operation(self.jobs[bid]))

    async def status(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(403, "PERMISSION_DENIED", "unregistered caller")
        job = self.jobs.get("batches/" + request.path_params["bid"])
        if job is None:
            return self._error(404, "NOT_FOUND", "Requested entity was not found.")
        self.reads += 1
        _advance(job, ["BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"], "BATCH_STATE_SUCCEEDED")
        if job["state"] == "BATCH_STATE_SUCCEEDED":
            script = _script(job)
            if script == "fail":
                job["state"] = "BATCH_STATE_FAILED"
            elif script == "expire":
                job["state"] = "BATCH_STATE_EXPIRED"
        return json_response(self._operation(job))

    async def list(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(403, "PERMISSION_DENIED", "unregistered caller")
        self.list_reads += 1
        return json_response({"operations": [self._operation(j) for j in self.jobs.values()]})

    async def cancel(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(403, "PERMISSION_DENIED", "unregistered caller")
        bid, _, verb = request.path_params["call"].partition(":")
        job = self.jobs.get("batches/" + bid)
        if verb != "cancel" or job is None:
            return self._error(404, "NOT_FOUND", "Requested entity was not found.")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            return self._error(400, "FAILED_PRECONDITION", "The batch has already ended.")
        job["state"] = "BATCH_STATE_CANCELLED"
        return json_response({})


# --- Adobe PDF Services ------------------------------------------------------------


class AdobeFixture(_Jobs):
    """`api_keys`: the x-api-key each call carried; `downloads`: the asset reads."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("urn:aaid:AS:UE1:23c30ee0-2e4d-46d6-87f2-087832fc", **kwargs)
        self.api_keys: list[str | None] = []
        self.downloads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/operation/compresspdf", self.create, methods=["POST"]),
                Route("/operation/compresspdf/{jid}/status", self.status, methods=["GET"]),
                Route("/assets/{jid}.pdf", self.download, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: str, message: str, status: int) -> Response:
        return json_response(
            {"error": {"code": code, "message": message, "status": status}}, status
        )

    def _refused(self, request: Request) -> Response | None:
        self.api_keys.append(request.headers.get("x-api-key"))
        if request.headers.get("authorization") != f"Bearer {ADOBE_TOKEN}":
            return self._error("UNAUTHORIZED", "Oauth token is not valid", 401)
        if request.headers.get("x-api-key") != ADOBE_CLIENT_ID:
            return self._error("UNAUTHORIZED", "Client ID is invalid", 401)
        return None

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("assetID"):
            return self._error("BAD_INPUT", "assetID is required", 400)
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "input": body, "state": "in progress", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        location = f"{request.base_url}operation/compresspdf/{jid}/status"
        return Response(
            status_code=201, headers={"location": location, "x-request-id": f"req-{jid[-4:]}"}
        )

    async def status(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error("NOT_FOUND", "Job not found", 404)
        self.reads += 1
        job["reads"] += 1
        if job["reads"] >= 3 and _script(job) != "slow":
            job["state"] = "failed" if _script(job) == "fail" else "done"
        answer: dict[str, Any] = {"status": job["state"]}
        if job["state"] == "done":
            answer["asset"] = {
                "metadata": {"type": "application/pdf", "size": len(PDF)},
                "downloadUri": f"{request.base_url}assets/{job['id']}.pdf?X-Amz-Signature=abc",
                "assetID": f"{job['id']}-out",
            }
        elif job["state"] == "failed":
            answer["error"] = {"code": "BAD_PDF", "message": ADOBE_FAILURE, "status": 400}
        return json_response(answer)

    async def download(self, request: Request) -> Response:
        self.downloads += 1
        return Response(PDF, media_type="application/pdf")


# --- Mux ---------------------------------------------------------------------------


class MuxFixture(_Jobs):
    """`deleted`: the assets deleted (a DELETE's 204)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("QrikEQpEXp3RvklQSHyHSYOakQkXlRId0", **kwargs)
        self.deleted: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/video/v1/assets", self.create, methods=["POST"]),
                Route("/video/v1/assets", self.list, methods=["GET"]),
                Route("/video/v1/assets/{aid}", self.status, methods=["GET"]),
                Route("/video/v1/assets/{aid}", self.delete, methods=["DELETE"]),
            ]
        )

    @staticmethod
    def _error(kind: str, message: str, status: int) -> Response:
        return json_response({"error": {"type": kind, "messages": [message]}}, status)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Basic {MUX_BASIC}"

    def asset(self, job: dict[str, Any]) -> dict[str, Any]:
        asset: dict[str, Any] = {
            "id": job["id"],
            "status": job["state"],
            "created_at": "1765000000",
            "playback_ids": [{"id": f"pb{job['id'][-6:]}", "policy": "public"}],
            "mp4_support": "none",
            "master_access": "none",
            "video_quality": "basic",
        }
        if "passthrough" in job["input"]:
            asset["passthrough"] = job["input"]["passthrough"]
        if job["state"] == "ready":
            asset |= {"duration": 23.8, "aspect_ratio": "16:9", "max_stored_resolution": "HD"}
        elif job["state"] == "errored":
            asset["errors"] = {"type": "invalid_input", "messages": [MUX_FAILURE]}
        return asset

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("unauthorized", "Unauthorized request", 401)
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("input"):
            return self._error("invalid_parameters", "input is required", 400)
        aid = self.new_id()
        self.jobs[aid] = {"id": aid, "input": body, "state": "preparing", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"data": self.asset(self.jobs[aid])}, 201)

    async def list(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("unauthorized", "Unauthorized request", 401)
        limit = int(request.query_params.get("limit", "25"))
        page = int(request.query_params.get("page", "1"))
        newest = [
            self.asset(j) for j in reversed(self.jobs.values()) if j["id"] not in self.deleted
        ]
        return json_response({"data": newest[(page - 1) * limit : page * limit]})

    async def status(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("unauthorized", "Unauthorized request", 401)
        job = self.jobs.get(request.path_params["aid"])
        if job is None or job["id"] in self.deleted:
            return self._error("not_found", "The requested asset does not exist", 404)
        self.reads += 1
        job["reads"] += 1
        if job["reads"] >= 3 and _script(job) != "slow":
            self.finish(job["id"])
        return json_response({"data": self.asset(job)})

    def finish(self, aid: str) -> None:
        job = self.jobs[aid]
        job["state"] = "errored" if _script(job) == "fail" else "ready"

    async def delete(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("unauthorized", "Unauthorized request", 401)
        job = self.jobs.get(request.path_params["aid"])
        if job is None or job["id"] in self.deleted:
            return self._error("not_found", "The requested asset does not exist", 404)
        self.cancels.append((job["id"], job["state"]))
        self.deleted.append(job["id"])
        return Response(status_code=204)

    async def deliver(
        self,
        url: str,
        aid: str,
        event: str,
        *,
        secret: str = MUX_SECRET,
        timestamp: int | None = None,
    ) -> int:
        """Mux's webhook `event` for asset `aid`, signed as Mux signs it."""
        job = self.jobs[aid]
        payload = {
            "type": event,
            "id": f"evt-{aid[-4:]}-{event}",
            "object": {"type": "asset", "id": aid},
            "environment": {"name": "Development", "id": "j0863n"},
            "data": self.asset(job),
            "created_at": "2026-12-06T03:00:00.000000Z",
            "accessor_source": None,
            "accessor": None,
            "request_id": None,
        }
        body = json.dumps(payload).encode()
        ts = str(int(time.time()) if timestamp is None else timestamp)
        digest = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
        headers = {"Content-Type": "application/json", "Mux-Signature": f"t={ts},v1={digest}"}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code
