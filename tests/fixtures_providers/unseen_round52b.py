"""Azure AI Speech batch transcription, Kling AI's video generation and Hume AI's
batch expression measurement, each a real app on loopback answering in the shapes
their public documentation gives (tests/integration/test_unseen_round52b.py).

- Azure AI Speech (REST v3.2, azure-rest-api-specs
  specification/cognitiveservices/data-plane/Speech/SpeechToText/stable/v3.2):
  `POST /speechtotext/v3.2/transcriptions` (`Ocp-Apim-Subscription-Key`; JSON
  {"contentUrls", "locale", "displayName", "properties"}) answers 201 with the
  transcription {"self": absolute URL, "model", "links": {"files"}, "properties",
  "lastActionDateTime", "status": "NotStarted", "createdDateTime", "locale",
  "displayName"} and `Location` (the same URL); `GET self` the transcription
  (NotStarted, Running, Succeeded, Failed; a failure's `properties.error` {"code",
  "message"}); `GET /speechtotext/v3.2/transcriptions?skip=&top=` {"values": [...],
  "@nextLink"?}; `GET {links.files}` {"values": [{"self", "name", "kind":
  "Transcription" | "TranscriptionReport", "properties": {"size"}, "createdDateTime",
  "links": {"contentUrl": SAS URL on blob storage}}], "@nextLink"?} (here a file a
  page); `DELETE self` 204. Errors {"code", "message"}; 429 with `Retry-After`. Web
  hooks: POST {"self": the transcription's URL} with `X-MicrosoftSpeechServices-Event:
  TranscriptionCompletion` and `X-MicrosoftSpeechServices-Signature`, the base64
  HMAC-SHA256 of the body under the hook's secret.
- Kling AI (app.klingai.com/global/dev/document-api): every call carries `Authorization:
  Bearer <JWT>`, HS256 under the secret key, {"iss": access key, "exp", "nbf"}, made by
  the caller (30 minutes in Kling's sample); refused 401 {"code": 1004, "message":
  "token expired"} etc. `POST /v1/videos/text2video` {"model_name", "prompt",
  "external_task_id"?, "callback_url"?} answers 200 {"code": 0, "message": "SUCCEED",
  "request_id", "data": {"task_id", "task_status": "submitted", "task_info":
  {"external_task_id"}, "created_at", "updated_at"}}; `GET
  /v1/videos/text2video/{task_id or external_task_id}` the same envelope, `data` the
  task (processing, succeed: `task_result.videos[]` {"id", "url", "duration"};
  failed: `task_status_msg`); an unknown task 404 {"code": 1203}. 429 {"code": 1302,
  "message": "API request too fast"}. Callbacks POST the task (`data`'s shape),
  unsigned, to `callback_url`.
- Hume AI (dev.hume.ai, Expression Measurement batch): `X-Hume-Api-Key`; `POST
  /v0/batch/jobs` {"urls", "models", "callback_url"?, "notify"} answers 200
  {"job_id"}; `GET /v0/batch/jobs/{id}` {"job_id", "request", "state": {"status":
  QUEUED | IN_PROGRESS | COMPLETED | FAILED, "created_timestamp_ms", ...; COMPLETED:
  "num_predictions", "num_errors"; FAILED: "message"}, "type": "INFERENCE",
  "user_id"}; `GET /v0/batch/jobs/{id}/predictions` a JSON array, one element a
  source; the callback POSTs {"job_id", "status", "predictions" | "message"},
  unsigned, to `callback_url`.

Scripts: the create body's `script` ("fail"; "slow": runs until the test ends it;
anything else succeeds after a few reads).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import httpx
import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json
from tests.fixtures_providers.unseen_media import MP4, _Jobs

AZURE_KEY = "azure-speech-test-subscription-key"
AZURE_HOOK_SECRET = "azure-speech-hook-secret-0123456789"
KLING_ACCESS_KEY = "kling-test-access-key"
KLING_SECRET_KEY = "kling-test-secret-key-0123456789abcdef"
KLING_TOKEN = "kling-callback-token-0123456789abcdef"
HUME_KEY = "hume-test-api-key"
HUME_TOKEN = "hume-callback-token-0123456789abcdef"

TRANSCRIPT = {
    "source": "https://contoso.example/audio.wav",
    "durationInTicks": 42000000,
    "combinedRecognizedPhrases": [{"channel": 0, "display": "Hello world."}],
}
AZURE_FAILURE = {"code": "InvalidData", "message": "The audio file could not be decoded."}
KLING_FAILURE = "Failure to pass the risk control system"
HUME_FAILURE = "The URL https://example.invalid/face.zip could not be downloaded."
PREDICTIONS: list[dict[str, Any]] = [
    {
        "source": {"type": "url", "url": "https://hume-tutorials.s3.amazonaws.com/faces.zip"},
        "results": {"predictions": [{"file": "faces/100.jpg", "models": {"face": {}}}]},
        "errors": [],
    }
]


def _script(job: dict[str, Any]) -> str | None:
    body = job["input"]
    return body.get("script") if isinstance(body, dict) else None


def _advance(job: dict[str, Any], steps: tuple[str, str, str, str]) -> str:
    """pending, running, then succeeded (or failed for "fail") at the third read;
    "slow" stays running until the test ends it."""
    pending, running, done, failed = steps
    job["reads"] += 1
    if job["state"] in (done, failed):
        return str(job["state"])
    script = _script(job)
    if job["reads"] == 1:
        job["state"] = pending
    elif script == "slow" or job["reads"] == 2:
        job["state"] = running
    else:
        job["state"] = failed if script == "fail" else done
    return str(job["state"])


# --- Azure AI Speech --------------------------------------------------------------


class AzureSpeechFixture(_Jobs):
    """Transcriptions; `url` (set by the test once served) is what `self` links name;
    `storage`: the blob host of the files' SAS URLs."""

    ROOT = "/speechtotext/v3.2/transcriptions"

    def __init__(self, *, others: int = 0, **kwargs: Any) -> None:
        super().__init__("ba7ea6f5-3065-40b7-b49a-a90f4858", **kwargs)
        self.url = ""
        self.storage_url = ""
        self.deletes: list[str] = []
        self.list_queries: list[dict[str, str]] = []
        self.file_reads: list[str | None] = []  # the key each files page was read with
        self.blob_auth: list[str | None] = []
        self.blob_reads: list[str] = []  # the file names read from storage
        self.throttled_files = 0  # later files pages answered 429 before one answers
        for n in range(others):  # made elsewhere: another tool, the portal
            tid = f"0ther000-0000-0000-0000-{n:012d}"
            self.jobs[tid] = {"id": tid, "input": {"displayName": f"portal {n}"}}
            self.jobs[tid] |= {"state": "Succeeded", "reads": 0}

    def app(self) -> Starlette:
        root = self.ROOT
        return Starlette(
            routes=[
                Route(root, self.create, methods=["POST"]),
                Route(root, self.list, methods=["GET"]),
                Route(root + "/{tid}", self.get, methods=["GET"]),
                Route(root + "/{tid}", self.delete, methods=["DELETE"]),
                Route(root + "/{tid}/files", self.files, methods=["GET"]),
            ]
        )

    def storage(self) -> Starlette:
        return Starlette(routes=[Route("/artifacts/{name}", self.blob)])

    @staticmethod
    def _error(code: str, message: str, status: int, **headers: str) -> Response:
        return json_response({"code": code, "message": message}, status, headers=headers)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("ocp-apim-subscription-key") != AZURE_KEY:
            return self._error("Unauthorized", "Access denied due to invalid subscription key", 401)
        return None

    def self_url(self, tid: str) -> str:
        return f"{self.url}{self.ROOT}/{tid}"

    def transcription(self, tid: str) -> dict[str, Any]:
        job = self.jobs[tid]
        properties: dict[str, Any] = {
            "diarizationEnabled": False,
            "wordLevelTimestampsEnabled": False,
            "punctuationMode": "DictatedAndAutomatic",
            "profanityFilterMode": "Masked",
        }
        if job["state"] == "Succeeded":
            properties["duration"] = "PT4.2S"
        if job["state"] == "Failed":
            properties["error"] = AZURE_FAILURE
        return {
            "self": self.self_url(tid),
            "model": {"self": f"{self.url}/speechtotext/v3.2/models/base/827712a5"},
            "links": {"files": self.self_url(tid) + "/files"},
            "properties": properties,
            "lastActionDateTime": "2026-12-06T03:00:05Z",
            "status": job["state"],
            "createdDateTime": "2026-12-06T03:00:00Z",
            "locale": "en-US",
            "displayName": job["input"].get("displayName"),
        }

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        if self.throttled_creates:
            self.throttled_creates -= 1
            return self._error(
                "TooManyRequests", "Rate limit is exceeded.", 429, **{"Retry-After": "1"}
            )
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("displayName") or not body.get("locale"):
            return self._error("InvalidPayload", "The displayName and locale are required.", 400)
        tid = self.new_id()
        self.jobs[tid] = {"id": tid, "input": body, "state": "NotStarted", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        headers = {"Location": self.self_url(tid)}
        return json_response(self.transcription(tid), 201, headers=headers)

    async def list(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        self.list_queries.append(dict(request.query_params))
        skip = int(request.query_params.get("skip", "0"))
        top = int(request.query_params.get("top", "100"))
        ids = list(self.jobs)
        page = ids[skip : skip + top]
        body: dict[str, Any] = {"values": [self.transcription(t) for t in page]}
        if skip + top < len(ids):
            body["@nextLink"] = f"{self.url}{self.ROOT}?skip={skip + top}&top={top}"
        return json_response(body)

    def finish(self, tid: str) -> None:
        self.jobs[tid]["state"] = "Succeeded"

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        tid = request.path_params["tid"]
        job = self.jobs.get(tid)
        if job is None:
            return self._error("NotFound", f"The entity {tid} was not found.", 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return self._error(
                "TooManyRequests", "Rate limit is exceeded.", 429, **{"Retry-After": "1"}
            )
        _advance(job, ("NotStarted", "Running", "Succeeded", "Failed"))
        return json_response(self.transcription(tid))

    async def delete(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        tid = request.path_params["tid"]
        if tid in self.jobs:
            self.cancels.append((tid, self.jobs[tid]["state"]))
            del self.jobs[tid]
        self.deletes.append(tid)
        return Response(status_code=204)

    def _file(self, tid: str, name: str, kind: str) -> dict[str, Any]:
        sas = "st=2026-12-06T03%3A00Z&se=2026-12-06T15%3A00Z&sp=rl&sv=2021-08-06&sr=b&sig=c2ln"
        return {
            "self": f"{self.self_url(tid)}/files/{hashlib.md5(name.encode()).hexdigest()}",
            "name": name,
            "kind": kind,
            "properties": {"size": 200},
            "createdDateTime": "2026-12-06T03:00:05Z",
            "links": {"contentUrl": f"{self.storage_url}/artifacts/{tid}-{name}?{sas}"},
        }

    async def files(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        tid = request.path_params["tid"]
        self.file_reads.append(request.headers.get("ocp-apim-subscription-key"))
        if tid not in self.jobs:
            return self._error("NotFound", f"The entity {tid} was not found.", 404)
        if self.throttled_files and request.query_params.get("skip", "0") != "0":
            self.throttled_files -= 1
            return self._error(
                "TooManyRequests", "Rate limit is exceeded.", 429, **{"Retry-After": "1"}
            )
        every = [
            self._file(tid, "contenturl_0.json", "Transcription"),
            self._file(tid, "report.json", "TranscriptionReport"),
        ]
        skip = int(request.query_params.get("skip", "0"))
        top = int(request.query_params.get("top", "1"))  # a file a page: paging shows
        body: dict[str, Any] = {"values": every[skip : skip + top]}
        if skip + top < len(every):
            body["@nextLink"] = f"{self.self_url(tid)}/files?skip={skip + top}&top={top}"
        return json_response(body)

    async def blob(self, request: Request) -> Response:
        self.blob_auth.append(request.headers.get("ocp-apim-subscription-key"))
        self.blob_reads.append(request.path_params["name"].rsplit("-", 1)[1])
        return json_response(TRANSCRIPT)

    async def deliver(self, url: str, tid: str, *, secret: str = AZURE_HOOK_SECRET) -> int:
        """The completion web hook for `tid`, signed as Azure signs it; the answer's code."""
        body = json.dumps({"self": self.self_url(tid)}).encode()
        signature = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest())
        headers = {
            "Content-Type": "application/json",
            "X-MicrosoftSpeechServices-Event": "TranscriptionCompletion",
            "X-MicrosoftSpeechServices-Signature": signature.decode(),
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


# --- Kling AI ------------------------------------------------------------------------


def kling_token(*, issued: int | None = None, lifetime: int = 1800) -> str:
    """A token as Kling's sample makes it: HS256 under the secret key, iss the access
    key, valid from 5 s before `issued` for `lifetime` seconds."""
    now = int(time.time()) if issued is None else issued
    claims = {"iss": KLING_ACCESS_KEY, "exp": now + lifetime, "nbf": now - 5}
    return jwt.encode(claims, KLING_SECRET_KEY, algorithm="HS256", headers={"typ": "JWT"})


class KlingFixture(_Jobs):
    """Kling's text-to-video tasks; `cdn_url`: where the videos are (another origin);
    `tokens`: every token a call was accepted with."""

    ROOT = "/v1/videos/text2video"

    def __init__(self, *, drop_first_create: bool = False, **kwargs: Any) -> None:
        super().__init__("7859123456789", **kwargs)
        # the first create never arrives (no task made), and no answer comes
        self.drop_first_create = drop_first_create
        self.create_calls = 0
        self.cdn_url = ""
        self.tokens: list[str] = []
        self.refusals: list[int] = []  # Kling's code of each refused token
        self.cdn_auth: list[str | None] = []
        self.by_external: dict[str, str] = {}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(self.ROOT, self.create, methods=["POST"]),
                Route(self.ROOT + "/{tid}", self.get, methods=["GET"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/kcdn/{name}", self.video)])

    @staticmethod
    def _error(code: int, message: str, status: int, **headers: str) -> Response:
        body = {"code": code, "message": message, "request_id": "a1b2c3d4-req"}
        return json_response(body, status, headers=headers)

    def _refused(self, request: Request) -> Response | None:
        """Kling's own checks: 1001 no Authorization, 1002 invalid, 1003 not yet
        valid, 1004 expired (all HTTP 401)."""
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer "):
            self.refusals.append(1001)
            return self._error(1001, "Authorization is empty", 401)
        token = auth.removeprefix("Bearer ")
        try:
            claims = jwt.decode(
                token, KLING_SECRET_KEY, algorithms=["HS256"], options={"require": ["exp", "nbf"]}
            )
        except jwt.ExpiredSignatureError:
            self.refusals.append(1004)
            return self._error(1004, "Authorization is expired", 401)
        except jwt.ImmatureSignatureError:
            self.refusals.append(1003)
            return self._error(1003, "Authorization is not yet valid", 401)
        except jwt.InvalidTokenError:
            self.refusals.append(1002)
            return self._error(1002, "Authorization is invalid", 401)
        if claims.get("iss") != KLING_ACCESS_KEY:
            self.refusals.append(1002)
            return self._error(1002, "Authorization is invalid", 401)
        self.tokens.append(token)
        return None

    def task(self, tid: str) -> dict[str, Any]:
        job = self.jobs[tid]
        body: dict[str, Any] = {
            "task_id": tid,
            "task_status": job["state"],
            "task_info": {"external_task_id": job["input"].get("external_task_id")},
            "created_at": 1765000000000,
            "updated_at": 1765000005000,
        }
        if job["state"] == "failed":
            body["task_status_msg"] = KLING_FAILURE
        if job["state"] == "succeed":
            url = f"{self.cdn_url}/kcdn/{tid}.mp4?x-oss-signature=abc"
            videos = [{"id": f"v{tid}", "url": url, "duration": "5.0"}]
            body["task_result"] = {"videos": [] if _script(job) == "novideo" else videos}
        return body

    def _envelope(self, tid: str) -> Response:
        body = {"code": 0, "message": "SUCCEED", "request_id": "a1b2c3d4-req"}
        return json_response(body | {"data": self.task(tid)})

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        if self.throttled_creates:
            self.throttled_creates -= 1
            return self._error(1302, "API request too fast", 429, **{"Retry-After": "1"})
        body = await read_json(request)
        self.create_calls += 1
        if self.drop_first_create and self.create_calls == 1:
            await hang()
            return Response(status_code=502)
        if not isinstance(body, dict) or not body.get("prompt"):
            return self._error(1201, "prompt is required", 400)
        external = body.get("external_task_id")
        if external and external in self.by_external:
            return self._error(1201, "external_task_id already exists", 400)
        tid = self.new_id()
        self.jobs[tid] = {"id": tid, "input": body, "state": "submitted", "reads": 0}
        if external:
            self.by_external[external] = tid
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return self._envelope(tid)

    def finish(self, tid: str) -> None:
        self.jobs[tid]["state"] = "succeed"

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        key = request.path_params["tid"]
        tid = key if key in self.jobs else self.by_external.get(key)
        if tid is None:
            return self._error(1203, "task not found", 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return self._error(1302, "API request too fast", 429, **{"Retry-After": "1"})
        _advance(self.jobs[tid], ("submitted", "processing", "succeed", "failed"))
        return self._envelope(tid)

    async def video(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("authorization"))
        return Response(MP4, media_type="video/mp4")

    async def call_back(self, tid: str, url: str | None = None) -> int:
        """Kling's callback: the task POSTed, unsigned, to `callback_url`."""
        target = url or self.jobs[tid]["input"]["callback_url"]
        body = json.dumps(self.task(tid)).encode()
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                target, content=body, headers={"Content-Type": "application/json"}
            )
        return answer.status_code


# --- Hume AI ---------------------------------------------------------------------------


class HumeFixture(_Jobs):
    """Hume's batch jobs. Scripts also: "partial" (COMPLETED, one of two sources
    unreadable), "allbad" (COMPLETED, every source unreadable)."""

    ROOT = "/v0/batch/jobs"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("4dc8a5d8-1f3e-4c8b-9b0a-2f6e", **kwargs)
        self.prediction_reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(self.ROOT, self.create, methods=["POST"]),
                Route(self.ROOT + "/{jid}", self.get, methods=["GET"]),
                Route(self.ROOT + "/{jid}/predictions", self.predictions, methods=["GET"]),
            ]
        )

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("x-hume-api-key") != HUME_KEY:
            fault = {"faultstring": "Invalid ApiKey", "detail": {"errorcode": "InvalidApiKey"}}
            return json_response({"fault": fault}, 401)
        return None

    def job(self, jid: str) -> dict[str, Any]:
        job = self.jobs[jid]
        state: dict[str, Any] = {"status": job["state"], "created_timestamp_ms": 1765000000000}
        if job["state"] != "QUEUED":
            state["started_timestamp_ms"] = 1765000001000
        if job["state"] in ("COMPLETED", "FAILED"):
            state["ended_timestamp_ms"] = 1765000009000
        if job["state"] == "COMPLETED":
            # counted by file: a source (faces.zip) holds several
            errors = {"partial": 1, "allbad": 2}.get(_script(job) or "", 0)
            state |= {"num_predictions": 5 * (2 - errors), "num_errors": errors}
        if job["state"] == "FAILED":
            state["message"] = HUME_FAILURE
        request = {k: v for k, v in job["input"].items() if k != "script"}
        request = {"text": [], "files": [], "notify": False} | request
        return {
            "job_id": jid,
            "request": request,
            "state": state,
            "type": "INFERENCE",
            "user_id": "0f1e2d3c-user",
        }

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        if self.throttled_creates:
            self.throttled_creates -= 1
            return json_response({"message": "Too many requests"}, 429, {"Retry-After": "1"})
        body = await read_json(request)
        if not isinstance(body, dict) or not (body.get("urls") or body.get("text")):
            return json_response({"message": "Must provide at least one of urls, text"}, 400)
        jid = self.new_id()
        self.jobs[jid] = {"id": jid, "input": body, "state": "QUEUED", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"job_id": jid})

    def finish(self, jid: str) -> None:
        self.jobs[jid]["state"] = "COMPLETED"

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        jid = request.path_params["jid"]
        if jid not in self.jobs:
            return json_response({"message": f"Job {jid} not found"}, 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return json_response({"message": "Too many requests"}, 429, {"Retry-After": "1"})
        _advance(self.jobs[jid], ("QUEUED", "IN_PROGRESS", "COMPLETED", "FAILED"))
        return json_response(self.job(jid))

    def prediction_list(self, jid: str) -> list[dict[str, Any]]:
        script = _script(self.jobs[jid])
        good = PREDICTIONS[0]
        bad = {
            "source": {"type": "url", "url": "https://example.invalid/face.zip"},
            "results": {"predictions": [], "errors": []},
            "error": HUME_FAILURE,
        }
        return {"partial": [good, bad], "allbad": [bad, bad]}.get(script or "", [good, good])

    async def predictions(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        jid = request.path_params["jid"]
        job = self.jobs.get(jid)
        if job is None or job["state"] != "COMPLETED":
            return json_response({"message": "Job is not completed"}, 400)
        self.prediction_reads += 1
        return json_response(self.prediction_list(jid))

    async def call_back(self, jid: str, url: str | None = None) -> int:
        """Hume's callback: {"job_id", "status", "predictions" | "message"}, unsigned."""
        target = url or self.jobs[jid]["input"]["callback_url"]
        job = self.jobs[jid]
        body: dict[str, Any] = {"job_id": jid, "status": job["state"]}
        if job["state"] == "COMPLETED":
            body["predictions"] = self.prediction_list(jid)
        else:
            body["message"] = HUME_FAILURE
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                target,
                content=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
        return answer.status_code
