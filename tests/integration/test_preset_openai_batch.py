"""The `openai_batch` preset against an OpenAI Batch API fixture, end to end.

Real reconciler, real receiver, real database; the fixture speaks the
documented shapes (see tests/fixtures_providers/openai.py).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness import TestClock
from reconciler.steps.poll import CONFIRMING_READS
from shared import ledger
from shared.ledger.states import LocalState
from shared.providers import ProviderAdapter, describe_guarantees, load_preset
from shared.signatures import sign_standard_webhooks
from tests.fixtures_providers.openai import API_KEY, OpenAIFixture
from tests.fixtures_providers.rig import PresetRig, preset_rig

S = LocalState
WEBHOOK_SECRET = "whsec_" + "c2VjcmV0LWZvci1vcGVuYWktdGVzdHM="
ENV = {"OPENAI_API_KEY": API_KEY}
HOOK_ENV = {**ENV, "OPENAI_WEBHOOK_SECRET": WEBHOOK_SECRET}


def batch_body(scenario: str) -> dict[str, Any]:
    return {
        "input_file_id": f"file-{scenario}",
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }


def rig(pool: Any, tmp_path: Path, fixture: OpenAIFixture, **kwargs: Any) -> Any:
    kwargs.setdefault("env", ENV)
    return preset_rig(pool, tmp_path, fixture.app(), preset="openai_batch", name="openai", **kwargs)


async def test_happy_path_fetches_the_output_file_and_checks_counts(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("happy"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        job = fx.registry.only()
        assert op.remote_job_id == job.job_id
        # our operation id travels in metadata: the only handle a lookup has
        assert job.request["metadata"] == {"jobwarden_operation_id": op_id}
        assert "idempotency-key" not in job.headers
        assert op.result_summary is not None
        assert op.result_summary["items_succeeded"] == 3
        assert op.result_summary["items_failed"] == 0
        assert fx.registry.calls["file"] == 1  # no error file: only the output file
        assert await r.history(op_id) == [
            "create_pending",
            "accepted",
            "observing",
            "result_collecting",
            "succeeded",
        ]


async def test_partially_failed_batch_records_failures_by_custom_id(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("partial"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.result_summary is not None
        assert (op.result_summary["items_succeeded"], op.result_summary["items_failed"]) == (2, 1)
        assert fx.registry.calls["file"] == 2  # output file and error file, checked together
        failed = await pool.fetch(
            "SELECT item_key FROM result_item_failures WHERE result_id = $1", op.result_id
        )
        assert [f[0] for f in failed] == ["request-3"]


async def test_an_output_and_an_error_file_are_stored_as_one_jsonl_document(
    pool: Any, tmp_path: Path
) -> None:
    """Two files whose last lines end without a newline: laid end to end, the stored
    file glued the output's last line to the error file's first (a review)."""
    fx = OpenAIFixture(final_newline=False)
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("partial"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        row = await pool.fetchrow(
            "SELECT sha256, storage_ref, size_bytes FROM results WHERE result_id = $1",
            op.result_id,
        )
    stored = Path(row["storage_ref"].removeprefix("file:")).read_bytes()
    lines = [json.loads(line) for line in stored.splitlines()]
    assert [line["custom_id"] for line in lines] == ["request-1", "request-2", "request-3"]
    assert hashlib.sha256(stored).hexdigest() == row["sha256"]  # the row names what is stored
    assert len(stored) == row["size_bytes"]


async def test_expired_batch_with_some_output_is_a_partial_result_not_a_failure(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("expired"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.remote_state == "partially_succeeded"
        assert op.result_summary is not None
        assert op.result_summary["items_total"] == 4
        assert op.result_summary["items_succeeded"] == 1
        codes = await pool.fetch(
            "SELECT code FROM result_item_failures WHERE result_id = $1", op.result_id
        )
        assert {c[0] for c in codes} == {"batch_expired"}


async def test_batch_that_fails_validation_is_failed_with_openais_reason(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("failed"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.last_error is not None
        assert op.last_error["code"] == "invalid_json_line"
        assert op.result_id is None


async def test_rejected_create_fails_without_a_remote_job(pool: Any, tmp_path: Path) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("bad"))
        assert await r.settle(op_id, {S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.remote_job_id is None
        assert op.last_error is not None and op.last_error["status"] == 400


async def test_cancel_is_confirmed_by_a_cancelled_read_not_by_the_cancel_answer(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("slow"))
        await r.settle(op_id, {S.OBSERVING})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        assert fx.registry.calls["cancel"] == 1
        history = await r.history(op_id)
        assert history[-3:] == ["cancel_requested", "cancelling", "cancelled"]
        observed = await pool.fetch(
            "SELECT remote_state_raw FROM observations WHERE operation_id = $1 ORDER BY 1", op_id
        )
        assert "cancelling" in {o[0] for o in observed}  # accepted cancel != cancelled


async def test_cancelled_batch_keeps_its_partial_output(pool: Any, tmp_path: Path) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        op = await r.op(op_id)
        assert op.result_id is not None
        assert op.result_summary is not None and op.result_summary["items_succeeded"] == 1


async def test_lost_create_response_is_resolved_by_metadata_lookup_across_pages(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("lost"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.NEEDS_ATTENTION}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert fx.registry.calls["create"] == 1, "no idempotency: the create is never re-sent"
        assert op.create_attempts == 1
        ours = [j for j in fx.registry.jobs.values() if j.scenario == "lost"]
        assert [j.job_id for j in ours] == [op.remote_job_id]
        assert fx.registry.calls["list"] == 2  # 120 newer batches pushed ours to page two
        lookups = await r.calls(op_id, "lookup")
        assert "after=" in lookups[-1]["url"]
        assert "create_unknown" in await r.history(op_id)


async def test_a_lookup_that_does_not_list_the_batch_yet_does_not_create_a_second(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("lagging"))
        await r.settle(op_id, {S.SUCCEEDED, S.NEEDS_ATTENTION})
        ours = [j for j in fx.registry.jobs.values() if j.scenario == "lagging"]
        assert len(ours) == 1, f"{len(ours)} batches created for one operation"


async def test_thin_signed_webhook_makes_the_reconciler_read_at_once(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx, env=HOOK_ENV, with_receiver=True) as r:
        op_id = await r.submit(batch_body("held"))
        # with webhooks there is no read at acceptance: the job waits for its event
        assert await r.settle(op_id, {S.ACCEPTED}) is S.ACCEPTED
        op = await r.op(op_id)
        assert op.next_poll_at is not None
        # webhooks configured: polling is a 30 s backstop, so only the event can be quick
        job = fx.registry.only()
        job.hold = False
        event = batch_completed("evt_1", job.job_id)
        answer = await post_signed(r, event)
        assert answer.status_code == 200
        assert answer.json() == {"status": "stored", "matched": True}
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=5.0) is S.SUCCEEDED
        webhook = await pool.fetchrow(
            "SELECT operation_id, remote_job_id, remote_state::text FROM webhook_events"
        )
        assert tuple(webhook) == (op_id, job.job_id, "succeeded")
        # the success itself rests on our own read, not on the event
        evidence = await pool.fetchval(
            "SELECT o.source FROM history h JOIN observations o"
            " ON h.evidence_kind = 'observation' AND o.observation_id = h.evidence_id"
            " WHERE h.operation_id = $1 AND h.to_state = 'result_collecting'",
            op_id,
        )
        assert evidence == "poll"
        forged = await post_signed(r, event, secret="whsec_" + "d3Jvbmc=")
        assert forged.status_code == 401


async def test_an_end_the_reads_do_not_show_yet_is_read_again_on_the_backoff(
    pool: Any, tmp_path: Path
) -> None:
    # "happy" moves one phase per status read (validating, in_progress,
    # completed): a provider whose reads lag behind the webhook it already sent.
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx, env=HOOK_ENV, with_receiver=True) as r:
        op_id = await r.submit(batch_body("happy"))
        assert await r.settle(op_id, {S.ACCEPTED}) is S.ACCEPTED
        job = fx.registry.only()
        event = batch_completed("evt_early", job.job_id)
        assert (await post_signed(r, event)).status_code == 200
        # the backstop is 30 s away: only reads on the backoff (50 ms here) end it now
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=10.0) is S.SUCCEEDED
        reads = await pool.fetch(
            "SELECT remote_state_raw FROM observations WHERE operation_id = $1"
            " AND source = 'poll' ORDER BY observation_id",
            op_id,
        )
        # the webhook woke a read that still showed the job running; the next came
        # on the backoff and confirmed the end
        assert [o[0] for o in reads][-2:] == ["in_progress", "completed"]


async def test_an_end_no_read_confirms_goes_back_to_the_backstop_after_ten_reads(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    # "slow" stays in_progress: the delivered end is never confirmed by a read
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx, env=HOOK_ENV, with_receiver=True, clock=clock) as r:
        op_id = await r.submit(batch_body("slow"))
        await r.reconciler.run_once()  # the create; the backstop's first read is 30 s away
        assert await r.state(op_id) is S.ACCEPTED
        assert (
            await post_signed(r, batch_completed("evt_lie", fx.registry.only().job_id))
        ).status_code == 200
        reads = 1 + CONFIRMING_READS  # the woken read, then the confirming ones
        wait = 0.0
        for _ in range(reads):  # each read, then the clock moved to the next one's time
            await clock.advance(wait)
            await r.reconciler.run_once()
            op = await r.op(op_id)
            assert op.next_poll_at is not None
            wait = (op.next_poll_at - clock.now()).total_seconds()
            assert wait < 20 or len(await r.calls(op_id, "status")) == reads
        assert len(await r.calls(op_id, "status")) == reads
        assert wait > 20  # back on the 30 s backstop after the tenth confirming read
        assert (await r.op(op_id)).state is S.OBSERVING


class FixedSchedule(ProviderAdapter):
    """A plugin that sets its own read schedule: every read 45 s after the last."""

    def next_poll_delay(
        self, attempt: int, retry_after: float | None, poll_after: float | None, rng: Any
    ) -> float:
        return PLUGIN_INTERVAL


PLUGIN_INTERVAL = 45.0


async def test_a_plugins_own_schedule_also_sets_the_confirming_reads(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Our webhook-less backoff never replaces a schedule a plugin chose itself."""
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx, env=HOOK_ENV, with_receiver=True, clock=clock) as r:
        adapters = dict(r.reconciler.ctx.adapters)
        adapters[r.provider] = FixedSchedule(r.desc)
        r.reconciler.ctx.adapters = adapters
        op_id = await r.submit(batch_body("slow"))
        await r.reconciler.run_once()  # the create
        assert (
            await post_signed(r, batch_completed("evt_plugin", fx.registry.only().job_id))
        ).status_code == 200
        await r.reconciler.run_once()  # the woken read: still in progress
        assert len(await r.calls(op_id, "status")) == 1
        op = await r.op(op_id)
        assert op.next_poll_at is not None
        wait = (op.next_poll_at - clock.now()).total_seconds()
        # the plain backoff would read again within seconds; the plugin said 45 s
        assert PLUGIN_INTERVAL / 2 < wait <= PLUGIN_INTERVAL + 1


