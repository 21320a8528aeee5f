"""A create refused with a status the provider documents as "nothing was created".

A tester describing Runway (no idempotency key, no lookup; its docs: 429 "May
retry? Yes", body `{"error": "..."}`, no Retry-After) found every
rate-limited create in the inbox: a 429 was ambiguous ("the job may exist"),
and for such a provider ambiguous means a human at once. `create.
not_created_statuses = [429]` says what the docs say: that answer is
back-pressure, and the same create goes out again (after its Retry-After,
else the backoff) within the create deadline, the 429 on record like any call.
Without the key nothing changes. Real reconciler, real database, the provider
a real HTTP server on loopback.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.harness import TestClock
from shared.clock import SYSTEM_CLOCK, Clock
from shared.ledger.states import LocalState
from shared.providers.config import deep_merge
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.shapes import runway_tasks

S = LocalState
ENDS = {S.SUCCEEDED, S.FAILED, S.NEEDS_ATTENTION}
THROTTLED = {"error": "You have exceeded the rate limit for this integration."}

# Runway's image_to_video as its docs describe it, TOML-only (no preset): the
# task server's description (tests/fixtures_providers/shapes.py), its create's
# error read from `/error` as Runway's 4xx bodies carry it.
RUNWAY: dict[str, Any] = deep_merge(
    runway_tasks(read_first=False), {"create": {"error_message": "/error"}}
)
NOT_CREATED: dict[str, Any] = {"create": {"not_created_statuses": [429]}}
# The same refusal as a GraphQL API words it: HTTP 200, the code in `errors`
# (Shopify's THROTTLED, its OPERATION_IN_PROGRESS in `userErrors`).
GRAPHQL_THROTTLED = {"data": {"create": None}, "errors": [{"extensions": {"code": "THROTTLED"}}]}
NOT_CREATED_CODES: dict[str, Any] = {
    "create": {"not_created_codes": {"/errors/0/extensions/code": ["THROTTLED"]}}
}
# How the provider says "throttled, nothing created", and the key that says so.
REFUSALS = {"http_429": NOT_CREATED, "graphql_200": NOT_CREATED_CODES}
# A lookup by our reference, for the case that must not use it.
WITH_LOOKUP: dict[str, Any] = {
    "create": {"client_reference_field": "metadata.reference"},
    "lookup": {
        "path": "/v1/tasks",
        "query_param": "reference",
        "list": "/tasks",
        "match": "metadata.reference",
        "job_id": "id",
    },
}


@dataclass
class Runway:
    """Answers the first `throttled` creates 429 (creating nothing), then takes
    them (or refuses them 400 when `refuse`); every task has succeeded."""

    throttled: int = 0
    retry_after: str | None = None
    refuse: bool = False
    # "http_429", or "graphql_200": the refusal a 200 whose `errors` name THROTTLED
    refusal: str = "http_429"
    creates: int = 0
    lookups: int = 0
    jobs: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def create(_request: Request) -> JSONResponse:
            self.creates += 1
            if self.creates <= self.throttled:
                headers = {"Retry-After": self.retry_after} if self.retry_after else {}
                if self.refusal == "graphql_200":
                    return JSONResponse(GRAPHQL_THROTTLED, headers=headers)
                return JSONResponse(THROTTLED, status_code=429, headers=headers)
            if self.refuse:
                return JSONResponse({"error": "promptImage: not a URL"}, status_code=400)
            self.jobs.append(f"task_{len(self.jobs) + 1}")
            return JSONResponse({"id": self.jobs[-1]}, status_code=202)

        async def task(request: Request) -> JSONResponse:
            job_id = request.path_params["job_id"]
            return JSONResponse({"id": job_id, "status": "SUCCEEDED", "output": ["out.mp4"]})

        async def lookup(_request: Request) -> JSONResponse:
            self.lookups += 1
            return JSONResponse({"tasks": []})

        return Starlette(
            routes=[
                Route("/v1/image_to_video", create, methods=["POST"]),
                Route("/v1/tasks", lookup, methods=["GET"]),
                Route("/v1/tasks/{job_id}", task, methods=["GET"]),
            ]
        )


def runway(
    pool: Any, tmp_path: Path, fx: Runway, *extra: dict[str, Any], clock: Clock = SYSTEM_CLOCK
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    """The reconciler against `fx`, described as RUNWAY with `extra` merged in."""
    description = RUNWAY
    for more in extra:
        description = deep_merge(description, more)
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="runway",
        env={},
        overrides=description,
        clock=clock,
    )


async def create_codes(r: PresetRig, op_id: str) -> list[int | None]:
    return [c["status_code"] for c in await r.calls(op_id, "create")]


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_a_429_that_created_nothing_is_sent_again_and_the_job_runs_once(
    pool: Any, tmp_path: Path, refusal: str
) -> None:
    fx = Runway(throttled=1, refusal=refusal)
    async with runway(pool, tmp_path, fx, REFUSALS[refusal]) as r:
        op_id = await r.submit({"promptImage": "https://x.example/a.png"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        history = await r.history(op_id)
        assert "create_unknown" not in history and "needs_attention" not in history
        assert await r.escalation(op_id) is None
        assert fx.jobs == ["task_1"] and fx.creates == 2
        op = await r.op(op_id)
        assert (op.remote_job_id, op.create_attempts) == ("task_1", 2)
        # the 429 is on record like any call: its answer, the provider's words
        throttled, taken = await r.calls(op_id, "create")
        said = {"http_429": (429, "exceeded the rate limit"), "graphql_200": (200, "THROTTLED")}
        assert (throttled["status_code"], taken["status_code"]) == (said[refusal][0], 202)
        assert throttled["attempt"] == 1 and said[refusal][1] in throttled["response_body"]
        assert throttled["idempotency_token"] == taken["idempotency_token"]


async def test_the_resend_waits_for_the_429s_retry_after(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = Runway(throttled=1, retry_after="7")
    async with runway(pool, tmp_path, fx, NOT_CREATED, clock=clock) as r:
        op_id = await r.submit({"promptImage": "https://x.example/a.png"})
        await r.reconciler.run_once()
        assert await create_codes(r, op_id) == [429]
        assert await r.state(op_id) is S.CREATE_PENDING
        await clock.advance(6.0)
        await r.reconciler.run_once()
        assert fx.creates == 1  # 6 s (and a little real time) after the 429: not yet
        await clock.advance(1.5)
        await r.reconciler.run_once()
        assert await create_codes(r, op_id) == [429, 202]
        assert await r.state(op_id) is S.ACCEPTED
        throttled, taken = await r.calls(op_id, "create")
        assert (taken["started_at"] - throttled["finished_at"]).total_seconds() >= 7.0


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_without_the_key_a_429_is_still_ambiguous_and_goes_to_a_human(
    pool: Any, tmp_path: Path, refusal: str
) -> None:
    fx = Runway(throttled=1, refusal=refusal)
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit({"promptImage": "https://x.example/a.png"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION
        assert await r.history(op_id) == ["create_pending", "create_unknown", "needs_attention"]
        assert "cannot deduplicate creates" in (await r.escalation(op_id))["reason"]
        assert fx.creates == 1 and len(await create_codes(r, op_id)) == 1


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_a_refusal_after_a_429_that_created_nothing_fails_the_operation(
    pool: Any, tmp_path: Path, refusal: str
) -> None:
    """No earlier attempt can have made a job, so a 400 is the final word (before,
    any retried create that was refused went to a human)."""
    fx = Runway(throttled=1, refuse=True, refusal=refusal)
    async with runway(pool, tmp_path, fx, REFUSALS[refusal]) as r:
        op_id = await r.submit({"promptImage": "not a url"})
        assert await r.settle(op_id, ENDS) is S.FAILED
        assert await r.history(op_id) == ["create_pending", "failed"]
        assert (await create_codes(r, op_id))[1:] == [400]


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
async def test_rate_limited_past_the_create_deadline_asks_a_human_without_a_lookup(
    pool: Any, tmp_path: Path, clock: TestClock, refusal: str
) -> None:
    fx = Runway(throttled=1000, retry_after="7", refusal=refusal)
    async with runway(pool, tmp_path, fx, REFUSALS[refusal], WITH_LOOKUP, clock=clock) as r:
        op_id = await r.submit({"promptImage": "https://x.example/a.png"}, create_deadline_s=20)
        for _ in range(5):
            await r.reconciler.run_once()
            await clock.advance(7.5)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION
        assert fx.creates == 3 and fx.lookups == 0 and fx.jobs == []
        assert await r.history(op_id) == ["create_pending", "needs_attention"]
        reason = (await r.escalation(op_id))["reason"]
        assert "all 3 create attempt(s) were refused" in reason
        assert "no remote job exists" in reason
