"""The `anthropic_batches` preset against a Message Batches fixture, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.providers import describe_guarantees, load_preset
from tests.fixtures_providers.anthropic import API_KEY, AnthropicFixture
from tests.fixtures_providers.rig import preset_rig

S = LocalState
ENV = {"ANTHROPIC_API_KEY": API_KEY}


def batch(scenario: str, n: int = 3) -> dict[str, Any]:
    params = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hello"}],
    }
    return {
        "requests": [{"custom_id": f"{scenario}-{i}", "params": params} for i in range(1, n + 1)]
    }


def rig(pool: Any, tmp_path: Path, fixture: AnthropicFixture) -> Any:
    return preset_rig(
        pool, tmp_path, fixture.app(), preset="anthropic_batches", name="anthropic", env=ENV
    )


async def test_ended_batch_with_every_request_succeeded_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("happy"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.remote_state == "succeeded"
        assert op.result_summary is not None
        assert (op.result_summary["items_total"], op.result_summary["items_succeeded"]) == (3, 3)


async def test_ended_is_not_success_the_counts_decide_partial(pool: Any, tmp_path: Path) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("mixed"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.remote_state == "partially_succeeded"
        failures = await pool.fetch(
            "SELECT item_key, code, message FROM result_item_failures WHERE result_id = $1",
            op.result_id,
        )
        assert [tuple(f) for f in failures] == [
            ("mixed-3", "invalid_request_error", "max_tokens: too large")
        ]


async def test_ended_with_no_success_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("errored", n=2))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.remote_state_raw == "ended" and op.remote_state == "failed"
        assert fx.registry.calls["results"] == 0


async def test_cancel_before_anything_ran_ends_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("idle"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, S.SUCCEEDED}) is S.CANCELLED
        assert fx.registry.calls["cancel"] == 1


async def test_cancel_after_some_succeeded_collects_what_finished(
    pool: Any, tmp_path: Path
) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, S.SUCCEEDED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.result_summary is not None and op.result_summary["items_succeeded"] == 1
        assert (await r.history(op_id))[-3:] == ["cancelling", "result_collecting", "succeeded"]


async def test_results_that_disagree_with_the_counts_are_refused(pool: Any, tmp_path: Path) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("miscount"))
        final = await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED})
        assert final is S.RESULT_VALIDATION_FAILED
        assert "expected 3 successful items, got 2" in (await r.escalation(op_id))["reason"]


async def test_archived_results_are_unavailable(pool: Any, tmp_path: Path) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("archived"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_UNAVAILABLE}) is S.RESULT_UNAVAILABLE


async def test_a_results_url_no_request_can_carry_is_unavailable_not_retried_forever(
    pool: Any, tmp_path: Path
) -> None:
    # results_url is any string in the document; one with a control character
    # cannot be requested. The result is declared unavailable, saying why.
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("ctrl_url"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_UNAVAILABLE}) is S.RESULT_UNAVAILABLE
        escalation = await r.escalation(op_id)
        assert escalation["state"] == "result_unavailable"
        assert escalation["reason"] == (
            "cannot locate the result: the provider's URL contains a control character"
        )
        assert fx.registry.calls["results"] == 0
        assert await r.calls(op_id, "result") == []


async def test_lost_create_response_needs_a_human_and_is_never_retried(
    pool: Any, tmp_path: Path
) -> None:
    fx = AnthropicFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch("lost"))
        assert await r.settle(op_id, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.NEEDS_ATTENTION
        for _ in range(3):  # nothing more happens, however often the reconciler runs
            await r.reconciler.run_once()
        assert fx.registry.calls["create"] == 1
        assert len(fx.registry.jobs) == 1  # the batch exists at Anthropic; we cannot name it
        op = await r.op(op_id)
        assert op.remote_job_id is None and op.create_attempts == 1
        assert await r.history(op_id) == ["create_pending", "create_unknown", "needs_attention"]
        escalation = await r.escalation(op_id)
        assert escalation["state"] == "needs_attention"
        assert "cannot deduplicate creates and offers no lookup" in escalation["reason"]
        # what the create got, for the human (its answer was lost: a timeout)
        assert escalation["reason"].endswith("; the last create got no answer (timeout)")


def test_guarantees_say_a_lost_create_cannot_be_reconciled() -> None:
    desc = load_preset("anthropic_batches", ENV)
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"] == (
        False,
        "the provider has no idempotency: a create whose response is lost is never retried "
        "automatically and escalates to an operator",
    )
    holds, why = report["lookup after lost response"]
    assert holds is False
    assert why.startswith("create after a lost response cannot be reconciled automatically")
    assert report["cancellable"][0] is True
    assert report["webhooks signed"][0] is False
    assert report["result integrity checked"][0] is False
