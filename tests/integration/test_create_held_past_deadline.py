"""A create answered with a wait that outlasts the create deadline.

`Retry-After` is honoured (seconds or HTTP-date, capped at a day), and no call
goes out before it ends. A create deadline that passes meanwhile still asks a
human, as a result deadline does for status reads (the provider's window past
the deadline's grace escalates): before, the operation sat in create_unknown
until the window ended, a day after a two-minute deadline, nobody told.
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
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import PLAIN_JOBS

S = LocalState

DESCRIBED = PLAIN_JOBS


class Throttling:
    """Every create answered 429 with `retry_after`; lookups list nothing."""

    def __init__(self, retry_after: str) -> None:
        self.retry_after = retry_after
        self.creates = self.lookups = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/jobs", self.create, methods=["POST"]),
                Route("/v1/jobs", self.lookup, methods=["GET"]),
            ]
        )

    async def create(self, _request: Request) -> Response:
        self.creates += 1
        return JSONResponse(
            {"error": "slow down"}, status_code=429, headers={"Retry-After": self.retry_after}
        )

    async def lookup(self, _request: Request) -> Response:
        self.lookups += 1
        return JSONResponse({"jobs": []})


def _rig(pool: Any, tmp_path: Path, fx: Any, overrides: dict[str, Any], clock: TestClock) -> Any:
    """The throttling provider `fx` serves, described as `overrides`, on the test clock."""
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="throttling",
        env={},
        overrides=overrides,
        clock=clock,
    )


@pytest.mark.parametrize(
    ("retry_after", "documented"),
    [("86400", False), ("Fri, 31 Dec 9999 23:59:59 GMT", False), ("86400", True)],
    ids=["seconds", "http_date", "documented_429"],
)
async def test_a_wait_past_the_create_deadline_goes_to_a_human(
    retry_after: str, documented: bool, pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The create got 429 asking for a day's wait, the create deadline two
    minutes away: a human is asked by the deadline, told until when the provider
    asks us to wait, and nothing more is sent meanwhile (no create, no lookup)."""
    fx = Throttling(retry_after)
    overrides = DESCRIBED
    if documented:
        overrides = {**DESCRIBED, "create": {**DESCRIBED["create"], "not_created_statuses": [429]}}
    async with _rig(pool, tmp_path, fx, overrides, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=120)
        await r.reconciler.run_once()
        assert fx.creates == 1
        await clock.advance(130.0)  # past the create deadline, well within the day
        for _ in range(3):
            await r.reconciler.run_once()
            await clock.advance(5.0)
        assert await r.state(op_id) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "asks us not to call again until" in reason, reason
        assert "past the create deadline" in reason, reason
        if documented:
            assert "no remote job exists" in reason, reason
        else:
            assert "whether a remote job exists is unknown" in reason, reason
        assert fx.creates == 1 and fx.lookups == 0


class LookupThrottling(Throttling):
    """The create answered 502 (the job may exist); every lookup 429 with `retry_after`."""

    async def create(self, _request: Request) -> Response:
        self.creates += 1
        return JSONResponse({"error": "bad gateway"}, status_code=502)

    async def lookup(self, _request: Request) -> Response:
        self.lookups += 1
        return JSONResponse(
            {"error": "slow down"}, status_code=429, headers={"Retry-After": self.retry_after}
        )


async def test_a_lookups_wait_past_the_create_deadline_goes_to_a_human(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A provider that cannot deduplicate creates: the create got a 502, so only a
    lookup may tell whether the job exists, and the lookup got 429 asking for a
    day. The operation sat in create_unknown for that day, its two-minute create
    deadline passed unseen."""
    fx = LookupThrottling("86400")
    overrides = {**DESCRIBED, "create": {**DESCRIBED["create"], "idempotency": "none"}}
    async with _rig(pool, tmp_path, fx, overrides, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=120)
        for _ in range(3):
            await r.reconciler.run_once()
            await clock.advance(5.0)
        assert fx.creates == 1 and fx.lookups == 1
        await clock.advance(130.0)  # past the create deadline, well within the day
        for _ in range(3):
            await r.reconciler.run_once()
            await clock.advance(5.0)
        assert await r.state(op_id) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "asks us not to call again until" in reason, reason
        assert "whether a remote job exists is unknown" in reason, reason
        assert fx.creates == 1 and fx.lookups == 1


class RefusedThenLookupThrottling(Throttling):
    """Every create answered with a documented 429 (creating nothing) asking for
    `retry_after`; every lookup 429 asking for a day."""

    async def lookup(self, _request: Request) -> Response:
        self.lookups += 1
        return JSONResponse(
            {"error": "slow down"}, status_code=429, headers={"Retry-After": "86400"}
        )


async def test_a_wait_past_the_deadline_where_no_job_can_exist_says_so_alone(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Every create was refused with a 429 the provider documents as creating
    nothing, a cancel came, and the lookup it asked for got a day's wait. The
    human was told no job exists, and in the same breath to list the 429 in
    create.not_created_statuses (it is listed) and to cancel the job at the
    provider if it exists: advice for a job that may exist, which
    `_deadline_passed` gives only then."""
    fx = RefusedThenLookupThrottling("30")
    overrides = {**DESCRIBED, "create": {**DESCRIBED["create"], "not_created_statuses": [429]}}
    async with _rig(pool, tmp_path, fx, overrides, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=120)
        await r.reconciler.run_once()
        assert fx.creates == 1 and await r.state(op_id) is S.CREATE_PENDING
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        await clock.advance(31.0)
        for _ in range(3):
            await r.reconciler.run_once()
            await clock.advance(5.0)
        assert await r.state(op_id) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and fx.lookups == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "asks us not to call again until" in reason, reason
        assert "no remote job exists" in reason, reason
        assert "not_created_statuses: it is then sent again" not in reason, reason
        assert "cancel it there" not in reason, reason
