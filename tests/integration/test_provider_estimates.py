"""A provider's own estimate of a job's end (`status.estimated_end`,
`status.estimated_seconds_left`): the poller reads near it, on a clock the test moves.

OpenAI's fine-tuning jobs say when they expect to finish (`estimated_finish`,
Unix seconds). Without reading it, a job an hour long was read on the backoff's
cap (a minute) all along; with it, the next read is just after the estimate,
never further than the job's age (a wrong estimate costs at most a doubling),
and an estimate the job has outlived is read past.
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
from reconciler.forecast import backoff_reads_by
from shared.ledger.states import LocalState as S
from tests.fixtures_providers.rig import TEST_LIMITS, PresetRig, preset_rig

CAP = TEST_LIMITS["backoff_cap"]
# The job's estimated length, from its creation.
ESTIMATE = 1200.0


def fine_tuning(estimate_key: str) -> dict[str, Any]:
    """The description a user writes for `FineTuningFixture`."""
    return {
        "create": {"path": "/fine_tuning/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/fine_tuning/jobs/{job_id}",
            "state": "/status",
            "state_map": {
                "validating_files": "pending",
                "queued": "pending",
                "running": "running",
                "succeeded": "succeeded",
                "failed": "failed",
                "cancelled": "cancelled",
            },
            estimate_key: "/estimated_finish" if estimate_key == "estimated_end" else "/eta_s",
        },
        "result": {"source": "inline", "inline": "/fine_tuned_model"},
    }


class FineTuningFixture:
    """Fine-tuning jobs that run until the test ends; each answer says when the job
    should finish (`estimated_finish`, Unix seconds) and how long that is from now
    (`eta_s`), from the test's clock."""

    def __init__(
        self, clock: TestClock, *, stuck: bool = False, estimate: float = ESTIMATE
    ) -> None:
        self.clock = clock
        self.stuck = stuck  # "a second left", whenever asked
        self.estimate = estimate  # the job's length, as its answers estimate it
        self.created: dict[str, float] = {}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/fine_tuning/jobs", self.create, methods=["POST"]),
                Route("/fine_tuning/jobs/{jid}", self.status),
            ]
        )

    async def create(self, request: Request) -> Response:
        jid = f"ftjob-{len(self.created) + 1}"
        self.created[jid] = self.clock.now().timestamp()
        return JSONResponse({"id": jid, "status": "validating_files"})

    async def status(self, request: Request) -> Response:
        jid = request.path_params["jid"]
        now = self.clock.now().timestamp()
        finish = now + 1.0 if self.stuck else self.created[jid] + self.estimate
        return JSONResponse(
            {"id": jid, "status": "running", "estimated_finish": int(finish), "eta_s": finish - now}
        )


def fine_tuned(
    pool: Any,
    tmp_path: Path,
    fx: FineTuningFixture,
    described: dict[str, Any],
    clock: TestClock,
    env: dict[str, str] | None = None,
) -> Any:
    """The fixture, described as a user does, read by the real reconciler on `clock`."""
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="openai_ft",
        env=env or {},
        overrides=described,
        clock=clock,
    )


async def wait_after_last_read(r: PresetRig, op_id: str) -> float:
    """Seconds from the row's last write (the read's release) to its next read."""
    return float(
        await r.pool.fetchval(
            "SELECT extract(epoch FROM next_poll_at - updated_at) FROM operations"
            " WHERE operation_id = $1",
            op_id,
        )
    )


async def read_at_age(r: PresetRig, clock: TestClock, op_id: str, age: float) -> float:
    """Move the clock to `age` seconds after the create, read once, return the next wait."""
    created = (await r.op(op_id)).created_at.timestamp()
    await clock.advance(created + age - clock.now().timestamp())
    reads = len(await r.calls(op_id, "status"))
    await r.reconciler.run_once()
    assert len(await r.calls(op_id, "status")) == reads + 1, await r.history(op_id)
    return await wait_after_last_read(r, op_id)


