"""The `assemblyai` preset against an AssemblyAI transcripts fixture, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from bench.harness import TestClock
from shared.ledger.states import LocalState
from shared.providers import describe_guarantees, load_preset
from tests.fixtures_providers.assemblyai import API_KEY, TEXT, AssemblyAIFixture
from tests.fixtures_providers.rig import preset_rig

S = LocalState
HOOK_TOKEN = "jw-hook-token-0123456789abcdef"
ENV = {"ASSEMBLYAI_API_KEY": API_KEY}
HOOK_ENV = {**ENV, "ASSEMBLYAI_WEBHOOK_TOKEN": HOOK_TOKEN}


def audio(scenario: str) -> dict[str, Any]:
    return {"audio_url": f"https://example.com/{scenario}.mp3", "speaker_labels": True}


def rig(pool: Any, tmp_path: Path, fixture: AssemblyAIFixture, **kwargs: Any) -> Any:
    kwargs.setdefault("env", ENV)
    return preset_rig(pool, tmp_path, fixture.app(), preset="assemblyai", **kwargs)


async def test_happy_path_stores_the_whole_transcript(pool: Any, tmp_path: Path) -> None:
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("happy"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        stored = await pool.fetchval(
            "SELECT inline FROM results WHERE result_id = $1", op.result_id
        )
        assert stored["text"] == TEXT and stored["id"] == op.remote_job_id
        job = fx.registry.only()
        assert job.request["speaker_labels"] is True  # the caller's options pass through
        assert "webhook_url" not in job.request and "webhook_auth_header_value" not in job.request


async def test_error_status_is_failed_with_assemblyais_reason(pool: Any, tmp_path: Path) -> None:
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("error"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.last_error is not None
        assert op.last_error["message"] == "Audio file is too short to transcribe"


async def test_completed_transcript_without_text_fails_validation(
    pool: Any, tmp_path: Path
) -> None:
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("notext"))
        final = await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED})
        assert final is S.RESULT_VALIDATION_FAILED
        assert "missing required field text" in (await r.escalation(op_id))["reason"]


async def _reads_after_cancel(r: Any, clock: TestClock, op_id: str, reads: int) -> None:
    """Drive the reconciler (the test's clock past each backoff) until `reads` more
    status reads were made after the cancel request."""
    before = len(await r.calls(op_id, "status"))
    for _ in range(50 * reads):
        if len(await r.calls(op_id, "status")) >= before + reads:
            return
        await r.reconciler.run_once()
        await clock.advance(1.0)
    raise AssertionError(f"no {reads} reads after the cancel: {await r.history(op_id)}")


async def test_cancel_is_unsupported_the_job_is_read_until_the_deadline_then_says_why(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """No cancel endpoint: nothing is sent, and the job is read on, in cancel_requested
    (not escalated: it may still end by itself). At the cancel deadline it stops for
    a human, saying why. It went to cancellation_unconfirmed at once, which tells an
    agent `done` and "not confirmed before the deadline", and then moved on its own."""
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit(audio("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=30.0)
        await _reads_after_cancel(r, clock, op_id, reads=3)
        assert await r.state(op_id) is S.CANCEL_REQUESTED
        assert await r.escalation(op_id) is None
        seen = await pool.fetchrow(
            "SELECT done, outcome FROM agent_operations WHERE operation_id = $1", op_id
        )
        assert (seen["done"], seen["outcome"]) == (False, None)
        await clock.advance(30.0)
        final = await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED, S.CANCELLED})
        assert final is S.CANCELLATION_UNCONFIRMED
        reason = (await r.escalation(op_id))["reason"]
        assert "cancel deadline passed and the job has not ended" in reason, reason
        assert "has no endpoint to stop a transcript in progress" in reason, reason
        assert await r.calls(op_id, "cancel") == []  # nothing was sent


async def test_a_job_that_cannot_be_cancelled_and_ends_by_itself_is_reported_as_it_ended(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The transcript completes before the cancel deadline: it is collected, a success
    as it is, and no human was ever asked."""
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit(audio("held"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=30.0)
        await _reads_after_cancel(r, clock, op_id, reads=1)
        fx.registry.only().hold = False
        assert await r.settle(op_id, {S.SUCCEEDED, S.CANCELLATION_UNCONFIRMED}) is S.SUCCEEDED
        assert "cancellation_unconfirmed" not in await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []


async def test_lost_create_response_escalates_instead_of_creating_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("lost"))
        assert await r.settle(op_id, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.NEEDS_ATTENTION
        assert fx.registry.calls["create"] == 1
        assert "cannot be retried safely" in (await r.escalation(op_id))["reason"]


async def test_static_header_webhook_wakes_the_reconciler(pool: Any, tmp_path: Path) -> None:
    fx = AssemblyAIFixture()
    async with rig(pool, tmp_path, fx, env=HOOK_ENV, with_receiver=True) as r:
        op_id = await r.submit(audio("held"))
        # with webhooks there is no read at acceptance: the job waits for its event
        assert await r.settle(op_id, {S.ACCEPTED}) is S.ACCEPTED
        job = fx.registry.only()
        # we chose the header and the token, and handed both over with the create
        assert job.request["webhook_auth_header_name"] == "X-Jobwarden-Token"
        assert job.request["webhook_auth_header_value"] == HOOK_TOKEN
        hook = job.request["webhook_url"]
        assert hook == f"{r.hook_url}?op={op_id}"
        job.hold = False
        payload = {"transcript_id": job.job_id, "status": "completed"}
        async with httpx.AsyncClient() as client:
            wrong = await client.post(hook, json=payload, headers={"X-Jobwarden-Token": "guess"})
            answer = await client.post(
                hook, json=payload, headers={"X-Jobwarden-Token": HOOK_TOKEN}
            )
        assert wrong.status_code == 401
        assert answer.json() == {"status": "stored", "matched": True}
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=5.0) is S.SUCCEEDED
        # the token we hand to AssemblyAI is never written to the call log
        leaked = await pool.fetchval(
            "SELECT count(*) FROM provider_calls p WHERE strpos(p::text, $1) > 0", HOOK_TOKEN
        )
        assert leaked == 0


def test_guarantees_no_cancel_and_an_unsigned_webhook() -> None:
    desc = load_preset("assemblyai", HOOK_ENV)
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"][0] is False
    assert report["lookup after lost response"][0] is False
    assert report["cancellable"] == (
        False,
        "cancellation is unsupported: AssemblyAI has no endpoint to stop a transcript in progress",
    )
    holds, why = report["webhooks signed"]
    assert holds is False and "static shared header" in why and "no replay protection" in why
    assert report["result integrity checked"][1].endswith("required fields text")
