"""fal.ai's queue and Runway's tasks, each a real app on loopback answering in the
shapes their public documentation gives (tests/integration/test_unseen_fal_runway.py).

- fal.ai queue (docs.fal.ai/model-endpoints/queue, fal.ai/docs/inference-api/queue/
  cancel): `POST /fal-ai/flux/dev` (`Authorization: Key …`) answers 200
  {"request_id", "response_url", "status_url", "cancel_url", "queue_position"};
  `GET /fal-ai/flux/requests/{id}/status?logs=1` {"status": IN_QUEUE (with
  "queue_position") | IN_PROGRESS (with "logs") | COMPLETED (with "logs", "metrics";
  for a request that failed so, the newer "error" and "error_type")};
  `GET /fal-ai/flux/requests/{id}` the model's output, or for a failed request the
  runner's 422 {"detail": [...]} or 500 with `X-Fal-Error-Type` (504 for one that
  timed out); `PUT
  /fal-ai/flux/requests/{id}/cancel` 202 {"status": "CANCELLATION_REQUESTED"} for a
  request that has not ended, 400 {"status": "ALREADY_COMPLETED"} for one that has.
  No idempotency, no list of requests.
- Runway (docs.dev.runwayml.com/api, the runwayml SDK's TaskRetrieveResponse):
  `POST /v1/image_to_video` (bearer, `X-Runway-Version: 2024-11-06` required)
  answers 200 {"id"}, or 429 {"error"} when rate limited (nothing created);
  `GET /v1/tasks/{id}` {"id", "status", "createdAt", "progress"? (0..1 while
  RUNNING), "output"? (URLs on another host, answering 403 once expired), "failure"?,
  "failureCode"?};
  `DELETE /v1/tasks/{id}` 204: cancels a task pending, throttled or running and
  deletes one that ended; either way it is never fetched again (404).

Scripts: each request's `script` field ("fail", "422", "500", "slow": stays
running until the test ends it; fal's "timeout": COMPLETED with error_type
request_timeout; Runway's "two": two output files; anything else succeeds after a
few reads).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json

FAL_KEY = "fal-test-key"
FAL_USER = "8f3a1b2c-fal-user"
RUNWAY_KEY = "rw-test-key"
RUNWAY_VERSION = "2024-11-06"
FAL_IMAGES = {
    "images": [{"url": "https://v3.fal.media/files/cat.png", "width": 1024, "height": 768}],
    "seed": 42,
}
FAL_VALIDATION = {
    "detail": [{"loc": ["body", "prompt"], "msg": "field required", "type": "value_error.missing"}]
}
# fal's newer status of a request that failed: COMPLETED, with its error
FAL_TIMEOUT = {"error": "Request timed out after 3600 seconds", "error_type": "request_timeout"}
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(64)
# CloudFront's answer to a signed link past its expiry
EXPIRED = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"


def mp4(name: str) -> bytes:
    """An output file's bytes: the first output's are MP4, another's differ."""
    return MP4 if "_" not in name else MP4 + name.encode()


class _Jobs:
    """Jobs, reads per job, counters, and the lost first create when asked."""

    def __init__(self, prefix: str, *, lose_first_create: bool = False) -> None:
        self.prefix = prefix
        self.lose_first_create = lose_first_create
        self.jobs: dict[str, dict[str, Any]] = {}
        self.creates = 0
        self.cancels: list[tuple[str, str]] = []  # (job id, its state when it arrived)
        self.throttled_creates = 0
        self.throttled_reads = 0
        self.reads = 0
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"{self.prefix}{next(self._ids):04d}"

    def only(self) -> dict[str, Any]:
        (job,) = self.jobs.values()
        return job


# --- fal.ai queue ------------------------------------------------------------------


