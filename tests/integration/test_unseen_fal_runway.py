"""fal.ai's queue and Runway's tasks, described in TOML as a new user would from
README.md (tests/fixtures_providers/unseen/fal.toml, runway.toml) and driven through
the real reconciler against fakes on loopback (tests/fixtures_providers/unseen_media.py):
create, a lost create answer, running, success with the result collected, failure
with its reason, cancel and its races, and throttling.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_media import (
    FAL_IMAGES,
    FAL_KEY,
    FAL_TIMEOUT,
    FAL_USER,
    MP4,
    RUNWAY_KEY,
    RUNWAY_VERSION,
    FalFixture,
    RunwayFixture,
)

S = LocalState


# --- fal.ai queue --------------------------------------------------------------------


def jwk_x(key: Ed25519PrivateKey) -> str:
    """A public key as fal's JWKS publishes it (`x`: base64url, no padding)."""
    raw = key.public_key().public_bytes_raw()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def fal(
    pool: Any, tmp_path: Path, fx: FalFixture, *, with_receiver: bool = False, **over: Any
) -> Any:
    """fal as described; the template's user id made the fake's. Without a receiver
    (no deliveries come) the description's webhooks are left out, as a user without
    one would, so reads follow the backoff, not the 30 s backstop."""
    table = described("fal", **over)
    if with_receiver:
        options = table["webhooks"]["options"]
        options["signed_content"] = options["signed_content"].replace("YOUR-FAL-USER-ID", FAL_USER)
    else:
        del table["webhooks"]
    env = {"FAL_KEY": FAL_KEY, "FAL_WEBHOOK_KEYS": jwk_x(fx.signer)}
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="fal",
        env=env,
        overrides=table,
        with_receiver=with_receiver,
    )


