"""OpenAI's Videos API (Sora), OpenAI's Responses API in background mode, Groq's
Batch API, ElevenLabs' dubbing and Fireworks' batch inference jobs, each a real app
on loopback answering in the shapes their public documentation gives
(tests/integration/test_unseen_round54.py).

Written from what is known of the public docs, without them open (no search was
available this round); each assumption is marked ASSUMED.

- OpenAI Videos (platform.openai.com/docs/api-reference/videos, guides/video-generation):
  `POST /v1/videos` (bearer; JSON or multipart: model, prompt, seconds, size)
  answers 200 a video {"id": "video_…", "object": "video", "model", "status":
  "queued", "progress": 0, "created_at", "size", "seconds", "quality"}; `GET
  /v1/videos/{id}` the same object, status queued | in_progress | completed |
  failed, "progress" 0..100, "completed_at"/"expires_at" once completed, "error":
  {"code", "message"} once failed; `GET /v1/videos/{id}/content` the MP4 bytes
  (`?variant=thumbnail|spritesheet` the stills), 404 once the video's assets
  expired (ASSUMED: the code; the docs say assets are kept for a limited time);
  `DELETE /v1/videos/{id}` 200 {"id", "object": "video.deleted", "deleted": true}
  (ASSUMED: the shape; and that it deletes a video in any state, a running one
  included, which then reads 404). No idempotency key, and no metadata to find a
  video by in `GET /v1/videos` (a list of the videos alone). Errors {"error":
  {"message", "type", "param", "code"}}. Webhooks (platform.openai.com/docs/guides/
  webhooks): Standard Webhooks (`webhook-id`, `webhook-timestamp`,
  `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">` under the
  `whsec_` secret), body {"id": "evt_…", "object": "event", "created_at", "type":
  "video.completed" | "video.failed", "data": {"id": "video_…"}}: thin.
- OpenAI Responses, background mode (guides/background, api-reference/responses):
  `POST /v1/responses` {"model", "input", "background": true, "store": true?,
  "metadata"?} answers 200 a response {"id": "resp_…", "object": "response",
  "status": "queued", "background": true, "output": [], "error": null,
  "incomplete_details": null, "metadata", "usage": null}; background needs the
  response stored: `"store": false` is refused 400 (ASSUMED: the code and words);
  `GET /v1/responses/{id}` status queued | in_progress | completed | failed |
  cancelled | incomplete, the answer in "output" (items {"type": "message", "role":
  "assistant", "content": [{"type": "output_text", "text"}]}; `output_text` is the
  SDKs' convenience, not in the JSON), "error": {"code", "message"} once failed,
  "incomplete_details": {"reason": "max_output_tokens" | "content_filter"} once
  incomplete (its output cut short); `POST /v1/responses/{id}/cancel` answers the
  response, "cancelled", and again the same for one already cancelled ("cancelling
  twice is idempotent"); a response that ended otherwise is refused 400
  {"error": {"message": "Cannot cancel a completed response.", "type":
  "invalid_request_error", "code": null}} (ASSUMED: the code and words; the other
  reading, a 200 no-op answering the response as it is, is `noop_cancel`). No list
  of responses. Webhooks as the Videos': response.completed | response.failed |
  response.cancelled | response.incomplete, data.id.
- Groq Batch (console.groq.com/docs/batch, api-reference#batches): OpenAI's batch
  objects under `/openai/v1`: `POST /openai/v1/batches` {"input_file_id",
  "endpoint": "/v1/chat/completions", "completion_window": "24h".."7d",
  "metadata"?} answers 200 {"id": "batch_…", "object": "batch", "status":
  "validating", "request_counts": {"total", "completed", "failed"},
  "output_file_id", "error_file_id", "errors", "metadata", …}; `GET
  /openai/v1/batches/{id}` status validating | failed | in_progress | finalizing
  | completed | expired | cancelling | cancelled; `POST
  /openai/v1/batches/{id}/cancel` answers the batch, "cancelling", then
  "cancelled"; `GET /openai/v1/batches` {"object": "list", "data": [batches]}
  (ASSUMED: no `has_more`/`last_id` paging; the whole list, newest first); `GET
  /openai/v1/files/{id}/content` the JSONL lines {"id", "custom_id", "response":
  {"status_code", "request_id", "body"} | null, "error": {"code", "message"} |
  null}. An expired batch keeps what it finished: its output file, and its error
  file naming the rest (code "batch_expired"). Errors {"error": {"message",
  "type", "code"}}. No webhooks.
- ElevenLabs dubbing (elevenlabs.io/docs/api-reference/dubbing): `POST /v1/dubbing`
  (`xi-api-key`; multipart: "file" or "source_url", "target_lang", "source_lang",
  "name", "num_speakers", …) answers 200 {"dubbing_id", "expected_duration_sec"};
  `GET /v1/dubbing/{id}` {"dubbing_id", "name", "status": "dubbing" | "dubbed" |
  "failed", "target_languages": [...], "media_metadata"?, "error": null | text};
  `GET /v1/dubbing/{id}/audio/{language_code}` the dubbed file (audio/mpeg for an
  audio source, video/mp4 for a video), 425 "Dubbing not yet complete"? before
  (ASSUMED); `DELETE /v1/dubbing/{id}` {"status": "ok"}, the dub gone after (404
  {"detail": {"status": "dubbing_not_found", "message"}}); `GET
  /v1/dubbing?cursor=&page_size=` {"dubs": [metadata], "next_cursor", "has_more"}
  (ASSUMED: newest first). Errors {"detail": {"status", "message"}} or FastAPI's
  422 {"detail": [...]}. `expected_duration_sec`: the create answer's estimate,
  which no status read repeats.
- Fireworks batch inference (docs.fireworks.ai/api-reference/create-batch-inference-job):
  `POST /v1/accounts/{account}/batchInferenceJobs?batchInferenceJobId=<id>` (bearer;
  {"model", "inputDatasetId", "outputDatasetId"?, "inferenceParameters"?}; the id
  chosen by the client: 1-63 of [a-z0-9-], ASSUMED starting with a letter) answers
  200 {"name": "accounts/{account}/batchInferenceJobs/{id}", "state":
  "JOB_STATE_CREATING", "inputDatasetId", "outputDatasetId":
  "accounts/{account}/datasets/…", "createTime", …}; the same id again is 409
  {"code": 6, "message": "… already exists", "details": []} (gRPC ALREADY_EXISTS as
  JSON, ASSUMED); `GET …/batchInferenceJobs/{id}` the job, state
  JOB_STATE_CREATING | JOB_STATE_QUEUED | JOB_STATE_PENDING | JOB_STATE_RUNNING |
  JOB_STATE_COMPLETED | JOB_STATE_FAILED | JOB_STATE_CANCELLED | JOB_STATE_EXPIRED
  (and the rest of Fireworks' shared JobState: VALIDATING, WRITING_RESULTS,
  CANCELLING, DELETING, …), "status": {"code": "…", "message"} beside a failure,
  "jobProgress": {"percent", "totalRequestCount", "successfulRequestCount",
  "failedRequestCount"}; `DELETE …/batchInferenceJobs/{id}` {} (ASSUMED: deletes the
  job, running or not; no separate cancel call). The output is a dataset: `GET
  /v1/accounts/{account}/datasets/{id}:getDownloadEndpoint` {"filenameToSignedUrls":
  {"<file>.jsonl": "https://storage…"}}.

Scripts: the create body's `script` ("fail", "slow": runs until the test ends it,
"incomplete": the response is cut short, "expire": the batch or job expires after
running, "queued": stays queued; anything else succeeds after a few reads).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.signatures import sign_standard_webhooks
from tests.fixtures_providers.common import hang, json_response, jsonl, read_json
from tests.fixtures_providers.unseen_media import MP4, _Jobs

OPENAI_KEY = "sk-openai-test"
# a Standard Webhooks secret: whsec_ + base64 of the key
OPENAI_WEBHOOK_SECRET = "whsec_" + "c2VjcmV0LWtleS1vZi10aGUtb3BlbmFpLXdlYmhvb2s="
SORA_FAILURE = "Your request was blocked by our moderation system."
RESPONSES_FAILURE = "The model produced invalid content."
ANSWER = "The capital of France is Paris."


def _script(job: dict[str, Any]) -> str | None:
    body = job["input"]
    return body.get("script") if isinstance(body, dict) else None


async def _created(fx: _Jobs) -> None:
    """Count a create; the first one's answer is lost when the fixture says so."""
    fx.creates += 1
    if fx.lose_first_create and fx.creates == 1:
        await hang()


