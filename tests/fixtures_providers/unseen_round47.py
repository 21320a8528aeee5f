"""Stability AI's async results, Rev.ai's transcription jobs, Mathpix's PDF
conversions and CloudConvert's jobs, each a real app on loopback answering in the
shapes their public documentation gives (tests/integration/test_unseen_round47.py).

- Stability AI (platform.stability.ai/docs/api-reference): `POST
  /v2beta/image-to-video` (bearer; multipart/form-data with an `image` file)
  answers 200 {"id": 64 hex}; `GET /v2beta/results/{id}` answers 202 {"id",
  "status": "in-progress"} while it runs, then 200 with the video itself
  (`Accept: video/*`; headers `finish-reason: SUCCESS | CONTENT_FILTERED`, `seed`)
  or JSON {"video": base64, "finish_reason", "seed"} (`Accept: application/json`),
  and 404 {"id", "name": "not_found", "errors": [...]} once expired; errors are
  {"id", "name", "errors": [...]} (429 "rate_limit_exceeded").
- Rev.ai (docs.rev.ai/api/asynchronous/reference): `POST /speechtotext/v1/jobs`
  (bearer, JSON {"media_url", "callback_url", "metadata"}) answers 200 with the job
  {"id", "created_on", "name", "metadata", "status": "in_progress", "type":
  "async", "language"}; `GET /speechtotext/v1/jobs?limit=&starting_after=` those
  objects, newest first, a bare array; `GET /speechtotext/v1/jobs/{id}` the job
  (`transcribed` adds "completed_on", "duration_seconds"; `failed` adds "failure",
  "failure_detail"); `GET .../{id}/transcript` the transcript {"monologues": [...]}
  as `application/vnd.rev.transcript.v1.0+json` for that Accept (406 otherwise);
  `DELETE .../{id}` 204 for an ended job, 409 for one in progress. Errors are RFC
  7807 problems {"type", "title", "status", "detail"?}. Callbacks POST {"job":
  the job object}, unsigned, to the `callback_url`.
- Mathpix (docs.mathpix.com): `POST /v3/pdf` (`app_id` and `app_key` headers,
  JSON {"url", "conversion_formats"}) answers 200 {"pdf_id"}; `GET /v3/pdf/{id}`
  {"status": received | loaded | split | completed | error, "num_pages",
  "num_pages_completed", "percent_done"} (an error: "error", "error_info" {"id",
  "message"}); `GET /v3/pdf/{id}.mmd` the Mathpix Markdown, text/plain.
- CloudConvert (cloudconvert.com/api/v2): `POST /v2/jobs` (bearer, JSON {"tasks":
  {name: task}, "tag"}) answers 201 {"data": job}; `GET /v2/jobs/{id}` {"data":
  job}; `GET /v2/jobs?filter[tag]=` {"data": [job...], "links", "meta"}. A job
  {"id", "tag", "status": waiting | processing | finished | error, "created_at",
  "tasks": [task...]} lists its tasks in no promised order (here: newest first),
  each {"id", "name", "operation", "status", "code", "message", "result"}; the
  export/url task's `result.files[]` {"filename", "size", "url"} on another host
  (storage.cloudconvert.com, links valid 24 hours). Webhooks {"event":
  "job.finished" | "job.failed", "job"} signed with `CloudConvert-Signature`, the
  hex HMAC-SHA256 of the raw body under the webhook's signing secret.

Scripts: the create body's `script` ("fail", "slow": stays running until the test
ends it; Stability's "filtered": CONTENT_FILTERED; Mathpix's "crawl": split, a page
more done at each read, never all; CloudConvert's "pages": three exported files;
anything else succeeds after a few reads).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json
from tests.fixtures_providers.unseen_media import MP4, _Jobs

STABILITY_KEY = "sk-stability-test-key"
REVAI_KEY = "revai-test-access-token"
REVAI_TOKEN = "revai-callback-token-0123456789abcdef"
MATHPIX_APP_ID = "jobwarden_test_app"
MATHPIX_KEY = "mathpix-test-app-key"
CLOUDCONVERT_KEY = "cc-test-api-key"
CLOUDCONVERT_SECRET = "cc-webhook-signing-secret-0123456789"

PDF = b"%PDF-1.7\n% converted by the fake CloudConvert\n%%EOF\n"
MMD = "\\title{On Heat}\n\n## Introduction\n\nThe flux $q = -k \\nabla T$ ...\n"
TRANSCRIPT: dict[str, Any] = {
    "monologues": [
        {
            "speaker": 0,
            "elements": [
                {"type": "text", "value": "Hello", "ts": 0.5, "end_ts": 1.5, "confidence": 1},
                {"type": "punct", "value": " "},
                {"type": "text", "value": "World", "ts": 1.75, "end_ts": 2.85, "confidence": 0.8},
                {"type": "punct", "value": "."},
            ],
        }
    ]
}
TRANSCRIPT_TYPE = "application/vnd.rev.transcript.v1.0+json"
REVAI_FAILURE = {
    "failure": "download_failure",
    "failure_detail": "Failed to download media file. Please check your url and file type",
}
MATHPIX_ERROR = {
    "error": "PDF is encrypted and cannot be processed",
    "error_info": {"id": "pdf_encrypted", "message": "PDF is encrypted"},
}
CC_FAILURE = {"code": "CONVERSION_FAILED", "message": "LibreOffice: the document is corrupt"}


def _script(job: dict[str, Any]) -> str | None:
    body = job["input"]
    return body.get("script") if isinstance(body, dict) else None


# --- Stability AI -----------------------------------------------------------------


class StabilityFixture(_Jobs):
    """Generations done at their third read; `accepts` the Accept of each result read."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("a6dc6c6e20acda010fe14d71f180658f2896ed9b4ec25aa99a6ff06c7969", **kwargs)
        self.images: list[tuple[str | None, str | None, bytes]] = []
        self.accepts: list[str | None] = []
        self.expired: set[str] = set()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2beta/image-to-video", self.create, methods=["POST"]),
                Route("/v2beta/results/{gid}", self.result, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(name: str, error: str, code: int) -> Response:
        return json_response({"id": "e1b2c3", "name": name, "errors": [error]}, code)

    async def create(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {STABILITY_KEY}":
            return self._error("unauthorized", "authorization: invalid API key", 401)
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return self._error("bad_request", "content-type: must be multipart/form-data", 400)
        async with request.form() as form:
            image = form.get("image")
            if not isinstance(image, UploadFile):
                return self._error("bad_request", "image: required", 400)
            self.images.append((image.filename, image.content_type, await image.read()))
            fields = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        gid = self.new_id()
        self.jobs[gid] = {"id": gid, "input": fields, "state": "in-progress", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"id": gid})

    def finish(self, gid: str) -> None:
        self.jobs[gid]["state"] = "done"

    async def result(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {STABILITY_KEY}":
            return self._error("unauthorized", "authorization: invalid API key", 401)
        gid = request.path_params["gid"]
        job = self.jobs.get(gid)
        if job is None or gid in self.expired:
            return self._error("not_found", f"Generation with id {gid} not found", 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return self._error("rate_limit_exceeded", "You have exceeded the rate limit", 429)
        job["reads"] += 1
        if job["state"] != "done" and _script(job) != "slow" and job["reads"] >= 3:
            job["state"] = "done"
        if job["state"] != "done":
            return json_response({"id": gid, "status": "in-progress"}, 202)
        accept = request.headers.get("accept")
        self.accepts.append(accept)
        reason = "CONTENT_FILTERED" if _script(job) == "filtered" else "SUCCESS"
        if "application/json" in (accept or "") and "video/" not in (accept or ""):
            body = {"video": base64.b64encode(MP4).decode(), "finish_reason": reason, "seed": 42}
            return json_response(body)
        headers = {"finish-reason": reason, "seed": "42"}
        return Response(MP4, media_type="video/mp4", headers=headers)


# --- Rev.ai ----------------------------------------------------------------------


class RevAiFixture(_Jobs):
    """Rev.ai's jobs; `others`: jobs made elsewhere (by hand, another tool), listed too."""

    def __init__(self, *, others: int = 0, drop_first_create: bool = False, **kwargs: Any) -> None:
        super().__init__("Umx5c6F7pH", **kwargs)
        # the first create never arrives (no job made), and no answer comes
        self.drop_first_create = drop_first_create
        self.create_calls = 0
        # jobs made elsewhere just after the first create (ours then on a later page)
        self.others_after = 0
        self.transcript_accepts: list[str | None] = []
        self.job_accepts: list[str | None] = []  # the Accept of every other call
        self.lists: list[dict[str, str]] = []
        self._others(others)

    def _others(self, count: int) -> None:
        for _ in range(count):
            oid = f"0ther{len(self.jobs):05d}"
            self.jobs[oid] = {"id": oid, "input": {"metadata": None}, "status": "transcribed"}
            self.jobs[oid]["reads"] = 0

    def app(self) -> Starlette:
        root = "/speechtotext/v1/jobs"
        return Starlette(
            routes=[
                Route(root, self.create, methods=["POST"]),
                Route(root, self.list, methods=["GET"]),
                Route(root + "/{jid}", self.get, methods=["GET"]),
                Route(root + "/{jid}/transcript", self.transcript, methods=["GET"]),
            ]
        )

    @staticmethod
    def _problem(title: str, code: int, detail: str | None = None) -> Response:
        body: dict[str, Any] = {"type": "https://www.rev.ai/api/v1/errors/x", "title": title}
        body["status"] = code
        if detail:
            body["detail"] = detail
        return json_response(body, code, headers={"Content-Type": "application/problem+json"})

    def _refused(self, request: Request) -> Response | None:
        if not request.url.path.endswith("/transcript"):
            self.job_accepts.append(request.headers.get("accept"))
        if request.headers.get("authorization") != f"Bearer {REVAI_KEY}":
            return self._problem("Authorization has been denied for this request", 401)
        return None

    def job(self, jid: str) -> dict[str, Any]:
        job = self.jobs[jid]
        body: dict[str, Any] = {
            "id": jid,
            "created_on": "2026-12-05T10:00:00.000Z",
            "name": "interview.mp3",
            "metadata": (job["input"] or {}).get("metadata"),
            "status": job["status"],
            "type": "async",
            "language": "en",
        }
        if job["status"] == "transcribed":
            body |= {"completed_on": "2026-12-05T10:02:00.000Z", "duration_seconds": 107.0}
        if job["status"] == "failed":
            body |= REVAI_FAILURE
        return body

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        self.create_calls += 1
        if self.drop_first_create and self.create_calls == 1:
            await hang()
            return Response(status_code=502)
        if not isinstance(body, dict) or "media_url" not in body:
            detail = "media_url: The media_url field is required"
            return self._problem("Your request parameters didn't validate", 400, detail)
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "input": body, "status": "in_progress", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            self._others(self.others_after)
            await hang()
        return json_response(self.job(jid))

    async def list(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        self.lists.append(dict(request.query_params))
        newest_first = list(reversed(self.jobs))
        after = request.query_params.get("starting_after")
        if after:
            newest_first = newest_first[newest_first.index(after) + 1 :]
        limit = int(request.query_params.get("limit", "100"))
        return json_response([self.job(jid) for jid in newest_first[:limit]])

    def finish(self, jid: str) -> None:
        self.jobs[jid]["status"] = "transcribed"

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        jid = request.path_params["jid"]
        job = self.jobs.get(jid)
        if job is None:
            return self._problem("could not find job", 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return self._problem("Too Many Requests", 429)
        job["reads"] += 1
        script = _script(job)
        if job["status"] == "in_progress" and script != "slow" and job["reads"] >= 2:
            job["status"] = "failed" if script == "fail" else "transcribed"
        return json_response(self.job(jid))

    async def transcript(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        jid = request.path_params["jid"]
        job = self.jobs.get(jid)
        if job is None:
            return self._problem("could not find job", 404)
        accept = request.headers.get("accept")
        self.transcript_accepts.append(accept)
        if job["status"] != "transcribed":
            return self._problem("Invalid Job State", 409, "Job is not transcribed")
        if accept not in (TRANSCRIPT_TYPE, "text/plain"):
            return self._problem("Not Acceptable", 406)
        if accept == "text/plain":
            return Response("Speaker 0  00:00:00    Hello World.", media_type="text/plain")
        return Response(json.dumps(TRANSCRIPT), media_type=TRANSCRIPT_TYPE)

    async def call_back(self, jid: str, url: str | None = None) -> int:
        """Rev.ai's callback: {"job": the job object} POSTed, unsigned, to the
        `callback_url` the create gave (or `url`); the answer's code."""
        target = url or self.jobs[jid]["input"]["callback_url"]
        body = json.dumps({"job": self.job(jid)}).encode()
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                target, content=body, headers={"Content-Type": "application/json"}
            )
        return answer.status_code


# --- Mathpix ---------------------------------------------------------------------


class MathpixFixture(_Jobs):
    """Mathpix's PDFs: received, loaded, split (2 pages of 4 a read), then completed."""

    PAGES = 4

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("2026_12_05_0f1c7ad0c8a94b2c8d5c", **kwargs)
        self.results = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v3/pdf", self.create, methods=["POST"]),
                Route("/v3/pdf/{pid}.mmd", self.mmd, methods=["GET"]),
                Route("/v3/pdf/{pid}", self.get, methods=["GET"]),
            ]
        )

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if (
            request.headers.get("app_id") != MATHPIX_APP_ID
            or request.headers.get("app_key") != MATHPIX_KEY
        ):
            error = {"id": "http_unauthorized", "message": "Invalid credentials"}
            return json_response({"error": "Invalid credentials", "error_info": error}, 401)
        return None

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        pid = self.new_id()
        self.jobs[pid] = {"id": pid, "input": body, "status": "received", "done": 0, "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"pdf_id": pid})

    def finish(self, pid: str) -> None:
        self.jobs[pid] |= {"status": "completed", "done": self.PAGES}

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        job = self.jobs.get(request.path_params["pid"])
        if job is None:
            error = {"id": "pdf_unknown", "message": "PDF ID not found"}
            return json_response({"error": "PDF ID not found", "error_info": error}, 404)
        self.reads += 1
        job["reads"] += 1
        script = _script(job)
        if job["status"] not in ("completed", "error"):
            if job["reads"] == 1:
                job["status"] = "loaded"
            elif script == "fail":
                job["status"] = "error"
            elif script != "slow":  # slow: loaded until the test ends it
                job["status"] = "split"
                if script == "crawl":
                    job["done"] = min(job["done"] + 1, self.PAGES - 1)
                else:
                    job["done"] = min(job["done"] + 2, self.PAGES)
                    if job["done"] == self.PAGES and job["reads"] > 3:
                        job["status"] = "completed"
        body: dict[str, Any] = {"status": job["status"]}
        if job["status"] in ("split", "completed"):
            body |= {
                "num_pages": self.PAGES,
                "num_pages_completed": job["done"],
                "percent_done": round(100 * job["done"] / self.PAGES, 1),
            }
        if job["status"] == "error":
            body |= MATHPIX_ERROR
        return json_response(body)

    async def mmd(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        job = self.jobs.get(request.path_params["pid"])
        if job is None or job["status"] != "completed":
            error = {"id": "pdf_unknown", "message": "PDF ID not found"}
            return json_response({"error": "PDF ID not found", "error_info": error}, 404)
        self.results += 1
        return Response(MMD, media_type="text/plain")


# --- CloudConvert ----------------------------------------------------------------


class CloudConvertFixture(_Jobs):
    """CloudConvert's jobs; `storage_url`: where export files are (another origin)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("6b8a0c2e-4f1d-4c3a-9e5b-0d7f", **kwargs)
        self.storage_url = ""
        self.storage_auth: list[str | None] = []
        self.list_queries: list[dict[str, str]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/jobs", self.create, methods=["POST"]),
                Route("/v2/jobs", self.list, methods=["GET"]),
                Route("/v2/jobs/{jid}", self.get, methods=["GET"]),
            ]
        )

    def storage(self) -> Starlette:
        return Starlette(routes=[Route("/tasks/{tid}/{name}", self.file)])

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {CLOUDCONVERT_KEY}":
            return json_response({"message": "Unauthenticated.", "code": "UNAUTHENTICATED"}, 401)
        return None

    def _task(self, jid: str, n: int, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        job = self.jobs[jid]
        status, code, message, result = job["status"], None, None, None
        if status == "processing":
            status = "finished" if spec["operation"] == "import/url" else "processing"
        elif status == "error":
            status = "error"
            if spec["operation"] == "convert":
                code, message = CC_FAILURE["code"], CC_FAILURE["message"]
            elif spec["operation"] == "import/url":
                status = "finished"
            else:
                code, message = "INPUT_TASK_FAILED", "Input task has failed"
        tid = f"{jid[:8]}-task-{n}"
        if status == "finished" and spec["operation"] == "export/url":
            url = f"{self.storage_url}/tasks/{tid}/report.pdf?temp_url_sig=ab12&temp_url_expires=1"
            files = [{"filename": "report.pdf", "size": len(PDF), "url": url}]
            if _script(job) == "pages":  # one file per page (a PDF to PNG)
                files = [
                    {"filename": f"report-{n}.png", "size": len(PDF), "url": f"{url}&page={n}"}
                    for n in (1, 2, 3)
                ]
            result = {"files": files}
        return {
            "id": tid,
            "name": name,
            "job_id": jid,
            "operation": spec["operation"],
            "status": status,
            "code": code,
            "message": message,
            "result": result,
            "created_at": "2026-12-05T10:00:00+00:00",
        }

    def job(self, jid: str) -> dict[str, Any]:
        job = self.jobs[jid]
        tasks = [
            self._task(jid, n, name, spec)
            for n, (name, spec) in enumerate((job["input"].get("tasks") or {}).items())
        ]
        return {
            "id": jid,
            "tag": job["input"].get("tag"),
            "status": job["status"],
            "created_at": "2026-12-05T10:00:00+00:00",
            "started_at": None if job["status"] == "waiting" else "2026-12-05T10:00:01+00:00",
            "ended_at": "2026-12-05T10:00:09+00:00" if job["status"] in ENDED else None,
            "tasks": tasks[::-1],  # newest first: not the order of the graph
            "links": {"self": f"https://api.cloudconvert.com/v2/jobs/{jid}"},
        }

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("tasks"):
            errors = {"tasks": ["The tasks field is required."]}
            return json_response(
                {
                    "message": "The given data was invalid.",
                    "code": "INVALID_DATA",
                    "errors": errors,
                },
                422,
            )
        jid = self.new_id() + "a1b2c3d4"
        self.jobs[jid] = {"id": jid, "input": body, "status": "waiting", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"data": self.job(jid)}, 201)

    async def list(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        self.list_queries.append(dict(request.query_params))
        tag = request.query_params.get("filter[tag]")
        data = [
            self.job(j) for j in self.jobs if tag is None or self.jobs[j]["input"].get("tag") == tag
        ]
        meta = {"current_page": 1, "from": 1, "path": "/v2/jobs", "per_page": 100, "to": len(data)}
        links = {"first": "/v2/jobs?page=1", "last": None, "prev": None, "next": None}
        return json_response({"data": data, "links": links, "meta": meta})

    def finish(self, jid: str) -> None:
        self.jobs[jid]["status"] = "finished"

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        jid = request.path_params["jid"]
        job = self.jobs.get(jid)
        if job is None:
            return json_response({"message": "Job not found", "code": "NOT_FOUND"}, 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return json_response({"message": "Too Many Attempts.", "code": "RATE_LIMIT"}, 429)
        job["reads"] += 1
        script = _script(job)
        if job["status"] not in ENDED:
            if script == "slow":
                job["status"] = "processing"
            else:
                steps = ("waiting", "processing", "END")
                job["status"] = steps[min(job["reads"] - 1, 2)]
                if job["status"] == "END":
                    job["status"] = "error" if script == "fail" else "finished"
        return json_response({"data": self.job(jid)})

    async def file(self, request: Request) -> Response:
        self.storage_auth.append(request.headers.get("authorization"))
        return Response(PDF, media_type="application/pdf")

    async def deliver(
        self, url: str, jid: str, *, secret: str = CLOUDCONVERT_SECRET, tamper: bool = False
    ) -> int:
        """CloudConvert's webhook for `jid`, signed as its docs say (hex HMAC-SHA256 of
        the raw body); `tamper`: the body changed after signing. The answer's code."""
        event = "job.failed" if self.jobs[jid]["status"] == "error" else "job.finished"
        body = json.dumps({"event": event, "job": self.job(jid)}).encode()
        signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if tamper:
            body = body.replace(b'"finished"', b'"error"', 1)
        headers = {"Content-Type": "application/json", "CloudConvert-Signature": signature}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


ENDED = ("finished", "error")
