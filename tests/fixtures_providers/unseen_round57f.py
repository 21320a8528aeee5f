"""Creatomate renders, OpenAI fine-tuning jobs, Klaviyo bulk profile imports and
Intercom content data exports, each a real app on loopback answering in the shapes
their public documentation gives (tests/integration/test_unseen_round57f.py).
Where the docs leave a behaviour open, the assumption is stated here.

- Creatomate v1 (Bearer): `POST /v1/renders` {"template_id", "modifications",
  "metadata", "webhook_url", ...} answers 202 with an ARRAY of render objects, one
  per output (one here); a render {"id", "status": planned | waiting | transcribing
  | rendering | succeeded | failed, "error_message" (only once failed), "url" (always
  present; the file is on the CDN only once succeeded, 404 before), "snapshot_url",
  "template_id", "output_format", "metadata", ...}; `GET /v1/renders/{id}` the
  render. Errors 400 {"hint": ...} (assumed: the reference shows none). No cancel,
  no list (neither documented).
- OpenAI fine-tuning (Bearer): `POST /v1/fine_tuning/jobs` {"model",
  "training_file", "metadata" (16 string pairs), ...} answers 200 the job
  {"object": "fine_tuning.job", "id": "ftjob-...", "status": validating_files |
  queued | running | succeeded | failed | cancelled, "error": {"code", "message",
  "param"} once failed (null otherwise), "fine_tuned_model", "result_files": [file
  ids], "metadata", ...}; `GET .../{id}` the job; `POST .../{id}/cancel` the job,
  cancelled (a job that ended: 400 invalid_request_error, assumed); `GET
  /v1/fine_tuning/jobs?after=&limit=&metadata[k]=v` {"object": "list", "data": [jobs,
  newest first], "has_more"} (no last_id: the cursor is the last job's id); `GET
  /v1/files/{id}/content` the metrics CSV (step, train_loss, train_accuracy, ...;
  plain CSV here, as the brief has it: some report it served base64-encoded).
  Errors {"error": {"message", "type", "param", "code"}}. `filters_metadata` False:
  a list that ignores the metadata filter (one that predates it).
- Klaviyo (`Authorization: Klaviyo-API-Key ...`, a `revision` header on every call,
  JSON:API; a body sent as application/json is taken as application/vnd.api+json
  is: assumed): `POST /api/profile-bulk-import-jobs` {"data": {"type":
  "profile-bulk-import-job", "attributes": {"profiles": {"data": [profiles]}}}}
  answers 202 {"data": {"type", "id", "attributes": {"status": queued |
  processing | complete | cancelled (| failed, as the brief has it), "created_at",
  "total_count", "completed_count", "failed_count", "completed_at", "expires_at",
  "started_at"}, "links": {"self"}}}; `GET .../{id}` the same; `GET
  .../{id}/import-errors` {"data": [{"type": "import-error", "id", "attributes":
  {"code", "title", "detail", "source": {"pointer"}, "original_payload"}}],
  "links": {"self", "next" (absolute, null on the last page), "prev"}} (a page
  holds `page_size` errors). Errors {"errors": [{"id", "status", "code", "title",
  "detail", "source"}]}. No cancel, and no reference of ours on a job.
- Intercom (Bearer, `Intercom-Version`): `POST /export/content/data`
  {"created_at_after", "created_at_before"} (unix seconds) answers 200
  {"job_identifier", "status": "pending", "download_url": "", "download_expires_at":
  ""}; one pending export at a time, another refused 429 (assumed from reports:
  "Exceeded rate limit of 1 pending message data export jobs"); `GET
  /export/content/data/{id}` the job, status pending | in_progress | completed |
  no_data | failed | canceled; a failed job read answers HTTP 504 with the job in
  its body (the 2.5 reference: "the HTTP Response Code will show as a 504"); `POST
  /export/cancel/{id}` the job, canceled (one that ended unchanged); `GET
  /download/content/data/{id}` with Accept: application/octet-stream the gzipped CSV
  (406 without it: assumed), and for a no_data export 404 (assumed: its
  download_url is empty). Errors {"type": "error.list", "request_id", "errors":
  [{"code", "message"}]}.

Scripts: the fixture's `script` for the next job ("fail", "slow": runs until the
test ends it); anything else completes after a few reads.
"""

