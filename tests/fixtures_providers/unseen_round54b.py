"""Google BigQuery's query jobs, Databricks' one-time runs, Cloudflare Stream's
copied videos, Snowflake's SQL API statements and Shopify's bulk operations, each a
real app on loopback
answering in the shapes their public documentation gives
(tests/integration/test_unseen_round54b.py). Where the docs leave a behaviour
open, the assumption is stated here.

- BigQuery REST v2 (bearer, an OAuth access token): `POST
  /bigquery/v2/projects/{p}/jobs` {"jobReference": {"projectId", "jobId",
  "location"}, "configuration": {"query": {"query", "useLegacySql"}, "labels"}}
  answers 200 the Job {"kind": "bigquery#job", "id": "p:US.<jobId>",
  "jobReference", "configuration", "status": {"state": "PENDING"}, "statistics"};
  the jobId is the client's choice, and a second insert with it answers 409
  {"error": {"code": 409, "message": "Already Exists: Job p:US.<jobId>",
  "errors": [{"message", "domain": "global", "reason": "duplicate"}], "status":
  "ALREADY_EXISTS"}}. `GET .../jobs/{jobId}?location=US` the Job, status.state
  PENDING | RUNNING | DONE, DONE with status.errorResult {"reason", "location",
  "message"} (and status.errors) when it failed; a job read without its location
  (or another) is 404 "Not found: Job p:EU.<jobId>" (assumed: the docs say the
  location "must" be given outside the US and EU multi-regions; the fake asks it
  always). `POST .../jobs/{jobId}/cancel?location=US` 200 {"kind":
  "bigquery#jobCancelResponse", "job": the Job as it stands}; best effort: the job
  then ends DONE with errorResult {"reason": "stopped", "message": "Job execution
  was cancelled: User requested cancellation"}, or completes all the same.
  `GET .../queries/{jobId}?location=US&maxResults=&pageToken=` {"kind":
  "bigquery#getQueryResultsResponse", "schema": {"fields"}, "jobReference",
  "totalRows" (a string: the whole result's), "rows": [{"f": [{"v"}]}],
  "pageToken" (absent on the last page), "jobComplete": true,
  "totalBytesProcessed", "cacheHit"}. Errors: {"error": {"code", "message",
  "errors": [{"reason"}], "status"}}.
- Databricks Jobs API 2.1 (bearer, a PAT "dapi..."): `POST
  /api/2.1/jobs/runs/submit` {"run_name", "tasks": [{"task_key",
  "notebook_task": {"notebook_path", "base_parameters"}, "existing_cluster_id"}],
  "idempotency_token" (at most 64 characters), "timeout_seconds"} answers 200
  {"run_id"} (an int64); a submit repeating a token answers the run it launched.
  `GET /api/2.1/jobs/runs/get?run_id=` {"job_id", "run_id", "state":
  {"life_cycle_state" QUEUED | PENDING | RUNNING | TERMINATING | TERMINATED |
  SKIPPED | INTERNAL_ERROR, "result_state" (only once the run ended) SUCCESS |
  FAILED | TIMEDOUT | CANCELED | ..., "state_message",
  "user_cancelled_or_timedout"}, "tasks": [{"run_id" (the task run's own),
  "task_key", "state", ...}], "run_name", "run_type": "SUBMIT_RUN",
  "run_page_url", ...}. `POST /api/2.1/jobs/runs/cancel` {"run_id"} answers {} at
  once, the run TERMINATING, then TERMINATED with result_state CANCELED ("Run
  cancelled."); an ended run's cancel answers {} as well and changes nothing
  (assumed: the docs say only that the cancel is asynchronous). `GET
  /api/2.1/jobs/runs/get-output?run_id=` a task run's {"metadata": the task run,
  "notebook_output": {"result", "truncated"}}; asked of the submitted (multi-task)
  run itself, 400 INVALID_PARAMETER_VALUE "Retrieving the output of runs with
  multiple tasks is not supported...". Errors {"error_code", "message"}. An int64
  in a request is read as a JSON number or its decimal string (assumed, as
  proto3's JSON mapping reads int64, which the API's definitions are).
- Cloudflare Stream (bearer, an API token): `POST
  /client/v4/accounts/{acct}/stream/copy` {"url", "meta", "creator" (at most 64
  characters), "requireSignedURLs", ...} answers 200 {"result": the video,
  "success": true, "errors": [], "messages": []}; the video {"uid", "creator",
  "readyToStream", "status": {"state" pendingupload | downloading | queued |
  inprogress | ready | error, "pctComplete" (a string), "errorReasonCode"
  (ERR_NON_VIDEO, ERR_DURATION_EXCEED_CONSTRAINT, ...), "errorReasonText"},
  "meta", "playback": {"hls", "dash"}, "duration", "input", "size", ...}. `GET
  .../stream/{uid}` the same envelope; `GET .../stream?creator=` {"result":
  [videos], "total", "range"}; `DELETE .../stream/{uid}` 200, the video gone
  whatever its state (then 404). Errors {"success": false, "errors": [{"code",
  "message"}]} (10003 "Not Found"). Webhooks (`PUT .../stream/webhook`
  {"notificationUrl"} answers the `secret`) post the video as the API shows it,
  `Webhook-Signature: time=<unix>,sig1=<hex HMAC-SHA256 of "<time>.<body>">`.
- Snowflake SQL API v2 (`Authorization: Bearer <key-pair JWT>` with
  `X-Snowflake-Authorization-Token-Type: KEYPAIR_JWT`): `POST
  /api/v2/statements?requestId=<uuid>&async=true` {"statement", "timeout",
  "database", "schema", "warehouse", "role", "parameters"} answers 202 {"code":
  "333334", "message": "Asynchronous execution in progress...",
  "statementHandle", "statementStatusUrl"}. Resubmitted with the same requestId
  and retry=true ("set to true only when retrying the request"), it answers the
  statement already submitted (assumed: without retry=true, a requestId seen
  before runs the statement again, as the fake does). `GET
  /api/v2/statements/{handle}` 202 the same while it runs; 200 the result set
  {"resultSetMetaData": {"numRows", "format": "jsonv2", "partitionInfo":
  [{"rowCount", "uncompressedSize"}], "rowType"}, "data": [[...]],
  "code": "090001", "sqlState": "00000", "message": "Statement executed
  successfully.", "statementHandle", "requestId", "createdOn"}; 422 {"code",
  "message", "sqlState", "statementHandle"} a failure (002003 ... 42S02), and a
  cancelled statement alike (000604 "SQL execution canceled", 57014).
  `?partition=N` (N > 0) answers {"data"} alone (assumed from "subsequent
  partitions" carrying no metadata). `POST .../{handle}/cancel` 200 {"code",
  "sqlState", "message", "statementHandle", "statementStatusUrl"}.
- Shopify Admin GraphQL bulk operations (`X-Shopify-Access-Token`): every call a
  `POST /admin/api/2025-01/graphql.json` answered 200, errors included.
  `bulkOperationRunQuery(query:)` answers {"data": {"bulkOperationRunQuery":
  {"bulkOperation": {"id": "gid://shopify/BulkOperation/<n>", "status":
  "CREATED"}, "userErrors": []}}, "extensions": {"cost"}}; the shop's one bulk
  query already running: bulkOperation null, userErrors [{"field", "message",
  "code": "OPERATION_IN_PROGRESS"}]; throttled: {"errors": [{"message":
  "Throttled", "extensions": {"code": "THROTTLED"}}]}, nothing made. `node(id:)
  { ... on BulkOperation { id status errorCode objectCount fileSize url
  partialDataUrl } }` status CREATED | RUNNING | COMPLETED | FAILED | CANCELING |
  CANCELED | EXPIRED, errorCode ACCESS_DENIED | INTERNAL_SERVER_ERROR | TIMEOUT,
  objectCount a string, url a signed Google Cloud Storage link to the JSONL (one
  object a line, a nested connection's with "__parentId"), null when the query
  matched nothing (objectCount "0"). `bulkOperationCancel(id:)` answers the
  operation CANCELING (CANCELED on a later read); an ended one: userErrors
  [{"message": "A bulk operation cannot be canceled when it is completed"}],
  still 200. Webhook bulk_operations/finish: {"admin_graphql_api_id", "status"
  (lower case), "error_code", "type", "created_at", "completed_at"},
  `X-Shopify-Hmac-Sha256` the base64 HMAC-SHA256 of the raw body under the app's
  client secret, `X-Shopify-Topic`, `X-Shopify-Webhook-Id`, ...

Scripts: BigQuery's in the create's `configuration.labels.script` (BigQuery's own
labels), Databricks' in the first task's `notebook_task.base_parameters.script`,
Cloudflare's in `meta.script`, Snowflake's in `parameters.query_tag`, Shopify's in
the mutation's `variables.script`: "fail" (DONE with invalidQuery; FAILED; error
ERR_NON_VIDEO; 422 002003; FAILED ACCESS_DENIED), "timeout" (Databricks'
TIMEDOUT), "skip" (Databricks' SKIPPED, ended with no result_state), "empty"
(BigQuery: no row, `rows` left out; Shopify: a query that matched nothing), "slow"
(runs until the test ends it), "race" (BigQuery: a cancel is taken, and the job
completes all the same); anything else completes after a few reads.
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

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created

# --- BigQuery ----------------------------------------------------------------------

BIGQUERY_TOKEN = "ya29.a0AfB_bigquery-test-token"
BIGQUERY_PROJECT = "my-project"
BIGQUERY_FAILURE = "Syntax error: Expected end of input but got keyword FORM at [1:10]"
BIGQUERY_STOPPED = "Job execution was cancelled: User requested cancellation"
BIGQUERY_SCHEMA = {
    "fields": [
        {"name": "word", "type": "STRING", "mode": "NULLABLE"},
        {"name": "n", "type": "INTEGER", "mode": "NULLABLE"},
    ]
}
BIGQUERY_ROWS = [["alpha", "3"], ["beta", "5"], ["gamma", "8"], ["delta", "13"], ["eps", "21"]]


def bigquery_rows(start: int, end: int) -> list[dict[str, Any]]:
    """Rows as BigQuery sends them: each a list of cells, every value a string."""
    return [{"f": [{"v": v} for v in row]} for row in BIGQUERY_ROWS[start:end]]


class BigQueryFixture(_Jobs):
    """`page_reads`: the pageToken of each results page read (None: the first);
    `page_size` rows a page, whatever maxResults asks; `locations`: the location
    of every job read."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("job_", **kwargs)
        self.page_size = 2
        self.page_reads: list[str | None] = []
        self.locations: list[str | None] = []
        self.duplicates = 0

    def app(self) -> Starlette:
        base = f"/bigquery/v2/projects/{BIGQUERY_PROJECT}"
        return Starlette(
            routes=[
                Route(f"{base}/jobs", self.insert, methods=["POST"]),
                Route(f"{base}/jobs/{{jid}}", self.get, methods=["GET"]),
                Route(f"{base}/jobs/{{jid}}/cancel", self.cancel, methods=["POST"]),
                Route(f"{base}/queries/{{jid}}", self.results, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: int, status: str, reason: str, message: str) -> Response:
        body = {
            "error": {
                "code": code,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
                "status": status,
            }
        }
        return json_response(body, code)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {BIGQUERY_TOKEN}":
            return self._error(
                401,
                "UNAUTHENTICATED",
                "authError",
                "Request is missing required authentication credential.",
            )
        return None

    def _find(self, request: Request) -> tuple[dict[str, Any] | None, Response | None]:
        """The job the path names, read in its own location (else BigQuery's 404)."""
        jid = request.path_params["jid"]
        location = request.query_params.get("location")
        self.locations.append(location)
        job = self.jobs.get(jid)
        if job is None or location != job["location"]:
            where = f"{BIGQUERY_PROJECT}:{location or 'US'}.{jid}"
            return None, self._error(404, "NOT_FOUND", "notFound", f"Not found: Job {where}")
        return job, None

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        status: dict[str, Any] = {"state": job["state"]}
        if job["state"] == "DONE" and job.get("error"):
            status["errorResult"] = job["error"]
            status["errors"] = [job["error"]]
        ref = {"projectId": BIGQUERY_PROJECT, "jobId": job["id"], "location": job["location"]}
        return {
            "kind": "bigquery#job",
            "etag": "B1p+bQ==",
            "id": f"{BIGQUERY_PROJECT}:{job['location']}.{job['id']}",
            "selfLink": f"https://bigquery.googleapis.com/bigquery/v2/projects/{BIGQUERY_PROJECT}"
            f"/jobs/{job['id']}?location={job['location']}",
            "user_email": "jobwarden@my-project.iam.gserviceaccount.com",
            "configuration": job["configuration"],
            "jobReference": ref,
            "statistics": {"creationTime": "1765000000000", "startTime": "1765000000100"},
            "status": status,
        }

    async def insert(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        config = body.get("configuration") if isinstance(body, dict) else None
        if not isinstance(config, dict) or "query" not in config:
            return self._error(400, "INVALID_ARGUMENT", "invalid", "Job configuration is missing")
        ref = body.get("jobReference") or {}
        jid = ref.get("jobId") or self.new_id()
        location = ref.get("location") or "US"
        if jid in self.jobs:
            self.duplicates += 1
            where = f"{BIGQUERY_PROJECT}:{location}.{jid}"
            return self._error(409, "ALREADY_EXISTS", "duplicate", f"Already Exists: Job {where}")
        script = (config.get("labels") or {}).get("script")
        race = script == "race"
        self.jobs[jid] = {
            "race": race,
            "id": jid,
            "location": location,
            "configuration": config,
            "state": "PENDING",
            "reads": 0,
            "script": "slow" if race else script,
        }
        await _created(self)
        return json_response(self.job(self.jobs[jid]))

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job, missing = self._find(request)
        if job is None:
            assert missing is not None
            return missing
        self.reads += 1
        if job.get("cancel_requested") and job["state"] != "DONE":
            job["state"] = "DONE"
            if not job["race"]:
                job["error"] = {"reason": "stopped", "message": BIGQUERY_STOPPED}
        _advance(job, ["PENDING", "RUNNING"], "DONE")
        if job["state"] == "DONE" and job["script"] == "fail" and "error" not in job:
            job["error"] = {
                "reason": "invalidQuery",
                "location": "query",
                "message": BIGQUERY_FAILURE,
            }
        return json_response(self.job(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job, missing = self._find(request)
        if job is None:
            assert missing is not None
            return missing
        self.cancels.append((job["id"], job["state"]))
        if job["state"] != "DONE":
            job["cancel_requested"] = True
        return json_response({"kind": "bigquery#jobCancelResponse", "job": self.job(job)})

    async def results(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job, missing = self._find(request)
        if job is None:
            assert missing is not None
            return missing
        token = request.query_params.get("pageToken")
        self.page_reads.append(token)
        ref = {"projectId": BIGQUERY_PROJECT, "jobId": job["id"], "location": job["location"]}
        if job["state"] != "DONE":
            pending = {"kind": "bigquery#getQueryResultsResponse", "jobReference": ref}
            return json_response(pending | {"jobComplete": False})
        if job.get("error"):
            error = job["error"]
            return self._error(400, "INVALID_ARGUMENT", error["reason"], error["message"])
        if job["script"] == "empty":
            # no row: BigQuery leaves `rows` out (proto3's JSON omits an empty list)
            empty = {"kind": "bigquery#getQueryResultsResponse", "schema": BIGQUERY_SCHEMA}
            empty |= {"jobReference": ref, "totalRows": "0", "jobComplete": True}
            return json_response(empty | {"totalBytesProcessed": "0", "cacheHit": False})
        start = int(token.removeprefix("BHZ")) if token else 0
        end = start + self.page_size
        page: dict[str, Any] = {
            "kind": "bigquery#getQueryResultsResponse",
            "etag": "Y2FjaGU=",
            "schema": BIGQUERY_SCHEMA,
            "jobReference": ref,
            "totalRows": str(len(BIGQUERY_ROWS)),
            "rows": bigquery_rows(start, end),
            "totalBytesProcessed": "65935",
            "jobComplete": True,
            "cacheHit": False,
        }
        if end < len(BIGQUERY_ROWS):
            page["pageToken"] = f"BHZ{end}"
        return Response(json.dumps(page), media_type="application/json; charset=UTF-8")


# --- Databricks --------------------------------------------------------------------

DATABRICKS_TOKEN = "dapi0123456789abcdef0123456789abcdef"
DATABRICKS_FAILURE = (
    "Task ingest failed with message: Workload failed, see run output for details."
    " This caused all downstream tasks to get skipped."
)
DATABRICKS_TIMEOUT = "Run timed out after 3600 seconds"
DATABRICKS_SKIPPED = (
    "Skipping this run because the limit of 1 maximum concurrent runs has been reached."
)
DATABRICKS_MULTI_TASK = (
    "Retrieving the output of runs with multiple tasks is not supported."
    " Please retrieve the output of each individual task run instead."
)


def databricks_output(task_key: str) -> str:
    """What a task's notebook handed to dbutils.notebook.exit()."""
    return json.dumps({"task": task_key, "rows_written": 1200})


class DatabricksFixture(_Jobs):
    """`tokens`: the idempotency_token of each submit; `output_reads`: the run id of
    each get-output read; `cancel_bodies`: each cancel's JSON body."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.tokens: list[str | None] = []
        self.output_reads: list[str] = []
        self.cancel_bodies: list[Any] = []
        self.by_token: dict[str, str] = {}
        self.task_runs: dict[str, tuple[str, str]] = {}  # task run id: (run id, task key)

    def new_id(self) -> str:
        return str(455644800 + len(self.jobs) + 1)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/2.1/jobs/runs/submit", self.submit, methods=["POST"]),
                Route("/api/2.1/jobs/runs/get", self.get, methods=["GET"]),
                Route("/api/2.1/jobs/runs/cancel", self.cancel, methods=["POST"]),
                Route("/api/2.1/jobs/runs/get-output", self.output, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: str, message: str, status: int) -> Response:
        return json_response({"error_code": code, "message": message}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {DATABRICKS_TOKEN}":
            return self._error("PERMISSION_DENIED", "Invalid access token.", 403)
        return None

    @staticmethod
    def _run_id(value: Any) -> str | None:
        """An int64 run id, as a JSON number or (proto3's JSON mapping) its decimal
        string; anything else is no run id."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return str(value)
        return None

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        life, result = job["state"], job.get("result")
        state: dict[str, Any] = {
            "life_cycle_state": life,
            "state_message": job.get("message", ""),
            "user_cancelled_or_timedout": result in ("CANCELED", "TIMEDOUT"),
        }
        if result is not None:
            state["result_state"] = result
        tasks = [
            {
                "run_id": int(tid),
                "task_key": key,
                "state": {k: v for k, v in state.items() if k != "user_cancelled_or_timedout"},
                "notebook_task": {"notebook_path": f"/Repos/etl/{key}", "source": "WORKSPACE"},
                "existing_cluster_id": "0923-164208-meows279",
                "attempt_number": 0,
            }
            for tid, key in job["tasks"]
        ]
        return {
            "job_id": 684372 + int(job["id"]) % 1000,
            "run_id": int(job["id"]),
            "creator_user_name": "jobwarden@example.com",
            "number_in_job": int(job["id"]),
            "original_attempt_run_id": int(job["id"]),
            "state": state,
            "tasks": tasks,
            "run_name": job["name"],
            "run_type": "SUBMIT_RUN",
            "run_page_url": f"https://dbc-a1b2345c-d6e7.cloud.databricks.com/#job/0/run/{job['id']}",
            "start_time": 1765000000000,
            "format": "MULTI_TASK",
        }

    async def submit(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        tasks = body.get("tasks") if isinstance(body, dict) else None
        if not isinstance(tasks, list) or not tasks:
            return self._error("INVALID_PARAMETER_VALUE", "At least one task is required.", 400)
        token = body.get("idempotency_token")
        self.tokens.append(token)
        if isinstance(token, str) and len(token) > 64:
            return self._error(
                "INVALID_PARAMETER_VALUE", "idempotency_token must be at most 64 characters", 400
            )
        if token in self.by_token:
            return json_response({"run_id": int(self.by_token[token])})
        rid = self.new_id()
        params = (tasks[0].get("notebook_task") or {}).get("base_parameters") or {}
        keys = [str(t.get("task_key")) for t in tasks]
        task_ids = [(str(int(rid) * 10 + n), key) for n, key in enumerate(keys, start=1)]
        for tid, key in task_ids:
            self.task_runs[tid] = (rid, key)
        self.jobs[rid] = {
            "id": rid,
            "name": body.get("run_name", "Untitled"),
            "tasks": task_ids,
            "state": "PENDING",
            "reads": 0,
            "script": params.get("script"),
        }
        if isinstance(token, str):
            self.by_token[token] = rid
        await _created(self)
        return json_response({"run_id": int(rid)})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        rid = self._run_id(request.query_params.get("run_id"))
        job = self.jobs.get(rid or "")
        if job is None:
            return self._error("RESOURCE_DOES_NOT_EXIST", f"Run {rid} does not exist.", 404)
        self.reads += 1
        if job["state"] == "TERMINATING" and job.pop("terminating", False):
            job["state"], job["result"], job["message"] = "TERMINATED", "CANCELED", "Run cancelled."
        elif job["state"] == "TERMINATING":
            job["terminating"] = True  # one read of it: the cluster stops its work
        elif job["state"] == "RUNNING" and job["script"] != "slow":
            job["state"] = "TERMINATED"
            job["result"], job["message"] = {
                "fail": ("FAILED", DATABRICKS_FAILURE),
                "timeout": ("TIMEDOUT", DATABRICKS_TIMEOUT),
            }.get(job["script"] or "", ("SUCCESS", ""))
        elif job["state"] == "PENDING" and job["script"] == "skip":
            job["state"], job["message"] = "SKIPPED", DATABRICKS_SKIPPED  # no result_state
        elif job["state"] == "PENDING":
            job["state"], job["message"] = "RUNNING", "In run"
        return json_response(self.run(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        self.cancel_bodies.append(body)
        rid = self._run_id(body.get("run_id") if isinstance(body, dict) else None)
        if rid is None:
            return self._error("INVALID_PARAMETER_VALUE", "Missing required field: run_id", 400)
        job = self.jobs.get(rid)
        if job is None:
            return self._error("RESOURCE_DOES_NOT_EXIST", f"Run {rid} does not exist.", 404)
        self.cancels.append((rid, job["state"]))
        if job["state"] in ("PENDING", "QUEUED", "RUNNING"):
            job["state"], job["message"] = "TERMINATING", "Run cancellation requested."
        return json_response({})  # an ended run: nothing to do, answered the same

    async def output(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        rid = self._run_id(request.query_params.get("run_id")) or ""
        self.output_reads.append(rid)
        if rid in self.jobs:
            return self._error("INVALID_PARAMETER_VALUE", DATABRICKS_MULTI_TASK, 400)
        if rid not in self.task_runs:
            return self._error("RESOURCE_DOES_NOT_EXIST", f"Run {rid} does not exist.", 404)
        parent, key = self.task_runs[rid]
        run = self.run(self.jobs[parent])
        (task,) = [t for t in run["tasks"] if t["task_key"] == key]
        return json_response(
            {
                "metadata": task | {"job_id": run["job_id"], "run_type": "SUBMIT_RUN"},
                "notebook_output": {"result": databricks_output(key), "truncated": False},
            }
        )


# --- Cloudflare Stream -------------------------------------------------------------

CLOUDFLARE_TOKEN = "cf-stream-edit-token-0123456789"
CLOUDFLARE_ACCOUNT = "023e105f4ecef8ad9ca31a8372d0c353"
CLOUDFLARE_WEBHOOK_SECRET = "85011ed3a913c6ad5f9cf6c5573cc0a7"
CLOUDFLARE_FAILURE = ("ERR_NON_VIDEO", "The file was not recognized as a valid video file.")
CLOUDFLARE_STEPS = ["downloading", "queued", "inprogress"]


class CloudflareStreamFixture(_Jobs):
    """`copies`: each copy's body; `list_reads`: the `creator` of each list read;
    `deleted`: the videos a DELETE removed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("ea95132c15732412d22c1476fa83f", **kwargs)
        self.copies: list[dict[str, Any]] = []
        self.list_reads: list[str | None] = []
        self.deleted: list[str] = []

    def app(self) -> Starlette:
        base = f"/client/v4/accounts/{CLOUDFLARE_ACCOUNT}/stream"
        return Starlette(
            routes=[
                Route(f"{base}/copy", self.copy, methods=["POST"]),
                Route(base, self.list, methods=["GET"]),
                Route(f"{base}/{{uid}}", self.get, methods=["GET"]),
                Route(f"{base}/{{uid}}", self.delete, methods=["DELETE"]),
            ]
        )

    @staticmethod
    def envelope(result: Any, status: int = 200, **extra: Any) -> Response:
        return json_response(
            {"result": result, "success": True, "errors": [], "messages": [], **extra}, status
        )

    @staticmethod
    def _error(code: int, message: str, status: int) -> Response:
        body = {
            "result": None,
            "success": False,
            "errors": [{"code": code, "message": message}],
            "messages": [],
        }
        return json_response(body, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {CLOUDFLARE_TOKEN}":
            return self._error(10000, "Authentication error", 403)
        return None

    def video(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        ready = state == "ready"
        code, text = CLOUDFLARE_FAILURE if state == "error" else ("", "")
        percent = {"downloading": 0.0, "queued": 0.0, "inprogress": 42.5}.get(state, 100.0)
        uid = job["id"]
        playback = f"https://customer-f33zs165nr7gyfy4.cloudflarestream.com/{uid}"
        return {
            "uid": uid,
            "creator": job["creator"],
            "thumbnail": f"{playback}/thumbnails/thumbnail.jpg",
            "thumbnailTimestampPct": 0,
            "readyToStream": ready,
            "readyToStreamAt": "2026-12-06T05:01:00Z" if ready else None,
            "status": {
                "state": state,
                "pctComplete": f"{percent:.6f}",
                "errorReasonCode": code,
                "errorReasonText": text,
            },
            "meta": job["meta"],
            "created": "2026-12-06T05:00:00Z",
            "modified": "2026-12-06T05:01:00Z",
            "size": 4190963 if ready else 0,
            "preview": f"https://customer-f33zs165nr7gyfy4.cloudflarestream.com/{uid}/watch",
            "allowedOrigins": [],
            "requireSignedURLs": False,
            "uploaded": "2026-12-06T05:00:00Z",
            "uploadExpiry": None,
            "maxSizeBytes": None,
            "maxDurationSeconds": None,
            "duration": 26.8 if ready else -1,
            "input": {"width": 1920, "height": 1080} if ready else {"width": -1, "height": -1},
            "playback": {
                "hls": f"{playback}/manifest/video.m3u8",
                "dash": f"{playback}/manifest/video.mpd",
            },
            "watermark": None,
        }

    async def copy(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("url"), str):
            return self._error(10005, "url is required", 400)
        self.copies.append(body)
        creator = body.get("creator")
        if isinstance(creator, str) and len(creator) > 64:
            return self._error(10005, "creator must be at most 64 characters", 400)
        uid = self.new_id()
        meta = body.get("meta") or {}
        self.jobs[uid] = {
            "id": uid,
            "creator": creator,
            "meta": meta,
            "state": "downloading",
            "reads": 0,
            "script": meta.get("script"),
        }
        await _created(self)
        return self.envelope(self.video(self.jobs[uid]))

    def _find(self, request: Request) -> dict[str, Any] | None:
        uid = request.path_params["uid"]
        return None if uid in self.deleted else self.jobs.get(uid)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._error(10003, "Not Found", 404)
        self.reads += 1
        _advance(job, CLOUDFLARE_STEPS, "error" if job["script"] == "fail" else "ready")
        return self.envelope(self.video(job))

    async def list(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        creator = request.query_params.get("creator")
        self.list_reads.append(creator)
        videos = [
            self.video(j)
            for j in self.jobs.values()
            if j["id"] not in self.deleted and (creator is None or j["creator"] == creator)
        ]
        return self.envelope(videos, total=str(len(videos)), range="1000")

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._error(10003, "Not Found", 404)
        self.cancels.append((job["id"], job["state"]))
        self.deleted.append(job["id"])
        return Response(status_code=200)

    def finish(self, uid: str, state: str = "ready") -> None:
        self.jobs[uid]["state"] = state

    async def deliver(
        self, url: str, uid: str, *, secret: str = CLOUDFLARE_WEBHOOK_SECRET, at: int | None = None
    ) -> int:
        """Stream's webhook for video `uid` as it stands, signed as Stream signs it."""
        body = json.dumps(self.video(self.jobs[uid])).encode()
        stamp = str(at if at is not None else int(time.time()))
        mac = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
        headers = {
            "content-type": "application/json",
            "webhook-signature": f"time={stamp},sig1={mac.hexdigest()}",
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


# --- Snowflake SQL API -------------------------------------------------------------

SNOWFLAKE_JWT = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJNWU9SRy5NWUFDQ09VTlQuSk9CV0FSREVOIn0.c2ln"
SNOWFLAKE_FAILURE = (
    "SQL compilation error:\nObject 'SALES.PUBLIC.ORDRES' does not exist or not authorized."
)
SNOWFLAKE_ROWS = [["2026-12-01", "118"], ["2026-12-02", "97"], ["2026-12-03", "131"]]
SNOWFLAKE_RUNNING = (
    "Asynchronous execution in progress. Use provided query id to perform query"
    " monitoring and management."
)


class SnowflakeFixture(_Jobs):
    """`submits`: (requestId, retry) of each POST; `partition_reads`: the partition
    of each result read; `partitions`: how many the result is cut into."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("01b2c3d4-0000-7a1e-0000-", **kwargs)
        self.submits: list[tuple[str | None, str | None]] = []
        self.by_request: dict[str, str] = {}
        self.partition_reads: list[str | None] = []
        self.partitions = 1

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:012d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v2/statements", self.submit, methods=["POST"]),
                Route("/api/v2/statements/{handle}", self.get, methods=["GET"]),
                Route("/api/v2/statements/{handle}/cancel", self.cancel, methods=["POST"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        typed = request.headers.get("x-snowflake-authorization-token-type") == "KEYPAIR_JWT"
        if request.headers.get("authorization") != f"Bearer {SNOWFLAKE_JWT}" or not typed:
            body = {"code": "390144", "message": "JWT token is invalid."}
            return json_response(body, 401)
        return None

    def url(self, handle: str) -> str:
        return f"/api/v2/statements/{handle}"

    def running(self, job: dict[str, Any]) -> Response:
        body = {
            "code": "333334",
            "message": SNOWFLAKE_RUNNING,
            "statementHandle": job["id"],
            "statementStatusUrl": self.url(job["id"]),
        }
        return json_response(body, 202)

    def result(self, job: dict[str, Any], partition: int) -> Response:
        share = -(-len(SNOWFLAKE_ROWS) // self.partitions)  # rows a partition, rounded up
        rows = SNOWFLAKE_ROWS[partition * share : (partition + 1) * share]
        if partition > 0:
            return json_response({"data": rows})  # later partitions: the data alone
        info = [
            {"rowCount": len(SNOWFLAKE_ROWS[n * share : (n + 1) * share]), "uncompressedSize": 64}
            for n in range(self.partitions)
        ]
        body = {
            "resultSetMetaData": {
                "numRows": len(SNOWFLAKE_ROWS),
                "format": "jsonv2",
                "partitionInfo": info,
                "rowType": [
                    {"name": "DAY", "type": "date", "nullable": False},
                    {"name": "ORDERS", "type": "fixed", "nullable": False, "scale": 0},
                ],
            },
            "data": rows,
            "code": "090001",
            "statementStatusUrl": self.url(job["id"]),
            "requestId": job["request_id"],
            "sqlState": "00000",
            "statementHandle": job["id"],
            "message": "Statement executed successfully.",
            "createdOn": 1765000000000,
        }
        return json_response(body)

    async def submit(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        request_id = request.query_params.get("requestId")
        retry = request.query_params.get("retry")
        self.submits.append((request_id, retry))
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("statement"), str):
            return json_response({"code": "391903", "message": "statement is required"}, 400)
        if request_id in self.by_request and retry == "true":
            return self.running(self.jobs[self.by_request[request_id]])  # the one submitted
        handle = self.new_id()
        self.jobs[handle] = {
            "id": handle,
            "request_id": request_id,
            "statement": body["statement"],
            "state": "running",
            "reads": 0,
            "script": (body.get("parameters") or {}).get("query_tag"),
        }
        if request_id:
            self.by_request[request_id] = handle
        await _created(self)
        return self.running(self.jobs[handle])

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["handle"])
        if job is None:
            body = {"code": "000709", "message": "Statement not found"}
            return json_response(body, 404)
        partition = request.query_params.get("partition")
        self.reads += 1
        job["reads"] += 1
        if job["state"] == "running" and job["reads"] >= 3 and job["script"] != "slow":
            job["state"] = "failed" if job["script"] == "fail" else "done"
        if job["state"] == "running":
            return self.running(job)
        if job["state"] in ("failed", "cancelled"):
            code, message, sql_state = (
                ("000604", "SQL execution canceled", "57014")
                if job["state"] == "cancelled"
                else ("002003", SNOWFLAKE_FAILURE, "42S02")
            )
            body = {
                "code": code,
                "message": message,
                "sqlState": sql_state,
                "statementHandle": job["id"],
            }
            return json_response(body, 422)
        self.partition_reads.append(partition)
        if int(partition or 0) >= self.partitions:
            body = {"code": "000605", "message": f"Partition {partition} out of range"}
            return json_response(body, 422)
        return self.result(job, int(partition or 0))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["handle"])
        if job is None:
            return json_response({"code": "000709", "message": "Statement not found"}, 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] == "running":
            job["state"] = "cancelled"
        body = {
            "code": "000000",
            "sqlState": "00000",
            "message": "successfully executed",
            "statementHandle": job["id"],
            "statementStatusUrl": self.url(job["id"]),
        }
        return json_response(body)


# --- Shopify bulk operations -------------------------------------------------------

SHOPIFY_TOKEN = "shpat_0123456789abcdef0123456789abcdef"
SHOPIFY_WEBHOOK_SECRET = "shpss_0123456789abcdef0123456789abcdef"
SHOPIFY_LINES = [
    {"id": "gid://shopify/Product/1921569226808", "title": "Snowboard"},
    {
        "id": "gid://shopify/ProductVariant/1",
        "sku": "SB-1",
        "__parentId": "gid://shopify/Product/1921569226808",
    },
    {"id": "gid://shopify/Product/1921569259576", "title": "Bindings"},
]
SHOPIFY_BUSY = (
    "A bulk query operation for this app and shop is already in progress:"
    " gid://shopify/BulkOperation/1000."
)
SHOPIFY_COST = {
    "requestedQueryCost": 10,
    "actualQueryCost": 10,
    "throttleStatus": {
        "maximumAvailable": 2000.0,
        "currentlyAvailable": 1990,
        "restoreRate": 100.0,
    },
}
SHOPIFY_THROTTLED = {
    "errors": [
        {
            "message": "Throttled",
            "extensions": {
                "code": "THROTTLED",
                "documentation": "https://shopify.dev/api/usage/rate-limits",
            },
        }
    ],
    "extensions": {"cost": SHOPIFY_COST | {"actualQueryCost": None}},
}


class ShopifyBulkFixture(_Jobs):
    """`storage_headers`: the headers of each read of the signed link; `refuse_first`:
    the first create's answer ("THROTTLED" or "OPERATION_IN_PROGRESS", nothing
    made); `throttled_reads`: how many status reads are answered THROTTLED."""

    def __init__(self, *, refuse_first: str | None = None, **kwargs: Any) -> None:
        super().__init__("gid://shopify/BulkOperation/72091", **kwargs)
        self.refuse_first = refuse_first
        self.posts = 0
        self.refused: list[str] = []
        self.storage_url = ""
        self.storage_headers: list[dict[str, str]] = []
        self.throttled_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/admin/api/2025-01/graphql.json", self.graphql, methods=["POST"])]
        )

    def storage(self) -> Starlette:
        """Google Cloud Storage's signed links (X-Goog-Signature in the query)."""
        return Starlette(routes=[Route("/shopify-tiers-assets/{key:path}", self.download)])

    def operation(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        done = state == "COMPLETED"
        count = 0 if job["script"] == "empty" else len(SHOPIFY_LINES)
        url = None
        if done and count:
            url = (
                f"{self.storage_url}/shopify-tiers-assets/bulk/{job['id'].rsplit('/', 1)[1]}.jsonl"
                "?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Expires=604800&X-Goog-Signature=0ddba11"
            )
        return {
            "id": job["id"],
            "status": state,
            "errorCode": "ACCESS_DENIED" if state == "FAILED" else None,
            "objectCount": str(count if done else 0),
            "fileSize": str(len(self.jsonl())) if url else None,
            "url": url,
            "partialDataUrl": None,
        }

    @staticmethod
    def jsonl() -> bytes:
        return b"".join(json.dumps(line).encode() + b"\n" for line in SHOPIFY_LINES)

    @staticmethod
    def answer(data: dict[str, Any]) -> Response:
        return json_response({"data": data, "extensions": {"cost": SHOPIFY_COST}})

    async def graphql(self, request: Request) -> Response:
        if request.headers.get("x-shopify-access-token") != SHOPIFY_TOKEN:
            body = {
                "errors": "[API] Invalid API key or access token"
                " (unrecognized login or wrong password)"
            }
            return json_response(body, 401)
        body = await read_json(request)
        query = body.get("query", "") if isinstance(body, dict) else ""
        variables = (body.get("variables") or {}) if isinstance(body, dict) else {}
        if "bulkOperationRunQuery" in query:
            return await self.run_query(variables)
        if "bulkOperationCancel" in query:
            return self.cancel(variables)
        if "node(id:" in query:
            return self.node(variables)
        return json_response({"errors": [{"message": "Field doesn't exist"}]})

    async def run_query(self, variables: dict[str, Any]) -> Response:
        self.posts += 1
        if self.refuse_first and self.posts == 1:
            self.refused.append(self.refuse_first)
            if self.refuse_first == "THROTTLED":
                return json_response(SHOPIFY_THROTTLED)
            error = {"field": None, "message": SHOPIFY_BUSY, "code": "OPERATION_IN_PROGRESS"}
            return self.answer(
                {"bulkOperationRunQuery": {"bulkOperation": None, "userErrors": [error]}}
            )
        oid = self.new_id()
        self.jobs[oid] = {
            "id": oid,
            "query": variables.get("q"),
            "state": "CREATED",
            "reads": 0,
            "script": variables.get("script"),
        }
        await _created(self)
        made = {"bulkOperation": {"id": oid, "status": "CREATED"}, "userErrors": []}
        return self.answer({"bulkOperationRunQuery": made})

    def node(self, variables: dict[str, Any]) -> Response:
        if self.throttled_reads > 0:
            self.throttled_reads -= 1
            return json_response(SHOPIFY_THROTTLED)
        job = self.jobs.get(variables.get("id", ""))
        if job is None:
            return self.answer({"node": None})
        self.reads += 1
        if job["state"] == "CANCELING":
            job["state"] = "CANCELED"
        _advance(job, ["CREATED", "RUNNING"], "FAILED" if job["script"] == "fail" else "COMPLETED")
        return self.answer({"node": self.operation(job)})

    def cancel(self, variables: dict[str, Any]) -> Response:
        job = self.jobs.get(variables.get("id", ""))
        if job is None:
            error = {"field": ["id"], "message": "Bulk operation does not exist"}
            return self.answer(
                {"bulkOperationCancel": {"bulkOperation": None, "userErrors": [error]}}
            )
        self.cancels.append((job["id"], job["state"]))
        errors = []
        if job["state"] in ("CREATED", "RUNNING"):
            job["state"] = "CANCELING"
        else:
            state = job["state"].lower()
            errors = [
                {
                    "field": None,
                    "message": f"A bulk operation cannot be canceled when it is {state}",
                }
            ]
        made = {"bulkOperation": {"id": job["id"], "status": job["state"]}, "userErrors": errors}
        return self.answer({"bulkOperationCancel": made})

    async def download(self, request: Request) -> Response:
        self.storage_headers.append(dict(request.headers))
        if "X-Goog-Signature" not in request.query_params:
            return Response(b"<Error><Code>AccessDenied</Code></Error>", 403)
        return Response(self.jsonl(), media_type="application/jsonl")

    def finish(self, oid: str) -> None:
        self.jobs[oid]["state"] = "COMPLETED"

    async def deliver(self, url: str, oid: str, *, secret: str = SHOPIFY_WEBHOOK_SECRET) -> int:
        """The bulk_operations/finish webhook for `oid`, signed as Shopify signs it."""
        job = self.jobs[oid]
        event = {
            "admin_graphql_api_id": oid,
            "completed_at": "2026-12-06T05:01:00-05:00",
            "created_at": "2026-12-06T05:00:00-05:00",
            "error_code": None,
            "status": job["state"].lower(),
            "type": "query",
        }
        body = json.dumps(event).encode()
        mac = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
        headers = {
            "content-type": "application/json",
            "x-shopify-topic": "bulk_operations/finish",
            "x-shopify-hmac-sha256": mac,
            "x-shopify-shop-domain": "my-shop.myshopify.com",
            "x-shopify-api-version": "2025-01",
            "x-shopify-webhook-id": f"b54557e4-bdd9-4b37-8a5f-bf7d70bc{self.posts:04d}",
            "x-shopify-triggered-at": "2026-12-06T10:01:00.000000Z",
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code