async def test_fal_a_request_queues_runs_and_its_output_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    fx = FalFixture()
    async with fal(pool, tmp_path, fx) as r:
        op_id = await r.submit({"prompt": "a cat in a hat"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == FAL_IMAGES
        op = await r.op(op_id)
        assert op.remote_job_id == fx.only()["id"]
        assert fx.only()["input"] == {"prompt": "a cat in a hat"}
        assert fx.only()["webhook"] is None  # no receiver here: no ?fal_webhook=
        # every state fal reported is on record in its own words
        raws = await r.pool.fetch(
            "SELECT DISTINCT remote_state_raw FROM observations WHERE operation_id = $1",
            op_id,
        )
        assert {row[0] for row in raws} >= {"IN_QUEUE", "IN_PROGRESS", "COMPLETED"}


async def test_fal_a_failed_request_fails_with_the_runners_reason(
    pool: Any, tmp_path: Path
) -> None:
    """fal reads COMPLETED of a failed request too; the response URL answers the
    runner's 422 or 500, which `[result.failed]` says is fal's verdict."""
    fx = FalFixture()
    async with fal(pool, tmp_path, fx) as r:
        invalid = await r.submit({"script": "422"})
        oom = await r.submit({"script": "500"})
        assert await r.settle(invalid, ENDS) is S.FAILED, await r.history(invalid)
        assert await r.settle(oom, ENDS) is S.FAILED, await r.history(oom)
        assert "field required" in json.dumps((await r.op(invalid)).last_error)
        error = (await r.op(oom)).last_error
        assert "runner_server_error" in json.dumps(error), error
        assert "CUDA out of memory" in json.dumps(error), error


async def test_fal_completed_with_an_error_is_a_failure_with_that_error(
    pool: Any, tmp_path: Path
) -> None:
    """fal's newer status says COMPLETED of a failed request, with `error` and
    `error_type` beside it (`status.error_means_failed`): failed at that read, the
    error its reason. Before, COMPLETED was a success: the response URL answered
    504 (request_timeout), retried as an outage until a human was asked."""
    fx = FalFixture()
    async with fal(pool, tmp_path, fx) as r:
        op_id = await r.submit({"script": "timeout", "prompt": "x"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert error is not None
        assert FAL_TIMEOUT["error"] in json.dumps(error), error
        assert FAL_TIMEOUT["error_type"] in json.dumps(error), error
        assert fx.results == 0  # no result fetched for a failed request
        assert "result_collecting" not in await r.history(op_id)
        observed = await r.pool.fetchrow(
            "SELECT remote_state_raw, remote_state::text FROM observations"
            " WHERE operation_id = $1 ORDER BY observation_id DESC LIMIT 1",
            op_id,
        )
        assert tuple(observed) == ("COMPLETED", "failed")  # fal's word, our reading


async def test_fal_a_lost_submit_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    """No idempotency and no lookup: the request that may be queued is not doubled;
    the operation goes to a human."""
    fx = FalFixture(lose_first_create=True)
    async with fal(pool, tmp_path, fx) as r:
        op_id = await r.submit({"prompt": "x"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_fal_a_cancel_refused_already_completed_collects_the_output(
    pool: Any, tmp_path: Path
) -> None:
    """The request ends between our last read and our cancel: fal answers 400
    ALREADY_COMPLETED. No cancel is claimed; the status read after it shows the end
    and the output is collected (the agent's cancel answered by `succeeded`)."""
    fx = FalFixture()
    async with fal(pool, tmp_path, fx) as r:
        op_id = await r.submit({"script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "COMPLETED")]
        assert "cancelling" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == FAL_IMAGES


async def test_fal_its_signed_webhook_wakes_the_operation_and_a_forged_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """The submit asks for the webhook (`?fal_webhook={webhook_url}`); fal's
    completion webhook, signed as fal signs it (Ed25519 over the request id,
    our user id, the timestamp and the body's SHA-256; the key as its JWKS
    publishes it), reaches the real receiver, is verified, and wakes the operation
    long before the 30 s backstop read; our own read then collects the output. One
    signed by another key is refused and moves nothing."""
    fx = FalFixture()
    async with fal(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({"script": "slow", "prompt": "x"})
        await r.settle(op_id, {S.ACCEPTED})  # the first read waits for a callback
        rid = fx.only()["id"]
        assert fx.only()["webhook"] == r.hook_url  # asked for in the submit's query
        forged = await fx.deliver(r.hook_url, rid, signer=Ed25519PrivateKey.generate())
        assert forged == 401
        fx.finish(rid)
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == FAL_IMAGES
        event = await r.pool.fetchrow(
            "SELECT event_id, id_signed, operation_id FROM webhook_events WHERE provider = 'fal'"
        )
        assert dict(event) == {"event_id": rid, "id_signed": True, "operation_id": op_id}


async def test_fal_throttled_status_reads_are_waited_out(pool: Any, tmp_path: Path) -> None:
    fx = FalFixture()
    fx.throttled_reads = 3
    async with fal(pool, tmp_path, fx) as r:
        op_id = await r.submit({"prompt": "x"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1


# --- Runway --------------------------------------------------------------------------

RUNWAY_ENV = {"RUNWAYML_API_SECRET": RUNWAY_KEY}


@contextlib.asynccontextmanager
async def runway(
    pool: Any,
    tmp_path: Path,
    fx: RunwayFixture,
    drop: tuple[str, ...] = (),
    **over: dict[str, Any],
) -> AsyncIterator[PresetRig]:
    """The rig, with Runway's output host (another origin) served beside it; `drop`:
    `[result]` keys taken out."""
    async with serve_app(fx.cdn()) as cdn_url:
        fx.cdn_url = cdn_url
        table = described("runway", **over)
        table["result"] = {k: v for k, v in table["result"].items() if k not in drop}
        async with preset_rig(
            pool, tmp_path, fx.app(), preset=None, name="runway", env=RUNWAY_ENV, overrides=table
        ) as r:
            yield r


IMAGE = {"promptImage": "https://example.com/cat.jpg", "model": "gen4_turbo", "ratio": "1280:720"}


async def test_runway_a_task_runs_and_its_video_is_kept_without_our_key(
    pool: Any, tmp_path: Path
) -> None:
    """`output` names the files by URL on Runway's storage host, links that expire in
    a day or two: `source = "files"` with no path fetches each and keeps it (the
    URLs alone were kept before, soon to point at nothing); our key stays home."""
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit(IMAGE)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.cdn_auth == [None]
        (fetch,) = await r.calls(op_id, "result")
        assert fetch["url"].startswith(f"{fx.cdn_url}/output/{fx.only()['id']}.mp4")
        # the version header went on every call
        assert set(fx.versions) == {RUNWAY_VERSION}
        raws = await r.pool.fetch(
            "SELECT DISTINCT remote_state_raw FROM observations WHERE operation_id = $1",
            op_id,
        )
        assert {row[0] for row in raws} >= {"PENDING", "THROTTLED", "RUNNING", "SUCCEEDED"}


async def test_runway_the_video_is_fetched_from_its_host_without_our_key(
    pool: Any, tmp_path: Path
) -> None:
    """The output URL is on another origin (Runway's storage): described as the
    result's URL, the file is fetched there, and our bearer key is not sent to it."""
    fx = RunwayFixture()
    over: dict[str, dict[str, Any]] = {
        "status": {"result_url": "/output/0"},
        "result": {
            "source": "url",
            "format": "binary",
            "expect": {"content_types": ["video/mp4"]},
        },
    }
    async with runway(pool, tmp_path, fx, drop=("file_ids",), **over) as r:
        op_id = await r.submit(IMAGE)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.cdn_auth == [None]


async def test_runway_an_expired_output_link_is_result_unavailable_never_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """The CDN answers 403 for a link that expired (its signed `_jwt`): the status
    is read again once for fresh links, and when the file is still refused the
    result is result_unavailable with the CDN's answer, for a human. Nothing is
    stored as the result."""
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        tid = fx.only()["id"]
        fx.expired.add(f"{tid}.mp4")
        fx.finish(tid)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "HTTP 403" in reason, reason
        assert (await r.op(op_id)).result_id is None
        assert len(await r.calls(op_id, "result")) == 2  # a fresh link asked for once
        assert fx.cdn_auth == [None, None]


async def test_runway_two_outputs_are_never_stored_as_one_video(pool: Any, tmp_path: Path) -> None:
    """A binary result is one file: two videos laid end to end are no video. Both
    are fetched; the result is result_validation_failed, saying why, not a success
    holding one of them."""
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "two"})
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "a binary result is one file, and the status named 2" in reason, reason
        assert fx.cdn_auth == [None, None]


async def test_runway_a_failed_task_fails_with_its_reason_and_code(
    pool: Any, tmp_path: Path
) -> None:
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = json.dumps((await r.op(op_id)).last_error)
        assert "SAFETY.INPUT.IMAGE" in error, error
        assert "content moderation" in error, error


async def test_runway_a_lost_create_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    fx = RunwayFixture(lose_first_create=True)
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit(IMAGE)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_runway_a_rate_limited_create_goes_again_and_reads_wait(
    pool: Any, tmp_path: Path
) -> None:
    """429 to a create: Runway's docs say retry (nothing was made); 429 to a read:
    back-pressure. One task, collected."""
    fx = RunwayFixture()
    fx.throttled_creates = 2
    fx.throttled_reads = 2
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit(IMAGE)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert len(await r.calls(op_id, "create")) == 3


async def test_runway_a_cancel_deletes_the_running_task_and_reads_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    """DELETE aborts a running task, which is then never fetched again (404):
    with `deletes_job`, that miss after our accepted cancel is the cancel done."""
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "RUNNING")]


async def test_runway_a_task_that_ended_before_the_cancel_is_not_deleted(
    pool: Any, tmp_path: Path
) -> None:
    """The task succeeded after our last read: the read before the cancel sees it,
    no DELETE goes (it would delete the output), the output is kept."""
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == []
        assert fx.deleted_after_end == []


async def test_runway_read_first_alone_sends_every_cancel_of_a_running_task_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """Why runway.toml says `deletes_job`: with `read_first` alone (README's Runway
    example before), the task our DELETE aborted reads 404, and a miss after a cancel
    that may delete is a human's to judge. Never a cancel claimed, never a rerun."""
    fx = RunwayFixture()
    cancel = {"deletes_job": False, "read_first": True}
    async with runway(pool, tmp_path, fx, cancel=cancel) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert "does not exist, after our cancel request" in (await r.escalation(op_id))["reason"]
        assert fx.creates == 1
