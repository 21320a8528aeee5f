"""Cancellation faults a demanding new user tries, each through the real reconciler
(and receiver) against a loopback provider (tests/fixtures_providers/cancel_fake.py),
that already hold: no cancel claimed that did not happen, no result lost.

Kept as guards, one per distinct fault: a cancel refused because the job just
ended (404 at a provider that forgets it, 409 after a failure); the job's
success announced by a webhook while our cancel is on the wire; "cancelled"
webhooks that are forged, replayed, for another job, or simply ahead of the
provider's own reads; a cancel whose answer was lost but which took effect,
safe to resend or not; two callers asking to cancel the same operation.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import JSONResponse, Response

from bench.harness import TestClock
from shared import ledger
from shared.ledger.states import LocalState
from tests.fixtures_providers.cancel_fake import Fake, agent_row, causes, fake_rig, post_hook
from tests.fixtures_providers.described import ENDS

S = LocalState


@pytest.mark.parametrize(
    ("code", "ended", "end"),
    [(404, "succeeded", S.SUCCEEDED), (409, "failed", S.FAILED)],
    ids=["404_after_success", "409_after_failure"],
)
async def test_a_cancel_refused_because_the_job_just_ended_reports_its_real_end(
    pool: Any, tmp_path: Path, code: int, ended: str, end: LocalState
) -> None:
    """The job ends as the cancel arrives; the provider refuses the cancel (a 404
    where it no longer knows a finished job to cancel, a 409 "already finished").
    A status read decides: the success is collected, the failure reported, and
    no `cancelling` or `cancelled` appears anywhere."""
    fx = Fake()

    async def just_ended(job: dict[str, Any]) -> Response:
        job["state"] = ended
        return JSONResponse({"error": {"code": "already_finished"}}, status_code=code)

    fx.on_cancel = just_ended
    async with fake_rig(pool, tmp_path, fx) as r:
        op_id = await r.submit({"n": 1})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is end, await causes(r, op_id)
        history = await r.history(op_id)
        assert "cancelling" not in history and "cancelled" not in history
        row = await agent_row(r, op_id)
        assert row["outcome"] == end.value and row["remote_state"] == ended
        if end is S.SUCCEEDED:
            assert row["result"] == {"items": [{"n": 1}, {"n": 2}]}
        assert [c["status_code"] for c in await r.calls(op_id, "cancel")] == [code]


async def test_a_success_announced_while_the_cancel_is_on_the_wire_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """Our cancel is held at the provider; meanwhile the job succeeds and its signed
    webhook is stored; the cancel is then refused (409). The success is collected."""
    fx = Fake()
    arrived, release = asyncio.Event(), asyncio.Event()

    async def held(_job: dict[str, Any]) -> Response:
        arrived.set()
        await release.wait()
        return JSONResponse({"error": {"code": "already_finished"}}, status_code=409)

    fx.on_cancel = held
    overrides = {"limits": {"request_timeout": 5.0}}  # the held cancel is answered
    async with fake_rig(pool, tmp_path, fx, with_receiver=True, **overrides) as r:
        op_id = await r.submit({"n": 1})
        await r.settle(op_id, {S.ACCEPTED})
        await r.cancel(op_id)
        sweep = asyncio.create_task(r.reconciler.run_once())
        await arrived.wait()
        job = fx.only()
        job["state"] = "succeeded"
        hook = await post_hook(r, "msg_done", {"job_id": job["job_id"], "state": "succeeded"})
        assert hook.json() == {"status": "stored", "matched": True}
        release.set()
        await sweep
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await causes(r, op_id)
        assert (await r.history(op_id))[-3:] == [
            "cancel_requested",
            "result_collecting",
            "succeeded",
        ]
        assert (await agent_row(r, op_id))["items_succeeded"] == 2


async def test_cancelled_webhooks_move_nothing_only_a_read_does(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The cancel is taken (`cancelling`) but the job runs on. A "cancelled" webhook
    forged with another secret is refused; one signed but ahead of (or contradicting)
    the provider's reads, its replay, and one naming another operation's job are
    stored and move nothing. At the cancel deadline: cancellation_unconfirmed."""
    fx = Fake()

    async def taken_ignored(job: dict[str, Any]) -> Response:
        return JSONResponse({"job_id": job["job_id"], "state": "cancelling"}, status_code=202)

    fx.on_cancel = taken_ignored
    async with fake_rig(pool, tmp_path, fx, clock=clock, with_receiver=True) as r:
        other = await r.submit({"n": 2}, result_deadline_s=3600)
        await r.settle(other, {S.ACCEPTED})
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.ACCEPTED})
        await r.cancel(op_id, cancel_deadline_s=60)
        await r.settle(op_id, {S.CANCELLING})
        mine = (await r.op(op_id)).remote_job_id
        theirs = (await r.op(other)).remote_job_id
        cancelled = {"job_id": mine, "state": "cancelled"}
        forger = "whsec_" + base64.b64encode(b"not-the-providers-secret").decode()
        assert (await post_hook(r, "msg_forged", cancelled, secret=forger)).status_code == 401
        for event_id, payload, answer in (
            ("msg_early", cancelled, "stored"),
            ("msg_early", cancelled, "duplicate"),
            ("msg_other", {"job_id": theirs, "state": "cancelled"}, "stored"),
        ):
            assert (await post_hook(r, event_id, payload)).json()["status"] == answer
        for _ in range(4):
            await r.reconciler.run_once()
            row = await agent_row(r, op_id)
            assert (row["state"], row["remote_state"], row["done"]) == (
                "cancelling",
                "running",
                False,
            )
            await clock.advance(5)
        await clock.advance(120)
        assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await causes(r, op_id)
        assert "cancelled" not in await r.history(op_id)
        assert await r.state(other) is S.OBSERVING  # its reads show it running
        assert (await agent_row(r, op_id))["outcome"] == "needs_attention"


