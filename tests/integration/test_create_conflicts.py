"""A create answered 409 again and again goes to a human, not on until the deadline.

Firecrawl answers a create whose idempotency key it has seen `409 "Idempotency
key already used"`, naming no job. A 409 without a recognised code is read as
a request with the same token still in progress (Stripe's meaning), and the
create was sent again on the backoff until the create deadline, an hour by
default: 28 creates in a minute, the agent told "no job id yet". A request in
progress ends within seconds; five 409s in a row do not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.steps.create import CONFLICTS_TOLERANCE
from shared.ledger.states import LocalState as S
from tests.fixtures_providers.rig import preset_rig

ENDS = {S.ACCEPTED, S.OBSERVING, S.SUCCEEDED, S.NEEDS_ATTENTION, S.FAILED}


def firecrawl() -> dict[str, Any]:
    return {
        "create": {
            "path": "/v1/crawl",
            "idempotency": "header",
            "idempotency_header": "x-idempotency-key",
            "idempotency_format": "uuid",
            "job_id": "/id",
            "error_code": "/error",
        },
        "status": {
            "path": "/v1/crawl/{job_id}",
            "state": "/status",
            "state_map": {"scraping": "running", "completed": "succeeded", "failed": "failed"},
        },
        "result": {"source": "none"},
    }


class CrawlsFixture:
    """The first create's answer is a 500 (the crawl was made); later ones with the
    same key answer 409 until `conflicts` of them were sent, then the crawl."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.creates = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/crawl", self.create, methods=["POST"]),
                Route("/v1/crawl/{cid}", self.status),
            ]
        )

    async def create(self, request: Request) -> Response:
        self.creates += 1
        if self.creates == 1:
            return JSONResponse({"error": "Internal server error"}, status_code=500)
        if self.creates <= 1 + self.conflicts:
            return JSONResponse({"error": "Idempotency key already used"}, status_code=409)
        return JSONResponse({"success": True, "id": "crawl-1"})

    async def status(self, request: Request) -> Response:
        return JSONResponse({"status": "scraping"})


@pytest.mark.parametrize(
    ("conflicts", "end"),
    [(CONFLICTS_TOLERANCE - 1, S.ACCEPTED), (100, S.NEEDS_ATTENTION)],
    ids=["in_progress_then_answered", "spent_token"],
)
async def test_a_create_answered_409_time_after_time_goes_to_a_human(
    pool: Any, tmp_path: Path, conflicts: int, end: S
) -> None:
    fx = CrawlsFixture(conflicts)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="firecrawl", env={}, overrides=firecrawl()
    ) as r:
        op_id = await r.submit({"url": "https://example.com"}, create_deadline_s=3600)
        state = await r.settle(op_id, ENDS)
        assert state is end, await r.history(op_id)
        if end is S.NEEDS_ATTENTION:
            assert fx.creates == 1 + CONFLICTS_TOLERANCE
            reason = (await r.escalation(op_id))["reason"]
            assert reason.startswith(
                f"the provider answered our create HTTP 409 {CONFLICTS_TOLERANCE} times in a row"
            ), reason
        else:
            assert fx.creates == 2 + conflicts
