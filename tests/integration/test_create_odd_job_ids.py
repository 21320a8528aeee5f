"""Job ids in create and lookup answers that no request can name exactly.

A provider's answer is a third party's bytes: a job id holding NUL (PostgreSQL
text cannot), or one the provider wrote as a JSON float (1e400, rounded to
"inf" as it is read). Neither may be recorded altered (every later call would
name another job), claimed as what it is not (a conflict no provider answered),
or stop the reconciler on a database error, over and over, with the operation
left where it was. A human is told, in words the database can hold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.shapes import PLAIN_JOBS

S = LocalState
Answer = Callable[["Jobs", Any], Awaitable[Response]]

DESCRIBED = PLAIN_JOBS


class Jobs:
    """Creates answered from a script (the last answer repeats); a lookup lists
    `listed` (raw JSON items, as the provider wrote them); every job read is done."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.creates = self.lookups = self.reads = 0
        self.listed: list[bytes] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/jobs", self.create, methods=["POST"]),
                Route("/v1/jobs", self.lookup, methods=["GET"]),
                Route("/v1/jobs/{job_id}", self.read, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        answer = self.answers[min(self.creates, len(self.answers) - 1)]
        self.creates += 1
        return await answer(self, await request.json())

    async def lookup(self, request: Request) -> Response:
        self.lookups += 1
        items = b",".join(self.listed)
        return Response(b'{"jobs": [' + items + b"]}", media_type="application/json")

    async def read(self, request: Request) -> Response:
        self.reads += 1
        return JSONResponse({"id": request.path_params["job_id"], "status": "done"})


def answer(status: int, body: bytes) -> Answer:
    """The create answered `status` with `body`, bytes as the provider wrote them."""

    async def respond(_jobs: Jobs, _body: Any) -> Response:
        return Response(body, status_code=status, media_type="application/json")

    return respond


def rig(pool: Any, tmp_path: Path, jobs: Jobs, clock: TestClock) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        jobs.app(),
        preset=None,
        name="odd",
        env={},
        overrides=DESCRIBED,
        clock=clock,
    )


async def run(r: PresetRig, clock: TestClock, rounds: int) -> None:
    """The daemon's sweeps, `rounds` times, five seconds apart."""
    for _ in range(rounds):
        await r.reconciler.run_once()
        await clock.advance(5.0)


def failed_steps(caplog: Any) -> list[Any]:
    return [rec for rec in caplog.records if rec.getMessage() == "step failed"]


async def test_a_stranger_with_nul_beside_our_job_goes_to_a_human(
    pool: Any, tmp_path: Path, clock: TestClock, caplog: Any
) -> None:
    """The first create got a 502, the same-token retry job j1; the cross-check's
    lookup lists j1 and a second job for our reference whose id holds NUL. The
    escalation quoted that id in its reason, which PostgreSQL refused: "step
    failed" at every lease, the operation left `accepted` with its cross-check
    pending, no human told of the second job, the job never read."""
    jobs = Jobs([answer(502, b"bad gateway"), answer(201, b'{"id": "j1"}')])
    async with rig(pool, tmp_path, jobs, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=600)
        ref = op_id.encode()
        jobs.listed = [
            b'{"ref": "' + ref + b'", "id": "j1"}',
            b'{"ref": "' + ref + b'", "id": "j\\u00002"}',
        ]
        await run(r, clock, 6)
        op = await r.op(op_id)
        assert op.state is S.NEEDS_ATTENTION, await r.history(op_id)
        assert op.remote_job_id == "j1"
        reason = (await r.escalation(op_id))["reason"]
        assert "same token answered with job j1, but the provider also holds j" in reason, reason
        assert jobs.creates == 2 and jobs.reads == 0
        assert not failed_steps(caplog)


async def test_a_created_job_whose_id_holds_nul_is_no_conflict(
    pool: Any, tmp_path: Path, clock: TestClock, caplog: Any
) -> None:
    """A single create answered 201 naming job "job<NUL>x". Its call kept the id
    scrubbed (U+FFFD for the NUL), and the answer, compared with that record,
    read as "the same idempotency token was answered with another job id": a
    conflict no provider answered, the same id twice in the human's list (and,
    before escalations were scrubbed, a step failing on every lease). The id
    cannot be recorded as given: that is what the human is told."""
    jobs = Jobs([answer(201, b'{"id": "job\\u0000x"}')])
    async with rig(pool, tmp_path, jobs, clock) as r:
        op_id = await r.submit({"x": 1})
        await run(r, clock, 3)
        op = await r.op(op_id)
        assert op.state is S.NEEDS_ATTENTION, await r.history(op_id)
        assert await r.history(op_id) == ["create_pending", "needs_attention"]
        assert op.remote_job_id is None
        reason = (await r.escalation(op_id))["reason"]
        assert "cannot be recorded as given" in reason, reason
        assert "another job id" not in reason, reason
        assert jobs.creates == 1 and jobs.lookups == 0 and jobs.reads == 0
        assert not failed_steps(caplog)
        # the call on record names no job the provider did not (the id scrubbed)
        assert [c["remote_job_id"] for c in await r.calls(op_id, "create")] == [None]


