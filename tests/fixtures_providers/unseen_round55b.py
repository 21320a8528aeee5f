"""AWS Elemental MediaConvert's jobs, GitHub Actions' workflow_dispatch runs,
Zendesk's job statuses, Dropbox's save_url and Baseten's async inference, each a
real app on loopback answering in the shapes their public documentation gives
(tests/integration/test_unseen_round55b.py). Where the docs leave a behaviour
open, the assumption is stated here.

- MediaConvert (REST JSON, SigV4 service "mediaconvert", checked by botocore's
  signer): `POST /2017-08-29/jobs` {"role", "settings", "clientRequestToken",
  "userMetadata", "queue"} answers 201 {"job": {"id", "arn", "status":
  "SUBMITTED", "createdAt", "clientRequestToken", "userMetadata", "settings",
  ...}}; the same clientRequestToken "within one minute of a successful request"
  answers the original job (the fake's `token_window`: for ever unless a test
  shortens it; past it, a second job). `GET /2017-08-29/jobs?order=DESCENDING`
  (ListJobs) {"jobs": [newest first, 20 a page], "nextToken"}.
  `GET /2017-08-29/jobs/{id}` {"job": ...} status SUBMITTED |
  PROGRESSING (with jobPercentComplete) | COMPLETE (with outputGroupDetails
  [{"outputDetails": [{"outputFilePaths": ["s3://..."], "durationInMs",
  "videoDetails"}], "type": "FILE_GROUP_GROUP"}]) | CANCELED | ERROR (with
  errorCode, an integer, and errorMessage). `DELETE /2017-08-29/jobs/{id}` 202 {};
  a job that ended: 409 ConflictException (assumed; the docs list 409 among the
  CancelJob errors). Errors {"message"} with `x-amzn-ErrorType`.
- GitHub Actions (bearer): `POST /repos/{o}/{r}/actions/workflows/{wf}/dispatches`
  {"ref", "inputs", "return_run_details"}: 204 no body, or with
  return_run_details true 200 {"workflow_run_id", "run_url", "html_url"}; an input
  the workflow does not declare is 422 {"message": "Unexpected inputs provided:
  [...]"}. `GET /repos/{o}/{r}/actions/runs/{id}` {"id", "name", "display_title",
  "event": "workflow_dispatch", "status" queued | in_progress | completed,
  "conclusion" null | success | failure | cancelled | ..., "html_url", ...}. `POST
  .../runs/{id}/cancel` 202 {}, on a completed run 409 {"message": "Cannot cancel
  a workflow run that is completed."}. `GET .../runs/{id}/artifacts` {"total_count",
  "artifacts": [{"id", "name", "size_in_bytes", "archive_download_url", "expired",
  ...}]}. The primary rate limit: 403 {"message": "API rate limit exceeded for
  ..."} with `x-ratelimit-remaining: 0`, `x-ratelimit-reset` (no Retry-After);
  the secondary: 403 {"message": "You have exceeded a secondary rate limit...
  include the request ID ..."} with `retry-after` (seconds).
  Webhook workflow_run: {"action": requested | in_progress | completed,
  "workflow_run": the run, "repository", "sender"}, `X-GitHub-Event: workflow_run`,
  `X-GitHub-Delivery`, `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
- Zendesk (Basic email/token): `POST /api/v2/users/create_many.json` {"users"}
  answers 200 {"job_status": {"id", "url", "status": "queued", "total", "progress":
  null, "message": null, "results": null}}; `GET /api/v2/job_statuses/{id}.json`
  the same, status queued | working | completed | failed | killed, results (once
  completed) [{"id", "status": "Created", "email"} or {"index", "error":
  "UserCreateFailed"?, "details"}] (the error's code assumed), message a sentence.
- Dropbox (bearer): `POST /2/files/save_url` {"path", "url"} answers 200
  {".tag": "async_job_id", "async_job_id"} (or, the docs' union allows it,
  {".tag": "complete", the file's metadata}); `POST
  /2/files/save_url/check_job_status` {"async_job_id"} 200 {".tag": "in_progress"}
  | {".tag": "complete", "name", "id", "path_lower", "path_display", "size",
  "content_hash", ...} | {".tag": "failed", "failed": {".tag": "download_failed"}}.
  Errors 409 {"error_summary", "error": {".tag"}}; 400 text for a malformed call.
- Baseten (`Authorization: Api-Key`): `POST /production/async_predict`
  {"model_input", "webhook_endpoint", "priority", "max_time_in_queue_seconds"}
  answers 200 {"request_id"}; `GET /async_request/{id}` {"request_id", "model_id",
  "deployment_id", "status" QUEUED | IN_PROGRESS | SUCCEEDED | FAILED | EXPIRED |
  CANCELED | WEBHOOK_FAILED, "errors": [{"code", "message"}]}: no output, ever.
  `DELETE /async_request/{id}` 200 {"request_id", "canceled": true|false,
  "message"}; only a QUEUED request is cancelled. The output is POSTed to
  webhook_endpoint: {"request_id", "model_id", "deployment_id", "type":
  "async_request_completed", "time", "data": the model's output, "errors"},
  `X-BASETEN-SIGNATURE: v1=<hex HMAC-SHA256 of the body>`.

Scripts: MediaConvert's in `userMetadata.script`, GitHub's in `inputs.script`,
Zendesk's in the first user's `name` ("fail" ends failed, "partial": one user
refused), Dropbox's in the `path` (".../fail..."; ".../now...": complete at once),
Baseten's in `model_input.script`: "fail", "slow" (runs until the test ends it),
anything else completes after a few reads.
"""

