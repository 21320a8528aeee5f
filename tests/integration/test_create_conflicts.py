"""A create answered 409 again and again goes to a human, not on until the deadline.

Firecrawl answers a create whose idempotency key it has seen `409 "Idempotency
key already used"`, naming no job. A 409 without a recognised code is read as
a request with the same token still in progress (Stripe's meaning), and the
create was sent again on the backoff until the create deadline, an hour by
default: 28 creates in a minute, the agent told "no job id yet". A request in
progress ends within a minute or two; ten minutes of 409s do not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from reconciler.steps.create import CONFLICTS_MIN_SECONDS, CONFLICTS_TOLERANCE
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
    [(CONFLICTS_TOLERANCE + 3, S.ACCEPTED), (1000, S.NEEDS_ATTENTION)],
    ids=["in_progress_then_answered", "spent_token"],
)
async def test_a_create_answered_409_time_after_time_goes_to_a_human(
    pool: Any, tmp_path: Path, clock: TestClock, conflicts: int, end: S
) -> None:
    """Five 409s in a row are not enough on their own: a Stripe-like provider may
    work on a create for a minute or two past our request timeout. Ten minutes of
    them are."""
    fx = CrawlsFixture(conflicts)
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="firecrawl",
        env={},
        overrides=firecrawl(),
        clock=clock,
    ) as r:
        op_id = await r.submit({"url": "https://example.com"}, create_deadline_s=3600)
        step = 30.0  # a create every step, at most (the backoff's cap is shorter here)
        while await r.state(op_id) not in ENDS and fx.creates < 100:
            await r.reconciler.run_once()
            await clock.advance(step)
        assert await r.state(op_id) is end, await r.history(op_id)
        if end is S.NEEDS_ATTENTION:
            # the first 409 is the second create: ten minutes of them, then a human
            assert fx.creates == 2 + int(CONFLICTS_MIN_SECONDS // step)
            reason = (await r.escalation(op_id))["reason"]
            assert reason.startswith("the provider answered our create HTTP 409"), reason
        else:
            assert fx.creates == 2 + conflicts
