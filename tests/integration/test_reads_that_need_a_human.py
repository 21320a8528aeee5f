"""Status reads that keep saying nothing the reconciler can act on go to a human.

Two kinds, each ten in a row: answers naming a state the description does not
map (Apify's `SUCCEEDED_WITH_WARNINGS`, missing from a user's state map), and
reads refused with a lasting 4xx (a key revoked after the create: 401; an
`Accept` the provider will not serve: 406). Before, a refused read counted for
nothing, and with webhooks neither kind was read again before the backstop, so
ten of them took longer than the result deadline: the agent was told "running"
for a day, and the inbox stayed empty.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from shared.ledger.states import LocalState as S
from tests.fixtures_providers.rig import TEST_LIMITS, PresetRig, preset_rig

ENDS = {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.NEEDS_ATTENTION, S.RESULT_TIMED_OUT}
WEBHOOKS = {
    "scheme": "static_header",
    "options": {"header": "X-Apify-Token"},
    "secrets_env": "APIFY_HOOK",
    "job_id": "/resource/id",
    "state": "/resource/status",
}


def apify_runs(*, webhooks: bool) -> dict[str, Any]:
    """The description a user writes for `RunsFixture`: its state map lacks one state."""
    described: dict[str, Any] = {
        "create": {"path": "/v2/acts/act-1/runs", "idempotency": "none", "job_id": "/data/id"},
        "status": {
            "path": "/v2/actor-runs/{job_id}",
            "state": "/data/status",
            "state_map": {
                "READY": "pending",
                "RUNNING": "running",
                "SUCCEEDED": "succeeded",
                "FAILED": "failed",
                "ABORTED": "cancelled",
            },
        },
        "result": {"source": "none"},
    }
    if webhooks:
        described["webhooks"] = WEBHOOKS
    return described


class RunsFixture:
    """Apify-like runs; every status read answers as `answer` says: an unmapped
    state, or a refusal with that HTTP code."""

    def __init__(self, answer: str, states: dict[int, str] | None = None) -> None:
        self.answer = answer
        self.states = states or {}  # read number -> the state it names instead
        self.reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/acts/act-1/runs", self.create, methods=["POST"]),
                Route("/v2/actor-runs/{rid}", self.status),
            ]
        )

    async def create(self, request: Request) -> Response:
        return JSONResponse({"data": {"id": "run-1", "status": "READY"}}, status_code=201)

    async def status(self, request: Request) -> Response:
        self.reads += 1
        said = self.states.get(self.reads)
        if said == "404":
            return JSONResponse({"error": {"type": "record-not-found"}}, status_code=404)
        if said == "THROTTLED":  # a failed request carried in a 200
            return JSONResponse({"errors": [{"message": "Throttled"}]})
        if said is not None:
            return JSONResponse({"data": {"id": "run-1", "status": said}})
        if self.answer == "unmapped":
            return JSONResponse({"data": {"id": "run-1", "status": "SUCCEEDED_WITH_WARNINGS"}})
        if self.answer.startswith("403 "):  # a throttle answered 403 (GitHub's)
            header = dict([self.answer.removeprefix("403 ").split(": ")])
            error = {"type": "rate-limit-exceeded", "message": "API rate limit exceeded."}
            return JSONResponse({"error": error}, status_code=403, headers=header)
        error = {"type": "token-not-valid", "message": "Authentication token is not valid."}
        return JSONResponse({"error": error}, status_code=int(self.answer))


@contextlib.asynccontextmanager
async def polled(
    pool: Any, tmp_path: Path, fx: RunsFixture
) -> AsyncIterator[tuple[PresetRig, str]]:
    """A run submitted to the fixture, polled (no webhooks)."""
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="apify",
        env={},
        overrides=apify_runs(webhooks=False),
    ) as r:
        yield r, await r.submit({"startUrls": []}, result_deadline_s=3600)


@pytest.mark.parametrize("webhooks", [False, True], ids=["polling", "webhooks"])
@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("unmapped", "with state 'SUCCEEDED_WITH_WARNINGS', which status.state_map does not map"),
        # the refusal quoted as the provider said it, then the hint
        ("401", 'HTTP 401 (\'{"error":{"type":"token-not-valid"'),
        ("406", "were refused (the latest with HTTP 406 ('"),
    ],
)
async def test_ten_reads_saying_nothing_usable_go_to_a_human(
    pool: Any, tmp_path: Path, clock: TestClock, webhooks: bool, answer: str, said: str
) -> None:
    fx = RunsFixture(answer)
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="apify",
        env={"APIFY_HOOK": "hook-token"},
        overrides=apify_runs(webhooks=webhooks),
        clock=clock,
    ) as r:
        op_id = await r.submit({"startUrls": []}, result_deadline_s=3600)
        await r.reconciler.run_once()  # the create
        assert await r.state(op_id) is S.ACCEPTED
        # with webhooks the first read is the backstop's (30 s here), and so would
        # every later one be: only the backoff gets ten reads in before the test ends
        await clock.advance(TEST_LIMITS["webhook_backstop_poll_seconds"] + 1)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert said in reason, reason
        assert fx.reads == 10


async def test_refusals_between_reads_that_see_the_job_are_read_past(
    pool: Any, tmp_path: Path
) -> None:
    """Nine refusals, then an answer naming a state, then nine more: no human."""
    fx = RunsFixture("401", {10: "RUNNING", 20: "SUCCEEDED"})
    async with polled(pool, tmp_path, fx) as (r, op_id):
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.reads == 20


@pytest.mark.parametrize("throttle", ["x-ratelimit-remaining: 0", "retry-after: 0"])
async def test_a_throttle_answered_403_is_no_refusal(
    pool: Any, tmp_path: Path, throttle: str
) -> None:
    """GitHub answers its rate limits with 403 (a spent quota, or a Retry-After):
    twelve of them in a row are throttles, read past, not refusals for a human."""
    fx = RunsFixture(f"403 {throttle}", {13: "SUCCEEDED"})
    async with polled(pool, tmp_path, fx) as (r, op_id):
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.reads == 13
        categories = {c["error_category"] for c in await r.calls(op_id, "status")}
        assert categories == {"back_pressure", None}, categories


async def test_a_throttle_between_misses_neither_sees_the_job_nor_breaks_the_run(
    pool: Any, tmp_path: Path
) -> None:
    """A 200 carrying only `errors` (a throttle) saw nothing: between "not found"
    answers it neither resets their run (it did, as a read that saw the job) nor
    counts; three misses in a row still go to a human."""
    fx = RunsFixture("unmapped", {1: "RUNNING", 2: "404", 3: "THROTTLED", 4: "404", 5: "404"})
    async with polled(pool, tmp_path, fx) as (r, op_id):
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "provider says job run-1 does not exist" in reason, reason
        assert fx.reads == 5
