"""Mailchimp's batch operations, HubSpot's CRM imports, Salesforce's Bulk API 2.0
ingest jobs, Mistral's batch jobs and Zamzar's conversion jobs, each a real app on
loopback answering in the shapes their public documentation gives
(tests/integration/test_unseen_round53b.py).

- Mailchimp Marketing API (batch operations; HTTP basic "anystring:<apikey>"):
  `POST /3.0/batches` {"operations": [{"method", "path", "body"?}]} answers 200
  {"id", "status": "pending", "total_operations": 0, ..., "response_body_url": ""};
  `GET /3.0/batches/{id}` status pending | preprocessing | started | finalizing |
  finished, "total_operations", "finished_operations", "errored_operations",
  "response_body_url" (finished: a signed S3 link to a .tar.gz of JSON files, each a
  list of {"status_code", "operation_id", "response"}); `DELETE /3.0/batches/{id}`
  204 (the batch is gone after: 404). Errors are problem+json {"type", "title",
  "status", "detail", "instance"}. A batch webhook (`POST /3.0/batch-webhooks`
  {"url"}) posts form-encoded fields, unsigned: type=batch_operation_completed,
  fired_at, data[id], data[status], data[total_operations], ...
- HubSpot CRM imports (bearer): `POST /crm/v3/imports` multipart (`importRequest`
  JSON, `files`) answers 200 {"id", "state": "STARTED", "importName", "metadata":
  {"counters", "fileIds", "objectLists"}, ...}; `GET /crm/v3/imports/{id}` state
  STARTED | PROCESSING | DONE | FAILED | CANCELED | DEFERRED, metadata.counters
  (TOTAL_ROWS, CREATED_OBJECTS, UPDATED_OBJECTS, UNIQUE_OBJECTS_WRITTEN); `POST
  /crm/v3/imports/{id}/cancel` 200 {"status": "COMPLETE"} (an ended import: 400
  VALIDATION_ERROR); `GET /crm/v3/imports/{id}/errors?after=` {"results":
  [{"id", "errorType", "errorMessage"?, "invalidValue", "objectType",
  "sourceData": {"lineNumber", "rowData"}}], "paging"?: {"next": {"after",
  "link"}}}; `GET /crm/v3/imports?after=` newest first, the same paging.
- Salesforce Bulk API 2.0 ingest (bearer): `POST
  /services/data/v62.0/jobs/ingest/` multipart (`job` JSON, `content` CSV) answers
  200 the job, state UploadComplete; `GET .../jobs/ingest/{id}/` state
  UploadComplete | InProgress | JobComplete | Failed | Aborted,
  "numberRecordsProcessed", "numberRecordsFailed", "errorMessage"? (Failed);
  `GET .../{id}/successfulResults/` CSV ("sf__Id","sf__Created", the columns), and
  `.../failedResults/` ("sf__Id","sf__Error", the columns), `page_size` rows a
  page, each but the last with `Sforce-Locator:` the next page's locator (the last
  "null"); `PATCH .../{id}/` {"state": "Aborted"} answers 200 the job, a job ended
  400 [{"errorCode": "INVALIDJOB", "message"}]. A row with no LastName fails.
- Mistral batch (bearer): `POST /v1/batch/jobs` {"input_files", "model",
  "endpoint", "metadata"} answers 200 the job {"id", "object": "batch", "status":
  "QUEUED", "output_file": null, "error_file": null, "errors": [],
  "total_requests", "completed_requests", "succeeded_requests",
  "failed_requests", ...}; `GET /v1/batch/jobs/{id}` status QUEUED | RUNNING |
  SUCCESS | FAILED | TIMEOUT_EXCEEDED | CANCELLATION_REQUESTED | CANCELLED; `POST
  /v1/batch/jobs/{id}/cancel` the job, CANCELLATION_REQUESTED (CANCELLED on the
  next read, a running job's finished half in output_file); `GET
  /v1/batch/jobs?page=&page_size=` {"data", "object": "list", "total"}; `GET
  /v1/files/{id}/content` the JSONL, one line a request {"id", "custom_id",
  "response": {"status_code", "body"}, "error": null}.
- Zamzar (HTTP basic "<apikey>:"): `POST /v1/jobs` multipart (`source_file`,
  `target_format`) answers 201 {"id" (an integer), "key", "status":
  "initialising", "source_file", "target_files": [], "target_format", ...}; `GET
  /v1/jobs/{id}` status initialising | converting | successful | failed |
  cancelled, "target_files": [{"id", "name", "size"}], "failure"? {"code",
  "message"}; `DELETE /v1/jobs/{id}` the job, cancelled (a job ended: 422);
  `GET /v1/files/{id}/content` 307 to a signed storage URL (S3, which refuses a
  request carrying an Authorization header besides its signature).

Scripts (the create's `script`, a form field or a member of the JSON part): "fail",
"slow" (runs until the test ends it), "partial" (Mailchimp: one operation errored;
HubSpot: DONE with errors; Salesforce: rows without LastName; Mistral: one request
in error_file), "timeout" (Mistral's TIMEOUT_EXCEEDED, half done); anything else
succeeds after a few reads.
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs

MAILCHIMP_KEY = "0123456789abcdef0123456789abcdef-us1"
MAILCHIMP_BASIC = "YW55c3RyaW5nOjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVmLXVzMQ=="
HUBSPOT_TOKEN = "pat-na1-hubspot-test"
SALESFORCE_TOKEN = "00DE0X0A0M0PeLE!AQcAQH0dMHEXAMPLE"
MISTRAL_KEY = "mistral-test-key"
ZAMZAR_BASIC = "emFtemFyLWtleTo="  # base64("zamzar-key:")
SALESFORCE_FAILURE = "InvalidBatch : Field name not found : Emial"
MISTRAL_FAILURE = "Input file could not be parsed: line 3 is not valid JSON"
ZAMZAR_FAILURE = "The source file could not be converted"
STORAGE_REFUSAL = (
    b"<Error><Code>InvalidArgument</Code><Message>Only one auth mechanism allowed; only the"
    b" X-Amz-Algorithm query parameter, Signature query string parameter or the"
    b" Authorization header should be specified</Message></Error>"
)


def _advance(job: dict[str, Any], steps: list[str], final: str) -> None:
    """One more read of `job`: through `steps`, then to `final` unless it is slow."""
    job["reads"] += 1
    if job["state"] not in steps:
        return
    at = steps.index(job["state"])
    if at + 1 < len(steps):
        job["state"] = steps[at + 1]
    elif job.get("script") != "slow":
        job["state"] = final


async def _created(fx: _Jobs) -> None:
    """Count a create; the first one's answer is lost when the fixture says so."""
    fx.creates += 1
    if fx.lose_first_create and fx.creates == 1:
        await hang()