@pytest.mark.parametrize("estimate_key", ["estimated_end", "estimated_seconds_left"])
async def test_the_next_read_is_near_the_providers_estimated_end(
    pool: Any, tmp_path: Path, clock: TestClock, estimate_key: str
) -> None:
    fx = FineTuningFixture(clock)
    async with fine_tuned(pool, tmp_path, fx, fine_tuning(estimate_key), clock) as r:
        op_id = await r.submit(
            {"model": "gpt-4o-mini", "training_file": "file-1"}, result_deadline_s=3 * ESTIMATE
        )
        await r.reconciler.run_once()  # the create
        assert await r.state(op_id) is S.ACCEPTED
        # early on, the estimate is far off: no wait longer than the job's age
        early = await read_at_age(r, clock, op_id, 100.0)
        assert await r.state(op_id) is S.OBSERVING
        assert 99.0 <= early <= 101.0, early
        # near it, the next read is just after it (2 % and half the backoff base late)
        near = await read_at_age(r, clock, op_id, 1000.0)
        assert ESTIMATE - 1000.0 <= near <= (ESTIMATE - 1000.0) * 1.03 + 1.0, near
        # outlived, the estimate says nothing: the backoff's cap again
        late = await read_at_age(r, clock, op_id, ESTIMATE + 300.0)
        assert late <= CAP, late


async def test_with_webhooks_an_estimate_does_not_push_the_backstop_out(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The backstop waits for a lost delivery as long as the job's age says (twice
    it): an estimate far ahead (a wrong date, milliseconds read as seconds) must
    not stretch it to the estimate, up to six hours."""
    described = fine_tuning("estimated_end")
    described["webhooks"] = {
        "scheme": "static_header",
        "options": {"header": "X-Token"},
        "secrets_env": "FT_HOOK",
        "job_id": "/id",
    }
    fx = FineTuningFixture(clock)
    async with fine_tuned(pool, tmp_path, fx, described, clock, env={"FT_HOOK": "hook-token"}) as r:
        op_id = await r.submit({"model": "m"}, result_deadline_s=3 * ESTIMATE)
        await r.reconciler.run_once()  # the create
        wait = await read_at_age(r, clock, op_id, 100.0)
        assert await r.state(op_id) is S.OBSERVING
        assert wait <= 2 * 100.0 + 1.0, wait  # not ESTIMATE - 100, stretched


async def test_an_estimate_that_never_runs_out_reads_no_more_than_the_backoff(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A job saying "a second left" on every answer is never outlived: read near
    each estimate, it was read every few seconds for ever. Read for read, an
    estimate makes no more reads than the backoff alone would have."""
    described = fine_tuning("estimated_seconds_left")
    limits = {"backoff_base": 2.0, "backoff_factor": 2.0, "backoff_cap": 60.0}
    described["limits"] = limits
    fx = FineTuningFixture(clock, stuck=True)
    async with fine_tuned(pool, tmp_path, fx, described, clock) as r:
        op_id = await r.submit({"model": "m"}, result_deadline_s=3 * ESTIMATE)
        await r.reconciler.run_once()  # the create
        created = (await r.op(op_id)).created_at.timestamp()
        horizon = 1800.0
        # the backoff's reads at its ceilings, and what its jitter adds (the
        # draws near the cap are within its top tenth)
        bound = int(backoff_reads_by(horizon, r.desc.limits) * 1.1) + 2
        reads = 0
        while reads <= bound:
            wait = await wait_after_last_read(r, op_id)
            if clock.now().timestamp() + wait - created > horizon:
                break
            await clock.advance(wait)
            await r.reconciler.run_once()
            reads = len(await r.calls(op_id, "status"))
        assert await r.state(op_id) is S.OBSERVING
        assert reads <= bound, (reads, bound)
        assert reads >= backoff_reads_by(horizon, r.desc.limits), reads  # not slower either


async def test_a_young_job_is_not_left_for_the_cap_on_an_estimate_far_off(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """An estimate weeks off (a wrong date) on a job seconds old: its next read was
    the backoff's cap (a minute) away, four times the lag a ten-second job would
    have had. No wait is longer than the job's age or the backoff's own."""
    described = fine_tuning("estimated_end")
    described["limits"] = {"backoff_base": 2.0, "backoff_factor": 2.0, "backoff_cap": 60.0}
    fx = FineTuningFixture(clock, estimate=20 * 86400.0)
    async with fine_tuned(pool, tmp_path, fx, described, clock) as r:
        op_id = await r.submit({"model": "m"}, result_deadline_s=3 * ESTIMATE)
        await r.reconciler.run_once()  # the create
        wait = await read_at_age(r, clock, op_id, 3.0)
        assert wait <= 4.0, wait  # the backoff's second step at most, not 60 s
