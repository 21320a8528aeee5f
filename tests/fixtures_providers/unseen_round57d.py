"""Adobe Firefly's async image generation, Vercel deployments, Leonardo.ai
generations and Marketo's bulk lead extract, each a real app on loopback answering
in the shapes their public documentation gives
(tests/integration/test_unseen_round57d.py). Where the docs leave a behaviour
open, the assumption is stated here.

- Adobe Firefly v3 (`Authorization: Bearer <IMS token>` and `x-api-key: <client
  id>` on every call): `POST /v3/images/generate-async` {"prompt", "numVariations",
  ...} answers 202 {"jobId": "urn:ff:jobs:...", "statusUrl", "cancelUrl"}; `GET
  statusUrl` {"jobId", "status": pending | running | succeeded | failed |
  canceled, "progress"?, "result"?: {"size", "outputs": [{"seed", "image":
  {"url"}}]}}, a failure {"jobId", "status": "failed", "error_code", "message"}
  (ErrorBody's members beside the status: assumed); `PUT cancelUrl` 200 (the job
  canceled on its next read; one that ended: 409, assumed). The status and cancel
  URLs are served on the base URL's origin (Adobe's are on a host of their own:
  see unseen/adobe_firefly.toml). The images are pre-signed links (image/jpeg).
- Vercel (bearer): `POST /v13/deployments` {"name", "target", "gitSource", "meta"}
  answers 200 the deployment {"id": "dpl_...", "url", "name", "meta",
  "readyState": "QUEUED", "status", ...}; `GET /v13/deployments/{id}` readyState
  QUEUED | INITIALIZING | BUILDING | READY | ERROR | CANCELED, "errorCode" and
  "errorMessage" on ERROR; `PATCH /v12/deployments/{id}/cancel` 200 the deployment,
  CANCELED (one that ended: 400 {"error": {"code", "message"}}, assumed); `GET
  /v6/deployments?meta-<key>=<value>` {"deployments": [{"uid", "name", "url",
  "state", "readyState", "meta", ...}], "pagination": {"count", "next", "prev"}}
  (the list names a deployment's id `uid`). Webhooks: {"id", "type":
  "deployment.succeeded" | "deployment.error" | "deployment.canceled" | ...,
  "createdAt", "payload": {"deployment": {"id", "meta", "url", "name"}, ...}},
  signed `x-vercel-signature`: the hex HMAC-SHA1 of the raw body.
- Leonardo.ai (bearer): `POST /api/rest/v1/generations` {"prompt", "modelId",
  "num_images", ...} answers 200 {"sdGenerationJob": {"generationId",
  "apiCreditCost"}}; `GET /api/rest/v1/generations/{id}` {"generations_by_pk":
  {"id", "status": PENDING | COMPLETE | FAILED, "generated_images": [{"id", "url",
  "nsfw"}], ...}}, and {"generations_by_pk": null} (200) for an id it does not hold,
  a deleted generation's too (Hasura's by-primary-key read: assumed); `DELETE`
  {"delete_generations_by_pk": {"id"}} removes the generation, a pending one too
  (assumed: the docs say "delete", nothing of a cancel). The webhook callback, set
  on the API key, posts {"type": "image_generation.complete", "object":
  "generation", "timestamp", "api_version", "data": {"object": {"id", "status",
  "images": [...]}}} with `Authorization: Bearer <webhook callback API key>`.
  Errors {"error", "path", "code"} (Hasura's).
- Marketo bulk lead extract (bearer): `POST /bulk/v1/leads/export/create.json`
  {"fields", "format", "filter"} answers 200 {"requestId", "success": true,
  "result": [{"exportId", "format", "status": "Created", "createdAt"}]}; the job
  runs only once `POST .../{exportId}/enqueue.json` queued it; `GET
  .../{exportId}/status.json` result[0].status Created | Queued | Processing |
  Completed | Failed | Canceled ("Cancelled" in the cancel's example: both served
  here as the docs show them), "numberOfRecords", "fileSize", "fileChecksum":
  "sha256:<hex>" once Completed, "errorMsg" once Failed; `GET .../file.json` the
  CSV (404 text/plain before); `POST .../cancel.json` the status, Cancelled. Every
  error is a 200 {"requestId", "success": false, "errors": [{"code", "message"}]}
  (601/602: the access token invalid or expired, which it is every hour; 606: the
  rate limit; 1029: too many jobs in the queue).

Scripts: each fixture's `script`, the next job's: "fail", "slow" (runs until the
test ends it), anything else completes after a few reads.
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

from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created


def _image(name: str) -> bytes:
    """A JPEG's first bytes and a name: what a test compares, not a picture."""
    return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + name.encode() + b"\xff\xd9"


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


