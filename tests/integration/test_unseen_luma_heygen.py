"""Luma's Dream Machine and HeyGen's avatar videos, described in TOML as a new user
would from README.md (tests/fixtures_providers/unseen/luma.toml, heygen.toml) and
driven through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_video.py): create, a lost create answer, running,
success with the video kept, failure with its reason, cancel (Luma's deleting
DELETE; HeyGen has none), throttling, and each one's callbacks.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_media import MP4
from tests.fixtures_providers.unseen_video import (
    HEYGEN_ERROR,
    HEYGEN_KEY,
    HEYGEN_SECRET,
    LUMA_FAILURE,
    LUMA_KEY,
    LUMA_TOKEN,
    HeyGenFixture,
    LumaFixture,
)

S = LocalState
PROMPT = {"prompt": "an old lady laughing underwater", "model": "ray-2", "resolution": "720p"}
AVATAR = {
    "video_inputs": [
        {
            "character": {"type": "avatar", "avatar_id": "Angela-inTshirt-20220820"},
            "voice": {"type": "text", "input_text": "Hello", "voice_id": "1bd001e7e50f"},
        }
    ],
    "dimension": {"width": 1280, "height": 720},
}


# --- Luma ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def luma(
    pool: Any, tmp_path: Path, fx: LumaFixture, *, with_receiver: bool = False, **over: Any
) -> AsyncIterator[PresetRig]:
    """Luma as described, its CDN served beside it. Without a receiver the webhooks
    table is left out, as a user without one would (reads follow the backoff)."""
    async with serve_app(fx.cdn()) as cdn_url:
        fx.cdn_url = cdn_url
        table = described("luma", **over)
        if not with_receiver:
            del table["webhooks"]
        env = {"LUMAAI_API_KEY": LUMA_KEY, "LUMA_CALLBACK_TOKEN": LUMA_TOKEN}
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="luma",
            env=env,
            overrides=table,
            with_receiver=with_receiver,
        ) as r:
            yield r


async def test_luma_a_generation_dreams_and_its_video_is_kept_without_our_key(
    pool: Any, tmp_path: Path
) -> None:
    fx = LumaFixture()
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.cdn_auth == [None]  # the CDN never saw our bearer key
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert fx.only()["input"] == PROMPT  # no receiver: no callback_url asked for
        assert await r.raw_states(op_id) >= {"queued", "dreaming", "completed"}


async def test_luma_a_completed_read_naming_no_video_yet_is_read_again(
    pool: Any, tmp_path: Path
) -> None:
    """A generation read `completed` while its `assets` are not filled in yet: the
    final read names no file, which says nothing of the video. It is read again,
    as a read naming no state is, and the video collected when named. Before, the
    first such read ended the operation result_unavailable ("the final status
    named no result files"), the video left at Luma for a human to fetch."""
    fx = LumaFixture()
    fx.assets_late = 3
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.assets_late == 0


async def test_luma_a_completed_generation_that_never_names_its_video_goes_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """Read again for `limits.result_retry_seconds` (and six tries) at least, then
    result_unavailable, saying what was missing."""
    fx = LumaFixture()
    fx.assets_late = 1000
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "the final status named no result files" in reason, reason
        assert len(await r.calls(op_id, "status")) >= 6


async def test_luma_a_failed_generation_fails_with_its_reason(pool: Any, tmp_path: Path) -> None:
    fx = LumaFixture()
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert LUMA_FAILURE in json.dumps((await r.op(op_id)).last_error)
        assert fx.cdn_auth == []


async def test_luma_a_lost_create_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    """No idempotency and no lookup: the generation that may be dreaming is not
    doubled; the operation goes to a human."""
    fx = LumaFixture(lose_first_create=True)
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        assert len(await r.calls(op_id, "create")) == 1


async def test_luma_a_rate_limited_create_goes_to_a_human_and_reads_wait(
    pool: Any, tmp_path: Path
) -> None:
    """Luma documents 429 without saying nothing was made: left ambiguous, the create
    goes to a human and is never sent twice, told how to say otherwise if the
    provider's docs do (the reason named only the 429). A 429 to a read is
    back-pressure."""
    fx = LumaFixture()
    fx.throttled_creates = 1
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert len(await r.calls(op_id, "create")) == 1
        assert fx.creates == 0
        reason = (await r.escalation(op_id))["reason"]
        assert "the last create got HTTP 429" in reason, reason
        assert "list it in create.not_created_statuses" in reason, reason  # the fix
    fx = LumaFixture()
    fx.throttled_reads = 3
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1


async def test_luma_a_cancel_deletes_the_dreaming_generation_and_reads_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    fx = LumaFixture()
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "dreaming")]


