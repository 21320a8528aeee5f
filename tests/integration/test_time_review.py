"""Time and numbers at their edges (a review's reproductions), with the real reconciler.

Each failed before its fix: a `Retry-After` date that overflows made every
read fail before it was recorded (the deadline never fired) and lost a
create's job id; a host clock ahead of the database's fired deadlines early
(the step's database frame was measured, then never handed to the step);
progress too small for a double divided by zero; an adapter that raises on a
provider's answer looped the operation for ever.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from bench.harness import TestClock
from shared.clock import SYSTEM_CLOCK, Clock, ShiftedClock
from shared.ledger.states import LocalState
from shared.providers import HttpResponse, ProviderAdapter, StatusFact
from tests.fixtures_providers.rig import PresetRig, simulator_rig, simulator_shaped

S = LocalState
# parsedate_to_datetime raises OverflowError on both: a zone offset no
# timedelta holds, a day no C int holds.
ZONE_TOO_FAR = "Mon, 01 Jan 2027 00:00:00 +99999999999999999999"
DAY_TOO_BIG = "Mon, 99999999999 Jan 2027 00:00:00 GMT"
# Long enough for the deadline's grace (300 s) to pass on the test clock.
CLOCK_STEPS, CLOCK_STEP_SECONDS = 25, 31.0


@dataclass
class ScriptedProvider:
    """The simulator preset's API shape, answering what the test scripts."""

    create_headers: dict[str, str] = field(default_factory=dict)
    status_headers: dict[str, str] = field(default_factory=dict)
    status_extra: Callable[[int], dict[str, Any]] = lambda _n: {}
    creates: int = 0
    reads: int = 0

    def app(self) -> Starlette:
        async def create(_request: Request) -> JSONResponse:
            self.creates += 1
            answer = {"job_id": "job-1", "state": "queued"}
            return JSONResponse(answer, status_code=202, headers=self.create_headers)

        async def status(request: Request) -> JSONResponse:
            self.reads += 1
            body = {"job_id": request.path_params["job_id"], "state": "running"}
            body.update(self.status_extra(self.reads))
            return JSONResponse(body, headers=self.status_headers)

        return simulator_shaped(create, status)


def scripted_rig(
    pool: Any,
    tmp_path: Path,
    provider: ScriptedProvider,
    *,
    clock: Clock = SYSTEM_CLOCK,
    overrides: Mapping[str, Any] | None = None,
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    return simulator_rig(pool, tmp_path, provider.app(), clock=clock, overrides=overrides)


async def status_answers(r: PresetRig, op_id: str) -> list[int | None]:
    """Each status read's recorded HTTP status (None: recorded without its answer)."""
    return [call["status_code"] for call in await r.calls(op_id, "status")]


async def test_an_overflowing_retry_after_on_status_reads_lets_the_deadline_fire(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    provider = ScriptedProvider(status_headers={"Retry-After": ZONE_TOO_FAR})
    async with scripted_rig(pool, tmp_path, provider, clock=clock) as r:
        op_id = await r.submit({}, result_deadline_s=20)
        await r.reconciler.run_once()  # the create
        assert await r.state(op_id) is S.ACCEPTED
        for _ in range(CLOCK_STEPS):
            await clock.advance(CLOCK_STEP_SECONDS)
            await r.reconciler.run_once()
        assert await r.state(op_id) is S.RESULT_TIMED_OUT
        answers = await status_answers(r, op_id)
    assert answers and all(code == 200 for code in answers)  # every answer kept


async def test_an_overflowing_retry_after_on_the_create_answer_keeps_its_job_id(
    pool: Any, tmp_path: Path
) -> None:
    provider = ScriptedProvider(create_headers={"Retry-After": DAY_TOO_BIG})
    async with scripted_rig(pool, tmp_path, provider) as r:
        op_id = await r.submit({}, create_deadline_s=200, result_deadline_s=600)
        await r.reconciler.run_once()
        op = await r.op(op_id)
    assert (op.state, op.remote_job_id, provider.creates) == (S.ACCEPTED, "job-1", 1)


async def test_a_host_clock_ahead_of_the_database_never_fires_the_create_deadline_early(
    pool: Any, tmp_path: Path
) -> None:
    """The README: host clocks need not agree. Two minutes ahead, a 60 s create
    deadline had passed before the create was sent."""
    provider = ScriptedProvider()
    async with scripted_rig(pool, tmp_path, provider, clock=ShiftedClock(120.0)) as r:
        op_id = await r.submit({}, create_deadline_s=60, result_deadline_s=600)
        await r.reconciler.run_once()
        assert (await r.state(op_id), provider.creates) == (S.ACCEPTED, 1)


async def test_a_host_clock_ahead_of_the_database_never_fires_the_result_deadline_early(
    pool: Any, tmp_path: Path
) -> None:
    provider = ScriptedProvider()
    async with scripted_rig(pool, tmp_path, provider, clock=ShiftedClock(120.0)) as r:
        op_id = await r.submit({}, create_deadline_s=600, result_deadline_s=60)
        await run_until_read(r, op_id)
        assert await r.state(op_id) is S.OBSERVING  # was result_timed_out at the first read


async def run_until_read(r: PresetRig, op_id: str, bound: float = 10.0) -> None:
    """run_once, as the daemon would, until a status read answered (the failure bound)."""
    ends = time.monotonic() + bound
    while time.monotonic() < ends:
        await r.reconciler.run_once()
        if 200 in await status_answers(r, op_id):
            return
    raise AssertionError(f"no status read answered within {bound} s")


async def test_progress_steps_too_small_for_a_double_leave_every_read_on_record(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    tiny = ScriptedProvider(status_extra=lambda n: {"pct": 5e-322 if n == 1 else 1e-321})
    overrides = {"status": {"progress_percent": "/pct"}}
    async with scripted_rig(pool, tmp_path, tiny, clock=clock, overrides=overrides) as r:
        op_id = await r.submit({}, result_deadline_s=3600)
        await r.reconciler.run_once()  # the create
        for _ in range(8):
            await clock.advance(CLOCK_STEP_SECONDS)
            await r.reconciler.run_once()
        answers = await status_answers(r, op_id)
        assert await r.state(op_id) is S.OBSERVING
    assert len(answers) == tiny.reads >= 2 and None not in answers


class RaisingStatusReader(ProviderAdapter):
    """A plugin whose status parser raises on the provider's answer."""

    def parse_status(self, resp: HttpResponse, now: datetime | None = None) -> StatusFact:
        raise ValueError("a parser bug meets an answer it never expected")


async def test_an_adapter_that_raises_on_an_answer_still_lets_the_deadline_fire(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Any exception reading a provider's answer: recorded, undecidable, deadlines kept."""
    provider = ScriptedProvider()
    overrides = {"plugin": f"{__name__}:RaisingStatusReader"}
    async with scripted_rig(pool, tmp_path, provider, clock=clock, overrides=overrides) as r:
        op_id = await r.submit({}, result_deadline_s=20)
        await r.reconciler.run_once()  # the create
        for _ in range(CLOCK_STEPS):
            await clock.advance(CLOCK_STEP_SECONDS)
            await r.reconciler.run_once()
        assert await r.state(op_id) is S.RESULT_TIMED_OUT
        answers = await status_answers(r, op_id)
    assert answers and all(code == 200 for code in answers)
