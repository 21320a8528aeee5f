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


async def test_an_unanswered_cancel_then_an_answered_error_is_not_called_refused(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    """A cancel safe to repeat: the first gets no answer, the resend is answered with
    an error. The first may have stopped the job: at the deadline the reason said
    "not accepted", from the newest answer alone."""
    fx = Fake()
    release = asyncio.Event()

    async def first_lost_then_refused(job: dict[str, Any]) -> Response:
        if len(fx.cancels) == 1:
            await release.wait()  # past the request timeout
        return JSONResponse({"error": {"code": "busy", "message": "try later"}}, status_code=500)

    fx.on_cancel = first_lost_then_refused
    async with fake_rig(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=600)
        try:
            await r.reconciler.run_once()  # the first cancel: no answer
            for _ in range(60):  # the resend, when its retry is due
                if len(fx.cancels) >= 2:
                    break
                await clock.advance(5)
                await r.reconciler.run_once()
            await clock.advance(900)  # past the cancel deadline, the job still running
            end = await r.settle(op_id, ENDS)
        finally:
            release.set()
        assert end is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        calls = await r.calls(op_id, "cancel")
        assert len(calls) >= 2 and calls[-1]["status_code"] == 500, calls
        assert any(c["error_category"] == "timeout" for c in calls), calls
        reason = (await r.escalation(op_id))["reason"]
        assert "not accepted" not in reason, reason
        assert "an earlier cancel request got no answer (timeout)" in reason, reason
        assert "whether the provider took it is unknown" in reason, reason