def batch_completed(event_id: str, batch_id: str) -> dict[str, Any]:
    """A thin OpenAI event: "this batch completed", and nothing of its state."""
    return {
        "id": event_id,
        "object": "event",
        "created_at": int(time.time()),
        "type": "batch.completed",
        "data": {"id": batch_id},
    }


async def post_signed(
    r: PresetRig, event: dict[str, Any], secret: str = WEBHOOK_SECRET
) -> httpx.Response:
    body = json.dumps(event).encode()
    now = int(time.time())
    headers = {
        "content-type": "application/json",
        "webhook-id": f"msg_{event['id']}",
        "webhook-timestamp": str(now),
        "webhook-signature": sign_standard_webhooks(secret, f"msg_{event['id']}", now, body),
    }
    async with httpx.AsyncClient() as client:
        return await client.post(r.hook_url, content=body, headers=headers)


def test_guarantees_say_lookup_instead_of_idempotency() -> None:
    desc = load_preset("openai_batch", HOOK_ENV)
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"][0] is False
    assert (
        "never retried automatically (it is looked up instead)" in report["at-most-once create"][1]
    )
    assert report["lookup after lost response"][0] is True
    assert "metadata.jobwarden_operation_id" in report["lookup after lost response"][1]
    assert report["cancellable"][0] is True
    assert report["webhooks signed"][0] is True
    assert report["result integrity checked"] == (
        False,
        "no checksum from the provider; checked: max 52428800 bytes, item counts",
    )


