"""`accepted` (the provider gave us a job id) moves to `observing` on the first
read that names the job's state, not on any read at all.

Before, every answered read moved it, one that saw nothing of the job too: a
revoked key's 401, a 429 or a 503 (back-pressure), an answer naming no state,
a GraphQL throttle carried in a 200, "not found". The agent and the operator
were then told the job was being observed when no read had ever seen it. Such
reads are recorded and scheduled as before and still count toward a human
(needs_attention, from `accepted`) and toward the result deadline.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from shared.ledger.states import LocalState as S
from tests.fixtures_providers.common import hang
from tests.fixtures_providers.rig import TEST_LIMITS, PresetRig, preset_rig

ENDS = {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.NEEDS_ATTENTION, S.RESULT_TIMED_OUT}
RETRY_AFTER_S = 40
WEBHOOKS = {
    "scheme": "static_header",
    "options": {"header": "X-Runs-Token"},
    "secrets_env": "RUNS_HOOK",
    "job_id": "/resource/id",
    "state": "/resource/status",
}


def runs(*, webhooks: bool = False) -> dict[str, Any]:
    """A user's description of `Runs` (no preset)."""
    described: dict[str, Any] = {
        "create": {"path": "/v2/runs", "idempotency": "none", "job_id": "/data/id"},
        "status": {
            "path": "/v2/runs/{job_id}",
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


class Runs:
    """A provider of runs on loopback whose status reads answer as `script` says,
    read by read (its last entry repeats): a state it names (`RUNNING`), or one
    of the answers in `answer` that names none."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/runs", self.create, methods=["POST"]),
                Route("/v2/runs/{rid}", self.status),
            ]
        )

    async def create(self, request: Request) -> Response:
        return JSONResponse({"data": {"id": "run-1", "status": "READY"}}, status_code=201)

    async def status(self, request: Request) -> Response:
        said = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return await answer(said)


async def answer(said: str) -> Response:
    """One status answer; every one but a state name says nothing of the job."""
    if said == "401":  # a revoked key
        error = {"type": "token-not-valid", "message": "Authentication token is not valid."}
        return JSONResponse({"error": error}, status_code=401)
    if said == "429":
        return JSONResponse(
            {"error": {"type": "rate-limit-exceeded"}},
            status_code=429,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    if said == "503":
        return Response("upstream unavailable", status_code=503)
    if said == "stateless":  # a 200 naming no state
        return JSONResponse({"data": {"id": "run-1"}})
    if said == "errors":  # a failed request carried in a 200 (GraphQL's THROTTLED)
        return JSONResponse({"errors": [{"message": "Throttled"}]})
    if said == "404":
        return JSONResponse({"error": {"type": "record-not-found"}}, status_code=404)
    if said == "hang":  # no answer within request_timeout
        await hang()
        return JSONResponse({"data": {"id": "run-1", "status": "RUNNING"}})
    return JSONResponse({"data": {"id": "run-1", "status": said}})


@contextlib.asynccontextmanager
async def accepted(
    pool: Any,
    tmp_path: Path,
    clock: TestClock,
    fx: Runs,
    *,
    webhooks: bool = False,
    with_receiver: bool = False,
    result_deadline_s: float = 3600.0,
) -> AsyncIterator[tuple[PresetRig, str]]:
    """A run created at the fixture: the operation is `accepted`, no read sent yet."""
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="runs",
        env={"RUNS_HOOK": "hook-token"},
        overrides=runs(webhooks=webhooks),
        with_receiver=with_receiver,
        clock=clock,
    ) as r:
        op_id = await r.submit({"input": 1}, result_deadline_s=result_deadline_s)
        # the create: rounds until it is done (under load a round may claim
        # nothing yet); the test clock stands still, so no read follows it
        await r.settle(op_id, {S.ACCEPTED, *ENDS})
        assert await r.state(op_id) is S.ACCEPTED
        assert fx.reads == 0
        yield r, op_id


async def read_once(r: PresetRig, clock: TestClock, op_id: str) -> Any:
    """Move to the operation's next appointment and read once; the read's call row."""
    before = len(await r.calls(op_id, "status"))
    assert await clock.to_appointment(r.pool, op_id)
    await r.reconciler.run_once()
    calls = await r.calls(op_id, "status")
    assert len(calls) == before + 1, calls
    return calls[-1]


async def overview(r: PresetRig, op_id: str) -> Any:
    """What the agent is shown (agent_operations is this view, filtered by caller)."""
    return await r.pool.fetchrow(
        "SELECT state, remote_state, done, message FROM operations_overview"
        " WHERE operation_id = $1",
        op_id,
    )


@pytest.mark.parametrize(
    ("said", "code", "category"),
    [
        ("401", 401, "http_4xx"),
        ("429", 429, "back_pressure"),
        ("503", 503, "back_pressure"),
        ("stateless", 200, None),
        ("errors", 200, "request_failed"),
        ("404", 404, "http_4xx"),
        ("hang", None, "timeout"),
    ],
)
async def test_a_read_that_sees_nothing_of_the_job_leaves_it_accepted(
    pool: Any, tmp_path: Path, clock: TestClock, said: str, code: int | None, category: str | None
) -> None:
    fx = Runs([said, "RUNNING"])
    async with accepted(pool, tmp_path, clock, fx) as (r, op_id):
        call = await read_once(r, clock, op_id)
        assert (call["status_code"], call["error_category"]) == (code, category)
        assert await r.state(op_id) is S.ACCEPTED, await r.history(op_id)
        assert "observing" not in await r.history(op_id)
        op = await r.op(op_id)
        assert op.poll_attempts == 1  # counted as a read, as before
        assert op.next_poll_at is not None and op.lease_owner is None  # read again later
        if code is not None:  # an answer: its observation is on record, naming no state
            observed = await r.pool.fetch(
                "SELECT remote_state FROM observations WHERE call_id = $1", call["call_id"]
            )
            assert [o["remote_state"] for o in observed] == [None]
        if said == "429":  # the provider's Retry-After holds the next read back
            held = (op.next_poll_at - call["finished_at"]).total_seconds()
            assert held >= RETRY_AFTER_S - 1, held
            assert call["not_before"] is not None and op.next_poll_at >= call["not_before"]
        shown = await overview(r, op_id)
        assert (shown["state"], shown["remote_state"], shown["done"]) == ("accepted", None, False)
        # the agent is told the job was taken, not that anyone saw it running (038)
        assert shown["message"].startswith("STARTED and NOT complete"), shown["message"]
        assert "no status read has seen it yet" in shown["message"], shown["message"]
        assert "is running" not in shown["message"], shown["message"]
        # the first read that names the job's state moves it on
        await read_once(r, clock, op_id)
        assert await r.state(op_id) is S.OBSERVING
        assert (await r.history(op_id))[-2:] == ["accepted", "observing"]
        seen = await overview(r, op_id)
        assert seen["remote_state"] == "running"
        assert "is running the job" in seen["message"], seen["message"]


async def test_a_first_read_naming_an_end_still_goes_through_observing_to_collection(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = Runs(["503", "SUCCEEDED"])
    async with accepted(pool, tmp_path, clock, fx) as (r, op_id):
        await read_once(r, clock, op_id)
        assert await r.state(op_id) is S.ACCEPTED
        await read_once(r, clock, op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED
        history = await r.history(op_id)
        assert history[-4:] == ["accepted", "observing", "result_collecting", "succeeded"], history
        assert fx.reads == 2


@pytest.mark.parametrize("webhooks", [False, True], ids=["polling", "webhooks"])
@pytest.mark.parametrize(
    ("said", "reads", "reason"),
    [
        ("401", 10, "the last 10 status reads were refused (the latest with HTTP 401"),
        ("stateless", 10, "the last 10 status reads answered HTTP 200 with no state"),
        ("404", 3, "provider says job run-1 does not exist"),
    ],
)
async def test_reads_that_never_see_the_job_still_go_to_a_human_from_accepted(
    pool: Any,
    tmp_path: Path,
    clock: TestClock,
    webhooks: bool,
    said: str,
    reads: int,
    reason: str,
) -> None:
    """The tolerances count from `accepted` as they did from `observing`. With
    webhooks the reads counted toward a human (refused, naming no state) follow
    the backoff, not the backstop, as from `observing`; misses keep the backstop."""
    fx = Runs([said])
    backstop = TEST_LIMITS["webhook_backstop_poll_seconds"]
    async with accepted(pool, tmp_path, clock, fx, webhooks=webhooks) as (r, op_id):
        await read_once(r, clock, op_id)  # the first read: the backstop's with webhooks
        waits = []
        while await r.state(op_id) is S.ACCEPTED:
            assert fx.reads < reads, await r.history(op_id)
            op = await r.op(op_id)
            assert op.next_poll_at is not None
            waits.append((op.next_poll_at - op.updated_at).total_seconds())
            await read_once(r, clock, op_id)
        assert await r.state(op_id) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.reads == reads
        history = await r.history(op_id)
        assert history[-2:] == ["accepted", "needs_attention"], history
        assert reason in (await r.escalation(op_id))["reason"]
        if said != "404":
            assert max(waits) < backstop / 10, waits


async def test_the_result_deadline_passes_from_accepted_when_no_read_saw_the_job(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = Runs(["503"])
    async with accepted(pool, tmp_path, clock, fx, result_deadline_s=600.0) as (r, op_id):
        await read_once(r, clock, op_id)
        assert await r.state(op_id) is S.ACCEPTED
        await clock.advance(601)
        assert await r.settle(op_id, ENDS) is S.RESULT_TIMED_OUT
        history = await r.history(op_id)
        assert history[-2:] == ["accepted", "result_timed_out"], history
        (reason,) = await r.pool.fetch(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'result_timed_out'",
            op_id,
        )
        assert "still shows no state (HTTP 503)" in reason["cause"], reason["cause"]


async def test_a_delivery_for_an_accepted_job_only_wakes_a_read(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A signed delivery saying the run succeeded moves nothing (only our own read
    does): it wakes a read at once, and reads that still see nothing (a 503) keep
    the operation `accepted` and follow the backoff, not the backstop, until one
    confirms the end."""
    fx = Runs(["503", "503", "SUCCEEDED"])
    backstop = TEST_LIMITS["webhook_backstop_poll_seconds"]
    async with accepted(pool, tmp_path, clock, fx, webhooks=True, with_receiver=True) as (r, op_id):
        body = {"resource": {"id": "run-1", "status": "SUCCEEDED"}}
        async with httpx.AsyncClient() as client:
            sent = await client.post(r.hook_url, json=body, headers={"X-Runs-Token": "hook-token"})
        assert sent.status_code == 200, sent.text
        assert await r.state(op_id) is S.ACCEPTED
        await r.reconciler.run_once()  # woken: read now, not at the backstop's 30 s
        assert fx.reads == 1
        assert await r.state(op_id) is S.ACCEPTED
        assert "observing" not in await r.history(op_id)
        op = await r.op(op_id)
        assert op.next_poll_at is not None
        assert (op.next_poll_at - op.updated_at).total_seconds() < backstop / 10
        await read_once(r, clock, op_id)
        assert await r.state(op_id) is S.ACCEPTED
        await read_once(r, clock, op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED
        history = await r.history(op_id)
        assert history[-4:] == ["accepted", "observing", "result_collecting", "succeeded"], history
        assert fx.reads == 3


class Abortable(Runs):
    """`Runs` with an abort (`cancel.read_first`: it harms a run that ended): each
    abort is counted, and answered as taken."""

    def __init__(self, script: list[str]) -> None:
        super().__init__(script)
        self.aborts = 0

    def app(self) -> Starlette:
        app = super().app()
        app.router.routes.append(Route("/v2/runs/{rid}/abort", self.abort, methods=["POST"]))
        return app

    async def abort(self, request: Request) -> Response:
        self.aborts += 1
        return JSONResponse({"data": {"id": "run-1", "status": "ABORTING"}})


def abortable() -> dict[str, Any]:
    """`runs()` with its abort, which a run that ended must not get (`cancel.read_first`)."""
    described = runs()
    described["cancel"] = {"path": "/v2/runs/{job_id}/abort", "read_first": True}
    return described


def abortable_rig(pool: Any, tmp_path: Path, fx: Abortable, clock: TestClock) -> Any:
    """`Abortable` as a user describes it (`abortable`), on the test's clock."""
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="runs",
        env={},
        overrides=abortable(),
        clock=clock,
    )


async def run_to_an_end(r: PresetRig, clock: TestClock, op_id: str) -> S:
    """Each appointment in turn, until the operation ends (or waits for a human)."""
    for _ in range(20):
        state = await r.state(op_id)
        if state in ENDS:
            return state
        assert await clock.to_appointment(r.pool, op_id), state
        await r.reconciler.run_once()
    raise AssertionError(await r.history(op_id))


@pytest.mark.parametrize("seen_nothing", ["429", "503", "401", "stateless"])
@pytest.mark.parametrize(
    ("then", "end", "aborts", "moves"),
    [
        ("RUNNING", S.CANCELLED, 1, ["cancel_requested", "cancelling", "cancelled"]),
        ("SUCCEEDED", S.SUCCEEDED, 0, ["cancel_requested", "result_collecting", "succeeded"]),
    ],
    ids=["running", "ended"],
)
async def test_a_cancel_of_a_job_no_read_has_seen_reads_it_first_from_cancel_requested(
    pool: Any,
    tmp_path: Path,
    clock: TestClock,
    seen_nothing: str,
    then: str,
    end: S,
    aborts: int,
    moves: list[str],
) -> None:
    """An agent cancels while the operation is still `accepted` (its one read saw
    nothing): the read before the cancel is made from `cancel_requested`, which
    no edge leaves for `observing`; one naming the run running lets the abort go,
    one naming its end settles it without one. Nothing passes through `observing`."""
    fx = Abortable([seen_nothing, then, "ABORTED"])
    async with abortable_rig(pool, tmp_path, fx, clock) as r:
        op_id = await r.submit({"input": 1})
        await r.reconciler.run_once()  # the create
        await read_once(r, clock, op_id)
        assert await r.state(op_id) is S.ACCEPTED
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        assert await run_to_an_end(r, clock, op_id) is end, await r.history(op_id)
        history = await r.history(op_id)
        assert history[-4:] == ["accepted", *moves], history
        assert fx.aborts == aborts


async def test_an_announced_end_no_read_confirms_is_read_on_the_backoff_ten_times_then_the_backstop(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A delivery says the run ended, every read answers 503: the operation stays
    `accepted`, and the fast confirming reads are bounded (CONFIRMING_READS), not
    a read every few seconds until the result deadline; then the backstop again."""
    fx = Runs(["503"])
    backstop = TEST_LIMITS["webhook_backstop_poll_seconds"]
    async with accepted(pool, tmp_path, clock, fx, webhooks=True, with_receiver=True) as (r, op_id):
        body = {"resource": {"id": "run-1", "status": "SUCCEEDED"}}
        async with httpx.AsyncClient() as client:
            sent = await client.post(r.hook_url, json=body, headers={"X-Runs-Token": "hook-token"})
        assert sent.status_code == 200, sent.text
        await r.reconciler.run_once()  # woken: the first read
        waits = []
        for _ in range(12):
            op = await r.op(op_id)
            assert op.state is S.ACCEPTED and op.next_poll_at is not None
            waits.append((op.next_poll_at - op.updated_at).total_seconds())
            await read_once(r, clock, op_id)
        assert all(wait < backstop / 10 for wait in waits[:10]), waits
        assert all(wait >= backstop - 1 for wait in waits[10:]), waits
        assert await r.state(op_id) is S.ACCEPTED


@pytest.mark.parametrize("seen_nothing", ["503", "401", "stateless"])
async def test_a_read_first_cancel_no_read_lets_go_escalates_at_its_deadline(
    pool: Any, tmp_path: Path, clock: TestClock, seen_nothing: str
) -> None:
    """`cancel.read_first`: only a read naming the run pending or running lets the
    abort go. Reads that never do (an outage's 503, a key revoked after the
    create, answers naming no state) escalate at the cancel deadline, saying no
    cancel was sent. Before, the operation stayed `cancel_requested` for ever,
    read on the backoff, the agent told "not yet confirmed" and no human told."""
    fx = Abortable([seen_nothing])
    async with abortable_rig(pool, tmp_path, fx, clock) as r:
        op_id = await r.submit({"input": 1})
        await r.reconciler.run_once()  # the create
        assert await r.state(op_id) is S.ACCEPTED
        assert await r.cancel(op_id, cancel_deadline_s=30.0) is S.CANCEL_REQUESTED
        for _ in range(200):
            if await r.state(op_id) is not S.CANCEL_REQUESTED:
                break
            assert await clock.to_appointment(r.pool, op_id)
            await r.reconciler.run_once()
        assert await r.state(op_id) is S.CANCELLATION_UNCONFIRMED, fx.reads
        assert fx.aborts == 0
        reason = (await r.escalation(op_id))["reason"]
        assert "no status read showed the job pending or running" in reason, reason
        assert "so no cancel was sent" in reason, reason
        assert (await r.history(op_id))[-2:] == ["cancel_requested", "cancellation_unconfirmed"]


async def test_a_read_first_cancel_goes_when_a_read_past_its_deadline_shows_the_job_running(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The deadline stops waiting for a read that shows the run; one that does, late,
    still lets the abort go (the agent asked for it), and the abort's confirmation
    is then read as for any cancel."""
    fx = Abortable(["503"])
    async with abortable_rig(pool, tmp_path, fx, clock) as r:
        op_id = await r.submit({"input": 1})
        await r.reconciler.run_once()  # the create
        assert await r.cancel(op_id, cancel_deadline_s=30.0) is S.CANCEL_REQUESTED
        await read_once(r, clock, op_id)  # a 503: the abort waits
        assert await r.state(op_id) is S.CANCEL_REQUESTED and fx.aborts == 0
        fx.script, fx.reads = ["RUNNING", "ABORTED"], 0
        await clock.advance(31.0)  # past the cancel deadline, no read since
        await r.reconciler.run_once()
        assert fx.aborts == 1
        assert await run_to_an_end(r, clock, op_id) is S.CANCELLED, await r.history(op_id)
