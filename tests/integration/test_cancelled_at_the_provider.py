"""A job cancelled at the provider, not by us: the transition says so.

The provider (its owner, an operator in its console, the provider itself: Amazon
SP-API cancels a report that has no data) cancels a job jobwarden never sent a
cancel for. Before, the history said only "status read: remote cancelled", which
an operator reads as the cancel an agent asked for. Through the real reconciler
against a loopback provider (tests/fixtures_providers/cancel_fake.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from starlette.responses import JSONResponse, Response

from reconciler.steps.poll import _cancelled_without_ours
from shared.ledger.states import LocalState
from tests.fixtures_providers.cancel_fake import Fake, causes, fake_rig
from tests.fixtures_providers.described import ENDS

S = LocalState


async def test_a_job_cancelled_at_the_provider_with_no_cancel_asked_says_who_did_not(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    fx = Fake()
    async with fake_rig(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.OBSERVING})
        (job,) = fx.jobs.values()
        job["state"] = "cancelled"
        await clock.advance(60)
        assert await r.settle(op_id, ENDS) is S.CANCELLED
        assert fx.cancels == []
        cause = dict(await causes(r, op_id))["cancelled"]
        assert "no cancellation was asked of jobwarden and none was sent" in cause, cause


async def test_a_job_cancelled_at_the_provider_before_our_cancel_left_says_so(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    """An intent recorded, the read before the cancel (`read_first`) finding the job
    cancelled already: no cancel was sent, and the cause does not say none was
    asked."""
    fx = Fake()
    async with fake_rig(pool, tmp_path, fx, clock=clock, cancel={"read_first": True}) as r:
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.OBSERVING})
        (job,) = fx.jobs.values()
        job["state"] = "cancelled"  # before the read that precedes our cancel
        await r.cancel(op_id, cancel_deadline_s=600)
        assert await r.settle(op_id, ENDS) is S.CANCELLED
        assert fx.cancels == []
        cause = dict(await causes(r, op_id))["cancelled"]
        assert "the job had already ended, so no cancel request was sent" in cause, cause
        assert "no cancellation was asked" not in cause, cause


def test_an_intent_not_sent_yet_is_named_as_such() -> None:
    """The words alone (pure: the operation's intent and send times): an intent
    recorded whose cancel never left is not "none was asked"."""
    asked = SimpleNamespace(op=SimpleNamespace(cancel_requested_at=datetime.now(UTC)))
    said = _cancelled_without_ours(asked)  # type: ignore[arg-type]
    assert "our cancel request had not been sent yet" in said, said
    never = SimpleNamespace(op=SimpleNamespace(cancel_requested_at=None))
    assert "none was sent" in _cancelled_without_ours(never)  # type: ignore[arg-type]


async def test_a_job_ended_after_our_cancel_was_not_taken_does_not_deny_it_left(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    """A cancel unsafe to repeat, answered 429 (cancel.resend_statuses: not taken, so
    no longer "sent"), the job cancelled at the provider meanwhile: the read before
    the next cancel finds it ended. The cause says ours was not taken; before, "no
    cancel request was sent", beside the cancel call on record."""
    fx = Fake()

    async def not_taken(job: dict[str, Any]) -> Response:
        job["state"] = "cancelled"  # by its owner, at the provider, as ours is refused
        return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "1"})

    fx.on_cancel = not_taken
    cancel = {"idempotent": False, "resend_statuses": [429], "read_first": True}
    async with fake_rig(pool, tmp_path, fx, clock=clock, cancel=cancel) as r:
        op_id = await r.submit({"n": 1}, result_deadline_s=3600)
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=600)
        for _ in range(20):
            if await r.state(op_id) in ENDS:
                break
            await r.reconciler.run_once()
            await clock.advance(2)
        assert await r.settle(op_id, ENDS) is S.CANCELLED
        assert len(fx.cancels) == 1
        cause = dict(await causes(r, op_id))["cancelled"]
        assert "no cancel request was sent" not in cause, cause
        assert "none of ours was taken" in cause, cause
