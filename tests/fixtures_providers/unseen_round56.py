"""Vertex AI batch prediction jobs, Twilio Bulk Exports, Azure OpenAI batch and
Transloadit assemblies, each a real app on loopback answering in the shapes their
public documentation gives (tests/integration/test_unseen_round56.py). Where the
docs leave a behaviour open, the assumption is stated here.

- Vertex AI (bearer): `POST /v1/projects/{p}/locations/{l}/batchPredictionJobs`
  {"displayName", "model", "inputConfig", "outputConfig", "labels"} answers 200 the
  BatchPredictionJob {"name": "projects/{number}/locations/{l}/batchPredictionJobs/{id}",
  "state": "JOB_STATE_PENDING", ...}; `GET /v1/{name}` the same, state
  JOB_STATE_PENDING | RUNNING | SUCCEEDED | PARTIALLY_SUCCEEDED | FAILED | CANCELLING
  | CANCELLED, "error" {"code", "message"} (google.rpc.Status) when failed,
  "completionStats" {"successfulCount", "failedCount", "incompleteCount"} (int64:
  JSON strings, as proto3 JSON writes them) and "outputInfo"
  {"gcsOutputDirectory"} once ended. `POST /v1/{name}:cancel` 200 {}, the job
  CANCELLING then CANCELLED (a job that ended: 400 FAILED_PRECONDITION, assumed).
  `GET .../batchPredictionJobs?filter=labels.k="v"` {"batchPredictionJobs",
  "nextPageToken"}. Errors {"error": {"code", "message", "status"}}.
- Twilio Bulk Export (Basic AccountSid:AuthToken): `POST /v1/Exports/Calls/Jobs`
  a form {StartDay, EndDay, FriendlyName, WebhookUrl, WebhookMethod} answers 201
  {"job_sid": "JS...", "resource_type", "friendly_name", "start_day", "end_day",
  "webhook_url", "webhook_method", "details", "job_queue_position",
  "estimated_completion_time"}; `GET /v1/Exports/Jobs/{sid}` the same, details
  [{"status", "count", "days"}] grouping the days by status (SUBMITTED, RUNNING,
  COMPLETED, FAILED: the words assumed upper case); `DELETE` 204, then a 404
  {"code": 20404, "message", "more_info", "status": 404}. `GET
  /v1/Exports/Calls/Jobs?PageSize=` {"jobs", "meta": {"next_page_url" (its PageToken
  inside; null on the last page), "page", "page_size", "url", "key"}} (oldest first,
  assumed); `GET /v1/Exports/Calls/Days` {"days": [{"day", "size", "resource_type",
  "create_date", "friendly_name"}], "meta"}. The webhook (assumed: a form of the
  job's fields, job_sid among them) is signed X-Twilio-Signature (HMAC-SHA1 of the
  URL and the sorted fields under the Auth Token, base64).
- Azure OpenAI batch (`api-key`, `api-version` required on every call): the
  OpenAI batch shapes under /openai/batches and /openai/files/{id}/content; a call
  without api-version 404 {"error": {"code": "404", "message": "Resource not
  found"}}.
- Transloadit: `POST /assemblies` multipart, a `params` field (JSON: auth.key,
  steps, fields, notify_url) answers 200 {"ok": "ASSEMBLY_EXECUTING",
  "assembly_id", "assembly_ssl_url", "assembly_url", "fields", "notify_url", ...};
  `GET assembly_ssl_url` the status, ok ASSEMBLY_UPLOADING | ASSEMBLY_EXECUTING |
  ASSEMBLY_COMPLETED | ASSEMBLY_CANCELED, "results" {"<step>": [{"ssl_url", ...}]};
  a failed assembly carries "error" (one of many codes) and "message" and no "ok"
  (assumed). `DELETE` it: {"ok": "ASSEMBLY_CANCELED", ...}. Not faked: the
  notify_url delivery (a form: `transloadit`, the status as JSON text, and
  `signature`, its HMAC-SHA384 under the auth secret), which no webhook scheme
  can verify (see unseen/transloadit.toml).

Scripts: Vertex's in `labels.script`, Twilio's in the fixture's `script` (the
next export's; its FriendlyName is our reference),
Azure's in `metadata.script`, Transloadit's in `params.fields.script`: "fail",
"partial", "slow" (runs until the test ends it), anything else completes after a
few reads.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any
from urllib.parse import urlencode

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created

# --- Vertex AI ---------------------------------------------------------------------

VX_TOKEN = "ya29.vertex-test-token"
VX_PARENT = "/v1/projects/my-project/locations/us-central1/batchPredictionJobs"
VX_FAILURE = "Failed to import data. Not found: Dataset my-project:input was not found."
VX_OUTPUT = "gs://my-bucket/out/prediction-gemini-2026_12_06T10_00_00_000Z"


class VertexFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.list_filters: list[str | None] = []

    def app(self) -> Starlette:
        job = "/v1/projects/{p}/locations/{l}/batchPredictionJobs/{jid}"
        return Starlette(
            routes=[
                Route(VX_PARENT, self.create, methods=["POST"]),
                Route(VX_PARENT, self.list_jobs, methods=["GET"]),
                Route(job, self.get_or_cancel, methods=["GET", "POST"]),
            ]
        )

    @staticmethod
    def _error(code: int, status: str, message: str) -> Response:
        return json_response({"error": {"code": code, "message": message, "status": status}}, code)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {VX_TOKEN}":
            return self._error(401, "UNAUTHENTICATED", "Request had invalid credentials.")
        return None

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["body"]
        out: dict[str, Any] = {
            "name": job["id"],
            "displayName": body.get("displayName"),
            "model": body.get("model"),
            "inputConfig": body.get("inputConfig"),
            "outputConfig": body.get("outputConfig"),
            "labels": body.get("labels", {}),
            "state": job["state"],
            "createTime": "2026-12-06T10:00:00.000000Z",
        }
        state = job["state"]
        if state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED", "JOB_STATE_FAILED"):
            failed = {"JOB_STATE_SUCCEEDED": 0, "JOB_STATE_PARTIALLY_SUCCEEDED": 1}.get(state, 3)
            out["completionStats"] = {
                "successfulCount": str(3 - failed),
                "failedCount": str(failed),
                "incompleteCount": "0",
            }
        if state in ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED"):
            out["outputInfo"] = {"gcsOutputDirectory": VX_OUTPUT}
        if state == "JOB_STATE_FAILED":
            out["error"] = {"code": 5, "message": VX_FAILURE}
        if state == "JOB_STATE_CANCELLED":
            # "the job's error is set to a Status with a google.rpc.Status.code of 1,
            # corresponding to Code.CANCELLED"
            out["error"] = {"code": 1, "message": "CANCELED"}
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        needed = {"displayName", "model", "inputConfig", "outputConfig"}
        if not isinstance(body, dict) or not needed <= set(body):
            return self._error(400, "INVALID_ARGUMENT", "displayName, model, ... are required")
        jid = f"projects/123456789/locations/us-central1/batchPredictionJobs/{self.new_id()}"
        self.jobs[jid] = {
            "id": jid,
            "body": body,
            "state": "JOB_STATE_PENDING",
            "reads": 0,
            "script": (body.get("labels") or {}).get("script"),
        }
        await _created(self)
        return json_response(self.job(self.jobs[jid]))

    def new_id(self) -> str:
        return str(4_000_000_000_000_000_000 + len(self.jobs) + 1)

    async def list_jobs(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        wanted = request.query_params.get("filter")
        self.list_filters.append(wanted)
        match = re.fullmatch(r'labels\.(\w+)="([^"]*)"', wanted or "")
        found = [
            self.job(j)
            for j in reversed(self.jobs.values())
            if match is None or (j["body"].get("labels") or {}).get(match[1]) == match[2]
        ]
        return json_response({"batchPredictionJobs": found} if found else {})

    async def get_or_cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        jid, _, verb = request.path_params["jid"].partition(":")
        name = f"projects/123456789/locations/{request.path_params['l']}/batchPredictionJobs/{jid}"
        job = self.jobs.get(name)
        if job is None or (request.method == "POST") != (verb == "cancel"):
            return self._error(404, "NOT_FOUND", f"The BatchPredictionJob does not exist: {name}")
        if request.method == "POST":
            return self.cancel(job)
        self.reads += 1
        if job["state"] == "JOB_STATE_CANCELLING":
            job["state"] = "JOB_STATE_CANCELLED"
            return json_response(self.job(job))
        end = {"fail": "JOB_STATE_FAILED", "partial": "JOB_STATE_PARTIALLY_SUCCEEDED"}
        _advance(
            job,
            ["JOB_STATE_PENDING", "JOB_STATE_RUNNING"],
            end.get(job["script"] or "", "JOB_STATE_SUCCEEDED"),
        )
        return json_response(self.job(job))

    def cancel(self, job: dict[str, Any]) -> Response:
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_QUEUED"):
            return self._error(400, "FAILED_PRECONDITION", "The job is not in a cancellable state.")
        job["state"] = "JOB_STATE_CANCELLING"
        return json_response({})


# --- Twilio Bulk Export ------------------------------------------------------------

TW_SID = "AC0123456789abcdef0123456789abcdef"
TW_TOKEN = "twilio-auth-token-0123456789abcdef"
TW_BASIC = base64.b64encode(f"{TW_SID}:{TW_TOKEN}".encode()).decode()
DAYS = ["2026-12-01", "2026-12-02"]


class TwilioExportsFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("JS0123456789abcdef0123456789ab", **kwargs)
        self.forms: list[dict[str, str]] = []
        self.day_reads = 0
        self.script: str | None = None  # the next export's: "fail", "slow" or None
        self.list_urls: list[str] = []

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:02d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/Exports/Calls/Jobs", self.create, methods=["POST"]),
                Route("/v1/Exports/Calls/Jobs", self.list_jobs, methods=["GET"]),
                Route("/v1/Exports/Jobs/{sid}", self.get, methods=["GET"]),
                Route("/v1/Exports/Jobs/{sid}", self.delete, methods=["DELETE"]),
                Route("/v1/Exports/Calls/Days", self.days, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {TW_BASIC}":
            body = {"code": 20003, "message": "Authenticate", "status": 401}
            return json_response(body, 401)
        return None

    @staticmethod
    def _missing(request: Request) -> Response:
        body = {
            "code": 20404,
            "message": f"The requested resource {request.url.path} was not found",
            "more_info": "https://www.twilio.com/docs/errors/20404",
            "status": 404,
        }
        return json_response(body, 404)

    def resource(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        form = job["form"]
        return {
            "job_sid": job["id"],
            "resource_type": "Calls",
            "friendly_name": form.get("FriendlyName"),
            "start_day": form.get("StartDay"),
            "end_day": form.get("EndDay"),
            "webhook_url": form.get("WebhookUrl"),
            "webhook_method": form.get("WebhookMethod"),
            "email": None,
            "details": [{"status": state, "count": len(DAYS), "days": DAYS}],
            "job_queue_position": "1" if state == "SUBMITTED" else None,
            "estimated_completion_time": "2026-12-06T10:05:00Z",
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.forms.append(form)
        if not {"StartDay", "EndDay", "FriendlyName"} <= set(form):
            body = {"code": 20001, "message": "Missing required parameter", "status": 400}
            return json_response(body, 400)
        sid = self.new_id()
        self.jobs[sid] = {
            "id": sid,
            "form": form,
            "state": "SUBMITTED",
            "reads": 0,
            "script": self.script,
        }
        await _created(self)
        return json_response(self.resource(self.jobs[sid]), 201)

    async def list_jobs(self, request: Request) -> Response:
        """Oldest first, PageSize a page; the next page named by its whole URL, its
        PageToken inside (the sid after which it starts), null on the last."""
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_urls.append(str(request.url))
        size = int(request.query_params.get("PageSize") or 50)
        sids = list(self.jobs)
        after = request.query_params.get("PageToken")
        start = sids.index(after[2:]) + 1 if after and after[2:] in sids else 0
        shown = sids[start : start + size]
        base = str(request.base_url).rstrip("/") + "/v1/Exports/Calls/Jobs"
        page = int(request.query_params.get("Page") or 0)
        more = start + size < len(sids)
        meta = {
            "page": page,
            "page_size": size,
            "first_page_url": f"{base}?PageSize={size}&Page=0",
            "previous_page_url": None,
            "url": str(request.url),
            "next_page_url": f"{base}?PageSize={size}&Page={page + 1}&PageToken=PA{shown[-1]}"
            if more
            else None,
            "key": "jobs",
        }
        return json_response({"jobs": [self.resource(self.jobs[s]) for s in shown], "meta": meta})

    def seed(self, name: str) -> str:
        """An export made elsewhere, listed before ours."""
        sid = self.new_id()
        form = {"StartDay": DAYS[0], "EndDay": DAYS[-1], "FriendlyName": name}
        self.jobs[sid] = {"id": sid, "form": form, "state": "COMPLETED", "reads": 0, "script": None}
        return sid

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["sid"])
        if job is None:
            return self._missing(request)
        self.reads += 1
        _advance(
            job, ["SUBMITTED", "RUNNING"], "FAILED" if job["script"] == "fail" else "COMPLETED"
        )
        return json_response(self.resource(job))

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.pop(request.path_params["sid"], None)
        if job is None:
            return self._missing(request)
        self.cancels.append((job["id"], job["state"]))
        return Response(status_code=204)

    async def days(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.day_reads += 1
        days = [
            {
                "day": d,
                "size": 4096,
                "resource_type": "Calls",
                "create_date": "2026-12-06",
                "friendly_name": "export",
            }
            for d in DAYS
        ]
        meta = {"page": 0, "page_size": 400, "key": "days", "next_page_url": None}
        return json_response({"days": days, "meta": meta})

    def finish(self, sid: str) -> None:
        self.jobs[sid]["state"] = "COMPLETED"

    async def deliver(self, url: str, sid: str, *, token: str = TW_TOKEN) -> int:
        """The job's webhook (a form of its fields), signed as Twilio signs it."""
        job = self.jobs[sid]
        fields = {
            "job_sid": sid,
            "resource_type": "Calls",
            "friendly_name": job["form"]["FriendlyName"],
            "status": job["state"],
        }
        signed = url + "".join(k + fields[k] for k in sorted(fields))
        mac = hmac.new(token.encode(), signed.encode(), hashlib.sha1).digest()
        headers = {
            "content-type": "application/x-www-form-urlencoded",
            "x-twilio-signature": base64.b64encode(mac).decode(),
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=urlencode(fields), headers=headers)).status_code