from __future__ import annotations

import gzip
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created

# --- Creatomate --------------------------------------------------------------------

CM_KEY = "cm_0123456789abcdef0123456789abcdef"
CM_TEMPLATE = "9e90d011-52e6-49dc-8a7a-5f25058c2568"
CM_FAILURE = "The source file https://example.com/missing.mp4 could not be loaded (HTTP 404)."
CM_VIDEO = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8


class CreatomateFixture(_Jobs):
    """The API and, apart, its CDN (`cdn()`, served at `cdn_url`): each CDN read's
    Authorization header is kept in `cdn_auth`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.cdn_url = ""
        self.cdn_auth: list[str | None] = []
        self.cdn_misses = 0  # CDN reads of a render not yet there

    def new_id(self) -> str:
        return f"69ba407b-72a9-4050-a9fb-{len(self.jobs) + 1:012x}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/renders", self.create, methods=["POST"]),
                Route("/v1/renders/{rid}", self.get, methods=["GET"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/renders/{name}", self.file, methods=["GET"])])

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {CM_KEY}":
            return json_response({"hint": "Invalid API key."}, 401)
        return None

    def render(self, job: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": job["id"],
            "status": job["state"],
            "url": f"{self.cdn_url}/renders/{job['id']}.mp4",
            "template_id": CM_TEMPLATE,
            "template_name": "Product promo",
            "template_tags": [],
            "output_format": "mp4",
            "render_scale": 1,
            "modifications": job["modifications"],
            "metadata": job["metadata"],
        }
        if job["state"] == "succeeded":
            out |= {"width": 720, "height": 900, "frame_rate": 60, "duration": 15.5}
            out |= {"file_size": len(CM_VIDEO)}
            out["snapshot_url"] = f"{self.cdn_url}/snapshots/{job['id']}.jpg"
        if job["state"] == "failed":
            out["error_message"] = CM_FAILURE
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not (body.get("template_id") or body.get("source")):
            return json_response({"hint": "Either template_id or source must be provided."}, 400)
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "state": "planned",
            "reads": 0,
            "script": self.script,
            "modifications": body.get("modifications") or {},
            "metadata": body.get("metadata"),
        }
        await _created(self)
        return json_response([self.render(self.jobs[rid])], 202)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return json_response({"hint": "Render not found."}, 404)
        self.reads += 1
        steps = ["planned", "waiting", "transcribing", "rendering"]
        _advance(job, steps, "failed" if job.get("script") == "fail" else "succeeded")
        return json_response(self.render(job))

    async def file(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("authorization"))
        job = self.jobs.get(request.path_params["name"].removesuffix(".mp4"))
        if job is None or job["state"] != "succeeded":
            self.cdn_misses += 1
            return Response(b"<Error><Code>NoSuchKey</Code></Error>", 404)
        return Response(CM_VIDEO, media_type="video/mp4")


# --- OpenAI fine-tuning ------------------------------------------------------------

OAI_KEY = "sk-proj-0123456789abcdefABCDEF0123456789"
FT_TRAINING = "file-abc123trainingjsonl"
FT_FAILURE = (
    "invalid_training_file",
    "The job failed due to an invalid training file. Expected file to have JSONL format,"
    " where every line is a valid JSON dictionary. Line 1 is not a dictionary.",
)
FT_METRICS = (
    b"step,train_loss,train_accuracy,valid_loss,valid_mean_token_accuracy\r\n"
    b"1,1.52347,0.0,,\r\n"
    b"2,0.57719,0.0,,\r\n"
    b"3,3.63525,0.0,,\r\n"
    b"4,1.72257,0.0,,\r\n"
    b"5,1.52379,0.0,,\r\n"
)


class FineTuningFixture(_Jobs):
    def __init__(self, *, filters_metadata: bool = True, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.filters_metadata = filters_metadata
        self.others = 0  # jobs created elsewhere right after ours (newer)
        self.list_reads: list[dict[str, str]] = []  # each list call's query
        self.file_reads: list[str] = []

    def new_id(self) -> str:
        return f"ftjob-{len(self.jobs) + 1:04d}aBcDeFgHiJkLmN"

    def app(self) -> Starlette:
        jobs = "/v1/fine_tuning/jobs"
        return Starlette(
            routes=[
                Route(jobs, self.create, methods=["POST"]),
                Route(jobs, self.list_jobs, methods=["GET"]),
                Route(f"{jobs}/{{jid}}", self.get, methods=["GET"]),
                Route(f"{jobs}/{{jid}}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/files/{fid}/content", self.content, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: int, message: str, code: str | None, param: str | None = None) -> Response:
        body = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        return json_response({"error": body}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {OAI_KEY}":
            return self._error(401, "Incorrect API key provided.", "invalid_api_key")
        return None

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        done = state == "succeeded"
        return {
            "object": "fine_tuning.job",
            "id": job["id"],
            "model": "gpt-4o-mini-2024-07-18",
            "created_at": 1733479200,
            "finished_at": 1733482800 if state in ("succeeded", "failed", "cancelled") else None,
            "fine_tuned_model": f"ft:gpt-4o-mini-2024-07-18:acme::{job['id'][6:14]}"
            if done
            else None,
            "organization_id": "org-123",
            "result_files": [job["result_file"]] if done else [],
            "status": state,
            "validation_file": None,
            "training_file": job["training_file"],
            "hyperparameters": {"n_epochs": 3, "batch_size": 1, "learning_rate_multiplier": 1.8},
            "trained_tokens": 5768 if done else None,
            "error": {"code": FT_FAILURE[0], "message": FT_FAILURE[1], "param": "training_file"}
            if state == "failed"
            else None,
            "integrations": [],
            "seed": 683058546,
            "estimated_finish": None,
            "metadata": job["metadata"],
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("training_file"):
            return self._error(400, "Missing required parameter: 'training_file'.", None)
        jid = self.new_id()
        self.jobs[jid] = {
            "id": jid,
            "state": "validating_files",
            "reads": 0,
            "script": self.script,
            "training_file": body["training_file"],
            "metadata": body.get("metadata"),
            "result_file": f"file-metrics{len(self.jobs) + 1:04d}",
        }
        for n in range(self.others):  # others' jobs, newer than ours
            other = f"ftjob-other{n:04d}"
            self.jobs[other] = {
                "id": other,
                "state": "succeeded",
                "reads": 0,
                "training_file": FT_TRAINING,
                "metadata": None,
                "result_file": f"file-other{n:04d}",
            }
        self.others = 0
        await _created(self)
        return json_response(self.job(self.jobs[jid]))

    async def list_jobs(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        q = request.query_params
        self.list_reads.append(dict(q))
        jobs = list(reversed(self.jobs.values()))  # newest first
        wanted = {k[9:-1]: v for k, v in q.items() if k.startswith("metadata[")}
        if self.filters_metadata and wanted:
            jobs = [
                j for j in jobs if all((j["metadata"] or {}).get(k) == v for k, v in wanted.items())
            ]
        if after := q.get("after"):
            ids = [j["id"] for j in jobs]
            jobs = jobs[ids.index(after) + 1 :] if after in ids else []
        limit = int(q.get("limit") or 20)
        page = jobs[:limit]
        body = {
            "object": "list",
            "data": [self.job(j) for j in page],
            "has_more": len(jobs) > limit,
        }
        return json_response(body)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            jid = request.path_params["jid"]
            return self._error(404, f"Could not find fine-tune: {jid}", "fine_tune_not_found")
        self.reads += 1
        steps = ["validating_files", "queued", "running"]
        _advance(job, steps, "failed" if job.get("script") == "fail" else "succeeded")
        return json_response(self.job(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            jid = request.path_params["jid"]
            return self._error(404, f"Could not find fine-tune: {jid}", "fine_tune_not_found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("validating_files", "queued", "running"):
            message = f"Job has already completed: {job['id']}"
            return self._error(400, message, None)
        job["state"] = "cancelled"
        return json_response(self.job(job))

    async def content(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        fid = request.path_params["fid"]
        self.file_reads.append(fid)
        if not any(
            j["result_file"] == fid and j["state"] == "succeeded" for j in self.jobs.values()
        ):
            return self._error(404, f"No such File object: {fid}", None, "id")
        return Response(FT_METRICS, media_type="application/octet-stream")


# --- Klaviyo -----------------------------------------------------------------------

KL_KEY = "pk_0123456789abcdef0123456789abcdef01"
KL_REVISION = "2024-10-15"
KL_BAD_EMAIL = "Invalid email address"


def kl_profiles(n: int, bad: int = 0) -> dict[str, Any]:
    """A bulk import body of `n` profiles, the first `bad` of them with no valid email."""
    profiles = [
        {
            "type": "profile",
            "attributes": {"email": f"m{i}@example" if i < bad else f"m{i}@example.com"},
        }
        for i in range(n)
    ]
    return {
        "data": {
            "type": "profile-bulk-import-job",
            "attributes": {"profiles": {"data": profiles}},
        }
    }


class KlaviyoFixture(_Jobs):
    def __init__(self, *, page_size: int = 20, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.page_size = page_size
        self.error_reads: list[str | None] = []  # each errors page's cursor
        self.bad_calls: list[str] = []  # calls without the revision header

    def new_id(self) -> str:
        return f"ZXhhbXBsZV9qb2Jf{len(self.jobs) + 1:04d}"

    def app(self) -> Starlette:
        jobs = "/api/profile-bulk-import-jobs"
        return Starlette(
            routes=[
                Route(jobs, self.create, methods=["POST"]),
                Route(f"{jobs}/{{jid}}", self.get, methods=["GET"]),
                Route(f"{jobs}/{{jid}}/import-errors", self.errors, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: int, code: str, title: str, detail: str, pointer: str = "") -> Response:
        error = {"id": "7b4d1e0a-0000", "status": status, "code": code, "title": title}
        error["detail"] = detail
        if pointer:
            error["source"] = {"pointer": pointer}
        return json_response({"errors": [error]}, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Klaviyo-API-Key {KL_KEY}":
            detail = "Missing or invalid private key."
            return self._error(401, "not_authenticated", "Authentication failed.", detail)
        if request.headers.get("revision") != KL_REVISION:
            self.bad_calls.append(request.url.path)
            return self._error(400, "invalid", "Invalid input.", "Missing revision header.")
        return None

    def resource(self, request: Request, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        done = state in ("complete", "cancelled", "failed")
        total = len(job["profiles"])
        failed = len(job["bad"]) if done else 0
        return {
            "data": {
                "type": "profile-bulk-import-job",
                "id": job["id"],
                "attributes": {
                    "status": state,
                    "created_at": "2026-12-06T10:00:00+00:00",
                    "total_count": total,
                    "completed_count": total - failed if done else 0,
                    "failed_count": failed,
                    "completed_at": "2026-12-06T10:04:00+00:00" if done else None,
                    "expires_at": "2026-12-13T10:00:00+00:00",
                    "started_at": None if state == "queued" else "2026-12-06T10:00:05+00:00",
                },
                "relationships": {"lists": {"data": []}},
                "links": {"self": f"{request.base_url}api/profile-bulk-import-jobs/{job['id']}"},
            }
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        try:
            profiles = body["data"]["attributes"]["profiles"]["data"]
            assert isinstance(profiles, list) and profiles
        except (KeyError, TypeError, AssertionError):
            pointer = "/data/attributes/profiles"
            return self._error(400, "invalid", "Invalid input.", "Profiles are required.", pointer)
        jid = self.new_id()
        bad = [
            n
            for n, p in enumerate(profiles)
            if not str(p.get("attributes", {}).get("email", "")).endswith(".com")
        ]
        self.jobs[jid] = {
            "id": jid,
            "state": "queued",
            "reads": 0,
            "script": self.script,
            "profiles": profiles,
            "bad": bad,
        }
        await _created(self)
        return json_response(self.resource(request, self.jobs[jid]), 202)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(404, "not_found", "Not found.", "The job was not found.")
        self.reads += 1
        _advance(
            job, ["queued", "processing"], "failed" if job.get("script") == "fail" else "complete"
        )
        return json_response(self.resource(request, job))

    async def errors(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(404, "not_found", "Not found.", "The job was not found.")
        cursor = request.query_params.get("page[cursor]")
        self.error_reads.append(cursor)
        start = int(cursor or 0)
        page = job["bad"][start : start + self.page_size]
        data = [
            {
                "type": "import-error",
                "id": f"err-{job['id']}-{n}",
                "attributes": {
                    "code": "invalid",
                    "title": "Invalid input.",
                    "detail": KL_BAD_EMAIL,
                    "source": {"pointer": f"/data/attributes/profiles/data/{n}/attributes/email"},
                    "original_payload": job["profiles"][n]["attributes"],
                },
            }
            for n in page
        ]
        here = f"{request.base_url}api/profile-bulk-import-jobs/{job['id']}/import-errors"
        more = start + self.page_size < len(job["bad"])
        links = {
            "self": here,
            "next": f"{here}?page%5Bcursor%5D={start + self.page_size}" if more else None,
            "prev": None,
        }
        return json_response({"data": data, "links": links})


# --- Intercom ----------------------------------------------------------------------

IC_TOKEN = "dG9rOmludGVyY29tX3Rlc3RfdG9rZW4="
IC_CSV = (
    b"user_id,user_external_id,content_id,content_title,content_type,receipt_id,"
    b"received_at,sent_at,delivered_at,first_opened_at\n"
    b"5f1a,cust-17,101,Winter sale,email,9001,1733479200,1733479200,1733479201,\n"
    b"5f1b,cust-18,101,Winter sale,email,9002,1733479200,1733479200,1733479201,1733480000\n"
)


class IntercomFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None
        self.downloads: list[str | None] = []  # each download's Accept header
        self.completed_code = 200  # the code a completed export's read answers

    def new_id(self) -> str:
        return f"v5xsp8c19ji{len(self.jobs) + 1:04d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/export/content/data", self.create, methods=["POST"]),
                Route("/export/content/data/{jid}", self.get, methods=["GET"]),
                Route("/export/cancel/{jid}", self.cancel, methods=["POST"]),
                Route("/download/content/data/{jid}", self.download, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: int, code: str, message: str) -> Response:
        body = {
            "type": "error.list",
            "request_id": "req-7f3a",
            "errors": [{"code": code, "message": message}],
        }
        return json_response(body, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {IC_TOKEN}":
            return self._error(401, "unauthorized", "Access Token Invalid")
        return None

    def job(self, request: Request, job: dict[str, Any]) -> dict[str, Any]:
        done = job["state"] == "completed"
        return {
            "job_identifier": job["id"],
            "status": job["state"],
            "download_url": f"{request.base_url}download/content/data/{job['id']}" if done else "",
            "download_expires_at": "1734084000" if done else "",
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        after = body.get("created_at_after") if isinstance(body, dict) else None
        before = body.get("created_at_before") if isinstance(body, dict) else None
        if not isinstance(after, int) or not isinstance(before, int) or after >= before:
            message = "created_at_after must be before created_at_before"
            return self._error(400, "parameter_invalid", message)
        if any(j["state"] in ("pending", "in_progress") for j in self.jobs.values()):
            self.throttled_creates += 1
            message = "Exceeded rate limit of 1 pending message data export jobs"
            return self._error(429, "rate_limit_exceeded", message)
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "state": "pending", "reads": 0, "script": self.script}
        await _created(self)
        return json_response(self.job(request, self.jobs[jid]))

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(404, "not_found", "Job not found")
        self.reads += 1
        final = {"fail": "failed", "empty": "no_data"}.get(job.get("script") or "", "completed")
        _advance(job, ["pending", "in_progress"], final)
        code = {"failed": 504, "completed": self.completed_code}.get(job["state"], 200)
        return json_response(self.job(request, job), code)

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(404, "not_found", "Job not found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("pending", "in_progress"):
            job["state"] = "canceled"
        return json_response(self.job(request, job))

    async def download(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.downloads.append(request.headers.get("accept"))
        job = self.jobs.get(request.path_params["jid"])
        if job is None or job["state"] != "completed":
            return self._error(404, "not_found", "Export not found")
        if request.headers.get("accept") != "application/octet-stream":
            return self._error(406, "not_acceptable", "Accept: application/octet-stream required")
        return Response(gzip.compress(IC_CSV), media_type="application/octet-stream")