async def test_a_job_id_written_as_a_float_names_no_job(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A create answered 201 {"id": 1e400}: the float, rounded as it is read, was
    taken as job "inf", whose reads the provider answered (a job of that name, or
    a catch-all route), and the operation "succeeded" on a job nobody named. A
    float names no id exactly (as in a webhook: `as_id`): the answer names no
    job, and the create stays uncertain."""
    jobs = Jobs([answer(201, b'{"id": 1e400}')])
    async with rig(pool, tmp_path, jobs, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=600)
        await run(r, clock, 4)
        op = await r.op(op_id)
        assert op.state is S.CREATE_UNKNOWN, await r.history(op_id)
        assert op.remote_job_id is None and jobs.reads == 0
        assert [c["remote_job_id"] for c in await r.calls(op_id, "create")] == [None] * jobs.creates


async def test_a_listed_job_id_written_as_a_float_is_no_lookup_answer(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Every create got a 502; at the create deadline the lookup lists our
    reference with {"id": 1e20}, which was adopted as job "1e+20" (Python's
    spelling of the float, not the provider's). It names no job: inconclusive,
    and the human is told the list holds our operation without a usable id."""
    jobs = Jobs([answer(502, b"bad gateway")])
    async with rig(pool, tmp_path, jobs, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=60)
        jobs.listed = [b'{"ref": "' + op_id.encode() + b'", "id": 1e20}']
        await run(r, clock, 3)
        await clock.advance(120.0)
        await run(r, clock, 2)
        op = await r.op(op_id)
        assert op.state is S.NEEDS_ATTENTION, await r.history(op_id)
        assert op.remote_job_id is None and jobs.lookups >= 1 and jobs.reads == 0
        reason = (await r.escalation(op_id))["reason"]
        assert "the list holds our operation but no job id at" in reason, reason


async def test_a_lookup_naming_only_a_job_with_nul_records_no_altered_id(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The same-token retry answered j1; the cross-check's lookup lists, for our
    reference, only a job whose id holds NUL. A human is told; the lookup's call
    on record named "j\ufffd2", an id no provider gave, which a later
    comparison or a human would take for the job's."""
    jobs = Jobs([answer(502, b"bad gateway"), answer(201, b'{"id": "j1"}')])
    async with rig(pool, tmp_path, jobs, clock) as r:
        op_id = await r.submit({"x": 1}, create_deadline_s=600)
        jobs.listed = [b'{"ref": "' + op_id.encode() + b'", "id": "j\\u00002"}']
        await run(r, clock, 6)
        assert await r.state(op_id) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert [c["remote_job_id"] for c in await r.calls(op_id, "lookup")] == [None]


async def test_a_synchronous_result_naming_a_job_id_with_nul_is_kept_without_it(
    pool: Any, tmp_path: Path, clock: TestClock, caplog: Any
) -> None:
    """A create answered 200 with its result inline and a job id holding NUL. The
    accepted path refuses such an id before anything else; the synchronous one
    handed it to the database, which refused the row: "step failed" at every
    lease, the result delivered once never kept, the operation left pending.
    As for a synchronous answer's id another operation holds, the id is not
    recorded and the result is kept all the same (nothing is read or cancelled
    after a synchronous result)."""
    described = {
        **DESCRIBED,
        "create": {
            **DESCRIBED["create"],
            "sync_result_statuses": [200],
            "sync_result": "/output",
        },
        "result": {"source": "inline", "inline": "/output", "format": "json"},
    }
    jobs = Jobs([answer(200, b'{"id": "job\\u0000x", "output": {"answer": 42}}')])
    async with preset_rig(
        pool,
        tmp_path,
        jobs.app(),
        preset=None,
        name="odd",
        env={},
        overrides=described,
        clock=clock,
    ) as r:
        op_id = await r.submit({"x": 1})
        await run(r, clock, 3)
        op = await r.op(op_id)
        assert not failed_steps(caplog)
        assert op.state is S.SUCCEEDED, await r.history(op_id)
        assert (op.remote_job_id, op.create_mode) == (None, "sync")
        assert b"42" in await r.result_bytes(op_id)
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'result_collecting'",
            op_id,
        )
        assert "cannot be recorded as given" in cause, cause
        assert jobs.creates == 1 and jobs.reads == 0


async def test_a_status_url_holding_nul_stops_no_step(
    pool: Any, tmp_path: Path, clock: TestClock, caplog: Any
) -> None:
    """A create answered 201 naming job j1 and a status URL holding NUL. The URL
    went to the database with the job id, which refused the row: "step failed"
    at every lease, the job never recorded, the operation left pending until its
    create deadline sent it to a human. The URL is left out, as when none is
    given: the job is read by status.path, and the history says why."""
    described = {
        **DESCRIBED,
        "create": {**DESCRIBED["create"], "status_url": "/status_url"},
        "status": {**DESCRIBED["status"], "use_status_url": True},
    }
    jobs = Jobs([answer(201, b'{"id": "j1", "status_url": "/v1/jobs/j\\u00001"}')])
    async with preset_rig(
        pool,
        tmp_path,
        jobs.app(),
        preset=None,
        name="odd",
        env={},
        overrides=described,
        clock=clock,
    ) as r:
        op_id = await r.submit({"x": 1})
        await run(r, clock, 4)
        assert not failed_steps(caplog)
        op = await r.op(op_id)
        assert (op.remote_job_id, op.status_url) == ("j1", None)
        assert op.state is S.SUCCEEDED, await r.history(op_id)
        assert jobs.creates == 1 and jobs.reads >= 1
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'accepted'", op_id
        )
        assert "its status URL holds NUL" in cause, cause
