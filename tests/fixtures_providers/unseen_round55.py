"""Meta's asynchronous insights report runs, Amazon SP-API's reports, Elasticsearch's
reindex tasks, Stripe's report runs and Jenkins' parameterized builds, each a real
app on loopback answering in the shapes their public documentation gives
(tests/integration/test_unseen_round55.py). Where the docs leave a behaviour open,
the assumption is stated here.

- Meta Marketing API v21.0 (a bearer access token): `POST
  /v21.0/act_<id>/insights` {"level", "fields", "date_preset", ...} answers 200
  {"report_run_id"}; `GET /v21.0/<report_run_id>` {"id", "account_id",
  "async_status" "Job Not Started" | "Job Started" | "Job Running" | "Job Completed"
  | "Job Failed" | "Job Skipped", "async_percent_completion" (a number), "date_start",
  "date_stop", "time_ref", "time_completed", "is_running"}; `GET
  /v21.0/<report_run_id>/insights?limit=` {"data": [rows], "paging": {"cursors":
  {"before", "after"}, "next"}}, `next` an absolute URL carrying the access token
  in its query (`access_token=`) and the `after` cursor, absent on the last page.
  Errors: {"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}},
  rate limits among them: 400, code 80000 (the ad account's insights quota) or 17
  (the user's), no Retry-After; a failed run says nothing more than "Job Failed"
  (the AdReportRun has no error field).
- Amazon SP-API Reports 2021-06-30 (`x-amz-access-token`: an LWA access token):
  `POST /reports/2021-06-30/reports` {"reportType", "marketplaceIds",
  "reportOptions"?} answers 202 {"reportId"}; `GET .../reports/{reportId}`
  {"reportId", "reportType", "marketplaceIds", "processingStatus" IN_QUEUE |
  IN_PROGRESS | DONE | CANCELLED | FATAL, "createdTime", "processingStartTime"?,
  "processingEndTime"?, "reportDocumentId"? (DONE, and FATAL with an error
  document)}; `DELETE .../reports/{reportId}` 200 with no body while IN_QUEUE, else
  400 {"errors": [{"code": "InvalidInput", "message"}]} (assumed: "only reports with
  processingStatus=IN_QUEUE can be cancelled"); `GET .../documents/{id}`
  {"reportDocumentId", "url" (a pre-signed S3 link, refusing any other credential),
  "compressionAlgorithm"? "GZIP"}: the file then gzipped as stored, served with no
  Content-Encoding. A report with no data ends CANCELLED on its own. Throttled
  (createReport: 0.0167 requests a second, a burst of 15): 429 {"errors": [{"code":
  "QuotaExceeded"}]} with `x-amzn-RateLimit-Limit`, the request refused.
- Elasticsearch 8 (`Authorization: ApiKey <base64>`): `POST
  /_reindex?wait_for_completion=false` {"source": {"index"}, "dest": {"index"}}
  answers 200 {"task": "<node id>:<number>"}; a missing source index 404 {"error":
  {"root_cause", "type": "index_not_found_exception", "reason"}, "status": 404}.
  `GET /_tasks/<task>` {"completed", "task": {"node", "id", "type", "action",
  "status": {"total", "updated", "created", "deleted", "batches",
  "version_conflicts", "noops", "retries", ...}, "description", "cancellable",
  "cancelled", "headers": {"X-Opaque-Id"}}, "response"? (the reindex's answer:
  "took", "timed_out", "total", ..., "failures": [], and "canceled": "by user
  request" once cancelled), "error"? {"type", "reason"}}. "failures" non-empty: the
  reindex aborted on them ("any failure causes the entire process to abort"),
  completed true and no `error`. `POST /_tasks/<task>/_cancel` {"nodes": {<node>:
  {"tasks": {<task>: {...}}}}}; a task no longer running 404
  resource_not_found_exception "task [<task>] is not found" (assumed).
- Stripe API (`Authorization: Bearer sk_...`): `POST /v1/reporting/report_runs`
  form-encoded (`report_type`, `parameters[interval_start]`, ...; a nested field in
  brackets, as Stripe's libraries send it), `Idempotency-Key` (the same key answers
  the first answer again) answers 200 {"id": "frr_...", "object":
  "reporting.report_run", "status": "pending", "parameters", "report_type",
  "result": null, "error": null, ...}; `GET .../report_runs/{id}` status pending |
  succeeded | failed, `error` a message string, `result` a File {"id", "object":
  "file", "purpose": "finance_report_run", "type": "csv", "url"}; the File's url
  asks for the same key (served here on the API's origin, where Stripe's is
  files.stripe.com). Events reporting.report_run.succeeded / .failed {"id":
  "evt_...", "object": "event", "type", "data": {"object": the run}},
  `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
  A request repeating a key whose first request is still in progress is 409
  {"error": {"type": "idempotency_error", "code": "idempotency_key_in_use"}}.
  Errors {"error": {"type", "code", "message", "param"}}; an object field sent as a
  plain field (not in brackets) is 400 parameter_invalid_string (assumed).
- Jenkins (HTTP basic, a user and an API token): `POST
  /job/<name>/buildWithParameters` form fields answers 201 with no body and
  `Location: <root>/queue/item/<n>/`; `GET /queue/item/<n>/api/json` {"_class":
  "hudson.model.Queue$WaitingItem", "id", "why", "cancelled": false, "executable":
  null}, then (LeftItem, kept five minutes) "executable": {"number", "url"}, with
  depth=1 the build's own fields; `GET /job/<name>/<number>/api/json` {"number",
  "building", "result" null | SUCCESS | UNSTABLE | FAILURE | NOT_BUILT | ABORTED,
  "url", ...}.

Scripts: Meta's in the create's `filtering` (the first filter's `value`), Amazon's
in `reportOptions.script`, Elasticsearch's in the source index's name after
"orders-" ("orders-slow"), Stripe's by `parameters[interval_start]` (STRIPE_SLOW,
STRIPE_FAIL), Jenkins' in its SCRIPT parameter: "fail" (Job Failed; FATAL; an
`error`; failed "An unknown error occurred"), "slow" (runs until the test ends it),
"queued" (Amazon: IN_QUEUE until the test ends it), "nodata" (Amazon: CANCELLED on
its own), "gzip" (Amazon: the document compressed),
"failures" (Elasticsearch: completed with failures); anything else completes after
a few reads.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created, _Storage

# --- Meta Marketing API ------------------------------------------------------------

META_TOKEN = "EAAGm0PX4ZCpsBAMetaTestToken0123456789"
META_ACCOUNT = "1234567890"
META_ROWS = [
    {"campaign_name": f"Winter sale {n}", "impressions": str(1000 * n), "spend": f"{n}.25"}
    for n in range(1, 6)
]
META_THROTTLED = {
    "error": {
        "message": "(#80000) There have been too many calls from this ad-account."
        " Wait a bit and try again.",
        "type": "OAuthException",
        "code": 80000,
        "error_subcode": 2446079,
        "fbtrace_id": "A1b2C3d4E5f",
    }
}


def _script_of_filtering(body: dict[str, Any]) -> str | None:
    filters = body.get("filtering")
    if isinstance(filters, str):
        filters = json.loads(filters)
    if isinstance(filters, list) and filters and isinstance(filters[0], dict):
        value = filters[0].get("value")
        return value if isinstance(value, str) else None
    return None


class MetaInsightsFixture(_Jobs):
    """`page_reads`: the `after` cursor of each rows page read (None: the first);
    `throttle_creates` / `throttle_reads`: how many creates / status reads are
    answered 400 code 80000."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("60230", **kwargs)
        self.page_size = 2
        self.page_reads: list[str | None] = []
        self.page_auth: list[str | None] = []
        self.throttle_creates = 0
        self.throttle_reads = 0

    def new_id(self) -> str:
        return f"6023{len(self.jobs) + 1:011d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"/v21.0/act_{META_ACCOUNT}/insights", self.create, methods=["POST"]),
                Route("/v21.0/{rid}", self.get, methods=["GET"]),
                Route("/v21.0/{rid}/insights", self.rows, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: int, message: str, status: int = 400) -> Response:
        body = {"error": {"message": message, "type": "OAuthException", "code": code}}
        return json_response(body | {"fbtrace_id": "A1b2C3d4E5f"}, status)

    def _refused(self, request: Request) -> Response | None:
        token = request.headers.get("authorization") == f"Bearer {META_TOKEN}"
        if not token and request.query_params.get("access_token") != META_TOKEN:
            return self._error(190, "Invalid OAuth access token - Cannot parse access token")
        return None

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if self.throttle_creates > 0:
            self.throttle_creates -= 1
            return json_response(META_THROTTLED, 400)
        body = await read_json(request)
        if not isinstance(body, dict) or "fields" not in body:
            return self._error(100, "(#100) The parameter fields is required")
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "state": "Job Not Started",
            "reads": 0,
            "script": _script_of_filtering(body),
        }
        await _created(self)
        return json_response({"report_run_id": rid})

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        done = job["state"] in ("Job Completed", "Job Failed")
        percent = {"Job Not Started": 0, "Job Started": 0, "Job Running": 50}
        return {
            "id": job["id"],
            "account_id": META_ACCOUNT,
            "time_ref": 1765000000,
            "time_completed": 1765000060 if done else None,
            "async_status": job["state"],
            "async_percent_completion": percent.get(job["state"], 100),
            "date_start": "2026-11-06",
            "date_stop": "2026-12-05",
            "is_running": not done,
        }

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if self.throttle_reads > 0:
            self.throttle_reads -= 1
            return json_response(META_THROTTLED, 400)
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(
                100, "(#100) Unsupported get request. Object does not exist or lacks permission"
            )
        self.reads += 1
        final = "Job Failed" if job["script"] == "fail" else "Job Completed"
        _advance(job, ["Job Not Started", "Job Started", "Job Running"], final)
        return json_response(self.run(job))

    async def rows(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None or job["state"] != "Job Completed":
            return self._error(100, "(#100) Report is not ready")
        after = request.query_params.get("after")
        self.page_reads.append(after)
        self.page_auth.append(request.headers.get("authorization"))
        start = int(after.removeprefix("MjQZD")) if after else 0
        end = start + self.page_size
        data = [
            row | {"date_start": "2026-11-06", "date_stop": "2026-12-05"}
            for row in META_ROWS[start:end]
        ]
        paging: dict[str, Any] = {"cursors": {"before": f"MjQZD{start}", "after": f"MjQZD{end}"}}
        if end < len(META_ROWS):
            base = str(request.base_url).rstrip("/")
            paging["next"] = (
                f"{base}/v21.0/{job['id']}/insights?access_token={META_TOKEN}"
                f"&limit={self.page_size}&after=MjQZD{end}"
            )
        return json_response({"data": data, "paging": paging})


# --- Amazon SP-API reports ---------------------------------------------------------

SP_TOKEN = "Atza|IwEBIAmazonLwaTestToken0123456789"
SP_QUOTA = "You exceeded your quota for the requested resource."
SP_TSV = (
    b"item-name\tseller-sku\tprice\tquantity\n"
    b"Snowboard\tSB-1\t399.00\t12\n"
    b"Bindings\tBD-7\t149.00\t30\n"
)


class AmazonReportsFixture(_Jobs, _Storage):
    """`documents`: the reportDocumentId of each document read; `deletes`: (report id,
    its processingStatus) of each DELETE."""

    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "", **kwargs)
        _Storage.__init__(self)
        self.documents: list[str] = []
        self.storage_headers: list[dict[str, str]] = []

    def new_id(self) -> str:
        return f"{50000 + len(self.jobs) + 1}019480"

    def app(self) -> Starlette:
        base = "/reports/2021-06-30"
        return Starlette(
            routes=[
                Route(f"{base}/reports", self.create, methods=["POST"]),
                Route(f"{base}/reports/{{rid}}", self.get, methods=["GET"]),
                Route(f"{base}/reports/{{rid}}", self.cancel, methods=["DELETE"]),
                Route(f"{base}/documents/{{did}}", self.document, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: int, code: str, message: str) -> Response:
        return json_response({"errors": [{"code": code, "message": message}]}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("x-amz-access-token") != SP_TOKEN:
            return self._error(403, "Unauthorized", "Access to requested resource is denied.")
        return None

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if self.throttled_creates > 0:
            self.throttled_creates -= 1
            headers = {"x-amzn-RateLimit-Limit": "0.0167"}
            body = {"errors": [{"code": "QuotaExceeded", "message": SP_QUOTA}]}
            return json_response(body, 429, headers)
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("reportType"):
            return self._error(400, "InvalidInput", "reportType is required")
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "type": body["reportType"],
            "marketplaces": body.get("marketplaceIds", []),
            "state": "IN_QUEUE",
            "reads": 0,
            "script": (body.get("reportOptions") or {}).get("script"),
        }
        await _created(self)
        return json_response({"reportId": rid}, 202)

    def report(self, job: dict[str, Any]) -> dict[str, Any]:
        out = {
            "reportId": job["id"],
            "reportType": job["type"],
            "marketplaceIds": job["marketplaces"],
            "processingStatus": job["state"],
            "createdTime": "2026-12-06T09:00:00+00:00",
        }
        if job["state"] != "IN_QUEUE":
            out["processingStartTime"] = "2026-12-06T09:00:05+00:00"
        if job["state"] in ("DONE", "FATAL", "CANCELLED"):
            out["processingEndTime"] = "2026-12-06T09:01:00+00:00"
        if job["state"] in ("DONE", "FATAL"):
            out["reportDocumentId"] = f"amzn1.spdoc.1.4.na.{job['id']}"
        return out

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "NotFound", "Report not found")
        self.reads += 1
        final = {"fail": "FATAL", "nodata": "CANCELLED"}.get(job["script"] or "", "DONE")
        if job["script"] == "queued":
            return json_response(self.report(job))
        _advance(job, ["IN_QUEUE", "IN_PROGRESS"], final)
        return json_response(self.report(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "NotFound", "Report not found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] != "IN_QUEUE":
            return self._error(
                400, "InvalidInput", f"Report {job['id']} cannot be cancelled: {job['state']}"
            )
        job["state"] = "CANCELLED"
        return Response(status_code=200)

    async def document(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        did = request.path_params["did"]
        rid = did.rsplit(".", 1)[-1]
        job = self.jobs.get(rid)
        if job is None or job["state"] not in ("DONE", "FATAL"):
            return self._error(404, "NotFound", "Report document not found")
        self.documents.append(did)
        if job["state"] == "FATAL":
            data = json.dumps({"errorDetails": "The report could not be generated."}).encode()
        else:
            data = SP_TSV
        doc: dict[str, Any] = {"reportDocumentId": did}
        if job["script"] == "gzip":
            data = gzip.compress(data)
            doc["compressionAlgorithm"] = "GZIP"
        doc["url"] = self.put(f"{did}.txt", data, "text/plain")
        return json_response(doc)

    async def get_object(self, request: Request) -> Response:
        self.storage_headers.append(dict(request.headers))
        return await _Storage.get(self, request)

    def storage(self) -> Starlette:
        return Starlette(routes=[Route("/bucket/{key:path}", self.get_object, methods=["GET"])])


# --- Elasticsearch tasks -----------------------------------------------------------

ES_API_KEY = "VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw=="
ES_NODE = "oTUltX4IQMOUUVeiohTt8A"
ES_DOCS = 1200
ES_FAILURE = "failed to parse field [price] of type [float] in document with id '17'"
ES_ERROR = "[orders-fail] blocked by: [FORBIDDEN/8/index write (api)];"


class ElasticsearchFixture(_Jobs):
    """`opaque_ids`: the X-Opaque-Id of each reindex; `task_paths`: the raw path of
    each task read (how the task id's colon went)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.opaque_ids: list[str | None] = []
        self.task_paths: list[str] = []

    def new_id(self) -> str:
        return f"{ES_NODE}:{4100 + len(self.jobs) + 1}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/_reindex", self.reindex, methods=["POST"]),
                Route("/_tasks/{task}", self.get, methods=["GET"]),
                Route("/_tasks/{task}/_cancel", self.cancel, methods=["POST"]),
            ]
        )

    @staticmethod
    def _error(status: int, kind: str, reason: str) -> Response:
        cause = {"type": kind, "reason": reason}
        return json_response({"error": cause | {"root_cause": [cause]}, "status": status}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"ApiKey {ES_API_KEY}":
            return self._error(
                401, "security_exception", "unable to authenticate with provided credentials"
            )
        return None

    async def reindex(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if request.query_params.get("wait_for_completion") != "false":
            return self._error(400, "illegal_argument_exception", "the fake only runs tasks")
        body = await read_json(request)
        source = ((body or {}).get("source") or {}).get("index", "")
        if source == "orders-missing":
            return self._error(404, "index_not_found_exception", f"no such index [{source}]")
        self.opaque_ids.append(request.headers.get("x-opaque-id"))
        tid = self.new_id()
        self.jobs[tid] = {
            "id": tid,
            "source": source,
            "dest": ((body or {}).get("dest") or {}).get("index"),
            "state": "running",
            "reads": 0,
            "script": source.removeprefix("orders-"),
            "opaque": request.headers.get("x-opaque-id"),
        }
        await _created(self)
        return json_response({"task": tid})

    def status(self, job: dict[str, Any], created: int) -> dict[str, Any]:
        return {
            "total": ES_DOCS,
            "updated": 0,
            "created": created,
            "deleted": 0,
            "batches": 1 + created // 1000,
            "version_conflicts": 0,
            "noops": 0,
            "retries": {"bulk": 0, "search": 0},
            "throttled_millis": 0,
            "requests_per_second": -1.0,
            "throttled_until_millis": 0,
        }

    def task(self, job: dict[str, Any]) -> dict[str, Any]:
        done = job["state"] != "running"
        created = ES_DOCS if job["state"] == "done" else 600
        node, number = job["id"].split(":")
        out: dict[str, Any] = {
            "completed": done,
            "task": {
                "node": node,
                "id": int(number),
                "type": "transport",
                "action": "indices:data/write/reindex",
                "status": self.status(job, created),
                "description": f"reindex from [{job['source']}] to [{job['dest']}]",
                "start_time_in_millis": 1765000000000,
                "running_time_in_nanos": 2_000_000_000,
                "cancellable": True,
                "cancelled": job["state"] == "cancelled",
                "headers": {"X-Opaque-Id": job["opaque"]} if job["opaque"] else {},
            },
        }
        if job["state"] == "error":
            out["error"] = {"type": "cluster_block_exception", "reason": ES_ERROR}
        elif done:
            response: dict[str, Any] = {"took": 2012, "timed_out": False} | self.status(
                job, created
            )
            response["failures"] = []
            if job["state"] == "failures":
                cause = {"type": "mapper_parsing_exception", "reason": ES_FAILURE}
                failure = {"index": job["dest"], "id": "17", "cause": cause, "status": 400}
                response["failures"] = [failure]
            if job["state"] == "cancelled":
                response["canceled"] = "by user request"
            out["response"] = response
        return out

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.task_paths.append(request.scope.get("raw_path", b"").decode())
        job = self.jobs.get(request.path_params["task"])
        if job is None:
            task = request.path_params["task"]
            return self._error(
                404,
                "resource_not_found_exception",
                f"task [{task}] isn't running and hasn't stored its results",
            )
        self.reads += 1
        job["reads"] += 1
        if job["state"] == "running" and job["reads"] >= 3 and job["script"] != "slow":
            job["state"] = {"fail": "error", "failures": "failures"}.get(job["script"], "done")
        return json_response(self.task(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["task"])
        if job is None:
            return self._error(404, "resource_not_found_exception", "task not found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] != "running":
            # only a running task is found to cancel (assumed from the code's
            # "task [..] is not found"; the docs do not say)
            return self._error(
                404, "resource_not_found_exception", f"task [{job['id']}] is not found"
            )
        job["state"] = "cancelled"
        node = job["id"].split(":")[0]
        tasks = {job["id"]: self.task(job)["task"]}
        return json_response({"nodes": {node: {"name": "instance-0000000001", "tasks": tasks}}})


# --- Stripe report runs ------------------------------------------------------------

STRIPE_KEY = "sk_test_51ReportsTestKey0123456789"
STRIPE_WEBHOOK_SECRET = "whsec_reportsTestSecret0123456789"
STRIPE_SLOW = 1764547201
STRIPE_FAIL = 1764547202
STRIPE_FAILURE = "An unknown error occurred while generating the report."
STRIPE_KEY_IN_USE = {
    "error": {
        "type": "idempotency_error",
        "code": "idempotency_key_in_use",
        "message": "There is currently another in-progress request using this Idempotent"
        " Key (that probably means you submitted twice, and the other request is still"
        " going through): Idempotency-Key. Please try again later.",
    }
}
STRIPE_CSV = (
    b"category,currency,description,net_amount\n"
    b"starting_balance,usd,Starting balance,1000.00\n"
    b"activity,usd,Activity,250.50\n"
    b"ending_balance,usd,Ending balance,1250.50\n"
)


def stripe_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Stripe's form as its API reads it: `a[b]=v` is the object a's member b."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        if "[" in name and name.endswith("]"):
            outer, inner = name[:-1].split("[", 1)
            out.setdefault(outer, {})[inner] = value
        else:
            out[name] = value
    return out


class StripeReportsFixture(_Jobs):
    """`forms`: each create's fields as sent; `keys`: each create's Idempotency-Key;
    `file_auth`: the Authorization of each file read."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("frr_1QaZ", **kwargs)
        self.forms: list[list[tuple[str, str]]] = []
        self.keys: list[str | None] = []
        self.answers: dict[str, Response] = {}
        self.in_flight: set[str] = set()
        self.in_use = 0
        self.base = ""  # the API's origin, where the fake serves the Files
        self.file_auth: list[str | None] = []
        self.events = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/reporting/report_runs", self.create, methods=["POST"]),
                Route("/v1/reporting/report_runs/{rid}", self.get, methods=["GET"]),
                Route("/v1/files/{fid}/contents", self.contents, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: int, code: str, message: str, param: str | None = None) -> Response:
        error = {"type": "invalid_request_error", "code": code, "message": message}
        return json_response({"error": error | ({"param": param} if param else {})}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {STRIPE_KEY}":
            return self._error(401, "api_key_invalid", "Invalid API Key provided")
        return None

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        key = request.headers.get("idempotency-key")
        self.keys.append(key)
        if key in self.answers:
            return self.answers[key]  # Stripe answers a key it saw with its first answer
        if key in self.in_flight:
            self.in_use += 1
            return json_response(STRIPE_KEY_IN_USE, 409)
        if key:
            self.in_flight.add(key)
        if request.headers.get("content-type") != "application/x-www-form-urlencoded":
            return self._error(400, "parameter_unknown", "Send the request as a form")
        pairs = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        self.forms.append(pairs)
        form = stripe_form(pairs)
        params = form.get("parameters")
        if not isinstance(params, dict):
            return self._error(400, "parameter_invalid_string", "Invalid hash", param="parameters")
        start = int(params.get("interval_start", 0))
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "report_type": form.get("report_type"),
            "parameters": {k: int(v) if v.isdigit() else v for k, v in params.items()},
            "state": "pending",
            "reads": 0,
            "script": {STRIPE_SLOW: "slow", STRIPE_FAIL: "fail"}.get(start),
        }
        await _created(self)
        answer = json_response(self.run(self.jobs[rid]))
        if key:
            self.answers[key] = answer
        return answer

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        fid = "file_1QaZ" + job["id"].removeprefix("frr_1QaZ")
        result = None
        if job["state"] == "succeeded":
            result = {
                "id": fid,
                "object": "file",
                "created": 1765000060,
                "expires_at": 1796536060,
                "filename": f"{fid}.csv",
                "purpose": "finance_report_run",
                "size": len(STRIPE_CSV),
                "title": f"FinanceReportRun {job['id']}",
                "type": "csv",
                "url": f"{self.base}/v1/files/{fid}/contents",
            }
        return {
            "id": job["id"],
            "object": "reporting.report_run",
            "created": 1765000000,
            "error": STRIPE_FAILURE if job["state"] == "failed" else None,
            "livemode": False,
            "parameters": job["parameters"],
            "report_type": job["report_type"],
            "result": result,
            "status": job["state"],
            "succeeded_at": 1765000060 if job["state"] == "succeeded" else None,
        }

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.base = str(request.base_url).rstrip("/")
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._error(404, "resource_missing", "No such report run")
        self.reads += 1
        job["reads"] += 1
        if job["state"] == "pending" and job["reads"] >= 2 and job["script"] != "slow":
            job["state"] = "failed" if job["script"] == "fail" else "succeeded"
        return json_response(self.run(job))

    async def contents(self, request: Request) -> Response:
        self.file_auth.append(request.headers.get("authorization"))
        if (refused := self._refused(request)) is not None:
            return refused
        return Response(STRIPE_CSV, media_type="text/csv")

    def finish(self, rid: str) -> None:
        self.jobs[rid]["state"] = "succeeded"

    async def deliver(
        self, url: str, rid: str, *, secret: str = STRIPE_WEBHOOK_SECRET, at: int | None = None
    ) -> int:
        """reporting.report_run.<status> for `rid`, signed as Stripe signs it."""
        job = self.jobs[rid]
        self.events += 1
        event = {
            "id": f"evt_1QaZ{self.events:04d}",
            "object": "event",
            "api_version": "2024-06-20",
            "created": 1765000061,
            "data": {"object": self.run(job)},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": f"reporting.report_run.{job['state']}",
        }
        body = json.dumps(event).encode()
        stamp = at if at is not None else int(time.time())
        mac = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
        headers = {
            "content-type": "application/json; charset=utf-8",
            "stripe-signature": f"t={stamp},v1={mac}",
            "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


# --- Jenkins -----------------------------------------------------------------------

JENKINS_BASIC = "aGVscGVyOjExZTM0NWFiY2RlZjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU="
JENKINS_JOB = "nightly-export"


class JenkinsFixture(_Jobs):
    """`queue_reads`: the path of each queue item read; `bare_reads`: how many asked
    for the queue item's page itself (no api/json), answered 404 as Jenkins does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.queue_reads: list[str] = []
        self.bare_reads = 0

    def new_id(self) -> str:
        return str(3900 + len(self.jobs) + 1)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"/job/{JENKINS_JOB}/buildWithParameters", self.trigger, methods=["POST"]),
                Route("/queue/item/{n}/", self.bare, methods=["GET"]),
                Route("/queue/item/{n}/api/json", self.item, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {JENKINS_BASIC}":
            return Response("<html>Unauthorized</html>", 401, media_type="text/html")
        return None

    async def trigger(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        fields = dict(parse_qsl((await request.body()).decode()))
        n = self.new_id()
        self.jobs[n] = {"id": n, "state": "queued", "reads": 0, "script": fields.get("SCRIPT")}
        await _created(self)
        base = str(request.base_url).rstrip("/")
        return Response(status_code=201, headers={"location": f"{base}/queue/item/{n}/"})

    async def bare(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.bare_reads += 1
        return Response(
            "<html><h2>HTTP ERROR 404 Not Found</h2></html>", 404, media_type="text/html"
        )

    async def item(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        n = request.path_params["n"]
        self.queue_reads.append(request.url.path)
        job = self.jobs.get(n)
        if job is None:
            return Response("<html>Not Found</html>", 404, media_type="text/html")
        return json_response(
            {
                "_class": "hudson.model.Queue$WaitingItem",
                "id": int(n),
                "blocked": False,
                "buildable": False,
                "why": "In the quiet period. Expires in 4.9 sec",
                "cancelled": False,
                "executable": None,
                "url": f"queue/item/{n}/",
            }
        )
