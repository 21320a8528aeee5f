"""Amazon Transcribe batch jobs, D-ID talks, Cloudinary explicit eager transformations
and Novita AI async tasks, each a real app on loopback answering in the shapes their
public documentation gives (tests/integration/test_unseen_round57b.py). Where the
docs leave a behaviour open, the assumption is stated here.

- Amazon Transcribe (AWS JSON 1.1, SigV4 service `transcribe`, checked with
  botocore): every call `POST /`, `X-Amz-Target: Transcribe.<Operation>`,
  `Content-Type: application/x-amz-json-1.1`. StartTranscriptionJob
  {TranscriptionJobName (ours: ^[0-9a-zA-Z._-]+, 1..200), LanguageCode, Media
  {MediaFileUri}, Tags?} answers 200 {"TranscriptionJob": {..., "TranscriptionJobStatus":
  "IN_PROGRESS"}}; a name already held: 400 ConflictException ("The requested job
  name already exists. Use a different job name."). GetTranscriptionJob
  {TranscriptionJobName}: TranscriptionJobStatus QUEUED | IN_PROGRESS | FAILED |
  COMPLETED, FailureReason when failed, Transcript.TranscriptFileUri (a pre-signed S3
  link on another host, signed afresh by each Get; `expired_links`: the X-Amz-Date
  values of links that have expired, answered 403 AccessDenied) when completed;
  an unknown name: 400 BadRequestException ("The requested job couldn't be
  found..."). DeleteTranscriptionJob: 200 and an empty body for an ended job; a
  job IN_PROGRESS: 400 BadRequestException ("...it's in a non-terminal state"):
  there is no cancel. Errors {"__type", "Message"}, `x-amzn-ErrorType`;
  `limit_first`: the first Start answers 400 LimitExceededException, nothing made.
- D-ID (`Authorization: Basic <API key>`): `POST /talks` {source_url, script,
  webhook?, user_data?} answers 201 {"id": "tlk_...", "created_at", "created_by",
  "status": "created", "object": "talk"}; `GET /talks/{id}` the talk: status created
  | started | done | error | rejected, result_url when done, error {kind,
  description} when error or rejected, user_data and webhook echoed. `GET
  /talks?limit=` {"talks": [...], "token"} newest first (token: the next page's,
  absent on the last; assumed). `DELETE /talks/{id}` 200 {"deleted": 1} whatever
  its status (assumed), then 404 {"kind": "NotFoundError", "description": "talk not
  found"}. The webhook: a POST of the talk object to the given URL, unsigned (none
  documented).
- Cloudinary (Basic api_key:api_secret): `POST /v1_1/{cloud}/image/explicit`
  {public_id, type, eager, eager_async, eager_notification_url?} answers 200 the
  asset with "eager": [{"status": "processing", "batch_id"}]; an unknown public_id 404
  {"error": {"message": "Resource not found - <id>"}}. The Admin API's `GET
  /v1_1/{cloud}/resources/image/upload/{public_id}` (public_id may hold slashes:
  folders) the asset, "derived" [{transformation, format, bytes, id, url,
  secure_url}] once the eager transformation is made (no state word: assumed from
  the docs' examples). The notification (`notify`) to eager_notification_url: a
  JSON POST {notification_type: "eager", eager: [...], public_id, batch_id} signed
  X-Cld-Signature = hex SHA-1(body + X-Cld-Timestamp + api_secret),
  X-Cld-Timestamp unix seconds. No cancel.
- Novita AI (Bearer): `POST /v3/async/txt2img` {extra: {webhook?: {url}}, request:
  {...}} answers 200 {"task_id"}; `GET /v3/async/task-result?task_id=` {"extra",
  "task": {task_id, task_type, status, reason, eta, progress_percent}, "images":
  [{image_url, image_url_ttl, image_type}], "videos", "audios"}, status
  TASK_STATUS_QUEUED | PROCESSING | SUCCEED | FAILED; an unknown task 404
  {"code": 404, "reason": "TASK_NOT_FOUND", "message"} (assumed). The webhook
  {"event_type": "ASYNC_TASK_RESULT", "payload": <the task-result body>}, unsigned.
  No cancel, no list.

Scripts: Transcribe's in a Tag {Key: "script"}, D-ID's in `script.input`, Cloudinary's
in the public_id's last part, Novita's in `request.prompt`: "fail", "reject"
(D-ID), "slow" (runs until the test ends it), anything else completes after a few
reads.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any
from urllib.parse import unquote

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.aws import access_key_of, signature_refusal
from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created, _Storage


class _Store(_Storage):
    """The object store, its reads served by `stored` (the providers' own `get`
    would shadow the store's)."""

    # the links first handed out that have expired by the time they are fetched
    expired_links: frozenset[str] = frozenset()

    def storage(self) -> Starlette:
        return Starlette(routes=[Route("/bucket/{key:path}", self.stored, methods=["GET"])])

    async def stored(self, request: Request) -> Response:
        if request.query_params.get("X-Amz-Date") in self.expired_links:
            self.auth.append(request.headers.get("authorization"))
            body = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
            return Response(body, 403, media_type="application/xml")
        return await _Storage.get(self, request)


# --- Amazon Transcribe -------------------------------------------------------------

AMZ_JSON = "application/x-amz-json-1.1"
TR_KEYS = {"AKIDTRANSCRIBE0001": "transcribe/Secret+Access+Key/EXAMPLE0000000000"}
TR_REGION, TR_SERVICE = "us-east-1", "transcribe"
TR_FAILURE = "The media format provided does not match the detected media format."
TR_TEXT = "Hello and welcome to the December all hands."


def _aws(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body) if body is not None else b"",
        status_code=status,
        media_type=AMZ_JSON,
        headers={"x-amzn-RequestId": "7d7e7f70-0000-4000-8000-000000000001"},
    )