from __future__ import annotations

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

from tests.fixtures_providers.aws import signature_refusal
from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created

# --- MediaConvert ------------------------------------------------------------------

MC_KEY_ID = "AKIAMEDIACONVERT0001"
MC_KEYS = {MC_KEY_ID: "mediaconvert/secret/key/0123456789abcdefghij"}
MC_FAILURE = "Demuxer: [ReadPacketData File read failed - end of file hit at length [0]]"
MC_ERROR_CODE = 1010


def mc_outputs(jid: str) -> list[dict[str, Any]]:
    """A COMPLETE job's outputGroupDetails: one HLS group of two renditions."""
    return [
        {
            "outputDetails": [
                {
                    "outputFilePaths": [f"s3://media-out/{jid}/teaser_{h}p.m3u8"],
                    "durationInMs": 30000,
                    "videoDetails": {"widthInPx": h * 16 // 9, "heightInPx": h},
                }
                for h in (720, 1080)
            ],
            "playlistFilePaths": [f"s3://media-out/{jid}/teaser.m3u8"],
            "type": "HLS_GROUP",
        }
    ]


class MediaConvertFixture(_Jobs):
    """`tokens`: the clientRequestToken of each create; `refusals`: signatures refused."""

    def __init__(self, *, token_window: float | None = None, **kwargs: Any) -> None:
        super().__init__("1765000000000-", **kwargs)
        self.tokens: list[str | None] = []
        self.by_token: dict[str, tuple[str, float]] = {}
        self.refusals: list[str] = []
        self.token_window = token_window  # seconds a token is honoured (None: for ever)
        self.list_reads = 0

    def app(self) -> Starlette:
        base = "/2017-08-29/jobs"
        return Starlette(
            routes=[
                Route(base, self.create, methods=["POST"]),
                Route(base, self.list_jobs, methods=["GET"]),
                Route(base + "/{jid}", self.get, methods=["GET"]),
                Route(base + "/{jid}", self.cancel, methods=["DELETE"]),
            ]
        )

    @staticmethod
    def _error(kind: str, message: str, code: int) -> Response:
        return json_response({"message": message}, code, headers={"x-amzn-ErrorType": kind})

    async def _refused(self, request: Request) -> Response | None:
        refusal = signature_refusal(
            request, await request.body(), MC_KEYS, "us-east-1", "mediaconvert"
        )
        if refusal is None:
            return None
        self.refusals.append(refusal[0])
        return self._error(refusal[0], refusal[1], 403)

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": job["id"],
            "arn": f"arn:aws:mediaconvert:us-east-1:123456789012:jobs/{job['id']}",
            "status": job["state"],
            "createdAt": "2026-12-06T10:00:00Z",
            "role": job["body"].get("role"),
            "settings": job["body"].get("settings"),
            "userMetadata": job["body"].get("userMetadata", {}),
            "queue": "arn:aws:mediaconvert:us-east-1:123456789012:queues/Default",
            "timing": {"submitTime": "2026-12-06T10:00:00Z"},
        }
        if "clientRequestToken" in job["body"]:
            out["clientRequestToken"] = job["body"]["clientRequestToken"]
        if job["state"] == "PROGRESSING":
            out["jobPercentComplete"] = min(99, 30 * job["reads"])
        if job["state"] == "COMPLETE":
            out["outputGroupDetails"] = mc_outputs(job["id"])
        if job["state"] == "ERROR":
            out["errorCode"] = MC_ERROR_CODE
            out["errorMessage"] = MC_FAILURE
        return {"job": out}

    async def create(self, request: Request) -> Response:
        if (refused := await self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or "settings" not in body or "role" not in body:
            return self._error("BadRequestException", "settings and role are required", 400)
        token = body.get("clientRequestToken")
        self.tokens.append(token)
        if token in self.by_token:
            jid, at = self.by_token[token]
            if self.token_window is None or time.monotonic() - at < self.token_window:
                return json_response(self.job(self.jobs[jid]), 201)
        jid = self.new_id() + "abcdef"
        self.jobs[jid] = {
            "id": jid,
            "body": body,
            "state": "SUBMITTED",
            "reads": 0,
            "script": (body.get("userMetadata") or {}).get("script"),
        }
        if token:
            self.by_token[token] = (jid, time.monotonic())
        await _created(self)
        return json_response(self.job(self.jobs[jid]), 201)

    async def list_jobs(self, request: Request) -> Response:
        """ListJobs: newest first, `page_size` a page behind nextToken (an index)."""
        if (refused := await self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        newest = [self.job(j)["job"] for j in reversed(self.jobs.values())]
        start = int(request.query_params.get("nextToken") or 0)
        body: dict[str, Any] = {"jobs": newest[start : start + 20]}
        if start + 20 < len(newest):
            body["nextToken"] = str(start + 20)
        return json_response(body)

    async def get(self, request: Request) -> Response:
        if (refused := await self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error("NotFoundException", "The specified job was not found.", 404)
        self.reads += 1
        end = "ERROR" if job["script"] == "fail" else "COMPLETE"
        _advance(job, ["SUBMITTED", "PROGRESSING"], end)
        return json_response(self.job(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := await self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error("NotFoundException", "The specified job was not found.", 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("SUBMITTED", "PROGRESSING"):
            message = f"The job {job['id']} is in status {job['state']} and cannot be canceled."
            return self._error("ConflictException", message, 409)
        job["state"] = "CANCELED"
        return json_response({}, 202)


# --- GitHub Actions ----------------------------------------------------------------

GH_TOKEN = "github_pat_11ABCDEFG0123456789_test"
GH_WEBHOOK_SECRET = "gh-webhook-secret-0123"
GH_REPO = "/repos/octo-org/etl"
GH_INPUTS = frozenset({"date", "script", "jobwarden_operation"})
GH_LIMITS_DOC = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
GH_SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try"
    " again. If you reach out to GitHub Support for help, please include the request ID"
    " C0DE:1234:5678."
)


def gh_artifacts(rid: int) -> list[dict[str, Any]]:
    return [
        {
            "id": rid * 10 + n,
            "node_id": f"MDg6QXJ0aWZhY3Qx{n}",
            "name": name,
            "size_in_bytes": 1024 * (n + 1),
            "url": f"https://api.github.com{GH_REPO}/actions/artifacts/{rid * 10 + n}",
            "archive_download_url": f"https://api.github.com{GH_REPO}/actions/artifacts/"
            f"{rid * 10 + n}/zip",
            "expired": False,
            "created_at": "2026-12-06T10:05:00Z",
            "expires_at": "2027-03-06T10:05:00Z",
            "workflow_run": {"id": rid, "head_branch": "main"},
        }
        for n, name in enumerate(["report", "logs"])
    ]


class GitHubActionsFixture(_Jobs):
    """`dispatches`: each dispatch's body; runs are ints, as GitHub's are."""

    def __init__(self, *, run_details: bool = True, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.dispatches: list[dict[str, Any]] = []
        self.next_id = 9_876_543_210
        self.artifact_reads = 0
        self.limited = 0  # how many calls to answer 403 "API rate limit exceeded"
        self.limited_answers = 0
        self.secondary = 0  # how many dispatches to answer 403 "secondary rate limit"

    def app(self) -> Starlette:
        base = f"{GH_REPO}/actions"
        return Starlette(
            routes=[
                Route(base + "/workflows/{wf}/dispatches", self.dispatch, methods=["POST"]),
                Route(base + "/runs/{rid:int}", self.get, methods=["GET"]),
                Route(base + "/runs/{rid:int}/cancel", self.cancel, methods=["POST"]),
                Route(base + "/runs/{rid:int}/artifacts", self.artifacts, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if self.limited > 0:
            self.limited -= 1
            self.limited_answers += 1
            body = {
                "message": "API rate limit exceeded for installation ID 4242.",
                "documentation_url": GH_LIMITS_DOC,
                "status": "403",
            }
            headers = {
                "x-ratelimit-limit": "5000",
                "x-ratelimit-remaining": "0",
                "x-ratelimit-used": "5000",
                "x-ratelimit-reset": str(int(time.time()) + 1),
                "x-ratelimit-resource": "core",
            }
            return json_response(body, 403, headers=headers)
        if request.headers.get("authorization") != f"Bearer {GH_TOKEN}":
            body = {
                "message": "Bad credentials",
                "documentation_url": "https://docs.github.com/rest",
                "status": "401",
            }
            return json_response(body, 401)
        return None

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        rid = job["id"]
        return {
            "id": rid,
            "name": "nightly",
            "display_title": "nightly",
            "run_number": 42,
            "event": "workflow_dispatch",
            "status": job["state"],
            "conclusion": job.get("conclusion"),
            "workflow_id": 161335,
            "head_branch": "main",
            "url": f"https://api.github.com{GH_REPO}/actions/runs/{rid}",
            "html_url": f"https://github.com/octo-org/etl/actions/runs/{rid}",
            "created_at": "2026-12-06T10:00:00Z",
            "updated_at": "2026-12-06T10:01:00Z",
            "run_attempt": 1,
        }

    async def dispatch(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if self.secondary > 0:
            self.secondary -= 1
            self.limited_answers += 1
            body = {"message": GH_SECONDARY, "documentation_url": GH_LIMITS_DOC}
            return json_response(body, 403, headers={"retry-after": "1"})
        body = await read_json(request)
        self.dispatches.append(body)
        inputs = body.get("inputs") or {}
        unexpected = sorted(set(inputs) - GH_INPUTS)
        if unexpected:
            body = {"message": f"Unexpected inputs provided: {unexpected}", "status": "422"}
            return json_response(body, 422)
        self.next_id += 1
        rid = self.next_id
        self.jobs[str(rid)] = {
            "id": rid,
            "state": "queued",
            "reads": 0,
            "script": inputs.get("script"),
        }
        await _created(self)
        if body.get("return_run_details") is not True:
            return Response(status_code=204)
        return json_response(
            {
                "workflow_run_id": rid,
                "run_url": f"https://api.github.com{GH_REPO}/actions/runs/{rid}",
                "html_url": f"https://github.com/octo-org/etl/actions/runs/{rid}",
            }
        )

    def _find(self, request: Request) -> dict[str, Any] | None:
        return self.jobs.get(str(request.path_params["rid"]))

    @staticmethod
    def _missing() -> Response:
        return json_response({"message": "Not Found", "status": "404"}, 404)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._missing()
        self.reads += 1
        _advance(job, ["queued", "in_progress"], "completed")
        if job["state"] == "completed" and job.get("conclusion") is None:
            job["conclusion"] = "failure" if job["script"] == "fail" else "success"
        return json_response(self.run(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._missing()
        self.cancels.append((str(job["id"]), job["state"]))
        if job["state"] == "completed":
            body = {"message": "Cannot cancel a workflow run that is completed.", "status": "409"}
            return json_response(body, 409)
        job["state"], job["conclusion"] = "completed", "cancelled"
        return json_response({}, 202)

    async def artifacts(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._missing()
        self.artifact_reads += 1
        found = gh_artifacts(job["id"]) if job.get("conclusion") == "success" else []
        return json_response({"total_count": len(found), "artifacts": found})

    def finish(self, rid: str) -> None:
        self.jobs[rid]["state"], self.jobs[rid]["conclusion"] = "completed", "success"

    async def deliver(self, url: str, rid: str, *, secret: str = GH_WEBHOOK_SECRET) -> int:
        """The workflow_run webhook for `rid`, signed as GitHub signs it."""
        job = self.jobs[rid]
        event = {
            "action": "completed" if job["state"] == "completed" else job["state"],
            "workflow_run": self.run(job),
            "workflow": {"id": 161335, "name": "nightly", "path": ".github/workflows/nightly.yml"},
            "repository": {"id": 1296269, "full_name": "octo-org/etl"},
            "sender": {"login": "jobwarden-bot"},
        }
        body = json.dumps(event).encode()
        mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            "content-type": "application/json",
            "x-github-event": "workflow_run",
            "x-github-delivery": f"72d3162e-cc78-11e3-81ab-{rid[-12:]:0>12}",
            "x-github-hook-id": "292430182",
            "x-hub-signature-256": f"sha256={mac}",
            "user-agent": "GitHub-Hookshot/044aadd",
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


# --- Zendesk -----------------------------------------------------------------------

ZD_BASIC = "amVzc2ljYUBhY21lLmNvbS90b2tlbjpadGVzdHRva2Vu"  # jessica@acme.com/token:Ztesttoken
ZD_FAILURE = "Job failed: internal error while processing the batch"
ZD_REFUSED = "Email: taken@acme.com is already being used by another user"


class ZendeskFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("8b726e606741012ffc2d782bcb7848fe", **kwargs)
        self.base = ""

    def new_id(self) -> str:
        return f"V3-{self.prefix}{len(self.jobs) + 1:02d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v2/users/create_many.json", self.create, methods=["POST"]),
                Route("/api/v2/job_statuses/{jid}.json", self.get, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {ZD_BASIC}":
            return json_response({"error": "Couldn't authenticate you"}, 401)
        return None

    def status(self, request: Request, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        users = job["users"]
        results = None
        if state == "completed":
            results = [
                {"index": i, "error": "UserCreateFailed", "details": ZD_REFUSED}
                if u.get("email") == "taken@acme.com"
                else {"id": 36000000 + i, "status": "Created", "email": u.get("email")}
                for i, u in enumerate(users)
            ]
        url = str(request.base_url).rstrip("/") + f"/api/v2/job_statuses/{job['id']}.json"
        return {
            "job_status": {
                "id": job["id"],
                "url": url,
                "total": len(users),
                "progress": len(users)
                if state == "completed"
                else (1 if state == "working" else None),
                "status": state,
                "message": ZD_FAILURE
                if state == "failed"
                else ("Completed at 2026-12-06 10:01:00 +0000" if state == "completed" else None),
                "results": results,
            }
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        users = body.get("users") if isinstance(body, dict) else None
        if not isinstance(users, list) or not users:
            body = {"error": "InvalidEndpoint", "description": "users is required"}
            return json_response(body, 400)
        jid = self.new_id()
        self.jobs[jid] = {
            "id": jid,
            "users": users,
            "state": "queued",
            "reads": 0,
            "script": users[0].get("name"),
        }
        await _created(self)
        return json_response(self.status(request, self.jobs[jid]))

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"error": "RecordNotFound", "description": "Not found"}, 404)
        self.reads += 1
        _advance(job, ["queued", "working"], "failed" if job["script"] == "fail" else "completed")
        return json_response(self.status(request, job))


# --- Dropbox -----------------------------------------------------------------------

DBX_TOKEN = "sl.u.AFtest-dropbox-token"


def dbx_metadata(path: str) -> dict[str, Any]:
    name = path.rsplit("/", 1)[1]
    return {
        "name": name,
        "id": "id:a4ayc_80_OEAAAAAAAAAXw",
        "client_modified": "2026-12-06T10:00:00Z",
        "server_modified": "2026-12-06T10:00:01Z",
        "rev": "a1c10ce0dd78",
        "size": 7212,
        "path_lower": path.lower(),
        "path_display": path,
        "is_downloadable": True,
        "content_hash": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    }


class DropboxFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("PEvh0L84U5tAAAAAAAAAAQ", **kwargs)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/2/files/save_url", self.save, methods=["POST"]),
                Route("/2/files/save_url/check_job_status", self.check, methods=["POST"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {DBX_TOKEN}":
            body = {
                "error_summary": "invalid_access_token/",
                "error": {".tag": "invalid_access_token"},
            }
            return json_response(body, 401)
        return None

    async def save(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not {"path", "url"} <= set(body):
            return Response(b'Error in call to API function "files/save_url": missing path', 400)
        path = body["path"]
        if "/now" in path:
            await _created(self)
            return json_response({".tag": "complete"} | dbx_metadata(path))
        jid = self.new_id()
        script = "fail" if "/fail" in path else ("slow" if "/slow" in path else None)
        self.jobs[jid] = {
            "id": jid,
            "path": path,
            "state": "in_progress",
            "reads": 0,
            "script": script,
        }
        await _created(self)
        return json_response({".tag": "async_job_id", "async_job_id": jid})

    async def check(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        job = self.jobs.get(body.get("async_job_id", "") if isinstance(body, dict) else "")
        if job is None:
            error = {
                "error_summary": "invalid_async_job_id/",
                "error": {".tag": "invalid_async_job_id"},
            }
            return json_response(error, 409)
        self.reads += 1
        job["reads"] += 1
        if job["reads"] >= 2 and job["script"] != "slow":
            job["state"] = "failed" if job["script"] == "fail" else "complete"
        if job["state"] == "failed":
            return json_response({".tag": "failed", "failed": {".tag": "download_failed"}})
        if job["state"] == "complete":
            return json_response({".tag": "complete"} | dbx_metadata(job["path"]))
        return json_response({".tag": "in_progress"})


# --- Baseten -----------------------------------------------------------------------

BT_KEY = "bt-api-key-0123456789"
BT_WEBHOOK_SECRET = "whsec_baseten_0123456789"
BT_OUTPUT = {"text": "A cat sitting on a windowsill.", "tokens": 8}
BT_FAILURE = "Model raised: CUDA out of memory"


class BasetenFixture(_Jobs):
    """`webhooks`: (url, body) asked of each create."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("b1a5e7e0-0000-4000-8000-", **kwargs)
        self.webhooks: list[str | None] = []

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:012d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/production/async_predict", self.predict, methods=["POST"]),
                Route("/async_request/{rid}", self.get, methods=["GET"]),
                Route("/async_request/{rid}", self.cancel, methods=["DELETE"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Api-Key {BT_KEY}":
            return json_response({"error": "Invalid API key"}, 401)
        return None

    def status(self, job: dict[str, Any]) -> dict[str, Any]:
        errors = (
            [{"code": "MODEL_PREDICT_ERROR", "message": BT_FAILURE}]
            if job["state"] == "FAILED"
            else []
        )
        return {
            "request_id": job["id"],
            "model_id": "abcd1234",
            "deployment_id": "qwerty12",
            "status": job["state"],
            "errors": errors,
        }

    async def predict(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("model_input"), dict):
            return json_response({"error": "model_input is required"}, 400)
        self.webhooks.append(body.get("webhook_endpoint"))
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "state": "QUEUED",
            "reads": 0,
            "script": body["model_input"].get("script"),
        }
        await _created(self)
        return json_response({"request_id": rid})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return json_response({"error": "Async request not found"}, 404)
        self.reads += 1
        _advance(
            job, ["QUEUED", "IN_PROGRESS"], "FAILED" if job["script"] == "fail" else "SUCCEEDED"
        )
        return json_response(self.status(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return json_response({"error": "Async request not found"}, 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] == "QUEUED":
            job["state"] = "CANCELED"
            return json_response({"request_id": job["id"], "canceled": True, "message": "Canceled"})
        message = f"Only QUEUED requests may be canceled; request is {job['state']}"
        return json_response({"request_id": job["id"], "canceled": False, "message": message})

    async def deliver(
        self, url: str, rid: str, *, secret: str = BT_WEBHOOK_SECRET, output: Any = None
    ) -> int:
        """The completion webhook for `rid`, its output in `data` (`output`, else
        BT_OUTPUT), signed as Baseten signs it."""
        event = {
            "request_id": rid,
            "model_id": "abcd1234",
            "deployment_id": "qwerty12",
            "type": "async_request_completed",
            "time": "2026-12-06T10:01:00.000000Z",
            "data": None if self.jobs[rid]["state"] == "FAILED" else output or BT_OUTPUT,
            "errors": self.status(self.jobs[rid])["errors"],
        }
        body = json.dumps(event).encode()
        mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {"content-type": "application/json", "x-baseten-signature": f"v1={mac}"}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code
