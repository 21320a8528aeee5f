"""Luma's Dream Machine and HeyGen's avatar videos, each a real app on loopback
answering in the shapes their public documentation gives
(tests/integration/test_unseen_luma_heygen.py).

- Luma (docs.lumalabs.ai; the lumaai SDK's `types/generation.py` and
  `resources/generations`): `POST /dream-machine/v1/generations` (bearer) answers
  201 with the generation object {"id" (UUID v4), "generation_type", "state":
  queued | dreaming | completed | failed, "failure_reason", "created_at",
  "assets": {"video", "image", "progress_video"} | null, "model", "request" (the
  create's own fields echoed, `callback_url` included)}, or 429 {"detail"};
  `GET /dream-machine/v1/generations/{id}` that object, 404 {"detail"} once
  deleted; `DELETE /dream-machine/v1/generations/{id}` 204, running or not, after
  which it is never fetched again. With `callback_url` in the create, Luma POSTs
  the generation object to it, unsigned, on each change of state (dreaming,
  completed, failed). Videos are on another host (storage.cdn-luma.com).
- HeyGen (docs.heygen.com): `POST /v2/video/generate` (`X-Api-Key`) answers 200
  {"error": null, "data": {"video_id"}}, or 429 {"error": {"code", "message"},
  "data": null}; `GET /v1/video_status.get?video_id=` {"code": 100, "data":
  {"id", "status": pending | waiting | processing | completed | failed,
  "video_url" (pre-signed, another host, expiring), "thumbnail_url", "duration",
  "error": {"code", "message", "detail"} | null, "callback_id"}, "message":
  "Success"}. No cancel. Webhooks are registered per account; each is signed with
  a hex HMAC-SHA256 of the raw body in `Signature`, the endpoint's secret the key:
  {"event_type": "avatar_video.success" | "avatar_video.fail", "event_data":
  {"video_id", "url" | "msg", "callback_id"}}.

Scripts: the create body's `script` ("fail", "slow": stays running until the
test ends it; anything else succeeds after a few reads).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, read_json
from tests.fixtures_providers.unseen_media import EXPIRED, MP4, _Jobs

LUMA_KEY = "luma-test-key"
LUMA_TOKEN = "lumatok_7c1e9a3b5d2f4e6a8b0c2d4e6f8a0b1c"
HEYGEN_KEY = "heygen-test-key"
HEYGEN_SECRET = "heygen-endpoint-secret-0123456789"
LUMA_FAILURE = "Prompt contains content that violates our usage policy"
HEYGEN_ERROR: dict[str, Any] = {
    "code": 40119,
    "message": "Video is too long",
    "detail": "Video is too long (> 3600.0s). Please upgrade your plan to generate longer videos",
}
ENDED = ("completed", "failed")


class LumaFixture(_Jobs):
    """Luma's generations; `cdn_url`: where its videos are (another origin)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("7e4fe07f-1dfd-4921-bc97-", **kwargs)
        self.cdn_url = ""
        self.deleted: list[str] = []
        self.deleted_after_end: list[str] = []
        self.cdn_auth: list[str | None] = []
        # reads of a completed generation that still name no video (`assets` not
        # yet filled in), before the one that does
        self.assets_late = 0
        self.lose_delete_answer = False  # the DELETE deletes, its answer never comes

    def app(self) -> Starlette:
        root = "/dream-machine/v1/generations"
        return Starlette(
            routes=[
                Route(root, self.create, methods=["POST"]),
                Route(root + "/{gid}", self.get, methods=["GET"]),
                Route(root + "/{gid}", self.delete, methods=["DELETE"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/dream_machine/{gid}/{name}", self.video)])

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {LUMA_KEY}":
            return json_response({"detail": "Invalid API key"}, 401)
        return None

    def generation(self, gid: str) -> dict[str, Any]:
        """The generation object, as every answer and callback carries it."""
        job = self.jobs[gid]
        done = job["state"] == "completed"
        base = f"{self.cdn_url}/dream_machine/{gid}"
        return {
            "id": gid,
            "generation_type": "video",
            "state": job["state"],
            "failure_reason": LUMA_FAILURE if job["state"] == "failed" else None,
            "created_at": "2026-12-05T10:00:00.000Z",
            "assets": (
                {"video": f"{base}/video_0.mp4", "image": f"{base}/video_0_thumb.jpg"}
                if done
                else None
            ),
            "model": "ray-2",
            "request": job["input"],
        }

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        if self.throttled_creates:
            self.throttled_creates -= 1
            return json_response({"detail": "Too many requests, please slow down"}, 429)
        gid = self.new_id() + "a1b2c3d4"  # a UUID v4's last group
        self.jobs[gid] = {"id": gid, "input": body, "state": "queued", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response(self.generation(gid), 201)

    def finish(self, gid: str) -> None:
        self.jobs[gid]["state"] = "completed"

    async def get(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        gid = request.path_params["gid"]
        job = self.jobs.get(gid)
        if job is None or gid in self.deleted:
            return json_response({"detail": "Generation not found"}, 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return json_response({"detail": "Too many requests, please slow down"}, 429)
        job["reads"] += 1
        script = (job["input"] or {}).get("script")
        if job["state"] not in ENDED:
            if script == "slow":
                job["state"] = "dreaming"
            else:
                steps = ("queued", "dreaming", "END")
                job["state"] = steps[min(job["reads"] - 1, 2)]
                if job["state"] == "END":
                    job["state"] = "failed" if script == "fail" else "completed"
        body = self.generation(gid)
        if job["state"] == "completed" and self.assets_late:
            self.assets_late -= 1
            body["assets"] = None
        return json_response(body)

    async def delete(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        gid = request.path_params["gid"]
        job = self.jobs.get(gid)
        if job is None or gid in self.deleted:
            return json_response({"detail": "Generation not found"}, 404)
        self.cancels.append((gid, job["state"]))
        if job["state"] in ENDED:
            self.deleted_after_end.append(gid)
        self.deleted.append(gid)
        if self.lose_delete_answer:
            await hang()
        return Response(status_code=204)

    async def video(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("authorization"))
        gid = request.path_params["gid"]
        if gid not in self.jobs or gid in self.deleted:
            return Response(EXPIRED, 403, media_type="application/xml")
        return Response(MP4, media_type="video/mp4")

    async def call_back(self, gid: str, url: str | None = None) -> int:
        """Luma's callback: the generation object POSTed, unsigned, to the
        `callback_url` the create gave (or `url`); the answer's code."""
        target = url or (self.jobs[gid]["input"] or {})["callback_url"]
        body = json.dumps(self.generation(gid)).encode()
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                target, content=body, headers={"Content-Type": "application/json"}
            )
        return answer.status_code


class HeyGenFixture(_Jobs):
    """HeyGen's videos; `cdn_url`: its file host. Each status read of a video that
    completed names a freshly signed link; one in `expired` answers 403."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("4c9d2e1f0a3b4c5d8e7f", **kwargs)
        self.cdn_url = ""
        self.cdn_auth: list[str | None] = []
        self.links = 0
        self.expired: set[int] = set()  # link numbers past their expiry

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/video/generate", self.create, methods=["POST"]),
                Route("/v1/video_status.get", self.status, methods=["GET"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/aws_pacific/avatar_tmp/{uid}/{name}", self.video)])

    @staticmethod
    def _refused(request: Request) -> Response | None:
        if request.headers.get("x-api-key") != HEYGEN_KEY:
            error = {"code": "authentication_failed", "message": "Unauthorized"}
            return json_response({"error": error, "data": None}, 401)
        return None

    async def create(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await read_json(request)
        if self.throttled_creates:
            self.throttled_creates -= 1
            error = {"code": "rate_limit_exceeded", "message": "Too many requests"}
            return json_response({"error": error, "data": None}, 429)
        vid = self.new_id()
        self.jobs[vid] = {"id": vid, "input": body, "status": "pending", "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"error": None, "data": {"video_id": vid}})

    def finish(self, vid: str) -> None:
        self.jobs[vid]["status"] = "completed"

    def link(self, vid: str) -> str:
        """A freshly signed link to the video (CloudFront's query)."""
        self.links += 1
        return (
            f"{self.cdn_url}/aws_pacific/avatar_tmp/9a1b/{vid}.mp4"
            f"?Expires=1767225600&Signature=sig{self.links}&Key-Pair-Id=K38HBHX5LX3X2H"
        )

    async def status(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        vid = request.query_params.get("video_id", "")
        job = self.jobs.get(vid)
        if job is None:
            return json_response({"code": 400, "data": None, "message": "video not found"}, 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            error = {"code": "rate_limit_exceeded", "message": "Too many requests"}
            return json_response({"error": error, "data": None}, 429)
        job["reads"] += 1
        script = (job["input"] or {}).get("script")
        if job["status"] not in ENDED:
            if script == "slow":
                job["status"] = "processing"
            else:
                steps = ("pending", "waiting", "processing", "END")
                job["status"] = steps[min(job["reads"] - 1, 3)]
                if job["status"] == "END":
                    job["status"] = "failed" if script == "fail" else "completed"
        done = job["status"] == "completed"
        data = {
            "id": vid,
            "status": job["status"],
            "video_url": self.link(vid) if done else None,
            "thumbnail_url": f"{self.cdn_url}/thumb/{vid}.jpg" if done else None,
            "duration": 12.4 if done else None,
            "error": HEYGEN_ERROR if job["status"] == "failed" else None,
            "callback_id": (job["input"] or {}).get("callback_id"),
        }
        return json_response({"code": 100, "data": data, "message": "Success"})

    async def video(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("x-api-key"))
        number = int(request.query_params.get("Signature", "sig0").removeprefix("sig"))
        if number in self.expired:
            return Response(EXPIRED, 403, media_type="application/xml")
        return Response(MP4, media_type="video/mp4")

    def event(self, vid: str) -> dict[str, Any]:
        job = self.jobs[vid]
        callback_id = (job["input"] or {}).get("callback_id")
        if job["status"] == "failed":
            data = {"video_id": vid, "msg": HEYGEN_ERROR["detail"], "callback_id": callback_id}
            return {"event_type": "avatar_video.fail", "event_data": data}
        data = {"video_id": vid, "url": self.link(vid), "callback_id": callback_id}
        return {"event_type": "avatar_video.success", "event_data": data}

    async def deliver(self, url: str, vid: str, *, secret: str = HEYGEN_SECRET) -> int:
        """HeyGen's webhook for `vid`, signed as HeyGen signs it; the answer's code."""
        body = json.dumps(self.event(vid)).encode()
        signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {"Content-Type": "application/json", "Signature": signature}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code
