"""Whether a job can call back is the create's, not the reading reconciler's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.worker import Reconciler
from shared.ledger.states import LocalState
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from tests.harness import Rig, reconciler_context, sim_providers

S = LocalState


async def _wait(pool: Any, op_id: str) -> float:
    wait = await pool.fetchval(
        "SELECT extract(epoch FROM next_poll_at - jw_now()) FROM operations"
        " WHERE operation_id = $1",
        op_id,
    )
    assert wait is not None
    return float(wait)


@pytest.mark.xfail(
    strict=True,
    reason="bbafd8b: Context.callbacks asks the reading reconciler's public_webhook_url, "
    "not whether the job's create carried {webhook_url}: a job created without one "
    "(before the URL was set, or by a reconciler without it) is read at the backstop's "
    "pace (60 s here, not the backoff's seconds) by one that has it, though no callback "
    "can come. Fix: record at create "
    "whether the sent request named a callback URL (webhook_url in the context and "
    "asks_callback) and let callbacks()/backoff/_next_read take the operation",
)
async def test_a_job_created_without_a_callback_url_stays_on_the_backoff(
    pool: Any, tmp_path: Path
) -> None:
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(
            sim_url, webhooks=True, overrides={"limits": {"webhook_backstop_poll_seconds": 300.0}}
        )
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()  # created with no callback URL
        assert await r.state(op_id) is S.ACCEPTED
        assert await _wait(pool, op_id) < 5
        await pool.execute(
            "UPDATE operations SET next_poll_at = jw_now() WHERE operation_id = $1", op_id
        )
        # the URL is set now (a restart with public_webhook_url, or another worker)
        hooks = "http://127.0.0.1:9/webhooks/{provider}"
        async with reconciler_context(pool, tmp_path, providers, webhook_url=hooks) as ctx:
            await Reconciler(ctx).run_once()  # a read of a job that will never call back
    assert await r.state(op_id) is S.OBSERVING
    # the backoff's next step (FAST_LIMITS: seconds at most), not the backstop's pace
    wait = await _wait(pool, op_id)
    assert wait < 5, wait
