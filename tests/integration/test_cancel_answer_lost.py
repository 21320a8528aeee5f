"""A cancel unsafe to repeat whose answer never came: the human is told it is unknown.

A cancel sent (`cancel.idempotent = false`) whose connection died before the
answer (a timeout, a reset) may have stopped the job or not: it is not sent
again, the job is read on, and at the cancel deadline a job still running goes
to `cancellation_unconfirmed`. Its reason said "our cancel request was not
accepted", which nobody knows: an operator reading it would send a second
cancel by hand, the very thing the description says is unsafe. Driven through
the real reconciler against a loopback provider
(tests/fixtures_providers/cancel_fake.py) whose cancel answer never comes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse, Response

from shared.ledger.states import LocalState
from tests.fixtures_providers.cancel_fake import Fake, agent_row, fake_rig
from tests.fixtures_providers.described import ENDS

S = LocalState


async def test_an_unanswered_cancel_unsafe_to_repeat_is_not_called_refused_at_its_deadline(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    fx = Fake()
    release = asyncio.Event()

    async def answer_lost(job: dict[str, Any]) -> Response:
        await release.wait()  # past the request timeout: the reconciler gives up on it
        return JSONResponse({"job_id": job["job_id"], "state": "cancelling"}, status_code=202)

    fx.on_cancel = answer_lost
    async with fake_rig(pool, tmp_path, fx, clock=clock, cancel={"idempotent": False}) as r:
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=60)
        await r.reconciler.run_once()
        (call,) = await r.calls(op_id, "cancel")
        assert call["status_code"] is None and call["error_category"] == "timeout"
        await clock.advance(120)  # past the cancel deadline, the job still running
        try:
            end = await r.settle(op_id, ENDS)
        finally:
            release.set()
        assert end is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        assert len(fx.cancels) == 1  # never sent again
        reason = (await r.escalation(op_id))["reason"]
        assert "not accepted" not in reason, reason
        assert "got no answer (timeout)" in reason, reason
        assert "whether the provider took it is unknown" in reason, reason
        assert "not sent again (cancel.idempotent is false)" in reason, reason
        row = await agent_row(r, op_id)
        assert row["outcome"] == "needs_attention" and "cancelled" not in await r.history(op_id)
        assert row["error"]["message"] == reason
