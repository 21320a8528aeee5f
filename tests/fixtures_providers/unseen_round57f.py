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

Scripts: the fixture's `script` for the next job ("fail", "slow": runs until the
test ends it); anything else completes after a few reads.
"""

from __future__ import annotations

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
