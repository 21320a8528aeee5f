"""Five more APIs no preset covers, each a real app on loopback answering in the
shapes its public documentation gives (tests/integration/test_unseen_more.py).

- RunPod serverless (docs.runpod.io/serverless/endpoints): `POST /v2/{endpoint}/run`
  {"input", "webhook"?} answers 200 {"id", "status": "IN_QUEUE"};
  `GET /v2/{endpoint}/status/{id}` {"id", "status", "delayTime", "executionTime",
  "output"?, "error"?}, states IN_QUEUE, IN_PROGRESS, COMPLETED, FAILED, CANCELLED,
  TIMED_OUT; `POST /v2/{endpoint}/cancel/{id}` answers {"id", "status"}. A handler
  that returns nothing completes with no `output` at all. No idempotency, no list.
- Speechmatics batch (docs.speechmatics.com, ASR REST API v2): `POST /v2/jobs`
  multipart (`config` JSON text, `data_file`) answers 201 {"id"};
  `GET /v2/jobs/{id}` {"job": JobDetails}, status running, done, rejected,
  deleted, expired, `errors` [{"timestamp", "message"}];
  `GET /v2/jobs?created_before=&limit=` {"jobs": [JobDetails]} newest first, 100
  at most; `GET /v2/jobs/{id}/transcript?format=json-v2`; `DELETE
  /v2/jobs/{id}?force=true` deletes a job, running or not, its transcript with it
  (without force a running job answers 423).
- Shotstack Edit API: `POST /edit/v1/render` (header `x-api-key`) answers 201
  {"success", "message", "response": {"message", "id"}}; `GET /edit/v1/render/{id}`
  {"success", "message", "response": {"id", "status", "error", "url", ...}},
  status queued, fetching, rendering, saving, done, failed; the file is on another
  host (its CDN), without the API key. No cancel.
- LlamaParse (LlamaCloud v1): `POST /api/parsing/upload` multipart (`file` and
  options) answers {"id", "status": "PENDING"}; `GET /api/parsing/job/{id}`
  {"id", "status", "error_code"?, "error_message"?}, status PENDING, SUCCESS, ERROR,
  PARTIAL_SUCCESS, CANCELED; `GET /api/parsing/job/{id}/result/markdown`
  {"markdown", "job_metadata"}. No cancel.
- Gladia v2 pre-recorded: `POST /v2/pre-recorded` (header `x-gladia-key`) {audio_url,
  custom_metadata?, callback?, callback_config?} answers 201 {"id", "result_url"};
  `GET /v2/pre-recorded/{id}` {"id", "status", "error_code", "custom_metadata",
  "result"}, status queued, processing, done, error; `GET /v2/pre-recorded?offset=&limit=`
  {"first", "current", "next", "items"} newest first.

Scripts: each fake reads one field of the request ("fail", "slow": stays running
until cancelled, "race": done at the read a cancel follows, anything else
succeeds after a few reads).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json

READS_TO_FINISH = 2
RUNPOD_KEY = "rp-test-key"
SPEECHMATICS_KEY = "sm-test-key"
SHOTSTACK_KEY = "ss-test-key"
LLAMA_KEY = "llx-test-key"
GLADIA_KEY = "gl-test-key"
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(64)


class _Jobs:
    """What every fake here keeps: its jobs, reads per job, counters, lost creates."""

    def __init__(self, prefix: str, *, lose_first_create: bool = False) -> None:
        self.prefix = prefix
        self.lose_first_create = lose_first_create
        self.jobs: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        self.creates = 0
        self.cancels = 0
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"{self.prefix}{next(self._ids):04d}"

    def read(self, jid: str) -> int:
        self.reads[jid] = self.reads.get(jid, 0) + 1
        return self.reads[jid]

    async def created(self) -> None:
        """Counts a create; the first hangs past the client's timeout when asked."""
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()


# --- RunPod serverless -------------------------------------------------------------


class RunPodFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("rp-", **kwargs)

    def app(self) -> Starlette:
        base = "/v2/my-endpoint"
        return Starlette(
            routes=[
                Route(f"{base}/run", self.run, methods=["POST"]),
                Route(f"{base}/status/{{jid}}", self.status, methods=["GET"]),
                Route(f"{base}/cancel/{{jid}}", self.cancel, methods=["POST"]),
            ]
        )

    @staticmethod
    def _refused(request: Request) -> Response | None:
        # RunPod takes the key bare or as a bearer token
        if request.headers.get("authorization") not in (RUNPOD_KEY, f"Bearer {RUNPOD_KEY}"):
            return json_response({"error": "Unauthorized"}, 401)
        return None

    async def run(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or "input" not in body:
            return json_response({"error": "input is required"}, 400)
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "status": "IN_QUEUE", "request": body}
        await self.created()
        return json_response({"id": jid, "status": "IN_QUEUE"})

    def _shown(self, job: dict[str, Any]) -> dict[str, Any]:
        shown = {k: v for k, v in job.items() if k != "request"}
        if job["status"] not in ("IN_QUEUE",):
            shown["delayTime"] = 812
        if job["status"] in ("COMPLETED", "FAILED", "TIMED_OUT"):
            shown["executionTime"] = 2301
        return shown

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"error": "request does not exist"}, 404)
        reads = self.read(job["id"])
        script = job["request"]["input"].get("script")
        if script == "expired" and reads > READS_TO_FINISH:
            # ended and forgotten before this read: /run results are kept 30 minutes
            del self.jobs[job["id"]]
            return json_response({"error": "request does not exist"}, 404)
        if job["status"] in ("IN_QUEUE", "IN_PROGRESS"):
            if script == "race" or (script != "slow" and reads > READS_TO_FINISH):
                self._end(job, script)
            else:
                job["status"] = "IN_PROGRESS"
        return json_response(self._shown(job))

    @staticmethod
    def _end(job: dict[str, Any], script: str | None) -> None:
        if script == "fail":
            job["status"] = "FAILED"
            job["error"] = "handler raised: CUDA out of memory"
        elif script == "timeout":
            job["status"] = "TIMED_OUT"
        elif script == "no_output":  # the handler returned None
            job["status"] = "COMPLETED"
        else:
            job["status"] = "COMPLETED"
            job["output"] = job["request"]["input"].get("echo", {"images": ["aGVsbG8="]})

    async def finish(self, jid: str) -> int:
        """Ends a job now and POSTs its status body to its `webhook`, as RunPod does
        (unsigned; the URL is the one the create gave); the receiver's status code."""
        job = self.jobs[jid]
        self._end(job, job["request"]["input"].get("script"))
        async with httpx.AsyncClient() as client:
            answer = await client.post(job["request"]["webhook"], json=self._shown(job))
        return answer.status_code

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.cancels += 1
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"error": "request does not exist"}, 404)
        if job["status"] in ("IN_QUEUE", "IN_PROGRESS"):
            job["status"] = "CANCELLED"
        return json_response({"id": job["id"], "status": job["status"]})


# --- Speechmatics batch --------------------------------------------------------------