class FalFixture(_Jobs):
    """`signer`: fal's webhook key (its public half is what a JWKS publishes)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("0b1f3c2e-0000-4000-8000-", **kwargs)
        self.results = 0
        self.signer = Ed25519PrivateKey.generate()

    async def deliver(self, url: str, rid: str, *, signer: Ed25519PrivateKey | None = None) -> int:
        """fal's completion webhook for `rid`, signed as fal signs it; the answer's code."""
        job = self.jobs[rid]
        failed = (job["input"] or {}).get("script") in ("422", "500")
        event: dict[str, Any] = {
            "request_id": rid,
            "gateway_request_id": rid,
            "status": "ERROR" if failed else "OK",
            "payload": FAL_VALIDATION if failed else FAL_IMAGES,
        }
        if failed:
            event["error"] = "Invalid status code: 422"
        body = json.dumps(event).encode()
        ts = str(int(time.time()))
        signed = "\n".join([rid, FAL_USER, ts, hashlib.sha256(body).hexdigest()])
        headers = {
            "Content-Type": "application/json",
            "X-Fal-Webhook-Request-Id": rid,
            "X-Fal-Webhook-User-Id": FAL_USER,
            "X-Fal-Webhook-Timestamp": ts,
            "X-Fal-Webhook-Signature": (signer or self.signer).sign(signed.encode()).hex(),
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code

    def app(self) -> Starlette:
        root = "/fal-ai/flux/requests/{rid}"
        return Starlette(
            routes=[
                Route("/fal-ai/flux/dev", self.submit, methods=["POST"]),
                Route(f"{root}/status", self.status, methods=["GET"]),
                Route(root, self.response, methods=["GET"]),
                Route(f"{root}/cancel", self.cancel, methods=["PUT"]),
            ]
        )

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Key {FAL_KEY}":
            return json_response({"detail": "Unauthorized"}, 401)
        return None

    def _job(self, request: Request) -> dict[str, Any] | None:
        return self.jobs.get(request.path_params["rid"])

    async def submit(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        if self.throttled_creates:
            self.throttled_creates -= 1
            return json_response({"detail": "Too many requests"}, 429)
        rid = self.new_id()
        self.jobs[rid] = {
            "id": rid,
            "input": body,
            "status": "IN_QUEUE",
            "reads": 0,
            "webhook": request.query_params.get("fal_webhook"),
        }
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        base = f"{request.base_url}fal-ai/flux/requests/{rid}"
        return json_response(
            {
                "request_id": rid,
                "response_url": base,
                "status_url": f"{base}/status",
                "cancel_url": f"{base}/cancel",
                "queue_position": 0,
            }
        )

    def finish(self, rid: str) -> None:
        self.jobs[rid]["status"] = "COMPLETED"

    async def status(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"detail": "Request not found"}, 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return json_response({"detail": "Rate limit exceeded"}, 429, {"Retry-After": "1"})
        job["reads"] += 1
        script = (job["input"] or {}).get("script")
        if job["status"] != "COMPLETED" and script != "slow":
            job["status"] = ("IN_QUEUE", "IN_PROGRESS", "COMPLETED")[min(job["reads"] - 1, 2)]
        logs = [{"message": "step 3/28", "level": "INFO", "timestamp": "2026-12-05T10:00:00Z"}]
        if job["status"] == "IN_QUEUE":
            return json_response({"status": "IN_QUEUE", "queue_position": 2})
        if job["status"] == "IN_PROGRESS":
            return json_response({"status": "IN_PROGRESS", "logs": logs})
        done: dict[str, Any] = {"status": "COMPLETED", "logs": logs, "metrics": {}}
        if script == "timeout":
            done.update(FAL_TIMEOUT)
        else:
            done["metrics"] = {"inference_time": 1.9}
        return json_response(done)

    async def response(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"detail": "Request not found"}, 404)
        self.results += 1
        if job["status"] != "COMPLETED":
            return json_response({"detail": "Request is still in progress"}, 400)
        script = (job["input"] or {}).get("script")
        if script == "422":
            return json_response(FAL_VALIDATION, 422)
        if script == "timeout":
            return json_response(
                {"detail": FAL_TIMEOUT["error"]},
                504,
                {"X-Fal-Error-Type": FAL_TIMEOUT["error_type"]},
            )
        if script == "500":
            return json_response(
                {"detail": "CUDA out of memory"},
                500,
                {"X-Fal-Error-Type": "runner_server_error"},
            )
        return json_response(FAL_IMAGES)

    async def cancel(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"status": "NOT_FOUND"}, 404)
        self.cancels.append((job["id"], job["status"]))
        if job["status"] == "COMPLETED":
            return json_response({"status": "ALREADY_COMPLETED"}, 400)
        return json_response({"status": "CANCELLATION_REQUESTED"}, 202)


# --- Runway ------------------------------------------------------------------------


class RunwayFixture(_Jobs):
    """Runway's API; `cdn_url` is where its outputs are (another origin)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("17f20503-6c24-4c16-946b-", **kwargs)
        self.cdn_url = ""
        self.deleted: list[str] = []
        self.deleted_after_end: list[str] = []
        self.versions: list[str | None] = []
        # the CDN's requests: whether each carried an Authorization header
        self.cdn_auth: list[str | None] = []
        # outputs per task (script "two": 2), and output files whose signed link
        # has expired (CloudFront's 403), by file name
        self.expired: set[str] = set()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/image_to_video", self.create, methods=["POST"]),
                Route("/v1/tasks/{tid}", self.task, methods=["GET"]),
                Route("/v1/tasks/{tid}", self.delete, methods=["DELETE"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/output/{name}", self.output, methods=["GET"])])

    def _refused(self, request: Request) -> Response | None:
        self.versions.append(request.headers.get("x-runway-version"))
        if request.headers.get("authorization") != f"Bearer {RUNWAY_KEY}":
            return json_response({"error": "Invalid API key"}, 401)
        if request.headers.get("x-runway-version") != RUNWAY_VERSION:
            return json_response({"error": "X-Runway-Version header is required"}, 400)
        return None

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        if self.throttled_creates:
            self.throttled_creates -= 1
            return json_response({"error": "You have exceeded the rate limit."}, 429)
        tid = self.new_id()
        self.jobs[tid] = {"id": tid, "input": body, "status": "PENDING", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"id": tid})

    def finish(self, tid: str) -> None:
        self.jobs[tid]["status"] = "SUCCEEDED"

    async def task(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        tid = request.path_params["tid"]
        job = self.jobs.get(tid)
        if job is None or tid in self.deleted:
            return json_response({"error": "Task not found"}, 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return json_response({"error": "You have exceeded the rate limit."}, 429)
        job["reads"] += 1
        script = (job["input"] or {}).get("script")
        ended = job["status"] in ("SUCCEEDED", "FAILED", "CANCELLED")
        if not ended and script != "slow":
            steps = ("PENDING", "THROTTLED", "RUNNING", "END")
            job["status"] = steps[min(job["reads"] - 1, 3)]
            if job["status"] == "END":
                job["status"] = "FAILED" if script == "fail" else "SUCCEEDED"
        if script == "slow" and job["status"] == "PENDING":
            job["status"] = "RUNNING"
        body: dict[str, Any] = {
            "id": tid,
            "status": job["status"],
            "createdAt": "2026-12-05T10:00:00.000Z",
        }
        if job["status"] == "RUNNING":
            body["progress"] = 0.42
        if job["status"] == "SUCCEEDED":
            body["output"] = [
                f"{self.cdn_url}/output/{name}?_jwt=eyJhbGciOi.sig" for name in self.outputs(tid)
            ]
        if job["status"] == "FAILED":
            body["failure"] = "The input image was flagged by content moderation."
            body["failureCode"] = "SAFETY.INPUT.IMAGE"
        return json_response(body)

    async def delete(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        tid = request.path_params["tid"]
        job = self.jobs.get(tid)
        if job is None or tid in self.deleted:
            return json_response({"error": "Task not found"}, 404)
        self.cancels.append((tid, job["status"]))
        if job["status"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            self.deleted_after_end.append(tid)  # its output, gone
        self.deleted.append(tid)  # aborted or deleted: never fetched again
        return Response(status_code=204)

    def outputs(self, tid: str) -> list[str]:
        """The task's output files' names on the CDN."""
        count = 2 if (self.jobs[tid]["input"] or {}).get("script") == "two" else 1
        return [f"{tid}.mp4"] + [f"{tid}_{n}.mp4" for n in range(1, count)]

    async def output(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("authorization"))
        name = request.path_params["name"]
        if not any(name in self.outputs(tid) for tid in self.jobs):
            return Response(b"not found", 404)
        if name in self.expired:
            return Response(EXPIRED, 403, media_type="application/xml")
        return Response(mp4(name), media_type="video/mp4")