# --- Azure OpenAI batch ------------------------------------------------------------

AZ_KEY = "azure-openai-key-0123456789"
AZ_VERSION = "2024-10-21"
AZ_FAILURE = "The input file is not valid JSONL: line 1"


class AzureBatchFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("batch_6a1f2c3e-0000-4000-8000-", **kwargs)
        self.files: dict[str, bytes] = {}
        self.list_reads = 0
        self.unversioned = 0

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:012d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/openai/batches", self.create, methods=["POST"]),
                Route("/openai/batches", self.list_batches, methods=["GET"]),
                Route("/openai/batches/{bid}", self.get, methods=["GET"]),
                Route("/openai/batches/{bid}/cancel", self.cancel, methods=["POST"]),
                Route("/openai/files/{fid}/content", self.content, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.query_params.get("api-version") != AZ_VERSION:
            self.unversioned += 1
            return json_response({"error": {"code": "404", "message": "Resource not found"}}, 404)
        if request.headers.get("api-key") != AZ_KEY:
            message = "Access denied due to invalid subscription key or wrong API endpoint."
            return json_response({"error": {"code": "401", "message": message}}, 401)
        return None

    def batch(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        done = state in ("completed", "cancelled")
        n = 3 if done and state == "completed" else 0
        return {
            "id": job["id"],
            "object": "batch",
            "endpoint": "/chat/completions",
            "errors": {
                "object": "list",
                "data": [{"code": "invalid_json_line", "message": AZ_FAILURE, "line": 1}],
            }
            if state == "failed"
            else None,
            "input_file_id": job["body"]["input_file_id"],
            "completion_window": "24h",
            "status": state,
            "output_file_id": f"file-out-{job['id'][-4:]}" if state == "completed" else None,
            "error_file_id": None,
            "created_at": 1765015200,
            "request_counts": {"total": 3 if state != "failed" else 0, "completed": n, "failed": 0},
            "metadata": job["body"].get("metadata"),
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or "input_file_id" not in body:
            err = {"error": {"code": "invalid_request", "message": "input_file_id is required"}}
            return json_response(err, 400)
        bid = self.new_id()
        self.jobs[bid] = {
            "id": bid,
            "body": body,
            "state": "validating",
            "reads": 0,
            "script": (body.get("metadata") or {}).get("script"),
        }
        lines = [
            {
                "custom_id": f"task-{i}",
                "response": {
                    "status_code": 200,
                    "body": {"choices": [{"message": {"content": f"answer {i}"}}]},
                },
                "error": None,
            }
            for i in range(3)
        ]
        self.files[f"file-out-{bid[-4:]}"] = "".join(json.dumps(x) + "\n" for x in lines).encode()
        await _created(self)
        return json_response(self.batch(self.jobs[bid]))

    async def list_batches(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        data = [self.batch(j) for j in reversed(self.jobs.values())]
        return json_response(
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": False,
            }
        )

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["bid"])
        if job is None:
            return json_response({"error": {"code": "404", "message": "Resource not found"}}, 404)
        self.reads += 1
        if job["state"] == "cancelling":
            job["state"] = "cancelled"
        _advance(
            job,
            ["validating", "in_progress", "finalizing"],
            "failed" if job["script"] == "fail" else "completed",
        )
        return json_response(self.batch(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["bid"])
        if job is None:
            return json_response({"error": {"code": "404", "message": "Resource not found"}}, 404)
        self.cancels.append((job["id"], job["state"]))
        job["state"] = "cancelling"
        return json_response(self.batch(job))

    async def content(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        data = self.files.get(request.path_params["fid"])
        if data is None:
            return json_response({"error": {"code": "404", "message": "File not found"}}, 404)
        return Response(data, media_type="application/octet-stream")


# --- Transloadit -------------------------------------------------------------------

TL_KEY = "transloadit-auth-key-0123"
TL_FAILURE = "Could not download the file: 404 Not Found"
TL_ERROR = "IMPORT_FILE_ERROR"


def tl_results(aid: str) -> dict[str, Any]:
    return {
        "resized": [
            {
                "id": f"{aid[:8]}f1",
                "name": "photo.jpg",
                "size": 24567,
                "mime": "image/jpeg",
                "ssl_url": f"https://tmp-eu-west-1.transloadit.net/{aid}/resized/photo.jpg",
            }
        ]
    }


class TransloaditFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("a7b0c1d2e3f44556677889900aabb", **kwargs)
        self.params: list[dict[str, Any]] = []

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:03d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/assemblies", self.create, methods=["POST"]),
                Route("/assemblies/{aid}", self.get, methods=["GET"]),
                Route("/assemblies/{aid}", self.cancel, methods=["DELETE"]),
            ]
        )

    def status(self, request: Request, job: dict[str, Any]) -> dict[str, Any]:
        url = str(request.base_url).rstrip("/") + f"/assemblies/{job['id']}"
        out: dict[str, Any] = {
            "assembly_id": job["id"],
            "assembly_url": url,
            "assembly_ssl_url": url,
            "fields": job["params"].get("fields", {}),
            "notify_url": job["params"].get("notify_url"),
            "bytes_expected": 0,
            "results": {},
        }
        if job["state"] == "ERROR":
            out |= {"error": TL_ERROR, "message": TL_FAILURE, "reason": TL_FAILURE}
        else:
            out["ok"] = job["state"]
        if job["state"] == "ASSEMBLY_COMPLETED":
            out["results"] = tl_results(job["id"])
        return out

    async def create(self, request: Request) -> Response:
        form = await request.form()
        try:
            params = json.loads(str(form.get("params")))
        except ValueError:
            return json_response(
                {"error": "INVALID_PARAMS_FIELD", "message": "params is not JSON"}, 400
            )
        self.params.append(params)
        if (params.get("auth") or {}).get("key") != TL_KEY:
            return json_response(
                {"error": "GET_ACCOUNT_UNKNOWN_AUTH_KEY", "message": "Unknown auth key"}, 404
            )
        aid = self.new_id()
        script = (params.get("fields") or {}).get("script")
        self.jobs[aid] = {
            "id": aid,
            "params": params,
            "state": "ASSEMBLY_EXECUTING",
            "reads": 0,
            "script": script,
        }
        await _created(self)
        return json_response(self.status(request, self.jobs[aid]))

    async def get(self, request: Request) -> Response:
        job = self.jobs.get(request.path_params["aid"])
        if job is None:
            return json_response(
                {"error": "ASSEMBLY_NOT_FOUND", "message": "Assembly not found"}, 404
            )
        self.reads += 1
        _advance(
            job,
            ["ASSEMBLY_EXECUTING"],
            "ERROR" if job["script"] == "fail" else "ASSEMBLY_COMPLETED",
        )
        return json_response(self.status(request, job))

    async def cancel(self, request: Request) -> Response:
        job = self.jobs.get(request.path_params["aid"])
        if job is None:
            return json_response(
                {"error": "ASSEMBLY_NOT_FOUND", "message": "Assembly not found"}, 404
            )
        self.cancels.append((job["id"], job["state"]))
        if job["state"] == "ASSEMBLY_EXECUTING":
            job["state"] = "ASSEMBLY_CANCELED"
        return json_response(self.status(request, job))