async def test_a_stored_body_whose_metadata_is_not_an_object_is_never_sent(
    pool: Any, tmp_path: Path
) -> None:
    # Our reference travels in metadata.jobwarden_operation_id; a stored body
    # whose metadata is a string cannot carry it. Nothing may be sent, and
    # nothing may be on record as possibly sent: a human decides.
    fx = OpenAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit({**batch_body("happy"), "metadata": "x"})
        assert await r.settle(op_id, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.NEEDS_ATTENTION
        op = await r.op(op_id)
        assert (op.create_attempts, op.remote_job_id) == (0, None)
        assert await r.calls(op_id, "create") == []
        assert fx.registry.calls["create"] == 0
        escalation = await r.escalation(op_id)
        assert escalation["state"] == "needs_attention"
        reason = escalation["reason"]
        assert "create request cannot be built" in reason and "never sent" in reason
        assert "'metadata' holds a non-object value" in reason
        assert await r.history(op_id) == ["create_pending", "needs_attention"]


@pytest.mark.parametrize("job_id", [".", "..", "batch_\x07"], ids=["dot", "dotdot", "control"])
async def test_a_batch_id_no_url_can_carry_is_kept_and_escalated(
    pool: Any, tmp_path: Path, job_id: str
) -> None:
    # The document's Batch.id is any string; one that would change the meaning
    # of /v1/batches/{batch_id} is never sent, but the job it names is kept.
    fx = OpenAIFixture(job_id=job_id)
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("happy"))
        assert await r.settle(op_id, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.NEEDS_ATTENTION
        assert (await r.op(op_id)).remote_job_id == job_id
        reason = (await r.escalation(op_id))["reason"]
        assert reason.startswith("the status read cannot be built from what is on record")
        assert fx.registry.calls["retrieve"] == 0
        assert await r.calls(op_id, "status") == []
        assert await r.history(op_id) == ["create_pending", "accepted", "needs_attention"]


async def test_an_operator_cancel_of_a_batch_no_url_can_carry_is_escalated_not_sent(
    pool: Any, tmp_path: Path
) -> None:
    fx = OpenAIFixture(job_id="..")
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("happy"))
        await r.settle(op_id, {S.NEEDS_ATTENTION})
        async with pool.acquire() as conn:
            await ledger.decisions.decide(
                conn, await r.op(op_id), S.CANCEL_REQUESTED, actor="operator:test", reason="stop it"
            )
        assert await r.settle(op_id, {S.NEEDS_ATTENTION}) is S.NEEDS_ATTENTION
        reason = await pool.fetchval(
            "SELECT reason FROM escalations WHERE operation_id = $1 AND resolved_at IS NULL", op_id
        )
        assert reason == (
            "the cancel request cannot be built from what is on record: job_id '..' is a "
            "relative path segment; this cancel request was not sent"
        )
        assert (await r.op(op_id)).cancel_sent_at is None
        assert fx.registry.calls["cancel"] == 0
        assert await r.calls(op_id, "cancel") == []


async def test_partial_output_no_url_can_carry_is_given_up_not_retried_forever(
    pool: Any, tmp_path: Path
) -> None:
    # A cancelled batch names its output file by an id no path can carry: the
    # partial output is not kept, and the operation still ends cancelled.
    fx = OpenAIFixture(file_id_suffix="\x01")
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_body("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        assert (await r.op(op_id)).result_id is None
        assert fx.registry.calls["file"] == 0
