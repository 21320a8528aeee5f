"""The reconciler against the real simulated provider, one test per seed fault."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared import ledger
from shared.states import LocalState
from tests.harness import rig

S = LocalState


async def test_slow_job_succeeds_after_several_polls(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("success", duration=0.6)
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await ledger.load_operation(pool, op_id)
        assert op.result_id is not None and op.remote_job_id is not None
        stats = await r.stats()
        assert stats["creates_total"] == 1
        assert stats["status_calls_per_job"][op.remote_job_id] >= 2
