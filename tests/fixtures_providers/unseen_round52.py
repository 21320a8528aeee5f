"""Together AI's batches and Firecrawl's crawls, each a real app on loopback
answering in the shapes their public documentation gives
(tests/integration/test_unseen_round52.py). DeepL's document translation needs no
fake: its description is refused at load (its status needs the upload's
`document_key`, which no description can carry).

- Together AI (docs.together.ai, Batch inference; togethercomputer/openapi's
  openapi.yaml): `POST /v1/batches` (bearer, JSON {"input_file_id", "endpoint",
  "completion_window"?}) answers 201 {"job": BatchJob, "warning"?} (create wraps the
  batch in `job`, retrieve does not); `GET /v1/batches/{id}` the BatchJob {"id",
  "user_id", "input_file_id", "status": VALIDATING | IN_PROGRESS | COMPLETED | FAILED
  | EXPIRED | CANCELLED, "progress" (0.0 to 100), "output_file_id"?,
  "error_file_id"?, "error"?, "created_at", "completed_at"?}; `POST
  /v1/batches/{id}/cancel` the BatchJob ("You can cancel a batch while it is
  VALIDATING or IN_PROGRESS"; the completed requests' responses stay in the output
  file); errors {"error": "..."} (429 too). The output file holds "one response line
  for every successful request line"; "any failed requests will have their error
  information in a separate error file accessible via error_file_id", each line
  keyed by `custom_id`; `GET /v1/files/{id}/content` serves either.
- Firecrawl (docs.firecrawl.dev, v1; firecrawl's own types: CrawlResponse,
  CrawlStatusResponse): `POST /v1/crawl` (bearer, JSON {"url", "limit"?, "webhook"?
  {"url", "headers"?, "metadata"?, "events"?}}, `x-idempotency-key` a UUID, a key
  seen before answered 409) answers 200 {"success": true, "id", "url"}; `GET
  /v1/crawl/{id}` {"success": true, "status": scraping | completed | failed |
  cancelled, "completed", "total", "creditsUsed", "expiresAt", "next"?, "data":
  [document...]}, a page of `data` at a time, `next` the next page's absolute URL;
  `DELETE /v1/crawl/{id}` {"status": "cancelled"} (409 "Crawl is already completed"
  once it completed; its crawl-cancel controller); 429 {"success": false, "error"}
  past the rate limit. Webhooks {"success", "type": "crawl.started" | "crawl.page"
  | "crawl.completed" | "crawl.failed", "id", "data", "metadata" (as given),
  "error"?}, signed `X-Firecrawl-Signature: sha256=<hex HMAC-SHA256 of the raw
  body>` under the account's webhook secret.

Scripts: the create body's `script` ("fail", "slow": runs until the test ends it;
Together's "mixed": some requests failed, both files; "allfail": every request
failed, an error file alone; anything else succeeds after a few reads).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response, jsonl, read_json
from tests.fixtures_providers.unseen_media import _Jobs

TOGETHER_KEY = "together-test-api-key"
FIRECRAWL_KEY = "fc-test-api-key"
FIRECRAWL_SECRET = "fc-webhook-secret-0123456789abcdef"

TOGETHER_OUTPUT = [
    {
        "id": f"resp-{n}",
        "custom_id": f"request-{n}",
        "response": {
            "status_code": 200,
            "body": {"choices": [{"message": {"role": "assistant", "content": f"answer {n}"}}]},
        },
    }
    for n in (1, 2, 3)
]
TOGETHER_ERRORS = [
    {
        "custom_id": "request-4",
        "error": {"message": "max_tokens exceeds the model's limit", "code": "invalid_request"},
    }
]
TOGETHER_FAILURE = "input file validation failed: line 2: custom_id is required"
CRAWL_PAGES = [
    {
        "markdown": f"# Page {n}",
        "metadata": {"sourceURL": f"https://example.com/{n}", "statusCode": 200},
    }
    for n in range(1, 6)
]


def _script(job: dict[str, Any]) -> str | None:
    body = job["input"]
    return body.get("script") if isinstance(body, dict) else None


# --- Together AI ------------------------------------------------------------------


class TogetherFixture(_Jobs):
    """`file_reads`: the content reads of each file id."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("0b9e6c1a-2f3d-4e5f-8a9b-00000000", **kwargs)
        self.files: dict[str, bytes] = {}
        self.file_reads: dict[str, int] = {}
        self.retry_after = "1"
        self.throttled_cancels = 0
        self.throttled_files = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/batches", self.create, methods=["POST"]),
                Route("/v1/batches/{bid}", self.status, methods=["GET"]),
                Route("/v1/batches/{bid}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/files/{fid}/content", self.content, methods=["GET"]),
            ]
        )

    @staticmethod
    def _error(message: str, code: int, headers: dict[str, str] | None = None) -> Response:
        return json_response({"error": message}, code, headers)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {TOGETHER_KEY}"

    def _batch(self, job: dict[str, Any]) -> dict[str, Any]:
        batch = {
            "id": job["id"],
            "user_id": "user_789xyz012",
            "input_file_id": job["input"]["input_file_id"],
            "file_size_bytes": 1048576,
            "status": job["state"],
            "job_deadline": "2026-12-07T03:00:00Z",
            "created_at": "2026-12-06T03:00:00Z",
            "endpoint": job["input"]["endpoint"],
            "progress": job["progress"],
            "model_id": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        }
        batch.update(job["extra"])
        return batch

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Invalid API key", 401)
        if self.throttled_creates:
            self.throttled_creates -= 1
            return self._error("rate limit exceeded", 429, {"Retry-After": self.retry_after})
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("input_file_id") or not body.get("endpoint"):
            return self._error("input_file_id and endpoint are required", 400)
        bid = self.new_id()
        self.jobs[bid] = {
            "id": bid,
            "input": body,
            "state": "VALIDATING",
            "progress": 0.0,
            "reads": 0,
            "extra": {},
        }
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response({"job": self._batch(self.jobs[bid])}, 201)

    def _file(self, bid: str, kind: str, lines: list[dict[str, Any]]) -> str:
        fid = f"file-{kind}-{bid[-4:]}"
        self.files[fid] = jsonl(lines)
        return fid

    def finish(self, bid: str) -> None:
        job = self.jobs[bid]
        script = _script(job)
        job["state"], job["progress"] = "COMPLETED", 100.0
        job["extra"]["completed_at"] = "2026-12-06T03:10:00Z"
        if script == "fail":
            job["state"] = "FAILED"
            job["extra"] = {"error": TOGETHER_FAILURE}
            return
        if script != "allfail":
            output = TOGETHER_OUTPUT[:2] if script == "mixed" else TOGETHER_OUTPUT
            job["extra"]["output_file_id"] = self._file(bid, "output", output)
        if script in ("mixed", "allfail"):
            job["extra"]["error_file_id"] = self._file(bid, "errors", TOGETHER_ERRORS)

    async def status(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Invalid API key", 401)
        job = self.jobs.get(request.path_params["bid"])
        if job is None:
            return self._error("batch job not found", 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return self._error("rate limit exceeded", 429, {"Retry-After": self.retry_after})
        job["reads"] += 1
        if job["state"] == "VALIDATING" and job["reads"] >= 2:
            job["state"], job["progress"] = "IN_PROGRESS", 40.0
        elif job["state"] == "IN_PROGRESS" and job["reads"] >= 3 and _script(job) != "slow":
            self.finish(job["id"])
        return json_response(self._batch(job))

    async def cancel(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Invalid API key", 401)
        job = self.jobs.get(request.path_params["bid"])
        if job is None:
            return self._error("batch job not found", 404)
        self.cancels.append((job["id"], job["state"]))
        if self.throttled_cancels:
            self.throttled_cancels -= 1
            return self._error("rate limit exceeded", 429, {"Retry-After": self.retry_after})
        if job["state"] not in ("VALIDATING", "IN_PROGRESS"):
            return self._error(f"batch job cannot be cancelled in status {job['state']}", 400)
        job["state"] = "CANCELLED"
        # the requests done before the cancel stay in the output file
        job["extra"]["output_file_id"] = self._file(job["id"], "output", TOGETHER_OUTPUT[:1])
        return json_response(self._batch(job))

    async def content(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Invalid API key", 401)
        fid = request.path_params["fid"]
        if fid not in self.files:
            return self._error("file not found", 404)
        self.file_reads[fid] = self.file_reads.get(fid, 0) + 1
        if self.throttled_files:
            self.throttled_files -= 1
            return self._error("rate limit exceeded", 429, {"Retry-After": self.retry_after})
        return Response(self.files[fid], media_type="application/octet-stream")


# --- Firecrawl --------------------------------------------------------------------

WEBHOOK_KEYS = {"url", "headers", "metadata", "events"}


def _webhook_refused(webhook: Any) -> str | None:
    """Firecrawl's webhookSchema: a URL string, or a strict object whose `url` is
    required, `metadata` string values only; the first violation, as its
    validation words it, or None."""
    if isinstance(webhook, str):
        webhook = {"url": webhook}
    if not isinstance(webhook, dict):
        return "webhook: Expected object, received " + type(webhook).__name__
    if set(webhook) - WEBHOOK_KEYS:
        return "webhook: Unrecognized key in body -- please review the v1 API documentation"
    url = webhook.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "webhook.url: Required" if url is None else "webhook.url: Invalid url"
    metadata = webhook.get("metadata", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        return "webhook.metadata: Expected string"
    return None


class FirecrawlFixture(_Jobs):
    """Crawls of five pages, served two a status page; `keys`: the idempotency keys
    seen; `throttled_reads`: that many status reads answer 429 first."""

    def __init__(self, *, page_size: int = 2, **kwargs: Any) -> None:
        super().__init__("f1c0a2b3-0000-4000-8000-00000000", **kwargs)
        self.page_size = page_size
        self.keys: list[str | None] = []
        self.webhooks: list[dict[str, Any]] = []  # the `webhook` object of each create
        self.retry_after = "1"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/crawl", self.create, methods=["POST"]),
                Route("/v1/crawl/{cid}", self.status, methods=["GET"]),
                Route("/v1/crawl/{cid}", self.cancel, methods=["DELETE"]),
            ]
        )

    @staticmethod
    def _error(message: str, code: int, headers: dict[str, str] | None = None) -> Response:
        return json_response({"success": False, "error": message}, code, headers)

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {FIRECRAWL_KEY}"

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Unauthorized: Invalid token", 401)
        if self.throttled_creates:
            self.throttled_creates -= 1
            return self._error("Rate limit exceeded", 429, {"Retry-After": self.retry_after})
        key = request.headers.get("x-idempotency-key")
        if key is not None:
            uuid.UUID(key)
            if key in self.keys:
                return self._error("Idempotency key already used", 409)
        self.keys.append(key)
        body = await read_json(request)
        if not isinstance(body, dict) or not body.get("url"):
            return self._error("url: Required", 400)
        if "webhook" in body:
            refused = _webhook_refused(body["webhook"])
            if refused is not None:
                return self._error(refused, 400)
            self.webhooks.append(body["webhook"])
        cid = self.new_id()
        self.jobs[cid] = {"id": cid, "input": body, "state": "scraping", "done": 0, "reads": 0}
        self.creates += 1
        if self.lose_first_create and self.creates == 1:
            await hang()
        return json_response(
            {"success": True, "id": cid, "url": f"{request.base_url}v1/crawl/{cid}"}
        )

    def finish(self, cid: str) -> None:
        job = self.jobs[cid]
        if _script(job) == "fail":
            job["state"] = "failed"
        else:
            job["state"], job["done"] = "completed", len(CRAWL_PAGES)

    async def status(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Unauthorized: Invalid token", 401)
        job = self.jobs.get(request.path_params["cid"])
        if job is None:
            return self._error("Job not found", 404)
        self.reads += 1
        if self.throttled_reads:
            self.throttled_reads -= 1
            return self._error("Rate limit exceeded", 429, {"Retry-After": self.retry_after})
        skip = int(request.query_params.get("skip", "0"))
        if skip == 0:
            job["reads"] += 1
            if job["state"] == "scraping":
                job["done"] = min(job["done"] + 1, len(CRAWL_PAGES) - 1)
                if job["reads"] >= 3 and _script(job) not in ("slow",):
                    self.finish(job["id"])
        data = CRAWL_PAGES[: job["done"]][skip : skip + self.page_size]
        body: dict[str, Any] = {
            "success": True,
            "status": job["state"],
            "completed": job["done"],
            "total": len(CRAWL_PAGES),
            "creditsUsed": job["done"],
            "expiresAt": "2026-12-07T03:00:00.000Z",
            "data": data,
        }
        if skip + self.page_size < job["done"]:
            body["next"] = f"{request.base_url}v1/crawl/{job['id']}?skip={skip + self.page_size}"
        return json_response(body)

    async def cancel(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error("Unauthorized: Invalid token", 401)
        job = self.jobs.get(request.path_params["cid"])
        if job is None:
            return self._error("Job not found", 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] == "completed":
            return self._error("Crawl is already completed", 409)
        job["state"] = "cancelled"
        return json_response({"status": "cancelled"})

    async def deliver(
        self, url: str, cid: str, event: str, *, secret: str = FIRECRAWL_SECRET, **extra: Any
    ) -> int:
        """Firecrawl's webhook `event` for crawl `cid`, signed as Firecrawl signs it."""
        job = self.jobs[cid]
        payload: dict[str, Any] = {
            "success": event != "crawl.failed",
            "type": event,
            "id": cid,
            "data": CRAWL_PAGES[:1] if event == "crawl.page" else [],
            "metadata": job["input"].get("webhook", {}).get("metadata", {}),
            **extra,
        }
        body = json.dumps(payload).encode()
        digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {"Content-Type": "application/json", "X-Firecrawl-Signature": f"sha256={digest}"}
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code
