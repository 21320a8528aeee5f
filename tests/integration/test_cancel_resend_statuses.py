"""`cancel.resend_statuses`: a cancel the provider did not take is sent again.

A cancel that is not safe to repeat (`cancel.idempotent = false`) is sent once
whatever its answer: an answer that might mean "taken" must not be followed by
a second cancel. A rate limit's 429 is no such answer where the provider says
so; without a way to say it, Together's throttled cancel was never resent and
the batch ran on until a human took it at the cancel deadline. With the key,
the cancel is sent again after its `Retry-After`, each attempt on record, and
confirmed as any other. Driven through the real reconciler against the Together
AI fake of round 52 (tests/fixtures_providers/unseen_round52.py).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers.errors import ConfigError
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import load, preset_rig
from tests.fixtures_providers.unseen_round52 import TogetherFixture
from tests.integration.test_unseen_round52 import BATCH, TOGETHER_ENV, verified

S = LocalState
RESEND_429 = {"cancel": {"resend_statuses": [429]}}


def _together(pool: Any, tmp_path: Path, fx: TogetherFixture, clock: Any) -> Any:
    """Together's fake, its cancel declared to be resent after a 429, on the test's clock."""
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="together",
        env=TOGETHER_ENV,
        overrides=described("together", **RESEND_429),
        clock=clock,
    )


async def _cancels_answered(r: Any, op_id: str, count: int, clock: Any) -> list[Any]:
    """Run the reconciler, the clock moved past each answer's Retry-After (1 s), until
    `count` cancels are on record."""
    for _ in range(50):
        calls = await r.calls(op_id, "cancel")
        if len(calls) >= count:
            return calls
        await r.reconciler.run_once()
        await clock.advance(0.5)
    raise AssertionError(f"{len(calls)} cancels on record, wanted {count}")


async def test_a_throttled_cancel_is_sent_again_and_confirmed(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    fx = TogetherFixture()
    fx.throttled_cancels = 2
    async with _together(pool, tmp_path, fx, clock) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        calls = await _cancels_answered(r, op_id, 3, clock)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        (batch,) = fx.jobs.values()
        assert [bid for bid, _ in fx.cancels] == [batch["id"]] * 3
        assert [c["status_code"] for c in calls] == [429, 429, 200]
        # no resend before the answer's Retry-After (1 s) had passed
        gaps = [
            (b["started_at"] - a["finished_at"]).total_seconds()
            for a, b in itertools.pairwise(calls)
        ]
        assert all(gap >= 1.0 for gap in gaps), gaps
        await verified(r, op_id)


async def test_still_throttled_at_the_deadline_says_no_cancel_was_taken(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    fx = TogetherFixture()
    fx.throttled_cancels = 1000
    async with _together(pool, tmp_path, fx, clock) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        await _cancels_answered(r, op_id, 2, clock)
        await clock.advance(3600.0)  # past any cancel deadline
        assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        assert fx.only()["state"] == "IN_PROGRESS"
        reason = (await r.escalation(op_id))["reason"]
        assert "no cancel request was taken" in reason and "429" in reason, reason
        assert "cancelled" not in await r.history(op_id)


@pytest.mark.parametrize(
    ("codes", "said"),
    [([202], "only 4xx/5xx"), ([200, 429], "only 4xx/5xx"), (["429"], "list of HTTP status")],
)
def test_resend_statuses_that_cannot_mean_not_taken_are_refused_at_load(
    codes: list[Any], said: str
) -> None:
    table = described("together", cancel={"resend_statuses": codes})
    with pytest.raises(ConfigError) as refused:
        load("together", None, "http://127.0.0.1:9", TOGETHER_ENV, table)
    assert "resend_statuses" in str(refused.value) and said in str(refused.value)