# --- Adobe Firefly -----------------------------------------------------------------

FF_TOKEN = "eyJhbGciOiJSUzI1NiJ9.firefly-ims-token"
FF_CLIENT_ID = "firefly-client-id-0123"
FF_FAILURE = "The input prompt was flagged by content moderation."
FF_ERROR = "input_text_content_policy_violation"


class FireflyFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("urn:ff:jobs:a1b2c3d4e5f6:", **kwargs)
        self.script: str | None = None
        self.refused = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v3/images/generate-async", self.create, methods=["POST"]),
                Route("/v3/status/{jid:path}", self.get, methods=["GET"]),
                Route("/v3/cancel/{jid:path}", self.cancel, methods=["PUT"]),
                Route("/images/{name}", self.image, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if (
            request.headers.get("authorization") != f"Bearer {FF_TOKEN}"
            or request.headers.get("x-api-key") != FF_CLIENT_ID
        ):
            self.refused += 1
            body = {"error_code": "401013", "message": "Oauth token is not valid"}
            return json_response(body, 401)
        return None

    def status(self, request: Request, job: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"jobId": job["id"], "status": job["state"]}
        if job["state"] == "running":
            out["progress"] = 40
        if job["state"] == "succeeded":
            outputs = [
                {"seed": 1000 + i, "image": {"url": f"{_base(request)}/images/{name}?sig=f00d"}}
                for i, name in enumerate(job["images"])
            ]
            out["result"] = {"size": {"width": 2048, "height": 2048}, "outputs": outputs}
        if job["state"] == "failed":
            out |= {"error_code": FF_ERROR, "message": FF_FAILURE}
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("prompt"):
            return json_response({"error_code": "validation_error", "message": "prompt"}, 400)
        jid = self.new_id()
        count = int(body.get("numVariations") or 1)
        self.jobs[jid] = {
            "id": jid,
            "body": body,
            "state": "pending",
            "reads": 0,
            "script": self.script,
            "images": [f"{jid.rsplit(':', 1)[-1]}-{i}.jpg" for i in range(count)],
        }
        await _created(self)
        base = _base(request)
        answer = {
            "jobId": jid,
            "statusUrl": f"{base}/v3/status/{jid}",
            "cancelUrl": f"{base}/v3/cancel/{jid}",
        }
        return json_response(answer, 202)

    def _job(self, request: Request) -> dict[str, Any] | None:
        return self.jobs.get(request.path_params["jid"])

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"error_code": "not_found", "message": "Job not found"}, 404)
        self.reads += 1
        if job["state"] == "cancel_requested":
            job["state"] = "canceled"
        _advance(job, ["pending", "running"], "failed" if job["script"] == "fail" else "succeeded")
        return json_response(self.status(request, job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"error_code": "not_found", "message": "Job not found"}, 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("pending", "running"):
            body = {"error_code": "job_not_cancelable", "message": "The job has already ended"}
            return json_response(body, 409)
        job["state"] = "cancel_requested"
        return json_response({"jobId": job["id"], "status": "running"})

    async def image(self, request: Request) -> Response:
        name = request.path_params["name"]
        if request.query_params.get("sig") != "f00d":
            return Response(b"<Error>AccessDenied</Error>", 403, media_type="application/xml")
        return Response(_image(name), media_type="image/jpeg")

    def finish(self, jid: str) -> None:
        self.jobs[jid]["state"] = "succeeded"


# --- Vercel ------------------------------------------------------------------------

VC_TOKEN = "vercel-token-0123456789"
VC_WEBHOOK_SECRET = "vercel-webhook-secret-abcdef"
VC_ERROR = "BUILD_FAILED"
VC_FAILURE = 'Command "npm run build" exited with 1'


class VercelFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("dpl_8Xk2Pq", **kwargs)
        self.script: str | None = None
        self.list_queries: list[str] = []
        self.events = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v13/deployments", self.create, methods=["POST"]),
                Route("/v13/deployments/{did}", self.get, methods=["GET"]),
                Route("/v12/deployments/{did}/cancel", self.cancel, methods=["PATCH"]),
                Route("/v6/deployments", self.list_deployments, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(code: int, kind: str, message: str) -> Response:
        return json_response({"error": {"code": kind, "message": message}}, code)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {VC_TOKEN}":
            return self._error(403, "forbidden", "Not authorized")
        return None

    def deployment(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["body"]
        state = job["state"]
        out: dict[str, Any] = {
            "id": job["id"],
            "name": body.get("name"),
            "url": f"{body.get('name')}-{job['id'][-6:].lower()}-acme.vercel.app",
            "meta": body.get("meta") or {},
            "target": body.get("target"),
            "readyState": state,
            "status": state,
            "createdAt": 1765015200000,
            "alias": [f"{body.get('name')}.vercel.app"] if state == "READY" else [],
            "aliasAssigned": state == "READY",
        }
        if state == "ERROR":
            out |= {"errorCode": VC_ERROR, "errorMessage": VC_FAILURE, "errorStep": "build"}
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("name"):
            message = "Invalid request: missing required property `name`."
            return self._error(400, "bad_request", message)
        meta = body.get("meta") or {}
        if any(not isinstance(v, str) for v in meta.values()):
            message = "Invalid request: `meta` values must be strings."
            return self._error(400, "bad_request", message)
        did = self.new_id()
        self.jobs[did] = {
            "id": did,
            "body": body,
            "state": "QUEUED",
            "reads": 0,
            "script": self.script,
        }
        await _created(self)
        return json_response(self.deployment(self.jobs[did]))

    def _job(self, request: Request) -> dict[str, Any] | None:
        return self.jobs.get(request.path_params["did"])

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return self._error(404, "not_found", "Deployment not found")
        self.reads += 1
        _advance(
            job,
            ["QUEUED", "INITIALIZING", "BUILDING"],
            "ERROR" if job["script"] == "fail" else "READY",
        )
        return json_response(self.deployment(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return self._error(404, "not_found", "Deployment not found")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("QUEUED", "INITIALIZING", "BUILDING"):
            message = "Cannot cancel a deployment that is not building"
            return self._error(400, "bad_request", message)
        job["state"] = "CANCELED"
        return json_response(self.deployment(job))

    async def list_deployments(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.list_queries.append(str(request.url.query))
        wanted = {
            k.removeprefix("meta-"): v
            for k, v in request.query_params.items()
            if k.startswith("meta-")
        }
        found = [
            j
            for j in reversed(self.jobs.values())
            if all((j["body"].get("meta") or {}).get(k) == v for k, v in wanted.items())
        ]
        items = [
            {
                "uid": j["id"],
                "name": j["body"].get("name"),
                "url": self.deployment(j)["url"],
                "created": 1765015200000,
                "state": j["state"],
                "readyState": j["state"],
                "meta": j["body"].get("meta") or {},
                "target": j["body"].get("target"),
            }
            for j in found
        ]
        pagination = {"count": len(items), "next": None, "prev": None}
        return json_response({"deployments": items, "pagination": pagination})

    def finish(self, did: str) -> None:
        self.jobs[did]["state"] = "READY"

    def event(self, did: str, kind: str) -> bytes:
        """A webhook's body as Vercel sends it (its id a new one each time); a
        deployment the fixture does not hold is another project's, made elsewhere."""
        self.events += 1
        job = self.jobs.get(did) or {
            "id": did,
            "body": {"name": "other-site", "target": "preview", "meta": {"team": "docs"}},
            "state": "READY",
        }
        event = {
            "id": f"evt_{self.events:04d}{did[-6:]}",
            "type": kind,
            "createdAt": int(time.time() * 1000),
            "region": "iad1",
            "payload": {
                "deployment": {
                    "id": did,
                    "meta": job["body"].get("meta") or {},
                    "url": self.deployment(job)["url"],
                    "name": job["body"].get("name"),
                },
                "links": {"deployment": f"https://vercel.com/acme/{job['body'].get('name')}"},
                "target": job["body"].get("target"),
                "project": {"id": "prj_0123456789"},
                "plan": "pro",
                "regions": ["iad1"],
            },
        }
        return json.dumps(event).encode()

    @staticmethod
    async def post(url: str, body: bytes, signature: str | None) -> int:
        headers = {"content-type": "application/json"}
        if signature is not None:
            headers["x-vercel-signature"] = signature
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code


# --- Leonardo.ai -------------------------------------------------------------------

LEO_KEY = "leonardo-api-key-0123"
LEO_HOOK_TOKEN = "leonardo-webhook-callback-key-4567"


class LeonardoFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("5f2c9a7e-0000-4000-8000-", **kwargs)
        self.script: str | None = None
        self.deleted: list[str] = []

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + len(self.deleted) + 1:012d}"

    def app(self) -> Starlette:
        one = "/api/rest/v1/generations/{gid}"
        return Starlette(
            routes=[
                Route("/api/rest/v1/generations", self.create, methods=["POST"]),
                Route(one, self.get, methods=["GET"]),
                Route(one, self.delete, methods=["DELETE"]),
                Route("/cdn/{gid}/{name}", self.image, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {LEO_KEY}":
            body = {"error": "Invalid API key", "path": "$", "code": "invalid-jwt"}
            return json_response(body, 401)
        return None

    def images(self, base: str, job: dict[str, Any]) -> list[dict[str, Any]]:
        gid = job["id"]
        return [
            {"id": f"{gid[:8]}-img{i}", "url": f"{base}/cdn/{gid}/Leonardo_{i}.jpg", "nsfw": False}
            for i in range(int(job["body"].get("num_images") or 1))
        ]

    def generation(self, base: str, job: dict[str, Any]) -> dict[str, Any]:
        body = job["body"]
        return {
            "id": job["id"],
            "status": job["state"],
            "prompt": body.get("prompt"),
            "modelId": body.get("modelId"),
            "imageHeight": body.get("height"),
            "imageWidth": body.get("width"),
            "createdAt": "2026-12-06T10:00:00.000",
            "generated_images": self.images(base, job) if job["state"] == "COMPLETE" else [],
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("prompt"):
            body = {"error": "prompt is required", "path": "$.prompt", "code": "validation-failed"}
            return json_response(body, 400)
        gid = self.new_id()
        self.jobs[gid] = {
            "id": gid,
            "body": body,
            "state": "PENDING",
            "reads": 0,
            "script": self.script,
        }
        await _created(self)
        return json_response({"sdGenerationJob": {"generationId": gid, "apiCreditCost": 16}})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["gid"])
        if job is None:
            return json_response({"generations_by_pk": None})
        self.reads += 1
        if job["script"] != "slow":
            job["reads"] += 1
            if job["reads"] >= 2:
                job["state"] = "FAILED" if job["script"] == "fail" else "COMPLETE"
        return json_response({"generations_by_pk": self.generation(_base(request), job)})

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        gid = request.path_params["gid"]
        job = self.jobs.pop(gid, None)
        if job is None:
            return json_response({"delete_generations_by_pk": None})
        self.cancels.append((gid, job["state"]))
        self.deleted.append(gid)
        return json_response({"delete_generations_by_pk": {"id": gid}})

    async def image(self, request: Request) -> Response:
        return Response(_image(request.path_params["name"]), media_type="image/jpeg")

    def finish(self, gid: str) -> None:
        self.jobs[gid]["state"] = "COMPLETE"

    async def deliver(self, url: str, base: str, gid: str, *, token: str = LEO_HOOK_TOKEN) -> int:
        job = self.jobs[gid]
        generation = self.generation(base, job)
        generation["images"] = generation.pop("generated_images")
        event = {
            "type": "image_generation.complete",
            "object": "generation",
            "timestamp": int(time.time()),
            "api_version": "v1",
            "data": {"object": generation},
        }
        headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=json.dumps(event), headers=headers)).status_code


# --- Marketo bulk lead extract -----------------------------------------------------

MK_TOKEN = "cdf01657-110d-4155-99a7-f986b2ff13a0:int"
MK_FAILURE = "Export job failed: internal error while writing the file"
MK_ROWS = [
    ["id", "firstName", "lastName", "email"],
    ["318581", "Ada", "Lovelace", "ada@example.com"],
    ["318582", "Alan", "Turing", "alan@example.com"],
    ["318583", "Grace", "Hopper", "grace@example.com"],
]
MK_CSV = "".join(",".join(row) + "\n" for row in MK_ROWS).encode()
MK_QUOTA = {"code": "1029", "message": "Export daily quota 500MB exceeded"}
MK_EXPIRED = {"code": "602", "message": "Access token expired"}
MK_THROTTLE = {"code": "606", "message": "Max rate limit '100' exceeded with in '20' secs"}


class MarketoFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("ce45a7a1-f19d-4ce2-882c-", **kwargs)
        self.script: str | None = None
        self.throttle_reads = 0  # the next reads answered 606
        self.throttle_creates = 0  # the next creates answered 606
        self.quota_spent = False  # creates answered 1029, the daily export quota spent
        self.checksum: str | None = None  # a checksum served instead of the file's
        self.expired = False  # every call answered 602, the token expired (hourly)
        self.files = 0

    def new_id(self) -> str:
        return f"{self.prefix}{len(self.jobs) + 1:012d}"

    def app(self) -> Starlette:
        root = "/bulk/v1/leads/export"
        return Starlette(
            routes=[
                Route(f"{root}/create.json", self.create, methods=["POST"]),
                Route(f"{root}/{{eid}}/enqueue.json", self.enqueue_call, methods=["POST"]),
                Route(f"{root}/{{eid}}/status.json", self.get, methods=["GET"]),
                Route(f"{root}/{{eid}}/file.json", self.file, methods=["GET"]),
                Route(f"{root}/{{eid}}/cancel.json", self.cancel, methods=["POST"]),
            ]
        )

    @staticmethod
    def _answer(
        result: list[dict[str, Any]] | None = None, errors: list[Any] | None = None
    ) -> Response:
        body: dict[str, Any] = {"requestId": "e42b#14272d07d78", "success": errors is None}
        body |= {"errors": errors} if errors is not None else {"result": result or []}
        return json_response(body)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {MK_TOKEN}":
            return self._answer(errors=[{"code": "601", "message": "Access token invalid"}])
        if self.expired:
            return self._answer(errors=[MK_EXPIRED])
        return None

    def status(self, job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        out: dict[str, Any] = {
            "exportId": job["id"],
            "format": "CSV",
            "status": state,
            "createdAt": "2026-12-06T10:00:00Z",
        }
        if state in ("Queued", "Processing", "Completed", "Failed"):
            out["queuedAt"] = "2026-12-06T10:00:10Z"
        if state == "Completed":
            out |= {
                "startedAt": "2026-12-06T10:00:20Z",
                "finishedAt": "2026-12-06T10:01:20Z",
                "numberOfRecords": len(MK_ROWS) - 1,
                "fileSize": len(MK_CSV),
                "fileChecksum": self.checksum or "sha256:" + hashlib.sha256(MK_CSV).hexdigest(),
            }
        if state == "Failed":
            out["errorMsg"] = MK_FAILURE
        return out

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if self.throttle_creates:
            self.throttle_creates -= 1
            self.throttled_creates += 1
            return self._answer(errors=[MK_THROTTLE])
        if self.quota_spent:
            self.creates += 1
            return self._answer(errors=[MK_QUOTA])
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("fields"):
            return self._answer(errors=[{"code": "1003", "message": "fields is required"}])
        eid = self.new_id()
        self.jobs[eid] = {
            "id": eid,
            "body": body,
            "state": "Created",
            "reads": 0,
            "script": self.script,
        }
        await _created(self)
        return self._answer([self.status(self.jobs[eid])])

    def enqueue(self, eid: str) -> None:
        """What `enqueue.json` does: a Created job is Queued."""
        job = self.jobs[eid]
        if job["state"] == "Created":
            job["state"] = "Queued"

    async def enqueue_call(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["eid"])
        if job is None:
            return self._answer(errors=[{"code": "1003", "message": "Export job not found"}])
        self.enqueue(job["id"])
        return self._answer([self.status(job)])

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        if self.throttle_reads:
            self.throttle_reads -= 1
            self.throttled_reads += 1
            return self._answer(errors=[MK_THROTTLE])
        job = self.jobs.get(request.path_params["eid"])
        if job is None:
            return self._answer(errors=[{"code": "1003", "message": "Export job not found"}])
        self.reads += 1
        # Created stays Created: only enqueue.json starts a job
        end = "Failed" if job["script"] == "fail" else "Completed"
        _advance(job, ["Queued", "Processing"], end)
        return self._answer([self.status(job)])

    async def file(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["eid"])
        if job is None or job["state"] != "Completed":
            return Response(b"Export job not found or not completed", 404, media_type="text/plain")
        self.files += 1
        return Response(MK_CSV, media_type="text/csv")

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["eid"])
        if job is None:
            return self._answer(errors=[{"code": "1003", "message": "Export job not found"}])
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("Completed", "Failed"):
            message = f"Export job {job['id']} is already {job['state']}"
            return self._answer(errors=[{"code": "1029", "message": message}])
        job["state"] = "Cancelled"
        return self._answer([self.status(job)])


def vercel_signature(secret: str, body: bytes) -> str:
    """x-vercel-signature as Vercel's docs compute it: crypto.createHmac('sha1',
    secret).update(rawBody).digest('hex')."""
    return hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