class _Storage:
    """An object store's signed links (S3's): served at `url` by `storage()`, each
    read's Authorization header in `auth`; a read carrying one is refused, as S3
    refuses a request with two auth mechanisms."""

    def __init__(self) -> None:
        self.url = ""
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.auth: list[str | None] = []

    def storage(self) -> Starlette:
        return Starlette(routes=[Route("/bucket/{key:path}", self.get, methods=["GET"])])

    def put(self, key: str, data: bytes, content_type: str) -> str:
        self.objects[key] = (data, content_type)
        return f"{self.url}/bucket/{key}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=f00d"

    async def get(self, request: Request) -> Response:
        self.auth.append(request.headers.get("authorization"))
        if request.headers.get("authorization"):
            return Response(STORAGE_REFUSAL, 400, media_type="application/xml")
        found = self.objects.get(request.path_params["key"])
        if found is None or "X-Amz-Signature" not in request.query_params:
            return Response(b"<Error><Code>AccessDenied</Code></Error>", 403)
        return Response(found[0], media_type=found[1])


# --- Mailchimp ---------------------------------------------------------------------


def mailchimp_archive(bid: str, operations: list[dict[str, Any]], errored: int) -> bytes:
    """The batch's response archive: a gzipped tar of one JSON file listing each
    operation's response (the first `errored` answered 400)."""
    answers = []
    for n, op in enumerate(operations):
        failed = n < errored
        body = (
            {"title": "Invalid Resource", "status": 400, "detail": "Please provide a valid email."}
            if failed
            else {"id": f"member{n}", "status": "subscribed"}
        )
        answers.append(
            {
                "status_code": 400 if failed else 200,
                "operation_id": op.get("operation_id"),
                "response": json.dumps(body),
            }
        )
    data = json.dumps(answers).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"{bid}-response/1.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class MailchimpFixture(_Jobs, _Storage):
    """`deleted`: the batches a DELETE removed."""

    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "5a7c2d1e", **kwargs)
        _Storage.__init__(self)
        self.deleted: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/3.0/batches", self.create, methods=["POST"]),
                Route("/3.0/batches/{bid}", self.status, methods=["GET"]),
                Route("/3.0/batches/{bid}", self.delete, methods=["DELETE"]),
            ]
        )

    @staticmethod
    def _problem(title: str, detail: str, status: int) -> Response:
        body = {
            "type": "https://mailchimp.com/developer/marketing/docs/errors/",
            "title": title,
            "status": status,
            "detail": detail,
            "instance": "995c5cb0-3280-4a6e-808b-3b096d0bb219",
        }
        return Response(json.dumps(body), status, media_type="application/problem+json")

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {MAILCHIMP_BASIC}":
            return self._problem("API Key Invalid", "Your API key may be invalid.", 401)
        return None

    def batch(self, job: dict[str, Any]) -> dict[str, Any]:
        finished = job["state"] == "finished"
        total = len(job["operations"])
        return {
            "id": job["id"],
            "status": job["state"],
            "total_operations": total if job["state"] != "pending" else 0,
            "finished_operations": total if finished else 0,
            "errored_operations": job["errored"] if finished else 0,
            "submitted_at": "2026-12-06T05:00:00+00:00",
            "completed_at": "2026-12-06T05:01:00+00:00" if finished else "",
            "response_body_url": job.get("url", ""),
            "_links": [],
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        operations = body.get("operations") if isinstance(body, dict) else None
        if not isinstance(operations, list) or not operations:
            return self._problem("Invalid Resource", "Schema describes array, object found", 400)
        bid = self.new_id()
        script = body.get("script")
        errored = {"fail": len(operations), "partial": 1}.get(script or "", 0)
        job = {"id": bid, "operations": operations, "state": "pending", "reads": 0}
        self.jobs[bid] = job | {"script": script, "errored": errored}
        await _created(self)
        return json_response(self.batch(self.jobs[bid]))

    async def deliver(self, url: str, bid: str) -> int:
        """Mailchimp's batch webhook for `bid` (form-encoded, unsigned) to `url`."""
        job = self.jobs[bid]
        fields = {f"data[{k}]": str(v) for k, v in self.batch(job).items() if k != "_links"}
        fields |= {"type": "batch_operation_completed", "fired_at": "2026-12-06 05:01:00"}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, data=fields)).status_code

    def finish(self, bid: str) -> None:
        """Batch `bid` is finished (its archive named at the next read)."""
        self.jobs[bid]["state"] = "finished"

    def _find(self, request: Request) -> dict[str, Any] | None:
        bid = request.path_params["bid"]
        return None if bid in self.deleted else self.jobs.get(bid)

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._problem(
                "Resource Not Found", "The requested resource could not be found.", 404
            )
        self.reads += 1
        _advance(job, ["pending", "preprocessing", "started", "finalizing"], "finished")
        if job["state"] == "finished" and "url" not in job:
            archive = mailchimp_archive(job["id"], job["operations"], job["errored"])
            job["url"] = self.put(f"{job['id']}-response.tar.gz", archive, "application/x-gzip")
        return json_response(self.batch(job))

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._problem(
                "Resource Not Found", "The requested resource could not be found.", 404
            )
        self.cancels.append((job["id"], job["state"]))
        self.deleted.append(job["id"])
        return Response(status_code=204)


