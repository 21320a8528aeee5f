"""The `replicate` preset against a Replicate predictions fixture, end to end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.ledger.states import LocalState
from shared.providers import describe_guarantees, load_preset
from shared.serve import serve_app
from shared.signatures import sign_standard_webhooks
from tests.fixtures_providers.replicate import (
    API_TOKEN,
    CANCEL_AFTER_MINIMUM_SECONDS,
    OUTPUT,
    ReplicateFixture,
)
from tests.fixtures_providers.rig import preset_rig

S = LocalState
WEBHOOK_SECRET = "whsec_" + "cmVwbGljYXRlLXRlc3Qtc2VjcmV0"
ENV = {"REPLICATE_API_TOKEN": API_TOKEN}
HOOK_ENV = {**ENV, "REPLICATE_WEBHOOK_SECRET": WEBHOOK_SECRET}


def prediction(scenario: str) -> dict[str, Any]:
    return {
        "version": "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa",
        "input": {"scenario": scenario, "text": "Alice"},
    }


def rig(pool: Any, tmp_path: Path, fixture: ReplicateFixture, **kwargs: Any) -> Any:
    kwargs.setdefault("env", ENV)
    return preset_rig(pool, tmp_path, fixture.app(), preset="replicate", **kwargs)


async def test_happy_path_keeps_the_output_and_sends_our_deadline(
    pool: Any, tmp_path: Path
) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("happy"), result_deadline_s=60)
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        result = await pool.fetchrow(
            "SELECT inline FROM results WHERE result_id = $1", op.result_id
        )
        assert result["inline"] == OUTPUT
        job = fx.registry.only()
        cancel_after = job.headers["cancel-after"]
        assert cancel_after.endswith("s") and 50 <= int(cancel_after[:-1]) <= 60
        assert "webhook" not in job.request  # no public receiver URL: nothing to call back
        assert job.request["webhook_events_filter"] == ["completed"]


async def test_a_deadline_closer_than_cancel_afters_minimum_sends_the_minimum(
    pool: Any, tmp_path: Path
) -> None:
    # Under 5 s left: Replicate refuses a shorter Cancel-After, so 5 s is sent.
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("happy"), result_deadline_s=4)
        final = await r.settle(op_id, {S.SUCCEEDED, S.FAILED, S.RESULT_TIMED_OUT})
        assert final is S.SUCCEEDED
        assert fx.registry.only().headers["cancel-after"] == f"{CANCEL_AFTER_MINIMUM_SECONDS}s"


async def test_failed_prediction_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("failed"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.last_error is not None
        assert op.last_error["message"] == "CUDA out of memory"


async def test_cancel_ends_canceled(pool: Any, tmp_path: Path) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        assert fx.registry.calls["cancel"] == 1
        assert (await r.op(op_id)).remote_state_raw == "canceled"


async def test_prediction_aborted_at_its_deadline_is_cancelled_by_the_provider(
    pool: Any, tmp_path: Path
) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("aborted"))
        assert await r.settle(op_id, {S.CANCELLED, S.FAILED}) is S.CANCELLED
        assert fx.registry.calls["cancel"] == 0
        assert await r.history(op_id) == ["create_pending", "accepted", "observing", "cancelled"]


async def test_output_removed_after_the_hour_is_result_unavailable(
    pool: Any, tmp_path: Path
) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("removed"))
        state = await r.settle(
            op_id, {S.SUCCEEDED, S.RESULT_UNAVAILABLE, S.RESULT_VALIDATION_FAILED}
        )
        assert state is S.RESULT_UNAVAILABLE
        escalation = await r.escalation(op_id)
        assert "no result in the final response" in escalation["reason"]


async def test_lost_create_response_escalates_instead_of_creating_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(prediction("lost"))
        assert await r.settle(op_id, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.NEEDS_ATTENTION
        assert fx.registry.calls["create"] == 1
        op = await r.op(op_id)
        assert op.create_attempts == 1 and op.remote_job_id is None
        escalation = await r.escalation(op_id)
        assert "cannot be retried safely" in escalation["reason"]
        assert escalation["details"]["recent_calls"][0]["error"] == "timeout"


async def test_per_prediction_webhook_is_matched_by_our_operation_id(
    pool: Any, tmp_path: Path
) -> None:
    fx = ReplicateFixture()
    async with rig(pool, tmp_path, fx, env=HOOK_ENV, with_receiver=True) as r:
        op_id = await r.submit(prediction("held"))
        # with webhooks there is no read at acceptance: the job waits for its event
        assert await r.settle(op_id, {S.ACCEPTED}) is S.ACCEPTED
        job = fx.registry.only()
        hook = job.request["webhook"]
        assert hook.startswith(r.hook_url)
        assert parse_qs(urlsplit(hook).query) == {"op": [op_id]}
        job.hold = False
        job.reads += 2  # the prediction finished at Replicate: its webhook says so
        body = json.dumps(fx.prediction(job)).encode()
        now = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": "msg_replicate_1",
            "webhook-timestamp": str(now),
            "webhook-signature": sign_standard_webhooks(
                WEBHOOK_SECRET, "msg_replicate_1", now, body
            ),
        }
        async with httpx.AsyncClient() as client:
            answer = await client.post(hook, content=body, headers=headers)
            again = await client.post(hook, content=body, headers=headers)
        assert answer.json() == {"status": "stored", "matched": True}
        assert again.json() == {"status": "duplicate"}  # a redelivery is recognised
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=5.0) is S.SUCCEEDED
        stored = await pool.fetchrow("SELECT operation_ref, operation_id FROM webhook_events")
        assert tuple(stored) == (op_id, op_id)


def test_guarantees_admit_no_idempotency_and_no_lookup() -> None:
    desc = load_preset("replicate", HOOK_ENV)
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"][0] is False
    assert report["lookup after lost response"] == (
        False,
        "create after a lost response cannot be reconciled automatically (predictions carry no "
        "client reference and cannot be listed by one); the operation escalates to an operator",
    )
    assert report["cancellable"][0] is True
    assert report["webhooks signed"][0] is True
    assert report["result integrity checked"][0] is False


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def cdn(seen: list[dict[str, str]]) -> Starlette:
    """replicate.delivery: the output files, on a host of their own, whoever asks."""

    async def file(request: Request) -> Response:
        seen.append(dict(request.headers))
        return Response(PNG, media_type="image/png")

    return Starlette(routes=[Route("/pbxt/{key}/{name}", file)])


async def test_an_image_models_output_files_are_downloaded_not_kept_as_expiring_links(
    pool: Any, tmp_path: Path
) -> None:
    """README's advice for a model whose output is file URLs (they expire about an
    hour after the prediction): `source = "files"` with `file_ids = "/output"` and no
    path keeps the file itself, fetched without our token."""
    seen: list[dict[str, str]] = []
    async with serve_app(cdn(seen)) as cdn_url:
        fx = ReplicateFixture(output=[f"{cdn_url}/pbxt/abc/out-0.png"])
        result = {"source": "files", "file_ids": "/output", "format": "binary"}
        async with rig(pool, tmp_path, fx, overrides={"result": result}) as r:
            op_id = await r.submit(prediction("happy"))
            assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED, S.RESULT_UNAVAILABLE}) is (
                S.SUCCEEDED
            ), await r.history(op_id)
            op = await r.op(op_id)
            ref = await pool.fetchval(
                "SELECT storage_ref FROM results WHERE result_id = $1", op.result_id
            )
    assert Path(ref.removeprefix("file:")).read_bytes() == PNG
    assert len(seen) == 1 and "authorization" not in seen[0]  # our token stays with the API