class SpeechmaticsFixture(_Jobs):
    def __init__(self, *, others: int = 0, gone_after_delete: bool = False, **kwargs: Any) -> None:
        super().__init__("sm", **kwargs)
        # a deleted job reads 404 (else it reads status "deleted")
        self.gone_after_delete = gone_after_delete
        self.forced_deletes = 0
        self.deleted_done = 0
        self.configs: list[Any] = []
        for i in range(others):
            self._add({"type": "transcription", "tracking": {"reference": f"other-{i}"}}, "o.wav")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/jobs", self.create, methods=["POST"]),
                Route("/v2/jobs", self.listing, methods=["GET"]),
                Route("/v2/jobs/{jid}", self.status, methods=["GET"]),
                Route("/v2/jobs/{jid}", self.delete, methods=["DELETE"]),
                Route("/v2/jobs/{jid}/transcript", self.transcript, methods=["GET"]),
            ]
        )

    def named(self, reference: str) -> list[str]:
        return [
            jid
            for jid, job in self.jobs.items()
            if job["config"].get("tracking", {}).get("reference") == reference
        ]

    def _add(self, config: dict[str, Any], data_name: str) -> dict[str, Any]:
        jid = self.new_id()
        # one second apart, in creation order: the list is newest first
        n = len(self.jobs)
        job = {
            "id": jid,
            "created_at": f"2026-12-05T09:{n // 60:02d}:{n % 60:02d}.000Z",
            "data_name": data_name,
            "duration": 12,
            "status": "running",
            "config": config,
        }
        self.jobs[jid] = job
        return job

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {SPEECHMATICS_KEY}":
            return json_response({"code": 401, "error": "Permission Denied"}, 401)
        return None

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return json_response({"code": 400, "error": "Job rejected", "detail": "multipart"}, 400)
        async with request.form() as form:
            raw_config, data_file = form.get("config"), form.get("data_file")
            data_name = data_file.filename if isinstance(data_file, UploadFile) else None
        if not isinstance(raw_config, str) or data_name is None:
            return json_response(
                {"code": 400, "error": "Job rejected", "detail": "config and data_file required"},
                400,
            )
        try:
            config = json.loads(raw_config)
        except ValueError:
            return json_response(
                {"code": 400, "error": "Job rejected", "detail": "config is not JSON"}, 400
            )
        self.configs.append(config)
        job = self._add(config, data_name or "audio")
        await self.created()
        return json_response({"id": job["id"]}, 201)

    async def listing(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        limit = min(int(request.query_params.get("limit", 100)), 100)
        before = request.query_params.get("created_before")
        jobs = sorted(self.jobs.values(), key=lambda j: j["created_at"], reverse=True)
        if before is not None:
            jobs = [j for j in jobs if j["created_at"] < before]
        return json_response({"jobs": jobs[:limit]})

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None or (self.gone_after_delete and job["status"] == "deleted"):
            return json_response({"code": 404, "error": "Job not found"}, 404)
        reads = self.read(job["id"])
        script = job["data_name"].removesuffix(".wav")
        if job["status"] == "running" and (
            script == "race" or (script != "slow" and reads > READS_TO_FINISH)
        ):
            if script == "fail":
                job["status"] = "rejected"
                job["errors"] = [
                    {"timestamp": "2026-12-05T09:01:00Z", "message": "Unsupported audio format"}
                ]
            else:
                job["status"] = "done"
        return json_response({"job": job})

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.cancels += 1
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"code": 404, "error": "Job not found"}, 404)
        if job["status"] == "running":
            if request.query_params.get("force") != "true":
                return json_response(
                    {"code": 423, "error": "Resource Locked", "detail": "job is running"}, 423
                )
            self.forced_deletes += 1
        elif job["status"] == "done":
            self.deleted_done += 1  # and its transcript with it
        job["status"] = "deleted"
        return json_response({"job": job})

    async def transcript(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None or job["status"] != "done":
            return json_response({"code": 404, "error": "Job not found"}, 404)
        if request.query_params.get("format") != "json-v2":
            return Response("hello world\n", media_type="text/plain")
        return json_response(
            {
                "format": "2.9",
                "job": {"id": job["id"], "data_name": job["data_name"], "duration": 12},
                "metadata": {"created_at": job["created_at"], "type": "transcription"},
                "results": [
                    {
                        "type": "word",
                        "start_time": 0.1,
                        "end_time": 0.4,
                        "alternatives": [{"content": "hello", "confidence": 0.98}],
                    }
                ],
            }
        )


# --- Shotstack --------------------------------------------------------------------


class ShotstackFixture(_Jobs):
    STEPS = ("queued", "fetching", "rendering", "saving", "done")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("ss-", **kwargs)
        self.cdn_fetches: list[dict[str, str]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/edit/v1/render", self.render, methods=["POST"]),
                Route("/edit/v1/render/{jid}", self.status, methods=["GET"]),
                Route("/cdn/{name}", self.cdn, methods=["GET"]),
            ]
        )

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("x-api-key") != SHOTSTACK_KEY:
            return json_response({"message": "Forbidden"}, 403)
        return None

    async def render(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or "timeline" not in body or "output" not in body:
            return json_response(
                {
                    "success": False,
                    "message": "Bad Request",
                    "response": {"error": "timeline and output are required"},
                },
                400,
            )
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "status": "queued", "request": body}
        await self.created()
        return json_response(
            {
                "success": True,
                "message": "Created",
                "response": {"message": "Render Successfully Queued", "id": jid},
            },
            201,
        )

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"success": False, "message": "Not Found"}, 404)
        reads = self.read(job["id"])
        fail = job["request"]["timeline"].get("background") == "#fail"
        if job["status"] not in ("done", "failed"):
            step = self.STEPS[min(reads, len(self.STEPS) - 1)]
            job["status"] = "failed" if fail and step == "rendering" else step
        response: dict[str, Any] = {
            "id": job["id"],
            "owner": "acc-1",
            "plan": "sandbox",
            "status": job["status"],
            "created": "2026-12-05T09:00:00.000Z",
            "updated": "2026-12-05T09:00:10.000Z",
        }
        if job["status"] == "failed":
            response["error"] = "Asset https://example.com/a.mp4 could not be fetched"
        if job["status"] == "done":
            # the CDN: another host than the API's, as shotstack-api-v1-output.s3...
            port = request.url.port
            response["url"] = f"http://localhost:{port}/cdn/{job['id']}.mp4"
            response["duration"] = 5
            response["renderTime"] = 4210
        return json_response({"success": True, "message": "OK", "response": response})

    async def cdn(self, request: Request) -> Response:
        self.cdn_fetches.append(dict(request.headers))
        return Response(MP4, media_type="video/mp4")


