"""Google BigQuery's query jobs, Databricks' one-time runs, Cloudflare Stream's
copied videos and Snowflake's SQL API statements, each a real app on loopback
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

Scripts (a create's `configuration.labels.script`, BigQuery's own labels): "fail"
(DONE with invalidQuery), "slow" (runs until the test ends it), "race" (a cancel
is taken, and the job completes all the same); anything else completes after a
few reads.
"""

from __future__ import annotations

import json
from typing import Any

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
