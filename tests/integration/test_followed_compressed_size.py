"""`result.compression` with several followed files: the collection stops fetching
once the files read add up past max_bytes, counted decompressed (what validation
and memory see). Before, it counted the gzip bytes as sent, so every file was
fetched and held decompressed (each up to max_bytes + 1) before validation refused
the whole as too large. Through the real reconciler against a loopback fake."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.ledger.states import LocalState
from tests.fixtures_providers.described import ENDS
from tests.fixtures_providers.rig import preset_rig

S = LocalState
FILES = ["f1", "f2", "f3"]
TEXT = b"row\n" * 225  # 900 bytes: one file fits max_bytes (1000), two do not


class Fake:
    """A job done at once naming three files, each a document linking a gzip file."""

    def __init__(self) -> None:
        self.fetched: list[str] = []

    async def create(self, request: Request) -> Response:
        return JSONResponse({"id": "job-1"}, status_code=201)

    async def status(self, request: Request) -> Response:
        return JSONResponse({"state": "done", "files": FILES})

    async def document(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        return JSONResponse({"url": f"/data/{file_id}", "compressionAlgorithm": "GZIP"})

    async def data(self, request: Request) -> Response:
        self.fetched.append(request.path_params["file_id"])
        return Response(gzip.compress(TEXT), media_type="application/octet-stream")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/jobs", self.create, methods=["POST"]),
                Route("/jobs/{job_id}", self.status),
                Route("/documents/{file_id}", self.document),
                Route("/data/{file_id}", self.data),
            ]
        )


DESCRIPTION = {
    "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
    "status": {
        "path": "/jobs/{job_id}",
        "state": "/state",
        "state_map": {"running": "running", "done": "succeeded"},
    },
    "result": {
        "source": "files",
        "file_ids": "/files",
        "path": "/documents/{file_id}",
        "follow": "/url",
        "compression": "/compressionAlgorithm",
        "format": "text",
        "expect": {"max_bytes": 1000},
    },
}


async def test_followed_files_stop_once_their_decompressed_sizes_pass_max_bytes(
    pool: Any, tmp_path: Path
) -> None:
    fx = Fake()
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="packed", env={}, overrides=DESCRIPTION
    ) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        assert fx.fetched == ["f1", "f2"]  # the third is never fetched