# --- LlamaParse -------------------------------------------------------------------


class LlamaParseFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("lp-", **kwargs)
        self.uploads: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/parsing/upload", self.upload, methods=["POST"]),
                Route("/api/parsing/job/{jid}", self.status, methods=["GET"]),
                Route("/api/parsing/job/{jid}/result/markdown", self.markdown, methods=["GET"]),
            ]
        )

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {LLAMA_KEY}":
            return json_response({"detail": "Invalid API Key"}, 401)
        return None

    async def upload(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        async with request.form() as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                return json_response({"detail": "file or input_url is required"}, 400)
            fields = {k: v for k, v in form.items() if isinstance(v, str)}
            filename = upload.filename
            self.uploads.append({"filename": filename, "bytes": await upload.read(), **fields})
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "status": "PENDING", "filename": filename}
        await self.created()
        return json_response({"id": jid, "status": "PENDING"})

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"detail": "Job not found"}, 404)
        reads = self.read(job["id"])
        if job["status"] == "PENDING" and reads > READS_TO_FINISH:
            if job["filename"] == "fail.pdf":
                job["status"] = "ERROR"
                job["error_code"] = "PDF_IS_PROTECTED"
                job["error_message"] = "The PDF is password protected"
            else:
                job["status"] = "SUCCESS"
        return json_response(job)

    async def markdown(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None or job["status"] != "SUCCESS":
            return json_response({"detail": "Job not found or not done"}, 404)
        return json_response(
            {
                "markdown": "# Invoice 42\n\n| item | price |\n|---|---|\n| cat | 3 |\n",
                "job_metadata": {"credits_used": 1, "job_pages": 1, "job_is_cache_hit": False},
            }
        )


# --- Gladia ---------------------------------------------------------------------------


class GladiaFixture(_Jobs):
    def __init__(self, *, others: int = 0, **kwargs: Any) -> None:
        super().__init__("gl-", **kwargs)
        self.list_reads: list[dict[str, str]] = []
        for i in range(others):
            self._add({"audio_url": "https://a.test/o.mp3", "custom_metadata": {"n": i}}, "")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/pre-recorded", self.create, methods=["POST"]),
                Route("/v2/pre-recorded", self.listing, methods=["GET"]),
                Route("/v2/pre-recorded/{jid}", self.status, methods=["GET"]),
            ]
        )

    def named(self, operation_id: str) -> list[str]:
        return [
            jid
            for jid, job in self.jobs.items()
            if (job.get("custom_metadata") or {}).get("jobwarden_operation") == operation_id
        ]

    def _add(self, body: dict[str, Any], base: str) -> dict[str, Any]:
        jid = self.new_id()
        job = {
            "id": jid,
            "request_id": f"G-{jid}",
            "version": 2,
            "kind": "pre-recorded",
            "status": "queued",
            "created_at": "2026-12-05T09:00:00.000Z",
            "completed_at": None,
            "custom_metadata": body.get("custom_metadata"),
            "error_code": None,
            "request_params": body,
            "result": None,
        }
        self.jobs[jid] = job
        return job

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("x-gladia-key") != GLADIA_KEY:
            return json_response({"statusCode": 401, "message": "Invalid API key"}, 401)
        return None

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or "audio_url" not in body:
            return json_response(
                {"statusCode": 400, "message": "audio_url must be a URL string"}, 400
            )
        base = str(request.base_url).rstrip("/")
        job = self._add(body, base)
        await self.created()
        return json_response(
            {"id": job["id"], "result_url": f"{base}/v2/pre-recorded/{job['id']}"}, 201
        )

    async def listing(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads.append(dict(request.query_params))
        offset = int(request.query_params.get("offset", 0))
        limit = int(request.query_params.get("limit", 20))
        items = list(reversed(self.jobs.values()))
        if "custom_metadata" in request.query_params:  # every member given must match
            wanted = json.loads(request.query_params["custom_metadata"])
            items = [
                job
                for job in items
                if all((job["custom_metadata"] or {}).get(k) == v for k, v in wanted.items())
            ]
        items = items[offset : offset + limit]
        base = str(request.base_url).rstrip("/") + "/v2/pre-recorded"
        more = offset + limit < len(self.jobs)
        return json_response(
            {
                "first": f"{base}?offset=0&limit={limit}",
                "current": f"{base}?offset={offset}&limit={limit}",
                "next": f"{base}?offset={offset + limit}&limit={limit}" if more else None,
                "items": items,
            }
        )

    async def status(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"statusCode": 404, "message": "Not found"}, 404)
        reads = self.read(job["id"])
        if job["status"] in ("queued", "processing"):
            if reads > READS_TO_FINISH and not self.held:
                self._end(job)
            else:
                job["status"] = "processing"
        # the request's parameters are echoed, the callback URL (and its token) too
        return json_response(job)

    held = False

    @staticmethod
    def _end(job: dict[str, Any]) -> None:
        job["completed_at"] = "2026-12-05T09:01:00.000Z"
        if job["request_params"]["audio_url"].endswith("fail.mp3"):
            job["status"] = "error"
            job["error_code"] = 422
        else:
            job["status"] = "done"
            job["result"] = {
                "metadata": {"audio_duration": 12.5, "number_of_distinct_channels": 1},
                "transcription": {
                    "full_transcript": "hello world",
                    "languages": ["en"],
                    "utterances": [{"start": 0.1, "end": 0.9, "text": "hello world"}],
                },
            }

    async def finish(self, jid: str) -> int:
        """Ends a job and POSTs the callback to `callback_config.url`: {id, event,
        payload (the result), custom_metadata}; the receiver's status code."""
        job = self.jobs[jid]
        self._end(job)
        ok = job["status"] == "done"
        body = {
            "id": jid,
            "event": "transcription.success" if ok else "transcription.error",
            "payload": job["result"] if ok else {"error_code": job["error_code"]},
            "custom_metadata": job["custom_metadata"],
            "request_params": job["request_params"],
        }
        async with httpx.AsyncClient() as client:
            url = job["request_params"]["callback_config"]["url"]
            return (await client.post(url, json=body)).status_code
