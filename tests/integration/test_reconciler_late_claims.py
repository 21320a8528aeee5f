"""A slow call does not hold new work back (a reviewer's find, low load).

run_once waited for every step of a batch that was not full before it
claimed again, and the daemon's ticks were skipped meanwhile: an operation
submitted while another's create hung was created only when that create
timed out, 10 s later. The provider here holds the first create until the
test lets it go; the second operation must be created meanwhile, by the same
run_once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.ledger.states import LocalState
from tests.fixtures_providers.common import json_response
from tests.fixtures_providers.rig import preset_rig

S = LocalState
DESCRIPTION: dict[str, Any] = {
    "create": {"path": "/jobs", "idempotency": "header", "job_id": "/id"},
    "status": {
        "path": "/jobs/{job_id}",
        "state": "/state",
        "state_map": {"running": "running", "done": "succeeded"},
    },
    "result": {"source": "inline", "inline": "/output"},
    # the held create must not time out while the test waits (the rig's lease is 10 s,
    # and a call that could outlast its lease is never sent)
    "limits": {"request_timeout": 8.0},
}


# Far above the sweep interval (0.5 s) a late claim takes, below the held call's timeout.
SECOND_CREATE_BOUND_SECONDS = 6.0


class HeldFirstCreate:
    """A provider whose first create answers only when `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.first_arrived = asyncio.Event()
        self.second_arrived = asyncio.Event()
        self.creates = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/jobs", self.create, methods=["POST"]),
                Route("/jobs/{jid}", self.status),
            ]
        )

    async def create(self, request: Request) -> Response:
        self.creates += 1
        job_id = f"job-{self.creates}"
        if self.creates == 1:
            self.first_arrived.set()
            await self.release.wait()
        else:
            self.second_arrived.set()
        return json_response({"id": job_id}, 201)

    async def status(self, request: Request) -> Response:
        return json_response({"state": "running"})


class RefusedClaims:
    """Reconciler.claim, refused for real (its connection terminated) when `when(limit)`."""

    def __init__(
        self, pool: Any, claim: Callable[[int], Awaitable[Any]], refused: asyncio.Event
    ) -> None:
        self.pool = pool
        self.claim = claim
        self.refused = refused

    def refusing(self, when: Callable[[int], bool]) -> Callable[[int], Awaitable[Any]]:
        async def claim(limit: int) -> Any:
            if not when(limit):
                return await self.claim(limit)
            async with self.pool.acquire() as conn:
                try:
                    await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
                finally:
                    self.refused.set()
            raise AssertionError("unreachable: the backend was terminated")

        return claim


async def test_an_operation_submitted_during_a_hanging_create_is_created_meanwhile(
    pool: Any, tmp_path: Path
) -> None:
    fx = HeldFirstCreate()
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="slow", env={}, overrides=DESCRIPTION
    ) as r:
        first = await r.submit({"n": 1})
        running = asyncio.create_task(r.reconciler.run_once())
        await fx.first_arrived.wait()
        second = await r.submit({"n": 2})
        # without late claims the second create waits for the release: it never
        # comes, and this fails once the bound (under the held call's timeout) passes
        await asyncio.wait_for(fx.second_arrived.wait(), SECOND_CREATE_BOUND_SECONDS)
        assert not running.done()  # the same run_once, still waiting on the first create
        fx.release.set()
        counts = await running
        assert counts["claimed"] == 2
        assert await r.settle(first, {S.ACCEPTED, S.OBSERVING}) in (S.ACCEPTED, S.OBSERVING)
        assert await r.settle(second, {S.ACCEPTED, S.OBSERVING}) in (S.ACCEPTED, S.OBSERVING)


async def test_a_late_claim_that_fails_leaves_the_calls_in_flight_alone(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late claim's error reached run_once's handler, which cancels every step in
    flight: a pool timeout in a quiet sweep cut a create off mid-request (a
    reviewer's second read). The database refuses the late claim for real here
    (the claim statement's connection is terminated)."""
    fx = HeldFirstCreate()
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="slow", env={}, overrides=DESCRIPTION
    ) as r:
        first = await r.submit({"n": 1})
        refused = asyncio.Event()
        claims = RefusedClaims(pool, r.reconciler.claim, refused)
        monkeypatch.setattr(
            r.reconciler, "claim", claims.refusing(lambda _: fx.first_arrived.is_set())
        )
        running = asyncio.create_task(r.reconciler.run_once())
        await fx.first_arrived.wait()
        await asyncio.wait_for(refused.wait(), SECOND_CREATE_BOUND_SECONDS)
        assert not running.done()  # the failed claim did not end the call in flight
        fx.release.set()
        counts = await running
        assert counts["claimed"] == 1 and fx.creates == 1
        assert await r.state(first) in (S.ACCEPTED, S.OBSERVING)


async def test_a_top_up_claim_that_fails_leaves_the_calls_in_flight_alone(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other claim run_once makes while steps run: topping up a full batch. Its
    error ended run_once the same way (a long-run review): the held create was
    cancelled mid-request and the batch's leases left to lapse."""
    fx = HeldFirstCreate()
    batch = 4
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="slow", env={}, overrides=DESCRIPTION
    ) as r:
        ops = [await r.submit({"n": n}) for n in range(batch + 1)]
        refused = asyncio.Event()
        claims = RefusedClaims(pool, r.reconciler.claim, refused)
        monkeypatch.setattr(r.reconciler, "claim", claims.refusing(lambda limit: limit < batch))
        running = asyncio.create_task(r.reconciler.run_once(batch))
        await fx.first_arrived.wait()
        await asyncio.wait_for(refused.wait(), SECOND_CREATE_BOUND_SECONDS)
        fx.release.set()
        counts = await running  # raised the claim's error, the held create cancelled
        assert counts["claimed"] == batch and fx.creates == batch
        assert [await r.state(op) for op in ops[:batch]] == [S.ACCEPTED] * batch
