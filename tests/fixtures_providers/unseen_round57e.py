"""dbt Cloud job runs, Fivetran connector syncs, Azure Data Factory pipeline runs and
Twelve Labs video indexing tasks, each a real app on loopback answering in the
shapes their public documentation gives (tests/integration/test_unseen_round57e.py).
Where the docs leave a behaviour open, the assumption is stated here.

- dbt Cloud v2 (`Authorization: Token ...`): `POST
  /api/v2/accounts/{a}/jobs/{j}/run/` {"cause" (required), "git_branch", ...}
  answers 200 {"status": {"code": 200, "is_success": true, "user_message":
  "Success!", "developer_message": ""}, "data": run}; run {"id" (a number),
  "job_definition_id", "status": 1 Queued | 2 Starting | 3 Running | 10 Success |
  20 Error | 30 Cancelled, "status_humanized", "status_message" (null unless it
  errored or was cancelled), "is_complete", "is_success", "is_error",
  "is_cancelled", "trigger": {"cause", ...} (with include_related=trigger)};
  `GET .../runs/{id}/` {"status", "data": run}; `POST .../runs/{id}/cancel/` the
  run (an ended run as it is: assumed); `GET .../runs/{id}/artifacts/run_results.json`
  the artifact (404 before the run wrote it); `GET .../runs/?job_definition_id=&
  order_by=-id&offset=&limit=` {"data": [runs], "extra": {"pagination": {"count",
  "total_count"}}}. Errors {"status": {"code", "is_success": false,
  "user_message", "developer_message"}, "data": null}. Webhooks: the body's hex
  HMAC-SHA256 under the webhook's secret in `Authorization`, no scheme word;
  {"accountId", "webhooksID", "eventId", "timestamp", "eventType":
  "job.run.completed", "webhookName", "data": {"jobId", "runId" (text),
  "runStatus": Success | Errored | Cancelled, "runStatusCode",
  "runStatusMessage", ...}}.
- Fivetran v1 (Basic): `POST /v1/connectors/{id}/sync` {"force": false} answers 200
  {"code": "Success", "message": "Sync has been successfully triggered for
  connector with id '...'"} (no id of a sync); `GET /v1/connectors/{id}` {"code":
  "Success", "data": {"id", "service", "paused", "succeeded_at", "failed_at",
  "status": {"setup_state", "sync_state": scheduled | syncing | paused |
  rescheduled, "update_state", ...}}}. A sync is told only by sync_state and the
  two timestamps (the last sync's end).
- Azure Data Factory 2018-06-01 (Bearer): `POST .../pipelines/{p}/createRun` (the
  body the pipeline's parameters) answers 200 {"runId"}; `GET
  .../pipelineruns/{runId}` {"runId", "runGroupId", "isLatest", "pipelineName",
  "parameters", "invokedBy", "runStart", "runEnd", "durationInMs", "status": Queued
  | InProgress | Succeeded | Failed | Canceling | Cancelled, "message",
  "lastUpdated"}; `POST .../pipelineruns/{runId}/cancel` 200, no body;
  `POST .../queryPipelineRuns` {"lastUpdatedAfter", "lastUpdatedBefore" (both
  required), "continuationToken", "filters", "orderBy"} answers {"value": [runs],
  "continuationToken"} (the token absent on the last page; a page here holds
  `page_size` runs). Every call wants `api-version`. Errors CloudError {"error":
  {"code", "message", "target", "details"}}.
- Twelve Labs v1.3 (`x-api-key`): `POST /v1.3/tasks` multipart (index_id,
  video_url or video_file) answers 201 {"_id", "video_id"}; `GET
  /v1.3/tasks/{id}` {"_id", "index_id", "video_id", "status": validating | pending
  | queued | indexing | ready | failed, "estimated_time" (RFC 3339),
  "system_metadata", "created_at", "updated_at"} (a failed task names no reason:
  assumed, none is documented).
  Errors {"code", "message"}; the create is rate-limited, 429 {"code":
  "too_many_requests"} with Retry-After, nothing made. Webhooks `TL-Signature: t=<unix>,v1=<hex
  HMAC-SHA256 of "{t}.{body}">`, {"id", "created_at", "type": "index.task.ready" |
  "index.task.failed", "data": {"id": the task, "status", ...}}. No cancel.

Scripts: the fixture's `script` for the next job ("fail", "slow": runs until the
test ends it); anything else completes after a few reads.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created

# --- dbt Cloud ---------------------------------------------------------------------

DBT_TOKEN = "dbtc_0123456789abcdefABCDEF0123456789"
DBT_HOOK_SECRET = "dbt-webhook-secret-3f9a1c7e"
DBT_ACCOUNT, DBT_JOB = "70403", "43167"
DBT_FAILURE = "Database Error in model stg_orders (models/staging/stg_orders.sql)"
DBT_WORDS = {1: "Queued", 2: "Starting", 3: "Running", 10: "Success", 20: "Error", 30: "Cancelled"}
DBT_RESULTS = {
    "metadata": {
        "dbt_schema_version": "https://schemas.getdbt.com/dbt/run-results/v6.json",
        "dbt_version": "1.9.1",
        "generated_at": "2026-12-06T10:04:00.000000Z",
        "invocation_id": "0b6c1a6e-1f0a-4b8a-9a5e-3b2c1d0e9f8a",
    },
    "results": [
        {"unique_id": "model.shop.stg_orders", "status": "success", "execution_time": 1.2},
        {"unique_id": "model.shop.orders", "status": "success", "execution_time": 3.4},
    ],
    "elapsed_time": 5.1,
    "args": {"which": "build"},
}


class DbtCloudFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.others = 0  # runs of the job made elsewhere (listed before ours)
        self.list_reads: list[tuple[str | None, str | None]] = []  # (offset, limit)
        self.artifact_reads = 0

    def new_id(self) -> str:
        return str(9_100_000 + len(self.jobs) + 1)

    def app(self) -> Starlette:
        root = f"/api/v2/accounts/{DBT_ACCOUNT}"
        return Starlette(
            routes=[
                Route(f"{root}/jobs/{{job}}/run/", self.create, methods=["POST"]),
                Route(f"{root}/runs/", self.list_runs, methods=["GET"]),
                Route(f"{root}/runs/{{rid}}/", self.get, methods=["GET"]),
                Route(f"{root}/runs/{{rid}}/cancel/", self.cancel, methods=["POST"]),
                Route(
                    f"{root}/runs/{{rid}}/artifacts/run_results.json",
                    self.artifact,
                    methods=["GET"],
                ),
            ]
        )

    @staticmethod
    def _status(code: int, message: str = "Success!") -> dict[str, Any]:
        return {
            "code": code,
            "is_success": code < 400,
            "user_message": message,
            "developer_message": "",
        }

    def _error(self, code: int, message: str) -> Response:
        return json_response({"status": self._status(code, message), "data": None}, code)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Token {DBT_TOKEN}":
            return self._error(401, "Invalid token.")
        return None

    def run(self, job: dict[str, Any], *, trigger: bool = False) -> dict[str, Any]:
        status = job["state"]
        out: dict[str, Any] = {
            "id": int(job["id"]),
            "account_id": int(DBT_ACCOUNT),
            "job_definition_id": int(DBT_JOB),
            "status": status,
            "status_humanized": DBT_WORDS[status],
            "status_message": job.get("message"),
            "git_branch": "main",
            "created_at": "2026-12-06 10:00:00.000000+00:00",
            "finished_at": "2026-12-06 10:04:00.000000+00:00" if status >= 10 else None,
            "is_complete": status >= 10,
            "is_success": status == 10,
            "is_error": status == 20,
            "is_cancelled": status == 30,
            "in_progress": status in (1, 2, 3),
            "href": f"https://cloud.getdbt.com/deploy/{DBT_ACCOUNT}/runs/{job['id']}",
        }
        if trigger:
            out["trigger"] = {"id": int(job["id"]) + 5, "cause": job["cause"]}
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if request.path_params["job"] != DBT_JOB:
            return self._error(404, "The requested resource was not found.")
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("cause"), str):
            return self._error(400, "The request was invalid. Please double check the data.")
        for _ in range(self.others):  # runs of the job others started before ours
            other = str(9_000_000 + len(self.jobs) + 1)
            self.jobs[other] = {"id": other, "state": 10, "reads": 0, "cause": "Nightly"}
        self.others = 0
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "state": 1,
            "reads": 0,
            "script": self.script,
            "cause": body["cause"],
        }
        await _created(self)
        return json_response({"status": self._status(200), "data": self.run(self.jobs[rid])})

    async def list_runs(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        q = request.query_params
        self.list_reads.append((q.get("offset"), q.get("limit")))
        runs = [j for j in self.jobs.values() if q.get("job_definition_id") == DBT_JOB]
        if q.get("order_by") == "-id":
            runs.sort(key=lambda j: -int(j["id"]))
        offset, limit = int(q.get("offset") or 0), min(int(q.get("limit") or 100), 100)
        page = runs[offset : offset + limit]
        with_trigger = "trigger" in (q.get("include_related") or "")
        data = [self.run(j, trigger=with_trigger) for j in page]
        extra = {
            "filters": {"job_definition_id": DBT_JOB},
            "order_by": q.get("order_by"),
            "pagination": {"count": len(page), "total_count": len(runs)},
        }
        return json_response({"status": self._status(200), "data": data, "extra": extra})

    def _job(self, request: Request) -> dict[str, Any] | None:
        return self.jobs.get(request.path_params["rid"])

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return self._error(404, "The requested resource was not found.")
        self.reads += 1
        _advance(job, [1, 2, 3], 20 if job.get("script") == "fail" else 10)
        if job["state"] == 20:
            job["message"] = DBT_FAILURE
        return json_response({"status": self._status(200), "data": self.run(job)})

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return self._error(404, "The requested resource was not found.")
        self.cancels.append((job["id"], DBT_WORDS[job["state"]]))
        if job["state"] in (1, 2, 3):
            job["state"], job["message"] = 30, "Cancelled by user."
        return json_response({"status": self._status(200), "data": self.run(job)})

    async def artifact(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None or job["state"] not in (10, 20):
            return self._error(404, "The requested resource was not found.")
        self.artifact_reads += 1
        return json_response(DBT_RESULTS)

    def event(self, rid: str) -> bytes:
        """dbt's job.run.completed for run `rid`, as sent (the body's bytes)."""
        job = self.jobs[rid]
        word = {10: "Success", 20: "Errored", 30: "Cancelled"}[job["state"]]
        event = {
            "accountId": int(DBT_ACCOUNT),
            "webhooksID": "wsu_2Lqk1AxQhY3nTq9bB1",
            "eventId": f"wev_{rid}",
            "timestamp": "2026-12-06T10:04:01.742843678Z",
            "eventType": "job.run.completed",
            "webhookName": "jobwarden",
            "data": {
                "jobId": DBT_JOB,
                "jobName": "Daily build",
                "runId": rid,
                "environmentId": "218762",
                "runStatus": word,
                "runStatusCode": job["state"],
                "runStatusMessage": job.get("message") or "None",
                "runReason": job["cause"],
                "runStartedAt": "2026-12-06T10:00:07Z",
                "runFinishedAt": "2026-12-06T10:04:00Z",
            },
        }
        return json.dumps(event).encode()


async def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    async with httpx.AsyncClient() as client:
        return (await client.post(url, content=body, headers=headers)).status_code


# --- Fivetran ----------------------------------------------------------------------

FT_BASIC = "ZDJWclpYazZjMlZqY21WMA=="  # base64("<api key>:<api secret>")
FT_CONNECTOR = "warehouse_salesforce"
FT_OLD_SUCCESS = "2026-12-05T02:00:00.000Z"  # the last sync's end, before any trigger


class FivetranFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.syncs: list[dict[str, Any]] = []  # each trigger's body
        self.connector: dict[str, Any] = {
            "id": FT_CONNECTOR,
            "group_id": "projected_sickle",
            "service": "salesforce",
            "schema": "salesforce",
            "paused": False,
            "sync_frequency": 360,
            "succeeded_at": FT_OLD_SUCCESS,
            "failed_at": None,
            "status": {
                "setup_state": "connected",
                "sync_state": "scheduled",
                "update_state": "on_schedule",
                "is_historical_sync": False,
                "tasks": [],
                "warnings": [],
            },
        }

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/connectors/{cid}/sync", self.sync, methods=["POST"]),
                Route("/v1/connectors/{cid}", self.get, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {FT_BASIC}":
            return json_response({"code": "AuthFailed", "message": "Invalid credentials"}, 401)
        if request.path_params["cid"] != FT_CONNECTOR:
            message = f"Connector with id '{request.path_params['cid']}' doesn't exist"
            return json_response({"code": "NotFound_Connector", "message": message}, 404)
        return None

    async def sync(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.syncs.append(await read_json(request) or {})
        self.connector["status"]["sync_state"] = "syncing"
        await _created(self)
        message = f"Sync has been successfully triggered for connector with id '{FT_CONNECTOR}'"
        return json_response({"code": "Success", "message": message})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.reads += 1
        return json_response({"code": "Success", "data": self.connector})


# --- Azure Data Factory ------------------------------------------------------------

ADF_TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.adf-test-token"
ADF_FACTORY = (
    "/subscriptions/8f3c0a2e-1b4d-4e6f-9a7b-0c1d2e3f4a5b/resourceGroups/analytics"
    "/providers/Microsoft.DataFactory/factories/salesfactory"
)
ADF_PIPELINE = "copy_sales"
ADF_FAILURE = (
    "Operation on target Copy sales data failed: ErrorCode=UserErrorSourceBlobNotExists,"
    "'Type=Microsoft.DataTransfer.Common.Shared.HybridDeliveryException,"
    "Message=The required Blob is missing.'"
)


class DataFactoryFixture(_Jobs):
    def __init__(self, *, page_size: int = 100, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.page_size = page_size
        self.others = 0  # runs of the pipeline made elsewhere, newer than ours
        self.queries: list[dict[str, Any]] = []  # each queryPipelineRuns body
        self.bad_calls: list[str] = []  # calls without api-version

    def new_id(self) -> str:
        return str(uuid.UUID(int=0xADF << 100 | len(self.jobs) + 1))

    def app(self) -> Starlette:
        runs = f"{ADF_FACTORY}/pipelineruns/{{rid}}"
        return Starlette(
            routes=[
                Route(f"{ADF_FACTORY}/pipelines/{{p}}/createRun", self.create, methods=["POST"]),
                Route(runs, self.get, methods=["GET"]),
                Route(f"{runs}/cancel", self.cancel, methods=["POST"]),
                Route(f"{ADF_FACTORY}/queryPipelineRuns", self.query, methods=["POST"]),
            ]
        )

    @staticmethod
    def _error(status: int, code: str, message: str) -> Response:
        body = {"error": {"code": code, "message": message, "target": None, "details": None}}
        return json_response(body, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {ADF_TOKEN}":
            return self._error(401, "InvalidAuthenticationToken", "The access token is invalid.")
        if request.query_params.get("api-version") != "2018-06-01":
            self.bad_calls.append(request.url.path)
            return self._error(400, "MissingApiVersionParameter", "api-version is required")
        return None

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        ended = state in ("Succeeded", "Failed", "Cancelled")
        return {
            "id": f"{ADF_FACTORY}/pipelineruns/{job['id']}",
            "runId": job["id"],
            "runGroupId": job["id"],
            "isLatest": True,
            "pipelineName": ADF_PIPELINE,
            "parameters": job["parameters"],
            "invokedBy": {"id": "b1c2", "name": "Manual", "invokedByType": "Manual"},
            "runStart": "2026-12-06T10:00:00.0000000Z",
            "runEnd": "2026-12-06T10:04:00.0000000Z" if ended else None,
            "durationInMs": 240000 if ended else None,
            "status": state,
            "message": job.get("message", ""),
            "lastUpdated": "2026-12-06T10:04:00.0000000Z",
            "annotations": [],
            "runDimension": {},
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if request.path_params["p"] != ADF_PIPELINE:
            return self._error(404, "PipelineNotFound", "Pipeline not found")
        body = await read_json(request)
        if body is not None and not isinstance(body, dict):
            return self._error(400, "BadRequest", "The request body is not a parameters object")
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "state": "Queued",
            "reads": 0,
            "script": self.script,
            "parameters": {k: str(v) for k, v in (body or {}).items()},
        }
        for n in range(self.others):  # others' runs, started after ours
            other = str(uuid.UUID(int=0xEEE << 100 | n + 1))
            self.jobs[other] = {"id": other, "state": "Succeeded", "reads": 0, "parameters": {}}
        self.others = 0
        await _created(self)
        return json_response({"runId": rid})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "PipelineRunNotFound", "Pipeline run not found")
        self.reads += 1
        if job["state"] == "Canceling":
            job["canceling_reads"] = job.get("canceling_reads", 0) + 1
            if job["canceling_reads"] > 1:  # read Canceling once, then Cancelled
                job["state"] = "Cancelled"
        else:
            fail = job.get("script") == "fail"
            _advance(job, ["Queued", "InProgress"], "Failed" if fail else "Succeeded")
        if job["state"] == "Failed":
            job["message"] = ADF_FAILURE
        return json_response(self.run(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "PipelineRunNotFound", "Pipeline run not found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("Queued", "InProgress"):
            job["state"] = "Canceling"
        return Response(status_code=200)

    async def query(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not (
            body.get("lastUpdatedAfter") and body.get("lastUpdatedBefore")
        ):
            said = "lastUpdatedAfter and lastUpdatedBefore are required"
            return self._error(400, "BadRequest", said)
        self.queries.append(body)
        runs = list(reversed(self.jobs.values()))  # newest first
        for f in body.get("filters") or []:
            if f.get("operand") == "PipelineName":
                runs = [r for r in runs if ADF_PIPELINE in f.get("values", [])]
        start = int(body.get("continuationToken") or 0)
        page = runs[start : start + self.page_size]
        out: dict[str, Any] = {"value": [self.run(j) for j in page]}
        if start + self.page_size < len(runs):
            out["continuationToken"] = str(start + self.page_size)
        return json_response(out)


# --- Twelve Labs -------------------------------------------------------------------

TL_KEY = "tlk_0123456789ABCDEFGHIJKLMNOP"
TL_HOOK_SECRET = "tl-webhook-secret-9b2e4d1a"
TL_INDEX = "6298d673f1090f1100476d4c"
TL_VIDEO = "https://example.com/videos/keynote.mp4"


class TwelveLabsFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.fields: list[dict[str, str]] = []  # each create's multipart fields
        self.throttle_first = False  # the first create answered 429, nothing made

    def new_id(self) -> str:
        return f"6659784b2d2b4a7d{len(self.jobs) + 1:08x}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1.3/tasks", self.create, methods=["POST"]),
                Route("/v1.3/tasks/{tid}", self.get, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("x-api-key") != TL_KEY:
            message = "The API key you provided is not valid."
            return json_response({"code": "api_key_invalid", "message": message}, 401)
        return None

    def task(self, job: dict[str, Any]) -> dict[str, Any]:
        ready = job["state"] == "ready"
        soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
        return {
            "_id": job["id"],
            "index_id": job["index_id"],
            "video_id": job["video"] if ready else None,
            "status": job["state"],
            "system_metadata": {"filename": "keynote.mp4", "duration": 531.2},
            "created_at": "2026-12-06T10:00:00Z",
            "updated_at": "2026-12-06T10:04:00Z",
            "estimated_time": None if job["state"] in ("ready", "failed") else soon,
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        async with request.form() as form:
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
        self.fields.append(fields)
        if self.throttle_first and self.throttled_creates == 0:
            self.throttled_creates += 1
            message = "You have exceeded the rate limit. Please try again later."
            body = {"code": "too_many_requests", "message": message}
            return json_response(body, 429, headers={"Retry-After": "1"})
        if not fields.get("index_id"):
            message = "The index_id parameter is required but was not provided."
            return json_response({"code": "parameter_not_provided", "message": message}, 400)
        if not fields.get("video_url"):
            message = "Either video_file or video_url must be provided."
            return json_response({"code": "parameter_not_provided", "message": message}, 400)
        tid = self.new_id()
        self.jobs[tid] = {
            "id": tid,
            "state": "validating",
            "reads": 0,
            "script": self.script,
            "index_id": fields["index_id"],
            "video": f"66597a3c2d2b4a7d{len(self.jobs) + 1:08x}",
        }
        await _created(self)
        return json_response({"_id": tid, "video_id": None}, 201)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["tid"])
        if job is None:
            message = f"The task {request.path_params['tid']} does not exist."
            return json_response({"code": "resource_not_exists", "message": message}, 404)
        self.reads += 1
        steps = ["validating", "pending", "queued", "indexing"]
        _advance(job, steps, "failed" if job.get("script") == "fail" else "ready")
        return json_response(self.task(job))

    def event(self, tid: str) -> bytes:
        job = self.jobs[tid]
        kind = "index.task.ready" if job["state"] == "ready" else "index.task.failed"
        event = {
            "id": f"whe_{tid}",
            "created_at": "2026-12-06T10:04:01Z",
            "type": kind,
            "data": {"id": tid, "status": job["state"], "index_id": job["index_id"]},
        }
        return json.dumps(event).encode()


def tl_signature(secret: str, body: bytes, at: int | None = None) -> str:
    """TL-Signature as Twelve Labs documents it, computed here on its own."""
    t = str(int(time.time()) if at is None else at)
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def dbt_signature(secret: str, body: bytes) -> str:
    """dbt Cloud's Authorization value: the body's hex HMAC-SHA256, nothing before it."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
