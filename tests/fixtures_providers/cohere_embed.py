"""Cohere's embed jobs (v1), as docs.cohere.com's API reference describes them.

- `POST /v1/embed-jobs` {model, dataset_id, input_type, name?} answers 200
  `{"job_id", "meta"}`; nothing deduplicates it. `name` is the only field a
  caller chooses that the job keeps.
- `GET /v1/embed-jobs` answers `{"embed_jobs": [...]}`, every job of the
  account, no paging and no filter.
- `GET /v1/embed-jobs/{id}`: an EmbedJob, `status` one of processing,
  complete, cancelling, cancelled, failed; no error field. An unknown id
  answers 404 `{"message"}`.
- `POST /v1/embed-jobs/{id}/cancel` answers 200 (empty): the job reads
  `cancelling`, then `cancelled`; "partial results will not be available".
- The result is a Dataset: `GET /v1/datasets/{output_dataset_id}` answers
  `{"dataset": {..., "dataset_parts": [{"url": <signed>, "num_rows"}]}}`; the
  embeddings themselves are the parts (Avro) behind those signed URLs.

A job's script is its `dataset_id`: "fail" fails, "slow" stays processing
until cancelled, "race" completes at the read the cancel follows.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import hang, json_response

COHERE_KEY = "co-test-key"
PART_BYTES = b"Obj\x01avro-embeddings"
READS_TO_FINISH = 2


class EmbedJobsFixture:
    def __init__(
        self, *, others: int = 3, lose_first_create: bool = False, keep_lost: bool = True
    ) -> None:
        self.lose_first_create = lose_first_create
        self.keep_lost = keep_lost
        self.creates = 0
        self.cancels = 0
        self.part_fetches = 0
        self.jobs: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        for i in range(others):
            self._add({"name": f"someone-else-{i}", "dataset_id": "x", "model": "m"})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/embed-jobs", self.create, methods=["POST"]),
                Route("/v1/embed-jobs", self.listing, methods=["GET"]),
                Route("/v1/embed-jobs/{jid}", self.status, methods=["GET"]),
                Route("/v1/embed-jobs/{jid}/cancel", self.cancel, methods=["POST"]),
                Route("/v1/datasets/{did}", self.dataset, methods=["GET"]),
                Route("/parts/{did}", self.part, methods=["GET"]),
            ]
        )

    def named(self, name: str) -> list[str]:
        return [jid for jid, job in self.jobs.items() if job.get("name") == name]

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        jid = f"ej-{len(self.jobs):04d}"
        job = {
            "job_id": jid,
            "name": body.get("name"),
            "status": "processing",
            "created_at": "2026-12-05T09:00:00Z",
            "input_dataset_id": body["dataset_id"],
            "model": body["model"],
            "truncate": body.get("truncate", "END"),
            "meta": {"api_version": {"version": "1"}},
        }
        self.jobs[jid] = job
        return job

    @staticmethod
    def _unauthorized(request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {COHERE_KEY}":
            return json_response({"message": "invalid api token"}, 401)
        return None

    async def create(self, request: Request) -> Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        body = await request.json()
        missing = [k for k in ("model", "dataset_id", "input_type") if k not in body]
        if missing:
            return json_response({"message": f"missing required field {missing[0]}"}, 400)
        self.creates += 1
        lost = self.lose_first_create and self.creates == 1
        if lost and not self.keep_lost:  # failed after reading the request
            await hang()
            return json_response({"message": "internal server error"}, 500)
        job = self._add(body)
        if lost:
            await hang()
        return json_response({"job_id": job["job_id"], "meta": job["meta"]})

    async def listing(self, request: Request) -> Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        return json_response({"embed_jobs": list(self.jobs.values())})

    async def status(self, request: Request) -> Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"message": "embed job not found"}, 404)
        jid = job["job_id"]
        self.reads[jid] = self.reads.get(jid, 0) + 1
        script = job["input_dataset_id"]
        if job["status"] == "cancelling":
            job["status"] = "cancelled"
        elif job["status"] == "processing" and script == "race":
            job["status"] = "complete"  # done just as a cancel is on its way
            job["output_dataset_id"] = f"{jid}-out"
        elif (
            job["status"] == "processing" and script != "slow" and self.reads[jid] > READS_TO_FINISH
        ):
            if script == "fail":
                job["status"] = "failed"
            else:
                job["status"] = "complete"
                job["output_dataset_id"] = f"{jid}-out"
        return json_response(job)

    async def cancel(self, request: Request) -> Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        self.cancels += 1
        job = self.jobs.get(request.path_params["jid"])
        if job is None:
            return json_response({"message": "embed job not found"}, 404)
        if job["status"] != "processing":
            return json_response({"message": f"cannot cancel a {job['status']} job"}, 400)
        job["status"] = "cancelling"
        return Response(status_code=200)

    async def dataset(self, request: Request) -> Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        did = request.path_params["did"]
        base = str(request.base_url).rstrip("/")
        return json_response(
            {
                "dataset": {
                    "id": did,
                    "name": did,
                    "created_at": "2026-12-05T09:01:00Z",
                    "updated_at": "2026-12-05T09:01:00Z",
                    "dataset_type": "embed-result",
                    "validation_status": "validated",
                    "dataset_parts": [
                        {
                            "id": f"{did}-p0",
                            "name": "part-0.avro",
                            "url": f"{base}/parts/{did}?X-Amz-Signature=abc&X-Amz-Expires=3600",
                            "index": 0,
                            "size_bytes": len(PART_BYTES),
                            "num_rows": 3,
                        }
                    ],
                }
            }
        )

    async def part(self, request: Request) -> Response:
        self.part_fetches += 1
        return Response(PART_BYTES, media_type="application/octet-stream")