def _aws_error(kind: str, message: str, status: int = 400) -> Response:
    resp = _aws({"__type": kind, "Message": message, "message": message}, status)
    resp.headers["x-amzn-ErrorType"] = kind
    return resp


class TranscribeFixture(_Store, _Jobs):
    """Jobs by their name; the transcripts in the object store (`storage()`)."""

    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "", **kwargs)
        _Storage.__init__(self)
        self.targets: list[str] = []
        self.deletes: list[tuple[str, str]] = []
        self.signed_by: list[str] = []
        self.limit_first = False
        self.starts = 0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self.rpc, methods=["POST"])])

    async def rpc(self, request: Request) -> Response:
        raw = await request.body()
        if not request.headers.get("authorization"):
            return _aws_error("MissingAuthenticationTokenException", "Missing token", 403)
        refusal = signature_refusal(request, raw, TR_KEYS, TR_REGION, TR_SERVICE)
        if refusal is not None:
            return _aws_error(*refusal, 403)
        self.signed_by.append(access_key_of(request))
        if request.headers.get("content-type", "").split(";")[0].strip() != AMZ_JSON:
            return _aws_error("SerializationException", "Unexpected content type")
        target = request.headers.get("x-amz-target", "")
        self.targets.append(target)
        body = json.loads(raw or b"{}")
        if target == "Transcribe.StartTranscriptionJob":
            return await self.start(body)
        if target == "Transcribe.GetTranscriptionJob":
            return self.get(body)
        if target == "Transcribe.DeleteTranscriptionJob":
            return self.delete(body)
        return _aws_error("UnknownOperationException", f"unknown operation {target!r}")

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["body"]
        out: dict[str, Any] = {
            "TranscriptionJobName": job["id"],
            "TranscriptionJobStatus": job["state"],
            "LanguageCode": body.get("LanguageCode"),
            "Media": body.get("Media"),
            "CreationTime": 1765015200.123,
            "StartTime": 1765015200.456,
            "Tags": body.get("Tags", []),
        }
        if job["state"] == "FAILED":
            out["FailureReason"] = TR_FAILURE
        if job["state"] == "COMPLETED":
            out["CompletionTime"] = 1765015260.789
            out["Transcript"] = {"TranscriptFileUri": job["uri"]}
        return {"TranscriptionJob": out}

    async def start(self, body: dict[str, Any]) -> Response:
        self.starts += 1
        if self.limit_first and self.starts == 1:
            return _aws_error(
                "LimitExceededException",
                "You've either sent too many requests or your input file is too long.",
            )
        name = body.get("TranscriptionJobName")
        if not isinstance(name, str) or not name or len(name) > 200:
            return _aws_error("BadRequestException", "TranscriptionJobName is required")
        if not all(c.isalnum() or c in "._-" for c in name):
            return _aws_error("BadRequestException", "TranscriptionJobName: pattern mismatch")
        if name in self.jobs:
            self.creates += 1
            return _aws_error(
                "ConflictException",
                "The requested job name already exists. Use a different job name.",
            )
        script = next((t["Value"] for t in body.get("Tags", []) if t.get("Key") == "script"), None)
        self.jobs[name] = {
            "id": name,
            "body": body,
            "state": "QUEUED",
            "reads": 0,
            "script": script,
            "uri": "",
        }
        await _created(self)
        return _aws(self.job(self.jobs[name]))

    def get(self, body: dict[str, Any]) -> Response:
        job = self.jobs.get(str(body.get("TranscriptionJobName")))
        if job is None:
            return _aws_error(
                "BadRequestException",
                "The requested job couldn't be found. "
                "Check the job name and try your request again.",
            )
        self.reads += 1
        _advance(
            job, ["QUEUED", "IN_PROGRESS"], "FAILED" if job["script"] == "fail" else "COMPLETED"
        )
        if job["state"] == "COMPLETED":
            # each Get signs the transcript's link afresh (it expires: 15 minutes)
            signed = self.put(
                f"{job['id']}/asrOutput.json", transcript(job["id"]), "application/json"
            )
            job["uri"] = f"{signed}&X-Amz-Date=20261206T1000{self.reads:02d}Z"
        return _aws(self.job(job))

    def delete(self, body: dict[str, Any]) -> Response:
        name = str(body.get("TranscriptionJobName"))
        job = self.jobs.get(name)
        if job is not None:
            self.deletes.append((name, job["state"]))
        if job is None or job["state"] not in ("COMPLETED", "FAILED"):
            return _aws_error(
                "BadRequestException",
                "The request couldn't be completed: the job doesn't exist or it's in a "
                "non-terminal state.",
            )
        del self.jobs[name]
        return _aws(None)