# --- HubSpot -----------------------------------------------------------------------

HUBSPOT_ROWS = ["email,firstname", "a@example.com,Ann", "not-an-email,Bob", "c@,Cy"]


class HubSpotFixture(_Jobs):
    """`uploads`: each create's importRequest and file; `error_reads`: the `after`
    of each errors page read; `errors_page_size` errors a page."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("5300", **kwargs)
        self.uploads: list[dict[str, Any]] = []
        self.error_reads: list[str | None] = []
        self.errors_page_size = 1
        self.list_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/crm/v3/imports", self.create, methods=["POST"]),
                Route("/crm/v3/imports", self.list, methods=["GET"]),
                Route("/crm/v3/imports/{iid}", self.status, methods=["GET"]),
                Route("/crm/v3/imports/{iid}/cancel", self.cancel, methods=["POST"]),
                Route("/crm/v3/imports/{iid}/errors", self.errors, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(category: str, message: str, status: int) -> Response:
        body = {
            "status": "error",
            "message": message,
            "correlationId": "c0ffee",
            "category": category,
        }
        return json_response(body, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {HUBSPOT_TOKEN}":
            return self._error(
                "INVALID_AUTHENTICATION", "Authentication credentials not found.", 401
            )
        return None

    def record(self, job: dict[str, Any]) -> dict[str, Any]:
        counters: dict[str, int] = {}
        if job["state"] == "DONE":
            rows = len(job["rows"])
            ok = rows - len(job["errors"])
            counters = {
                "TOTAL_ROWS": rows,
                "CREATED_OBJECTS": ok,
                "UPDATED_OBJECTS": 0,
                "UNIQUE_OBJECTS_WRITTEN": ok,
                "PROPERTY_VALUES_EMITTED": 2 * ok,
            }
        return {
            "id": job["id"],
            "state": job["state"],
            "createdAt": "2026-12-06T05:00:00.000Z",
            "updatedAt": "2026-12-06T05:00:00.000Z",
            "metadata": {"counters": counters, "fileIds": ["8765432"], "objectLists": []},
            "importRequestJson": job["request"],
            "importSource": "API",
            "importName": job["request"].get("name"),
            "optOutImport": False,
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        async with request.form() as form:
            raw = form.get("importRequest")
            upload = form.get("files")
            if isinstance(raw, UploadFile):
                raw = (await raw.read()).decode()
            if not isinstance(raw, str) or not isinstance(upload, UploadFile):
                return self._error("VALIDATION_ERROR", "importRequest and files are required", 400)
            content = (await upload.read()).decode()
        import_request = json.loads(raw)
        self.uploads.append({"importRequest": import_request, "file": content})
        iid = self.new_id()
        rows = content.splitlines()[1:]
        script = import_request.get("script")
        errors = [n for n, row in enumerate(rows, 2) if "@example.com" not in row]
        if script != "partial":
            errors = []
        self.jobs[iid] = {
            "id": iid,
            "request": import_request,
            "rows": rows,
            "errors": errors,
            "state": "STARTED",
            "reads": 0,
            "script": script,
        }
        await _created(self)
        return json_response(self.record(self.jobs[iid]))

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["iid"])
        if job is None:
            return self._error("OBJECT_NOT_FOUND", "Import not found", 404)
        self.reads += 1
        _advance(job, ["STARTED", "PROCESSING"], "FAILED" if job["script"] == "fail" else "DONE")
        return json_response(self.record(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["iid"])
        if job is None:
            return self._error("OBJECT_NOT_FOUND", "Import not found", 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("STARTED", "PROCESSING", "DEFERRED"):
            return self._error("VALIDATION_ERROR", f"Import is {job['state']}: cannot cancel", 400)
        job["state"] = "CANCELED"
        at = "2026-12-06T05:02:00.000Z"
        return json_response({"status": "COMPLETE", "startedAt": at, "completedAt": at})

    @staticmethod
    def _page(request: Request, items: list[Any], size: int) -> dict[str, Any]:
        start = int(request.query_params.get("after") or 0)
        page: dict[str, Any] = {"results": items[start : start + size]}
        if start + size < len(items):
            after = str(start + size)
            link = f"{request.url.replace(query=f'after={after}')}"
            page["paging"] = {"next": {"after": after, "link": link}}
        return page

    async def errors(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["iid"])
        if job is None:
            return self._error("OBJECT_NOT_FOUND", "Import not found", 404)
        self.error_reads.append(request.query_params.get("after"))
        items = [
            {
                "id": f"{job['id']}-err-{line}",
                "createdAt": 1765000000000,
                "errorType": "INVALID_EMAIL",
                "errorMessage": f"Invalid email on line {line}",
                "invalidValue": job["rows"][line - 2].split(",")[0],
                "objectType": "CONTACT",
                "sourceData": {"lineNumber": line, "rowData": job["rows"][line - 2].split(",")},
            }
            for line in job["errors"]
        ]
        return json_response(self._page(request, items, self.errors_page_size))

    async def list(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        newest = [self.record(j) for j in reversed(self.jobs.values())]
        return json_response(self._page(request, newest, 10))


# --- Salesforce Bulk API 2.0 ingest ------------------------------------------------

SF_JOBS = "/services/data/v62.0/jobs/ingest"
SF_RECORD_ERROR = "REQUIRED_FIELD_MISSING:Required fields are missing: [LastName]:LastName --"
SF_CSV = "FirstName,LastName\nAstro,Nomical\nHootie,McOwl\nAppy,Camper\nEarnie,Badger\nNo,\n"


class SalesforceFixture(_Jobs):
    """`uploads`: each create's job part and CSV; `result_reads`: each results
    page's (kind, locator); `page_size` rows a results page."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("7508c00000Ab1", **kwargs)
        self.uploads: list[dict[str, Any]] = []
        self.result_reads: list[tuple[str, str | None]] = []
        self.page_size = 2
        self.garbled_failures = False  # failedResults/ answers 200 with an HTML page

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"{SF_JOBS}/", self.create, methods=["POST"]),
                Route(SF_JOBS + "/{jid}/", self.status, methods=["GET"]),
                Route(SF_JOBS + "/{jid}/", self.patch, methods=["PATCH"]),
                Route(SF_JOBS + "/{jid}/{kind}/", self.results, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: str, message: str, status: int) -> Response:
        return json_response([{"errorCode": code, "message": message}], status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {SALESFORCE_TOKEN}":
            return self._error("INVALID_SESSION_ID", "Session expired or invalid", 401)
        return None

    def info(self, job: dict[str, Any]) -> dict[str, Any]:
        done = job["state"] in ("JobComplete", "Failed")
        info = {
            "id": job["id"],
            "operation": job["job"]["operation"],
            "object": job["job"]["object"],
            "createdById": "005xx000001X7dlAAC",
            "createdDate": "2026-12-06T05:00:00.000+0000",
            "systemModstamp": "2026-12-06T05:00:00.000+0000",
            "state": job["state"],
            "concurrencyMode": "Parallel",
            "contentType": "CSV",
            "apiVersion": 62.0,
            "jobType": "V2Ingest",
            "lineEnding": "LF",
            "columnDelimiter": "COMMA",
            "numberRecordsProcessed": len(job["rows"]) if done else 0,
            "numberRecordsFailed": len(job["failed"]) if done else 0,
            "retries": 0,
            "totalProcessingTime": 120 if done else 0,
        }
        if job["state"] == "Failed":
            info["errorMessage"] = SALESFORCE_FAILURE
        return info

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return self._error("INVALIDJOB", "a job without data is Open: upload, then close", 400)
        async with request.form() as form:
            part = form.get("job")
            upload = form.get("content")
            if isinstance(part, UploadFile):
                part = (await part.read()).decode()
            if not isinstance(part, str) or not isinstance(upload, UploadFile):
                return self._error("INVALIDJOB", "the job and content parts are required", 400)
            content = (await upload.read()).decode()
        job_part = json.loads(part)
        self.uploads.append({"job": job_part, "content": content})
        header, *rows = content.strip("\n").split("\n")
        jid = self.new_id()
        failed = (
            [r for r in rows if not r.split(",")[1]] if job_part.get("script") == "partial" else []
        )
        self.jobs[jid] = {
            "id": jid,
            "job": job_part,
            "header": header,
            "rows": rows
            if job_part.get("script") == "partial"
            else [r for r in rows if r.split(",")[1]],
            "failed": failed,
            "state": "UploadComplete",
            "reads": 0,
            "script": job_part.get("script"),
        }
        await _created(self)
        return json_response(self.info(self.jobs[jid]))

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error("NOT_FOUND", "The requested resource does not exist", 404)
        self.reads += 1
        final = "Failed" if job["script"] == "fail" else "JobComplete"
        _advance(job, ["UploadComplete", "InProgress"], final)
        return json_response(self.info(job))

    async def patch(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error("NOT_FOUND", "The requested resource does not exist", 404)
        body = await read_json(request)
        if body != {"state": "Aborted"}:
            return self._error("INVALIDJOB", f"Invalid state change: {body}", 400)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("Open", "UploadComplete", "InProgress"):
            return self._error("INVALIDJOB", "Aborting already Completed Job not allowed", 400)
        job["state"] = "Aborted"
        return json_response(self.info(job))

    async def results(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        kind = request.path_params["kind"]
        if job is None or kind not in ("successfulResults", "failedResults"):
            return self._error("NOT_FOUND", "The requested resource does not exist", 404)
        locator = request.query_params.get("locator")
        self.result_reads.append((kind, locator))
        if kind == "failedResults" and self.garbled_failures:
            # a proxy's or a maintenance page's HTML, answered 200
            return Response("<html><body>Service Unavailable</body></html>", media_type="text/html")
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if kind == "successfulResults":
            writer.writerow(["sf__Id", "sf__Created", *job["header"].split(",")])
            ok = [r for r in job["rows"] if r not in job["failed"]]
            rows = [[f"003xx0000{n:06d}", "true", *r.split(",")] for n, r in enumerate(ok)]
        else:
            writer.writerow(["sf__Id", "sf__Error", *job["header"].split(",")])
            rows = [["", SF_RECORD_ERROR, *r.split(",")] for r in job["failed"]]
        start = int(locator or 0)
        writer.writerows(rows[start : start + self.page_size])
        more = start + self.page_size < len(rows)
        headers = {"Sforce-Locator": str(start + self.page_size) if more else "null"}
        return Response(out.getvalue(), media_type="text/csv", headers=headers)


# --- Mistral batch -----------------------------------------------------------------

MISTRAL_REQUESTS = 4


def mistral_lines(jid: str, n: int) -> bytes:
    """The output file of job `jid`: the first `n` requests' answers."""
    lines = [
        {
            "id": f"batch-{jid[-4:]}-{k}",
            "custom_id": f"request-{k}",
            "response": {
                "status_code": 200,
                "body": {
                    "id": f"cmpl-{k}",
                    "object": "chat.completion",
                    "model": "mistral-small-latest",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": f"answer {k}"}}
                    ],
                },
            },
            "error": None,
        }
        for k in range(n)
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


MISTRAL_REQUEST_ERROR = "Invalid model: mistral-nonexistent"


def mistral_errors(jid: str, first: int, n: int) -> bytes:
    """The error file of job `jid`: requests `first`.. failed, each its 400."""
    lines = [
        {
            "id": f"batch-{jid[-4:]}-{k}",
            "custom_id": f"request-{k}",
            "response": {
                "status_code": 400,
                "body": {"object": "error", "message": MISTRAL_REQUEST_ERROR},
            },
            "error": {"message": MISTRAL_REQUEST_ERROR, "code": 1500},
        }
        for k in range(first, first + n)
    ]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


class MistralFixture(_Jobs):
    """`file_reads`: each file content read."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("b1f6c2a4-6d0e-4e9b-9a3f-0000", **kwargs)
        self.files: dict[str, bytes] = {}
        self.file_reads: list[str] = []
        self.list_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/batch/jobs", self.create, methods=["POST"]),
                Route("/v1/batch/jobs", self.list, methods=["GET"]),
                Route("/v1/batch/jobs/{jid}", self.status, methods=["GET"]),
                Route("/v1/batch/jobs/{jid}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/files/{fid}/content", self.content, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {MISTRAL_KEY}":
            return json_response({"message": "Unauthorized", "request_id": "r0"}, 401)
        return None

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        done = {
            "SUCCESS": MISTRAL_REQUESTS,
            "TIMEOUT_EXCEEDED": MISTRAL_REQUESTS // 2,
            "CANCELLED": job.get("done_at_cancel", 0),  # what ran before it stopped
        }
        succeeded = done.get(state, 0)
        failed = 1 if state == "SUCCESS" and job["script"] == "partial" else 0
        succeeded -= failed
        answer = {
            "id": job["id"],
            "object": "batch",
            "input_files": job["input"]["input_files"],
            "metadata": job["input"].get("metadata"),
            "endpoint": job["input"]["endpoint"],
            "model": job["input"]["model"],
            "output_file": None,
            "error_file": None,
            "errors": [],
            "status": state,
            "created_at": 1765000000,
            "total_requests": MISTRAL_REQUESTS,
            "completed_requests": succeeded + failed,
            "succeeded_requests": succeeded,
            "failed_requests": failed,
            "started_at": 1765000001 if state != "QUEUED" else None,
            "completed_at": None,
        }
        if succeeded:
            fid = f"out-{job['id'][-4:]}"
            self.files.setdefault(fid, mistral_lines(job["id"], succeeded))
            answer["output_file"] = fid
        if failed:
            eid = f"err-{job['id'][-4:]}"
            self.files.setdefault(eid, mistral_errors(job["id"], succeeded, failed))
            answer["error_file"] = eid
        if state == "FAILED":
            answer["errors"] = [{"message": MISTRAL_FAILURE, "count": 1}]
        return answer

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("input_files") or not body.get("endpoint"):
            return json_response({"message": "input_files and endpoint are required"}, 422)
        jid = self.new_id()
        script = body.get("script")
        self.jobs[jid] = {"id": jid, "input": body, "state": "QUEUED", "reads": 0, "script": script}
        await _created(self)
        return json_response(self.job(self.jobs[jid]))

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"message": "Batch job not found"}, 404)
        self.reads += 1
        if job["state"] == "CANCELLATION_REQUESTED":
            job["state"] = "CANCELLED"
        final = {"fail": "FAILED", "timeout": "TIMEOUT_EXCEEDED"}.get(
            job["script"] or "", "SUCCESS"
        )
        _advance(job, ["QUEUED", "RUNNING"], final)
        return json_response(self.job(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"message": "Batch job not found"}, 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("QUEUED", "RUNNING"):
            job["done_at_cancel"] = MISTRAL_REQUESTS // 2 if job["state"] == "RUNNING" else 0
            job["state"] = "CANCELLATION_REQUESTED"
        return json_response(self.job(job))

    async def list(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        page = int(request.query_params.get("page", "0"))
        size = int(request.query_params.get("page_size", "100"))
        jobs = [self.job(j) for j in self.jobs.values()]
        data = jobs[page * size : (page + 1) * size]
        return json_response({"data": data, "object": "list", "total": len(jobs)})

    async def content(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        fid = request.path_params["fid"]
        self.file_reads.append(fid)
        if fid not in self.files:
            return json_response({"message": "File not found"}, 404)
        return Response(self.files[fid], media_type="application/octet-stream")


# --- Zamzar ------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(48)


class ZamzarFixture(_Jobs, _Storage):
    """`content_reads`: the API's /files/{id}/content reads (each a 307)."""

    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "1530", **kwargs)
        _Storage.__init__(self)
        self.uploads: list[dict[str, Any]] = []
        self.content_reads: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/jobs", self.create, methods=["POST"]),
                Route("/v1/jobs/{jid}", self.status, methods=["GET"]),
                Route("/v1/jobs/{jid}", self.delete, methods=["DELETE"]),
                Route("/v1/files/{fid}/content", self.content, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: int, message: str, status: int) -> Response:
        return json_response({"errors": [{"message": message, "code": code}]}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {ZAMZAR_BASIC}":
            return self._error(1, "API key was missing or invalid", 401)
        return None

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "id": int(job["id"]),
            "key": "zamzar-key",
            "status": job["state"],
            "sandbox": False,
            "created_at": "2026-12-06T05:00:00Z",
            "finished_at": None,
            "source_file": {"id": int(job["id"]) + 1000, "name": job["name"], "size": 2048},
            "target_files": [],
            "target_format": job["target_format"],
            "credit_cost": 1,
        }
        if job["state"] == "successful":
            answer["finished_at"] = "2026-12-06T05:01:00Z"
            stem = job["name"].rsplit(".", 1)[0]
            target = {"id": int(job["id"]) + 2000, "name": f"{stem}.png", "size": len(PNG)}
            answer["target_files"] = [target]
        elif job["state"] == "failed":
            answer["failure"] = {"code": 4, "message": ZAMZAR_FAILURE}
        return answer

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        async with request.form() as form:
            upload = form.get("source_file")
            target = form.get("target_format")
            script = form.get("script")
            if not isinstance(upload, UploadFile) or not isinstance(target, str):
                return self._error(10, "source_file and target_format are required", 422)
            self.uploads.append({"name": upload.filename, "bytes": await upload.read()})
            name = upload.filename or "file"
        jid = self.new_id()
        self.jobs[jid] = {
            "id": jid,
            "name": name,
            "target_format": target,
            "state": "initialising",
            "reads": 0,
            "script": script,
        }
        await _created(self)
        return json_response(self.job(self.jobs[jid]), 201)

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(22, "resource does not exist", 404)
        self.reads += 1
        final = "failed" if job["script"] == "fail" else "successful"
        _advance(job, ["initialising", "converting"], final)
        return json_response(self.job(job))

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(22, "resource does not exist", 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("initialising", "converting"):
            return self._error(23, "job cannot be cancelled: it has already completed", 422)
        job["state"] = "cancelled"
        return json_response(self.job(job))

    async def content(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        fid = request.path_params["fid"]
        self.content_reads.append(fid)
        if not any(int(j["id"]) + 2000 == int(fid) for j in self.jobs.values()):
            return self._error(22, "resource does not exist", 404)
        url = self.put(f"zamzar/{fid}.png", PNG, "image/png")
        return Response(status_code=307, headers={"location": url})