def _openai_error(message: str, status: int, code: str | None = None) -> Response:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    return json_response({"error": error}, status)


async def _form_or_json(request: Request) -> Any:
    """A create's fields, sent as multipart/form-data (a file as (filename, content
    type, bytes)) or as JSON."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        return await read_json(request)
    form: dict[str, Any] = {}
    async with request.form() as fields:
        for key, value in fields.multi_items():
            if isinstance(value, str):
                form[key] = value
            else:
                form[key] = (value.filename, value.content_type, await value.read())
    return form


def _bearer(request: Request, key: str) -> bool:
    return request.headers.get("authorization") == f"Bearer {key}"


async def deliver_standard(
    url: str, event_type: str, object_id: str, *, secret: str = OPENAI_WEBHOOK_SECRET
) -> int:
    """An OpenAI webhook (Standard Webhooks) of `event_type` naming `object_id`."""
    event_id = f"evt_{hashlib.sha256(f'{event_type}{object_id}'.encode()).hexdigest()[:24]}"
    body = json.dumps(
        {
            "id": event_id,
            "object": "event",
            "created_at": int(time.time()),
            "type": event_type,
            "data": {"id": object_id},
        }
    ).encode()
    now = int(time.time())
    headers = {
        "content-type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(now),
        "webhook-signature": sign_standard_webhooks(secret, event_id, now, body),
    }
    async with httpx.AsyncClient() as client:
        return (await client.post(url, content=body, headers=headers)).status_code


# --- OpenAI Videos (Sora) ----------------------------------------------------------


class SoraFixture(_Jobs):
    """`contents`: the content reads of each video; `expired`: the videos whose assets
    are gone (content 404); `deleted`: the videos a DELETE removed; `encodings`: each
    create's content type (the docs' examples send a form: `curl -F`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("video_68d7512d07848190b3e45da0ecbebcde", **kwargs)
        self.contents: dict[str, int] = {}
        self.variants: list[str | None] = []
        self.expired: set[str] = set()
        self.deleted: list[str] = []
        self.encodings: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/videos", self.create, methods=["POST"]),
                Route("/v1/videos/{vid}", self.status, methods=["GET"]),
                Route("/v1/videos/{vid}", self.delete, methods=["DELETE"]),
                Route("/v1/videos/{vid}/content", self.content, methods=["GET"]),
            ]
        )

    def video(self, job: dict[str, Any]) -> dict[str, Any]:
        progress = {"queued": 0, "in_progress": 42, "completed": 100, "failed": 42}
        video: dict[str, Any] = {
            "id": job["id"],
            "object": "video",
            "model": job["input"].get("model", "sora-2"),
            "status": job["state"],
            "progress": progress[job["state"]],
            "created_at": 1765000000,
            "size": job["input"].get("size", "1280x720"),
            "seconds": str(job["input"].get("seconds", "4")),
            "quality": "standard",
            "remixed_from_video_id": None,
            "completed_at": None,
            "expires_at": None,
            "error": None,
        }
        if job["state"] == "completed":
            video |= {"completed_at": 1765000100, "expires_at": 1765086500}
        elif job["state"] == "failed":
            video["error"] = {"code": "moderation_blocked", "message": SORA_FAILURE}
        return video

    def _find(self, request: Request) -> dict[str, Any] | None:
        vid = request.path_params["vid"]
        return None if vid in self.deleted else self.jobs.get(vid)

    async def create(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        self.encodings.append(request.headers.get("content-type", "").split(";")[0])
        body = await _form_or_json(request)
        if not isinstance(body, dict) or not body.get("prompt"):
            return _openai_error("Missing required parameter: 'prompt'.", 400)
        vid = self.new_id()
        self.jobs[vid] = {"id": vid, "input": body, "state": "queued", "reads": 0}
        await _created(self)
        return json_response(self.video(self.jobs[vid]))

    def finish(self, vid: str) -> None:
        job = self.jobs[vid]
        job["state"] = "failed" if _script(job) == "fail" else "completed"

    async def status(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        job = self._find(request)
        if job is None:
            return _openai_error("Video not found.", 404, "not_found")
        self.reads += 1
        job["reads"] += 1
        if job["state"] == "queued":
            job["state"] = "in_progress"
        elif job["state"] == "in_progress" and job["reads"] >= 3 and _script(job) != "slow":
            self.finish(job["id"])
        return json_response(self.video(job))

    async def content(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        job = self._find(request)
        if job is None:
            return _openai_error("Video not found.", 404, "not_found")
        self.variants.append(request.query_params.get("variant"))
        if job["id"] in self.expired:
            return _openai_error("The video's assets have expired.", 404, "not_found")
        if job["state"] != "completed":
            return _openai_error("Video is not ready yet.", 400, "video_not_ready")
        self.contents[job["id"]] = self.contents.get(job["id"], 0) + 1
        return Response(MP4, media_type="video/mp4")

    async def delete(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        job = self._find(request)
        if job is None:
            return _openai_error("Video not found.", 404, "not_found")
        self.cancels.append((job["id"], job["state"]))
        self.deleted.append(job["id"])
        return json_response({"id": job["id"], "object": "video.deleted", "deleted": True})


# --- OpenAI Responses, background mode ---------------------------------------------

MESSAGE = {
    "type": "message",
    "id": "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c5dc7b6e",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
}
CUT_SHORT = {
    **MESSAGE,
    "status": "incomplete",
    "content": [{"type": "output_text", "text": "The capital of", "annotations": []}],
}


class ResponsesFixture(_Jobs):
    """`stores`: what each create said of `store`; `backgrounds`: of `background`;
    `noop_cancel`: a cancel of a response that ended answers 200 with it unchanged
    (the other reading of the docs: "a no-op") instead of 400."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", **kwargs)
        self.backgrounds: list[Any] = []
        self.stores: list[Any] = []
        self.noop_cancel = False

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/responses", self.create, methods=["POST"]),
                Route("/v1/responses/{rid}", self.status, methods=["GET"]),
                Route("/v1/responses/{rid}/cancel", self.cancel, methods=["POST"]),
            ]
        )

    def response(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["input"]
        answer: dict[str, Any] = {
            "id": job["id"],
            "object": "response",
            "created_at": 1765000000,
            "status": job["state"],
            "background": True,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model", "o3"),
            "output": [],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": body.get("metadata") or {},
        }
        usage = {"input_tokens": 36, "output_tokens": 87, "total_tokens": 123}
        if job["state"] == "completed":
            answer |= {"output": [MESSAGE], "usage": usage}
        elif job["state"] == "incomplete":
            answer |= {
                "output": [CUT_SHORT],
                "usage": usage,
                "incomplete_details": {"reason": "max_output_tokens"},
            }
        elif job["state"] == "failed":
            answer["error"] = {"code": "server_error", "message": RESPONSES_FAILURE}
        return answer

    async def create(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("model"):
            return _openai_error("Missing required parameter: 'model'.", 400)
        self.backgrounds.append(body.get("background"))
        self.stores.append(body.get("store"))
        if body.get("background") and body.get("store") is False:
            return _openai_error("Background mode requires store=true.", 400)
        rid = self.new_id()
        state = "queued" if body.get("background") else "completed"
        self.jobs[rid] = {"id": rid, "input": body, "state": state, "reads": 0}
        await _created(self)
        return json_response(self.response(self.jobs[rid]))

    async def status(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return _openai_error(f"Response with id '{request.path_params['rid']}' not found.", 404)
        self.reads += 1
        job["reads"] += 1
        script = _script(job)
        if job["state"] == "queued" and script != "queued":
            job["state"] = "in_progress"
        elif job["state"] == "in_progress" and job["reads"] >= 3 and script != "slow":
            self.finish(job["id"])
        return json_response(self.response(job))

    def finish(self, rid: str) -> None:
        job = self.jobs[rid]
        ends = {"fail": "failed", "incomplete": "incomplete"}
        job["state"] = ends.get(_script(job) or "", "completed")

    async def cancel(self, request: Request) -> Response:
        if not _bearer(request, OPENAI_KEY):
            return _openai_error("Incorrect API key provided.", 401, "invalid_api_key")
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return _openai_error("Response not found.", 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("queued", "in_progress"):
            job["state"] = "cancelled"
        elif job["state"] != "cancelled" and not self.noop_cancel:
            return _openai_error(f"Cannot cancel a {job['state']} response.", 400)
        return json_response(self.response(job))


# --- ElevenLabs dubbing ------------------------------------------------------------

ELEVENLABS_KEY = "sk_elevenlabs_test"
DUB_FAILURE = "Failed to download the source media: 404 Not Found"


def dubbed_audio(language: str) -> bytes:
    """A dubbed MP3 (ID3 header), its bytes naming its language."""
    return b"ID3\x04\x00\x00" + language.encode() * 32


class DubbingFixture(_Jobs):
    """`forms`: each create's fields as sent (a file as (filename, content type,
    bytes)); `audio_reads`: (dub id, language) of each audio read; `deleted`: dubs a
    DELETE removed; `list_reads`: the list's reads (its cursor, as sent);
    `expected_duration_sec`: each create answer's estimate (each dub's `answered_at`
    and first `read_at` say when, by the monotonic clock)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("21m00Tcm4TlvDq8ikWAM", **kwargs)
        self.forms: list[dict[str, Any]] = []
        self.audio_reads: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.list_reads: list[str | None] = []
        self.expected_duration_sec = 0.6

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/dubbing", self.create, methods=["POST"]),
                Route("/v1/dubbing", self.list, methods=["GET"]),
                Route("/v1/dubbing/{did}", self.status, methods=["GET"]),
                Route("/v1/dubbing/{did}", self.delete, methods=["DELETE"]),
                Route("/v1/dubbing/{did}/audio/{lang}", self.audio, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(status: str, message: str, code: int) -> Response:
        return json_response({"detail": {"status": status, "message": message}}, code)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("xi-api-key") != ELEVENLABS_KEY:
            return self._error("invalid_api_key", "Invalid API key", 401)
        return None

    def metadata(self, job: dict[str, Any]) -> dict[str, Any]:
        form = job["input"]
        return {
            "dubbing_id": job["id"],
            "name": form.get("name", ""),
            "status": job["state"],
            "source_language": form.get("source_lang", "auto"),
            "target_languages": [form["target_lang"]],
            "editable": False,
            "created_at": "2026-12-06T07:00:00Z",
            "media_metadata": {"content_type": "audio/mpeg", "duration": 12.5},
            "error": DUB_FAILURE if job["state"] == "failed" else None,
        }

    def _find(self, request: Request) -> dict[str, Any] | None:
        did = request.path_params["did"]
        return None if did in self.deleted else self.jobs.get(did)

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            return json_response(
                {"detail": [{"loc": ["body"], "msg": "Expected multipart", "type": "value_error"}]},
                422,
            )
        form = await _form_or_json(request)
        self.forms.append(form)
        if "target_lang" not in form or not ("file" in form or "source_url" in form):
            return json_response(
                {"detail": [{"loc": ["body", "target_lang"], "msg": "field required"}]}, 422
            )
        did = self.new_id()
        self.jobs[did] = {"id": did, "input": form, "state": "dubbing", "reads": 0}
        await _created(self)
        self.jobs[did]["answered_at"] = time.monotonic()
        return json_response(
            {"dubbing_id": did, "expected_duration_sec": self.expected_duration_sec}
        )

    def finish(self, did: str) -> None:
        job = self.jobs[did]
        job["state"] = "failed" if job["input"].get("script") == "fail" else "dubbed"

    async def status(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._error("dubbing_not_found", "Dubbing not found.", 404)
        self.reads += 1
        job["reads"] += 1
        job.setdefault("read_at", time.monotonic())
        if job["reads"] >= 2 and job["input"].get("script") != "slow":
            self.finish(job["id"])
        return json_response(self.metadata(job))

    async def audio(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        job = self._find(request)
        language = request.path_params["lang"]
        if job is None or language not in self.metadata(job)["target_languages"]:
            return self._error("dubbing_not_found", "Dubbing not found.", 404)
        if job["state"] != "dubbed":
            return self._error("dubbing_not_completed", "Dubbing is not complete yet.", 425)
        self.audio_reads.append((job["id"], language))
        return Response(dubbed_audio(language), media_type="audio/mpeg")

    async def delete(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        job = self._find(request)
        if job is None:
            return self._error("dubbing_not_found", "Dubbing not found.", 404)
        self.cancels.append((job["id"], job["state"]))
        self.deleted.append(job["id"])
        return json_response({"status": "ok"})

    async def list(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        cursor = request.query_params.get("cursor")
        self.list_reads.append(cursor)
        size = int(request.query_params.get("page_size", "100"))
        newest = [
            self.metadata(j) for j in reversed(self.jobs.values()) if j["id"] not in self.deleted
        ]
        start = int(cursor) if cursor else 0
        page = newest[start : start + size]
        more = start + size < len(newest)
        return json_response(
            {"dubs": page, "next_cursor": str(start + size) if more else None, "has_more": more}
        )


# --- Groq Batch --------------------------------------------------------------------

GROQ_KEY = "gsk_groq_test_key"
GROQ_FAILURE = "Line 3: invalid JSON: unexpected end of input"
GROQ_REQUESTS = 4


def groq_line(n: int) -> dict[str, Any]:
    """The output file's line for request `n` (answered 200)."""
    return {
        "id": f"batch_req_{n:03d}",
        "custom_id": f"request-{n}",
        "response": {
            "status_code": 200,
            "request_id": f"req_{n:03d}",
            "body": {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "model": "llama-3.1-8b-instant",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"answer {n}"},
                        "finish_reason": "stop",
                    }
                ],
            },
        },
        "error": None,
    }


def groq_cut(n: int, code: str) -> dict[str, Any]:
    """The error file's line for request `n`, cut off (batch_expired, batch_cancelled)."""
    message = {
        "batch_expired": "This request could not be executed before the completion window expired.",
        "batch_cancelled": "This request was not executed because the batch was cancelled.",
    }[code]
    return {
        "id": f"batch_req_{n:03d}",
        "custom_id": f"request-{n}",
        "response": None,
        "error": {"code": code, "message": message},
    }


class GroqFixture(_Jobs):
    """`files`: the JSONL files by id; `file_reads`: each file read; `list_reads`:
    the list's reads (its query, as sent)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("batch_01jh6xa7reempvjyh6n3yst2zw", **kwargs)
        self.files: dict[str, bytes] = {}
        self.file_reads: list[str] = []
        self.list_reads: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/openai/v1/batches", self.create, methods=["POST"]),
                Route("/openai/v1/batches", self.list, methods=["GET"]),
                Route("/openai/v1/batches/{bid}", self.status, methods=["GET"]),
                Route("/openai/v1/batches/{bid}/cancel", self.cancel, methods=["POST"]),
                Route("/openai/v1/files/{fid}/content", self.content, methods=["GET"]),
            ]
        )

    def batch(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["input"]
        done = job.get("done", 0)
        failed = job.get("cut", 0)
        answer: dict[str, Any] = {
            "id": job["id"],
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "errors": None,
            "input_file_id": body.get("input_file_id"),
            "completion_window": body.get("completion_window"),
            "status": job["state"],
            "output_file_id": job.get("output_file_id"),
            "error_file_id": job.get("error_file_id"),
            "created_at": 1765000000,
            "in_progress_at": None,
            "expires_at": 1765086400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": GROQ_REQUESTS, "completed": done, "failed": failed},
            "metadata": body.get("metadata"),
        }
        if job["state"] == "failed":
            line = {"code": "invalid_json_line", "message": GROQ_FAILURE, "param": None, "line": 3}
            answer["errors"] = {"object": "list", "data": [line]}
            answer["request_counts"] = {"total": 0, "completed": 0, "failed": 0}
        return answer

    def _file(self, job: dict[str, Any], kind: str, lines: list[dict[str, Any]]) -> None:
        if lines:
            fid = f"file_{kind}_{job['id'][-8:]}"
            self.files[fid] = jsonl(lines)
            job[f"{kind}_file_id"] = fid

    def end(self, job: dict[str, Any], state: str, done: int, code: str | None = None) -> None:
        """`done` requests answered, the rest cut off with `code`."""
        job |= {"state": state, "done": done, "cut": GROQ_REQUESTS - done}
        self._file(job, "output", [groq_line(n) for n in range(1, done + 1)])
        cut = [groq_cut(n, code) for n in range(done + 1, GROQ_REQUESTS + 1)] if code else []
        self._file(job, "error", cut)

    async def create(self, request: Request) -> Response:
        if not _bearer(request, GROQ_KEY):
            return _openai_error("Invalid API Key", 401, "invalid_api_key")
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("input_file_id"):
            return _openai_error("input_file_id is required", 400)
        window = body.get("completion_window")
        if window not in ("24h", "48h", "72h", "7d") and not str(window).endswith("h"):
            return _openai_error("completion_window must be between 24h and 7d", 400)
        bid = self.new_id()
        self.jobs[bid] = {"id": bid, "input": body, "state": "validating", "reads": 0}
        await _created(self)
        return json_response(self.batch(self.jobs[bid]))

    async def status(self, request: Request) -> Response:
        if not _bearer(request, GROQ_KEY):
            return _openai_error("Invalid API Key", 401, "invalid_api_key")
        job = self.jobs.get(request.path_params["bid"])
        if job is None:
            return _openai_error("batch not found", 404, "not_found")
        self.reads += 1
        job["reads"] += 1
        script = _script(job)
        if job["state"] == "validating":
            job["state"] = "failed" if script == "fail" else "in_progress"
        elif job["state"] == "in_progress" and job["reads"] >= 3 and script != "slow":
            job["state"] = "finalizing"
        elif job["state"] == "finalizing":
            if script == "expire":
                self.end(job, "expired", 1, "batch_expired")
            else:
                self.end(job, "completed", GROQ_REQUESTS)
        elif job["state"] == "cancelling":
            # read cancelling once, as a batch stays cancelling up to minutes
            job["cancelling_reads"] = job.get("cancelling_reads", 0) + 1
            if job["cancelling_reads"] > 1:
                self.end(job, "cancelled", 1, "batch_cancelled")
        return json_response(self.batch(job))

    async def cancel(self, request: Request) -> Response:
        if not _bearer(request, GROQ_KEY):
            return _openai_error("Invalid API Key", 401, "invalid_api_key")
        job = self.jobs.get(request.path_params["bid"])
        if job is None:
            return _openai_error("batch not found", 404, "not_found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("validating", "in_progress", "finalizing"):
            job["state"] = "cancelling"
        elif job["state"] not in ("cancelling", "cancelled"):
            return _openai_error(f"Cannot cancel a batch with status {job['state']}", 400)
        return json_response(self.batch(job))

    async def list(self, request: Request) -> Response:
        if not _bearer(request, GROQ_KEY):
            return _openai_error("Invalid API Key", 401, "invalid_api_key")
        self.list_reads.append(str(request.query_params))
        newest = [self.batch(j) for j in reversed(self.jobs.values())]
        return json_response({"object": "list", "data": newest})

    async def content(self, request: Request) -> Response:
        if not _bearer(request, GROQ_KEY):
            return _openai_error("Invalid API Key", 401, "invalid_api_key")
        fid = request.path_params["fid"]
        if fid not in self.files:
            return _openai_error("file not found", 404, "not_found")
        self.file_reads.append(fid)
        return Response(self.files[fid], media_type="application/octet-stream")


# --- Fireworks batch inference jobs ------------------------------------------------

FIREWORKS_KEY = "fw_test_key"
FIREWORKS_ACCOUNT = "my-account"
FIREWORKS_FAILURE = "Input dataset row 2 is not a valid chat completion request"
FIREWORKS_OUTPUT = "BIJOutputSet.jsonl"
RUNNING = ("JOB_STATE_CREATING", "JOB_STATE_QUEUED", "JOB_STATE_RUNNING")


def fireworks_line(n: int) -> dict[str, Any]:
    return {
        "custom_id": f"request-{n}",
        "response": {
            "id": f"cmpl-{n}",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer {n}"}}],
        },
    }


class FireworksFixture(_Jobs):
    """Jobs by the id the client chose. `ids_asked`: the batchInferenceJobId of each
    create, as sent; `conflicts`: creates refused 409 ALREADY_EXISTS; `downloads`:
    the output file's reads, each one's Authorization in `download_auth`, served by
    `storage()` at `storage_url` (Google Cloud Storage: another server; the API's
    own when None)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.ids_asked: list[str | None] = []
        self.conflicts = 0
        self.endpoint_reads = 0
        self.downloads = 0
        self.download_auth: list[str | None] = []
        self.storage_url: str | None = None

    def app(self) -> Starlette:
        prefix = f"/v1/accounts/{FIREWORKS_ACCOUNT}"
        return Starlette(
            routes=[
                Route(f"{prefix}/batchInferenceJobs", self.create, methods=["POST"]),
                Route(f"{prefix}/batchInferenceJobs/{{jid}}", self.status, methods=["GET"]),
                Route(f"{prefix}/batchInferenceJobs/{{jid}}", self.delete, methods=["DELETE"]),
                Route(f"{prefix}/datasets/{{call}}", self.endpoint, methods=["GET"]),
                Route("/signed/{name}", self.download, methods=["GET"]),
            ]
        )

    def storage(self) -> Starlette:
        return Starlette(routes=[Route("/signed/{name}", self.download, methods=["GET"])])

    @staticmethod
    def _error(code: int, message: str, status: int) -> Response:
        # grpc-gateway's error body: google.rpc.Status as JSON
        return json_response({"code": code, "message": message, "details": []}, status)

    def _refused(self, request: Request) -> Response | None:
        if not _bearer(request, FIREWORKS_KEY):
            return self._error(16, "unauthenticated: invalid API key", 401)
        return None

    def job(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["input"]
        done = job["state"] == "JOB_STATE_COMPLETED"
        answer: dict[str, Any] = {
            "name": f"accounts/{FIREWORKS_ACCOUNT}/batchInferenceJobs/{job['id']}",
            "displayName": body.get("displayName", ""),
            "createTime": "2026-12-06T07:00:00Z",
            "createdBy": "dev@example.com",
            "state": job["state"],
            "model": body.get("model"),
            "inputDatasetId": body.get("inputDatasetId"),
            "outputDatasetId": f"accounts/{FIREWORKS_ACCOUNT}/datasets/out-{job['id']}",
            "inferenceParameters": body.get("inferenceParameters", {}),
            "updateTime": "2026-12-06T07:05:00Z",
            "jobProgress": {
                "percent": 100 if done else 50 if job["state"] == "JOB_STATE_RUNNING" else 0,
                "totalRequestCount": 3,
                "successfulRequestCount": 3 if done else 0,
                "failedRequestCount": 0,
            },
        }
        if job["state"] == "JOB_STATE_FAILED":
            answer["status"] = {"code": "INVALID_ARGUMENT", "message": FIREWORKS_FAILURE}
        return answer

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        jid = request.query_params.get("batchInferenceJobId")
        self.ids_asked.append(jid)
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("model") or not body.get("inputDatasetId"):
            return self._error(3, "model and inputDatasetId are required", 400)
        if jid is not None and not _fireworks_id(jid):
            return self._error(3, f"invalid batch inference job id {jid!r}", 400)
        if jid in self.jobs:
            self.conflicts += 1
            name = f"accounts/{FIREWORKS_ACCOUNT}/batchInferenceJobs/{jid}"
            return self._error(6, f"batch inference job {name} already exists", 409)
        jid = jid or f"bij-{len(self.jobs) + 1:04d}"
        self.jobs[jid] = {"id": jid, "input": body, "state": "JOB_STATE_CREATING", "reads": 0}
        await _created(self)
        return json_response(self.job(self.jobs[jid]))

    def finish(self, jid: str) -> None:
        job = self.jobs[jid]
        ends = {"fail": "JOB_STATE_FAILED", "expire": "JOB_STATE_EXPIRED"}
        job["state"] = ends.get(_script(job) or "", "JOB_STATE_COMPLETED")

    async def status(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(5, "batch inference job not found", 404)
        self.reads += 1
        job["reads"] += 1
        if job["state"] in RUNNING[:-1]:
            job["state"] = RUNNING[RUNNING.index(job["state"]) + 1]
        elif job["state"] == "JOB_STATE_RUNNING" and _script(job) != "slow":
            self.finish(job["id"])
        return json_response(self.job(job))

    async def delete(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return self._error(5, "batch inference job not found", 404)
        self.cancels.append((job["id"], job["state"]))
        del self.jobs[job["id"]]
        return json_response({})

    async def endpoint(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        dataset, _, verb = request.path_params["call"].partition(":")
        if verb != "getDownloadEndpoint" or not dataset.startswith("out-"):
            return self._error(5, "dataset not found", 404)
        self.endpoint_reads += 1
        storage = self.storage_url or str(request.base_url).rstrip("/")
        signed = f"{storage}/signed/{dataset}.jsonl?X-Goog-Signature=ab12"
        return json_response({"filenameToSignedUrls": {FIREWORKS_OUTPUT: signed}})

    async def download(self, request: Request) -> Response:
        self.downloads += 1
        self.download_auth.append(request.headers.get("authorization"))
        lines = [fireworks_line(n) for n in (1, 2, 3)]
        return Response(jsonl(lines), media_type="application/jsonl")


def _fireworks_id(jid: str) -> bool:
    """1-63 of lowercase letters, digits and hyphens, starting with a letter."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-")
    return 0 < len(jid) <= 63 and jid[0].isalpha() and jid[0].islower() and set(jid) <= allowed
