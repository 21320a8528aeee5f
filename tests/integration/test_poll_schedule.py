"""The poll step's schedule against the simulator, on a clock the test moves.

The forecast's arithmetic is unit-tested (tests/unit/test_forecast.py); these
check that the real step feeds it what the provider said: no read at
acceptance, the quiet stretch while progress shows nothing, and a forecast
that pushes the next read past the backoff cap once progress moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness import FAST_LIMITS, TestClock
from shared.ledger.states import LocalState
from tests.harness import Rig, rig

S = LocalState
BASE, CAP = FAST_LIMITS["backoff_base"], FAST_LIMITS["backoff_cap"]
# A job of 1,000 s: queued for 100 s, then one item in ten every 90 s.
DURATION = 1000.0


async def wait_after_last_read(r: Rig, op_id: str) -> float:
    """Seconds from the row's last write (the release that set it) to its next read.

    Measured from the write, not from now: the test clock runs on real time
    between its moves, so "from now" shrank by however long a loaded machine
    took to get here (a run failed with 7 ms left of a 25-50 ms wait).
    """
    return float(
        await r.pool.fetchval(
            "SELECT extract(epoch FROM next_poll_at - updated_at) FROM operations"
            " WHERE operation_id = $1",
            op_id,
        )
    )


async def status_reads(r: Rig, op_id: str) -> int:
    return int(
        await r.pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'status'",
            op_id,
        )
    )


async def read_at_age(r: Rig, clock: TestClock, op_id: str, age: float, created: float) -> float:
    """Move the clock to `age` seconds after the create, read once, return the next wait."""
    await clock.advance(created + age - clock.monotonic())
    reads = await status_reads(r, op_id)
    await r.reconciler.run_once()
    assert await status_reads(r, op_id) == reads + 1
    return await wait_after_last_read(r, op_id)


async def test_a_job_just_accepted_is_read_on_the_first_backoff_step_not_at_once(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("success", duration=DURATION, result_deadline_s=3600.0)
        await r.reconciler.run_once()
        assert await r.state(op_id) is S.ACCEPTED
        assert await status_reads(r, op_id) == 0  # a read now would only learn "queued"
        assert BASE / 2 - 0.01 <= await wait_after_last_read(r, op_id) <= BASE
        await clock.advance(BASE)
        await r.reconciler.run_once()
        assert await r.state(op_id) is S.OBSERVING
        assert await status_reads(r, op_id) == 1


async def test_no_progress_yet_stretches_the_backoff_and_moving_progress_forecasts_past_it(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("success", duration=DURATION, result_deadline_s=3600.0)
        created = clock.monotonic()
        await r.reconciler.run_once()  # the create
        # 0 of 10 at 50 s, once the backoff has reached its cap and narrowed (the sixth
        # read): the cap stretched to twice (its draw is 0.9 to 1 of it), the age allowing
        for age in (50.0, 51.0, 52.0, 53.0, 54.0, 55.0):
            wait = await read_at_age(r, clock, op_id, age, created)
        assert CAP * 0.9 * 2 - 0.01 <= wait <= CAP * 2 + 0.01, wait
        # 2 of 10 at 300 s (the anchor), 4 of 10 at 500 s: the rate between them, each
        # read as anywhere within its item, says the end is 333 s away at the earliest;
        # the read goes just after that, far past the backoff cap
        await read_at_age(r, clock, op_id, 300.0, created)
        wait = await read_at_age(r, clock, op_id, 500.0, created)
        assert 333.0 <= wait <= 333.0 * 1.02 + BASE / 2 + 1.0, wait
        assert await r.state(op_id) is S.OBSERVING