def transcript(name: str) -> bytes:
    """The transcript file as Transcribe writes it (asrOutput.json)."""
    words = TR_TEXT.rstrip(".").split()
    items = [
        {
            "start_time": f"{n * 0.5:.2f}",
            "end_time": f"{n * 0.5 + 0.4:.2f}",
            "alternatives": [{"confidence": "0.99", "content": w}],
            "type": "pronunciation",
        }
        for n, w in enumerate(words)
    ]
    doc = {
        "jobName": name,
        "accountId": "123456789012",
        "status": "COMPLETED",
        "results": {"transcripts": [{"transcript": TR_TEXT}], "items": items},
    }
    return json.dumps(doc).encode()


# --- D-ID talks --------------------------------------------------------------------

DID_KEY = "ZGlkLXVzZXJAZXhhbXBsZS5jb20:didsecret0123456789"
DID_ERROR = ("FaceError", "Failed to detect a face in the source image")
DID_REJECTED = ("ContentModeration", "The source image was flagged by content moderation")
DID_VIDEO = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64


class DidFixture(_Store, _Jobs):
    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "tlk_Xq3vN8", **kwargs)
        _Storage.__init__(self)
        self.bodies: list[dict[str, Any]] = []
        self.list_reads = 0

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:04d}-aBcD"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/talks", self.create, methods=["POST"]),
                Route("/talks", self.list_talks, methods=["GET"]),
                Route("/talks/{tid}", self.get, methods=["GET"]),
                Route("/talks/{tid}", self.delete, methods=["DELETE"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {DID_KEY}":
            return json_response({"message": "Unauthorized"}, 401)
        return None

    @staticmethod
    def _missing() -> Response:
        return json_response({"kind": "NotFoundError", "description": "talk not found"}, 404)

    def talk(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["body"]
        out: dict[str, Any] = {
            "id": job["id"],
            "object": "talk",
            "created_at": "2026-12-06T10:00:00.000Z",
            "created_by": "google-oauth2|1234567890",
            "source_url": body.get("source_url"),
            "status": job["state"],
            "user_data": body.get("user_data"),
            "webhook": body.get("webhook"),
            "modified_at": "2026-12-06T10:00:05.000Z",
        }
        if job["state"] in ("started", "done"):
            out["started_at"] = "2026-12-06T10:00:02.000Z"
        if job["state"] == "done":
            out |= {
                "result_url": job["url"],
                "duration": 3.2,
                "audio_url": "https://d-id.example/a.mp3",
            }
        if job["state"] == "error":
            out["error"] = {"kind": DID_ERROR[0], "description": DID_ERROR[1]}
        if job["state"] == "rejected":
            out["error"] = {"kind": DID_REJECTED[0], "description": DID_REJECTED[1]}
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        self.bodies.append(body)
        if not isinstance(body, dict) or "source_url" not in body or "script" not in body:
            return json_response(
                {"kind": "ValidationError", "description": "source_url and script are required"},
                400,
            )
        tid = self.new_id()
        self.jobs[tid] = {
            "id": tid,
            "body": body,
            "state": "created",
            "reads": 0,
            "script": (body.get("script") or {}).get("input"),
            "url": "",
        }
        await _created(self)
        job = self.jobs[tid]
        return json_response(
            {
                "id": tid,
                "created_at": "2026-12-06T10:00:00.000Z",
                "created_by": "google-oauth2|1234567890",
                "status": job["state"],
                "object": "talk",
            },
            201,
        )

    async def list_talks(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_reads += 1
        limit = int(request.query_params.get("limit") or 100)
        ids = list(reversed(self.jobs))
        after = request.query_params.get("token")
        start = ids.index(after) + 1 if after in ids else 0
        shown = ids[start : start + limit]
        out: dict[str, Any] = {"talks": [self.talk(self.jobs[t]) for t in shown]}
        if start + limit < len(ids):
            out["token"] = shown[-1]
        return json_response(out)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["tid"])
        if job is None:
            return self._missing()
        self.reads += 1
        final = {"fail": "error", "reject": "rejected"}.get(job["script"] or "", "done")
        _advance(job, ["created", "started"], final)
        if job["state"] == "done" and not job["url"]:
            job["url"] = self.put(f"{job['id']}.mp4", DID_VIDEO, "video/mp4")
        return json_response(self.talk(job))

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.pop(request.path_params["tid"], None)
        if job is None:
            return self._missing()
        self.cancels.append((job["id"], job["state"]))
        return json_response({"deleted": 1})

    def finish(self, tid: str) -> None:
        job = self.jobs[tid]
        job["state"] = "done"
        job["url"] = self.put(f"{tid}.mp4", DID_VIDEO, "video/mp4")

    async def deliver(self, url: str, tid: str) -> int:
        """D-ID's webhook: the talk object POSTed to the URL given, nothing signed."""
        async with httpx.AsyncClient() as client:
            resp = await client.post(url, json=self.talk(self.jobs[tid]))
            return resp.status_code


# --- Cloudinary --------------------------------------------------------------------

CLD_CLOUD = "demo-cloud"
CLD_KEY, CLD_SECRET = "614335564976464", "cld-api-secret-0123456789abcdef"
CLD_EAGER = "c_scale,w_320"
CLD_IMAGE = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x01" * 64
CLD_ROOT = f"/v1_1/{CLD_CLOUD}"


def cld_signature(body: bytes, timestamp: str, secret: str, algorithm: str = "sha1") -> str:
    """X-Cld-Signature as Cloudinary's SDKs compute and verify it
    (verifyNotificationSignature): the hex digest of body + timestamp + api_secret."""
    return hashlib.new(algorithm, body + timestamp.encode() + secret.encode()).hexdigest()


class CloudinaryFixture(_Store, _Jobs):
    """Assets by public_id (made by `upload`); an explicit eager call makes the
    derived asset after a few reads of the asset."""

    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "", **kwargs)
        _Storage.__init__(self)
        self.bodies: list[dict[str, Any]] = []
        self.assets: set[str] = set()

    def upload(self, public_id: str) -> None:
        self.assets.add(public_id)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(f"{CLD_ROOT}/image/explicit", self.explicit, methods=["POST"]),
                Route(
                    f"{CLD_ROOT}/resources/image/upload/{{pid:path}}",
                    self.resource,
                    methods=["GET"],
                ),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        import base64

        wanted = base64.b64encode(f"{CLD_KEY}:{CLD_SECRET}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {wanted}":
            return json_response({"error": {"message": "Invalid Signature"}}, 401)
        return None

    def asset(self, job: dict[str, Any], *, eager: bool) -> dict[str, Any]:
        pid = job["id"]
        out: dict[str, Any] = {
            "asset_id": "b5e6d2b39ba3e0869d67141ba7dba6cf",
            "public_id": pid,
            "version": 1765015200,
            "format": "jpg",
            "resource_type": "image",
            "type": "upload",
            "bytes": 120253,
            "width": 864,
            "height": 576,
            "url": f"http://res.cloudinary.com/{CLD_CLOUD}/image/upload/v1765015200/{pid}.jpg",
            "secure_url": f"https://res.cloudinary.com/{CLD_CLOUD}/image/upload/v1765015200/{pid}.jpg",
        }
        if eager:
            out["eager"] = [{"status": "processing", "batch_id": job["batch_id"]}]
        else:
            out["derived"] = (
                [
                    {
                        "transformation": CLD_EAGER,
                        "format": "jpg",
                        "bytes": len(CLD_IMAGE),
                        "id": "8267a869b62a93a59248f35d7f124c1f",
                        "url": job["url"].replace("https", "http", 1),
                        "secure_url": job["url"],
                    }
                ]
                if job["state"] == "done"
                else []
            )
        return out

    async def explicit(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        self.bodies.append(body)
        pid = str((body or {}).get("public_id"))
        if pid not in self.assets:
            return json_response({"error": {"message": f"Resource not found - {pid}"}}, 404)
        self.jobs[pid] = {
            "id": pid,
            "body": body,
            "state": "processing",
            "reads": 0,
            "script": pid.rsplit("/", 1)[-1],
            "batch_id": f"b{len(self.jobs) + 1:03d}e2f1a9c8d7",
            "url": "",
        }
        await _created(self)
        return json_response(self.asset(self.jobs[pid], eager=True))

    async def resource(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        pid = unquote(request.path_params["pid"])
        job = self.jobs.get(pid)
        if job is None:
            return json_response({"error": {"message": f"Resource not found - {pid}"}}, 404)
        self.reads += 1
        if job["script"] != "fail":  # a failed eager is never derived: told only by notification
            _advance(job, ["processing", "deriving"], "done")
        if job["state"] == "done" and not job["url"]:
            job["url"] = self.put(f"{CLD_EAGER}/{pid}.jpg", CLD_IMAGE, "image/jpeg")
        return json_response(self.asset(job, eager=False))

    def finish(self, pid: str) -> None:
        job = self.jobs[pid]
        job["state"] = "done"
        job["url"] = self.put(f"{CLD_EAGER}/{pid}.jpg", CLD_IMAGE, "image/jpeg")

    async def notify(self, url: str, pid: str, *, secret: str = CLD_SECRET) -> int:
        """The eager notification as Cloudinary sends it, signed with the api_secret."""
        job = self.jobs[pid]
        event = {
            "notification_type": "eager",
            "eager": [{"transformation": CLD_EAGER, "secure_url": job["url"], "bytes": 1}],
            "public_id": pid,
            "batch_id": job["batch_id"],
        }
        body = json.dumps(event).encode()
        ts = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Cld-Timestamp": ts,
            "X-Cld-Signature": cld_signature(body, ts, secret),
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


# --- Novita AI ---------------------------------------------------------------------

NV_KEY = "sk_novita_0123456789abcdef"
NV_FAILURE = "NSFW content detected in the generated image"
NV_IMAGE = b"\x89PNG\r\n\x1a\n" + b"\x02" * 64


class NovitaFixture(_Store, _Jobs):
    def __init__(self, **kwargs: Any) -> None:
        _Jobs.__init__(self, "f6aec953-2e81-4e8b-938e-", **kwargs)
        _Storage.__init__(self)
        self.bodies: list[dict[str, Any]] = []

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:012d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v3/async/txt2img", self.create, methods=["POST"]),
                Route("/v3/async/task-result", self.get, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {NV_KEY}":
            return json_response(
                {"code": 401, "reason": "INVALID_API_KEY", "message": "invalid api key"}, 401
            )
        return None

    def result(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        return {
            "extra": {"seed": "2371934", "enable_nsfw_detection": False},
            "task": {
                "task_id": job["id"],
                "task_type": "TXT_TO_IMG",
                "status": state,
                "reason": NV_FAILURE if state == "TASK_STATUS_FAILED" else "",
                "eta": 0,
                "progress_percent": 100 if state == "TASK_STATUS_SUCCEED" else 40,
            },
            "images": [
                {"image_url": url, "image_url_ttl": 3600, "image_type": "png"}
                for url in job["urls"]
            ],
            "videos": [],
            "audios": [],
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        self.bodies.append(body)
        if not isinstance(body, dict) or "request" not in body:
            return json_response(
                {"code": 400, "reason": "INVALID_REQUEST_BODY", "message": "request is required"},
                400,
            )
        tid = self.new_id()
        self.jobs[tid] = {
            "id": tid,
            "body": body,
            "state": "TASK_STATUS_QUEUED",
            "reads": 0,
            "script": body["request"].get("prompt"),
            "urls": [],
        }
        await _created(self)
        return json_response({"task_id": tid})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.query_params.get("task_id", ""))
        if job is None:
            return json_response(
                {"code": 404, "reason": "TASK_NOT_FOUND", "message": "task not found"}, 404
            )
        self.reads += 1
        final = "TASK_STATUS_FAILED" if job["script"] == "fail" else "TASK_STATUS_SUCCEED"
        _advance(job, ["TASK_STATUS_QUEUED", "TASK_STATUS_PROCESSING"], final)
        if job["state"] == "TASK_STATUS_SUCCEED" and not job["urls"]:
            self.finish(job["id"])
        return json_response(self.result(job))

    def finish(self, tid: str) -> None:
        job = self.jobs[tid]
        job["state"] = "TASK_STATUS_SUCCEED"
        wanted = int(job["body"]["request"].get("image_num") or 1)
        job["urls"] = [
            self.put(f"{tid}/image_0{n}.png", NV_IMAGE + bytes([n]), "image/png")
            for n in range(1, wanted + 1)
        ]

    async def deliver(self, url: str, tid: str) -> int:
        """The ASYNC_TASK_RESULT event, unsigned."""
        event = {"event_type": "ASYNC_TASK_RESULT", "payload": self.result(self.jobs[tid])}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, json=event)).status_code