async def test_luma_a_delete_whose_answer_is_lost_claims_no_cancel_and_says_why(
    pool: Any, tmp_path: Path
) -> None:
    """The DELETE arrives (the generation is gone) but its answer is lost: the miss
    that follows is no accepted cancel's, so nothing is claimed; a human is asked,
    told the description says the DELETE deletes (the reason said "if that request
    deletes the job", as if nobody knew) and what to decide."""
    fx = LumaFixture()
    fx.lose_delete_answer = True
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS, timeout=20) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "that request deletes the job (cancel.deletes_job)" in reason, reason
        assert "resolve --decision cancelled" in reason, reason


async def test_luma_a_generation_that_completed_before_the_cancel_is_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The read before the DELETE sees `completed`: no DELETE (it would delete the
    video), the video collected."""
    fx = LumaFixture()
    async with luma(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == []
        assert await r.result_bytes(op_id) == MP4


async def test_luma_its_callback_carries_our_token_wakes_the_operation_and_is_scrubbed(
    pool: Any, tmp_path: Path
) -> None:
    """Luma signs nothing: README's recipe puts a token in the callback URL. The
    create asks for the callback with it; Luma's callback (the generation object,
    which echoes `request.callback_url`, token and all) reaches the real receiver,
    wakes the operation long before the 30 s backstop, and is stored without the
    token. One to our URL without the token is refused."""
    fx = LumaFixture()
    async with luma(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        gid = fx.only()["id"]
        assert fx.only()["input"]["callback_url"] == f"{r.hook_url}?token={LUMA_TOKEN}"
        assert await fx.call_back(gid, url=r.hook_url) == 400  # no token: missing_header
        assert await fx.call_back(gid, url=f"{r.hook_url}?token=x{LUMA_TOKEN[1:]}") == 401
        fx.finish(gid)
        assert await fx.call_back(gid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        payloads = await r.pool.fetch(
            "SELECT payload::text FROM webhook_events WHERE provider = 'luma'"
        )
        assert len(payloads) == 1
        assert LUMA_TOKEN not in payloads[0][0]
        for row in await r.pool.fetch("SELECT * FROM provider_calls"):
            assert LUMA_TOKEN not in json.dumps(dict(row), default=str)


# --- HeyGen ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def heygen(
    pool: Any, tmp_path: Path, fx: HeyGenFixture, *, with_receiver: bool = False, **over: Any
) -> AsyncIterator[PresetRig]:
    async with serve_app(fx.cdn()) as cdn_url:
        fx.cdn_url = cdn_url
        table = described("heygen", **over)
        if not with_receiver:
            del table["webhooks"]
        env = {"HEYGEN_API_KEY": HEYGEN_KEY, "HEYGEN_WEBHOOK_SECRET": HEYGEN_SECRET}
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="heygen",
            env=env,
            overrides=table,
            with_receiver=with_receiver,
        ) as r:
            yield r


async def test_heygen_a_video_renders_and_is_kept_without_our_key(
    pool: Any, tmp_path: Path
) -> None:
    fx = HeyGenFixture()
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit(AVATAR)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.cdn_auth == [None]
        assert fx.only()["input"]["callback_id"] == op_id  # client_reference_field
        assert await r.raw_states(op_id) >= {"pending", "waiting", "processing", "completed"}


async def test_heygen_a_failed_video_fails_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = HeyGenFixture()
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit({**AVATAR, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = json.dumps((await r.op(op_id)).last_error)
        assert HEYGEN_ERROR["message"] in error, error
        assert str(HEYGEN_ERROR["code"]) in error, error


async def test_heygen_an_expired_video_link_is_read_again_for_a_fresh_one(
    pool: Any, tmp_path: Path
) -> None:
    """The link the collection fetches has expired (403; the read that saw the end
    named one, the collection's own read another): the status is read once more
    and the fresh link fetched."""
    fx = HeyGenFixture()
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit({**AVATAR, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.expired.update({fx.links + 1, fx.links + 2})
        fx.finish(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert len(await r.calls(op_id, "result")) == 2


async def test_heygen_a_lost_create_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    fx = HeyGenFixture(lose_first_create=True)
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit(AVATAR)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_heygen_a_rate_limited_create_goes_to_a_human_and_reads_wait(
    pool: Any, tmp_path: Path
) -> None:
    fx = HeyGenFixture()
    fx.throttled_creates = 1
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit(AVATAR)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert len(await r.calls(op_id, "create")) == 1
    fx = HeyGenFixture()
    fx.throttled_reads = 3
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit(AVATAR)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1


async def test_heygen_a_cancel_claims_nothing_and_the_video_is_still_collected(
    pool: Any, tmp_path: Path
) -> None:
    """HeyGen has no cancel: the agent's cancel is recorded, nothing is sent, and
    nothing claims the video stopped; it renders on and is collected."""
    fx = HeyGenFixture()
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit({**AVATAR, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        fx.finish(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []
        assert await r.result_bytes(op_id) == MP4


async def test_heygen_a_cancel_past_its_deadline_says_no_cancel_was_sent(
    pool: Any, tmp_path: Path
) -> None:
    """The video still renders at the cancel deadline: a human is asked, told that
    HeyGen has no cancel endpoint and nothing was sent."""
    fx = HeyGenFixture()
    async with heygen(pool, tmp_path, fx) as r:
        op_id = await r.submit({**AVATAR, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=0.5)
        assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "provider heygen has no cancel endpoint" in reason, reason
        assert "no cancel was sent" in reason, reason
        assert await r.calls(op_id, "cancel") == []


async def test_heygen_its_signed_webhook_wakes_the_operation_and_a_forged_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """HeyGen's account webhook, a hex HMAC-SHA256 of the body in `Signature`
    (README's `hmac` family, as Lemon Squeezy's), reaches the real receiver, names
    its operation by `callback_id`, and wakes it long before the 30 s backstop. One
    signed with another secret is refused and moves nothing. The pre-signed link it
    carries is stored redacted: it was kept whole, reusable from the database,
    although README promises no pre-signed link is (the call log's copies were)."""
    fx = HeyGenFixture()
    async with heygen(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**AVATAR, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        vid = fx.only()["id"]
        fx.finish(vid)
        assert await fx.deliver(r.hook_url, vid, secret="another-endpoint-secret") == 401
        assert await fx.deliver(r.hook_url, vid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        event = await r.pool.fetchrow(
            "SELECT operation_id, payload::text FROM webhook_events WHERE provider = 'heygen'"
        )
        assert event["operation_id"] == op_id
        # the event's `url` is a pre-signed link (CloudFront's Signature): a bearer
        # credential to the video, stored redacted as every other copy of it is
        payload = json.loads(event["payload"])
        assert "Signature=sig" not in event["payload"], payload
        assert "Signature=[redacted]" in payload["event_data"]["url"], payload
        assert payload["event_data"]["video_id"] == vid