@pytest.mark.parametrize("idempotent", [True, False], ids=["safe_to_resend", "unsafe"])
async def test_a_cancel_whose_answer_was_lost_but_took_effect_is_confirmed_by_a_read(
    pool: Any, tmp_path: Path, clock: TestClock, idempotent: bool
) -> None:
    """The provider cancels the job, then the answer is lost (past the request
    timeout). A cancel safe to resend goes once more; one unsafe is never sent
    again. Either way only a status read showing `cancelled` ends it cancelled."""
    fx = Fake()
    release = asyncio.Event()

    async def took_then_lost(job: dict[str, Any]) -> Response:
        job["state"] = "cancelled"
        if len(fx.cancels) == 1:
            await release.wait()
        return JSONResponse({"job_id": job["job_id"], "state": "cancelled"}, status_code=202)

    fx.on_cancel = took_then_lost
    async with fake_rig(pool, tmp_path, fx, clock=clock, cancel={"idempotent": idempotent}) as r:
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=600)
        try:
            for _ in range(10):
                await r.reconciler.run_once()
                if await r.state(op_id) in ENDS:
                    break
                await clock.advance(3)
        finally:
            release.set()
        assert await r.state(op_id) is S.CANCELLED, await causes(r, op_id)
        assert len(fx.cancels) == (2 if idempotent else 1)
        assert (await causes(r, op_id))[-1] == ("cancelled", "status read: remote cancelled")
        assert (await r.calls(op_id, "cancel"))[0]["error_category"] == "timeout"


async def test_two_callers_cancelling_one_operation_send_one_cancel_and_keep_the_first_intent(
    pool: Any, tmp_path: Path
) -> None:
    fx = Fake()
    async with fake_rig(pool, tmp_path, fx) as r:
        op_id = await r.submit({"n": 1})
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            first = await ledger.cancel_intent(
                conn, op_id, requested_by="agent:ann", reason="wrong month"
            )
            second = await ledger.cancel_intent(
                conn, op_id, requested_by="agent:bob", reason="duplicate run"
            )
        assert (first.state, first.recorded) == (S.CANCEL_REQUESTED, True)
        assert (second.state, second.recorded) == (S.CANCEL_REQUESTED, False)
        await r.settle(op_id, {S.CANCELLING})
        fx.only()["state"] = "cancelled"
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await causes(r, op_id)
        op = await r.op(op_id)
        assert (op.cancel_requested_by, op.cancel_reason) == ("agent:ann", "wrong month")
        assert len(fx.cancels) == 1
        assert (await r.history(op_id)).count("cancel_requested") == 1
