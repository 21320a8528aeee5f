"""A result sent content-coded is checked against the digest of the bytes as sent.

RFC 9530's Content-Digest (like RFC 3230's Digest and Content-MD5) covers
the message's content: the bytes on the wire, before the gzip the server
applied is undone. The reconciler asks for `Accept-Encoding: identity`, but
a server that compresses anyway, with a correct Content-Digest, had its
result refused as corrupted (the digest was compared with the decoded body
only). A digest of the decoded body, as some servers compute it, still
passes; one of neither does not.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bench.harness import TestClock
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import simulator_rig, simulator_shaped
from tests.integration.test_url_review import run

S = LocalState
RESULT = json.dumps({"job_id": "job-1", "items": [{"n": 1}, {"n": 2}]}).encode()
SENT = gzip.compress(RESULT, mtime=0)
DIGESTS_OVER = {
    "the bytes as sent": SENT,
    "the decoded body": RESULT,
    "neither": b"something else",
}


def content_digest(data: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"


def provider(digest_over: bytes, sent: bytes = SENT) -> Starlette:
    """The simulator's shape: a job done at once, its result gzipped whatever was asked."""

    async def create(_request: Request) -> JSONResponse:
        return JSONResponse({"job_id": "job-1", "state": "queued"}, status_code=202)

    async def status(request: Request) -> JSONResponse:
        base = str(request.base_url).rstrip("/")
        return JSONResponse(
            {"job_id": "job-1", "state": "succeeded", "result_url": f"{base}/results/job-1"}
        )

    async def result(_request: Request) -> Response:
        headers = {"Content-Encoding": "gzip", "Content-Digest": content_digest(digest_over)}
        return Response(sent, media_type="application/json", headers=headers)

    return simulator_shaped(create, status, result)


@pytest.mark.parametrize("over", DIGESTS_OVER, ids=["sent", "decoded", "neither"])
async def test_a_gzipped_result_is_checked_against_its_content_digest(
    pool: Any, tmp_path: Path, clock: TestClock, over: str
) -> None:
    async with simulator_rig(pool, tmp_path, provider(DIGESTS_OVER[over]), clock=clock) as r:
        op_id = await r.submit({})
        state = await run(r, op_id, clock)
        stored = await pool.fetchrow(
            "SELECT sha256, size_bytes FROM results WHERE operation_id=$1 AND valid", op_id
        )
        fetched = await r.calls(op_id, "result")
    assert fetched, "the result was never fetched"
    if over == "neither":
        assert (state, stored) == (S.RESULT_VALIDATION_FAILED, None)
        return
    assert state is S.SUCCEEDED
    # what is stored is the decoded document, hashed as such
    assert stored is not None and stored["sha256"] == hashlib.sha256(RESULT).hexdigest()
    assert stored["size_bytes"] == len(RESULT)


@pytest.mark.parametrize("how", ["cut", "two members"])
async def test_a_gzipped_result_decodes_whole_or_not_at_all(
    pool: Any, tmp_path: Path, clock: TestClock, how: str
) -> None:
    """A gzip stream cut before its end decoded to a prefix of the document, and the
    digest of the bytes as sent matched: a truncated result passed as valid. And a
    body of two gzip members (RFC 1952 2.2) kept only the first."""
    half = len(RESULT) // 2
    sent = (
        SENT[:-12] if how == "cut" else gzip.compress(RESULT[:half]) + gzip.compress(RESULT[half:])
    )
    app = provider(sent, sent)
    async with simulator_rig(pool, tmp_path, app, clock=clock) as r:
        op_id = await r.submit({})
        state = await run(r, op_id, clock)
        valid = await pool.fetchval(
            "SELECT sha256 FROM results WHERE operation_id=$1 AND valid", op_id
        )
        fetched = await r.calls(op_id, "result")
    if how == "two members":
        assert (state, valid) == (S.SUCCEEDED, hashlib.sha256(RESULT).hexdigest())
        return
    # each fetch a failed call (no answer taken), then the usual end of a result
    # that keeps failing
    assert (state, valid) == (S.RESULT_UNAVAILABLE, None)
    assert fetched and {(c["error_category"], c["status_code"]) for c in fetched} == {
        ("other", None)
    }
