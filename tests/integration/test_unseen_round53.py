"""MiniMax's video tasks, DashScope's asynchronous tasks, Gemini's Batch API, Adobe
PDF Services and Mux's assets, described in TOML as a new user would from README.md
(tests/fixtures_providers/unseen/minimax.toml, dashscope.toml, gemini_batch.toml,
adobe_pdf.toml, mux.toml) and driven through the real reconciler (and receiver)
against fakes on loopback (tests/fixtures_providers/unseen_round53.py): success with
the result collected and validated, failure with its reason, cancel (confirmed, or
refused as the API documents), a lost create answer, and each API's own edge:
MiniMax's status by query parameter and its two-step download (`result.follow`), DashScope's
`X-DashScope-Async` header and UNKNOWN (an expired task), Gemini's `batches/…` id
and EXPIRED, Adobe's job URL in the `location` header of a body-less 201, Mux's
`Mux-Signature` with a stale timestamp refused.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.unseen_media import MP4
from tests.fixtures_providers.unseen_round53 import (
    ADOBE_CLIENT_ID,
    ADOBE_FAILURE,
    ADOBE_TOKEN,
    DASHSCOPE_FAILURE,
    DASHSCOPE_KEY,
    GEMINI_ANSWERS,
    GEMINI_FAILURE,
    GEMINI_KEY,
    MINIMAX_KEY,
    MINIMAX_SENSITIVE,
    MUX_BASIC,
    MUX_FAILURE,
    MUX_SECRET,
    PDF,
    AdobeFixture,
    DashScopeFixture,
    GeminiFixture,
    MiniMaxFixture,
    MuxFixture,
)

S = LocalState


def rig(pool: Any, tmp_path: Path, app: Any, name: str, env: dict[str, str], **kwargs: Any) -> Any:
    """Provider `name` as described in unseen/<name>.toml, served by `app`."""
    with_receiver = kwargs.pop("with_receiver", False)
    table = described(name, **kwargs)
    return preset_rig(
        pool,
        tmp_path,
        app,
        preset=None,
        name=name,
        env=env,
        overrides=table,
        with_receiver=with_receiver,
    )


# --- MiniMax -----------------------------------------------------------------------

MINIMAX_ENV = {"MINIMAX_API_KEY": MINIMAX_KEY}
VIDEO = {"model": "MiniMax-Hailuo-02", "prompt": "a cat on a skateboard", "duration": 6}


@contextlib.asynccontextmanager
async def minimax(
    pool: Any, tmp_path: Path, fx: MiniMaxFixture, *, storage_allowed: bool = True
) -> AsyncIterator[Any]:
    """The rig, with MiniMax's storage (the download_url's server) on `localhost`
    beside it, another server; `storage_allowed`: the operator named that host in
    result.allowed_hosts (a loopback name is refused otherwise)."""
    async with serve_app(fx.cdn()) as cdn_url:
        fx.cdn_url = cdn_url.replace("127.0.0.1", "localhost")
        allowed = {"result": {"allowed_hosts": ["localhost"]}} if storage_allowed else {}
        async with rig(pool, tmp_path, fx.app(), "minimax", MINIMAX_ENV, **allowed) as r:
            yield r


async def test_minimax_a_task_read_by_query_parameter_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """The status is `GET /v1/query/video_generation?task_id=`: Queueing, Preparing,
    Processing, Success with a file_id; the file's record is fetched from
    /v1/files/retrieve?file_id=, and the video at its download_url is the result."""
    fx = MiniMaxFixture()
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        task = fx.only()
        assert (await r.op(op_id)).remote_job_id == task["id"]
        assert {"Preparing", "Processing", "Success"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.retrieves == 1
        assert fx.downloads == {f"2{task['id']}": 1}


async def test_minimax_the_video_one_hop_past_the_file_record_is_the_result(
    pool: Any, tmp_path: Path
) -> None:
    """MiniMax's two-step result (`result.follow = "/file/download_url"`): the status
    names a file id, the file record a signed download_url on MiniMax's storage,
    another server; the video there is fetched and kept, and our key never goes to
    it (the API's calls carry it). Before, no description reached the second hop:
    the record was kept as the result, its link soon expired, the video never read."""
    fx = MiniMaxFixture()
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.download_auth == [None]
        assert fx.download_urls[0].startswith(f"{fx.cdn_url}/download/"), fx.download_urls
        results = [c["url"] for c in await r.calls(op_id, "result")]
        assert len(results) == 2 and "/v1/files/retrieve" in results[0], results
        assert results[1].startswith(fx.cdn_url), results


async def test_minimax_a_file_record_without_its_link_is_never_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """A file record naming no download_url: the result is unavailable, the reason
    naming the path the link was looked for at, and nothing else is fetched."""
    fx = MiniMaxFixture()
    fx.no_link = True
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "no link at /file/download_url (result.follow)" in said, said
        assert (await r.op(op_id)).result_id is None
        assert fx.download_auth == []


async def test_minimax_an_expired_download_link_is_fetched_again_fresh(
    pool: Any, tmp_path: Path
) -> None:
    """The download_url answers 403 "Request has expired": the next attempt reads
    the status and the file record afresh, and the new link's video is kept."""
    fx = MiniMaxFixture()
    fx.expired = 1
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.retrieves == 2
        first, second = fx.download_urls
        assert first.endswith("Signature=s1") and second.endswith("Signature=s2")
        assert fx.download_auth == [None, None]


async def test_minimax_a_download_link_that_stays_expired_is_result_unavailable(
    pool: Any, tmp_path: Path
) -> None:
    """Refused again on the fresh link: result_unavailable in the storage's words,
    after one fresh read, never a success and never an endless retry."""
    fx = MiniMaxFixture()
    fx.expired = 100
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "HTTP 403" in said and "Request has expired" in said, said
        assert fx.retrieves == 2 and len(fx.download_urls) == 2


async def test_minimax_a_download_link_on_an_internal_host_not_allowed_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """The download_url on a loopback host the operator did not name: refused before
    it is sent (result_unavailable, saying why), the storage never asked."""
    fx = MiniMaxFixture()
    async with minimax(pool, tmp_path, fx, storage_allowed=False) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "localhost" in said and "allowed_hosts" in said, said
        assert fx.download_auth == []


async def test_minimax_a_failed_task_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = MiniMaxFixture()
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "Fail" in await r.raw_states(op_id)
        assert (await r.op(op_id)).result_id is None
        assert fx.retrieves == 0


async def test_minimax_a_refusal_answered_200_is_a_refused_create(
    pool: Any, tmp_path: Path
) -> None:
    """MiniMax refuses with HTTP 200, an empty task_id and base_resp 1026. A 2xx
    naming no job is never taken for a refusal (it stays a doubt, and without a
    lookup a human's), never read as a job, never sent again; MiniMax's code and
    words are on record for the agent and in the human's reason. Before, the
    reason said only "the last create got HTTP 200", the refusal's words lost."""
    fx = MiniMaxFixture()
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "script": "refuse"})
        end = await r.settle(op_id, ENDS)
        assert end in (S.FAILED, S.NEEDS_ATTENTION), await r.history(op_id)
        assert len(await r.calls(op_id, "create")) == 1
        assert end is S.NEEDS_ATTENTION
        said = (await r.escalation(op_id))["reason"]
        assert f"HTTP 200 (1026: {MINIMAX_SENSITIVE})" in said, said
        error = (await r.op(op_id)).last_error
        assert (error["code"], error["message"]) == ("1026", MINIMAX_SENSITIVE), error
        assert fx.jobs == {}


async def test_minimax_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = MiniMaxFixture(lose_first_create=True)
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        said = (await r.escalation(op_id))["reason"]
        assert "cannot deduplicate creates and offers no lookup" in said, said


async def test_minimax_a_cancel_sends_nothing_and_the_task_ends_as_it_does(
    pool: Any, tmp_path: Path
) -> None:
    """No cancel endpoint: nothing is sent, the task is read on, and the end it
    reaches by itself is what the operation ends as (the file record kept), never
    a cancel claimed."""
    fx = MiniMaxFixture()
    async with minimax(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        await r.settle(op_id, {S.OBSERVING})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []
        assert await r.result_bytes(op_id) == MP4


# --- DashScope ---------------------------------------------------------------------

DASHSCOPE_ENV = {"DASHSCOPE_API_KEY": DASHSCOPE_KEY}
SYNTHESIS = {"model": "wan2.2-t2v-plus", "input": {"prompt": "a kitten running in the moonlight"}}


def dashscope(pool: Any, tmp_path: Path, fx: DashScopeFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "dashscope", DASHSCOPE_ENV)


async def test_dashscope_an_async_task_is_collected(pool: Any, tmp_path: Path) -> None:
    """The create carries `X-DashScope-Async: enable` (without it DashScope refuses
    a synchronous call); PENDING, RUNNING, SUCCEEDED: the video at output.video_url
    fetched once and kept."""
    fx = DashScopeFixture()
    async with dashscope(pool, tmp_path, fx) as r:
        op_id = await r.submit(SYNTHESIS)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.async_headers == ["enable"]
        assert await r.result_bytes(op_id) == MP4
        task = fx.only()
        assert fx.videos == {task["id"]: 1}
        assert {"RUNNING", "SUCCEEDED"} <= await r.raw_states(op_id)


async def test_dashscope_a_failed_task_is_failed_with_its_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = DashScopeFixture()
    async with dashscope(pool, tmp_path, fx) as r:
        op_id = await r.submit({**SYNTHESIS, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.last_error["message"] == DASHSCOPE_FAILURE, op.last_error
        assert op.last_error.get("code") == "DataInspectionFailed", op.last_error


async def test_dashscope_a_pending_task_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = DashScopeFixture()
    async with dashscope(pool, tmp_path, fx) as r:
        op_id = await r.submit({**SYNTHESIS, "script": "queued"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "PENDING")]
        assert "CANCELED" in await r.raw_states(op_id)


async def test_dashscope_a_running_task_refuses_the_cancel_and_none_is_claimed(
    pool: Any, tmp_path: Path
) -> None:
    """ "Only tasks in the PENDING state can be canceled": a RUNNING task answers
    400 UnsupportedOperation and runs on. No cancel is claimed: a human is told,
    with DashScope's words, that the task goes on (README: a refused cancel, the job
    then read slowly so its real end is recorded)."""
    fx = DashScopeFixture()
    async with dashscope(pool, tmp_path, fx) as r:
        op_id = await r.submit({**SYNTHESIS, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        while fx.only()["state"] != "RUNNING":
            await r.reconciler.run_once()
        await r.cancel(op_id)
        for _ in range(200):
            await r.reconciler.run_once()
            if fx.cancels:
                break
        assert fx.cancels == [(fx.only()["id"], "RUNNING")]
        await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED})
        said = (await r.escalation(op_id))["reason"]
        assert "HTTP 400 (UnsupportedOperation: Failed to cancel" in said, said
        assert "still shows 'RUNNING'" in said, said
        assert "cancelled" not in await r.history(op_id)
        assert len(fx.cancels) == 1  # a refusal is not sent again


async def test_dashscope_unknown_is_a_task_gone_not_one_running(pool: Any, tmp_path: Path) -> None:
    """UNKNOWN: "the task does not exist or its status is unknown" (task ids live
    24 hours). Never read as running for ever: the operation ends failed, its
    reason naming UNKNOWN."""
    fx = DashScopeFixture()
    async with dashscope(pool, tmp_path, fx) as r:
        op_id = await r.submit({**SYNTHESIS, "script": "expire"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "UNKNOWN" in await r.raw_states(op_id)
        said = await reason(r, op_id)
        assert "UNKNOWN" in said, said


async def test_dashscope_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = DashScopeFixture(lose_first_create=True)
    async with dashscope(pool, tmp_path, fx) as r:
        op_id = await r.submit(SYNTHESIS)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Gemini Batch API --------------------------------------------------------------

GEMINI_ENV = {"GEMINI_API_KEY": GEMINI_KEY}
REQUESTS = [
    {
        "request": {"contents": [{"parts": [{"text": f"question {n}"}]}]},
        "metadata": {"key": f"request-{n}"},
    }
    for n in (1, 2, 3)
]
GEMINI_BATCH = {"batch": {"input_config": {"requests": {"requests": REQUESTS}}}}


def gemini(pool: Any, tmp_path: Path, fx: GeminiFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "gemini_batch", GEMINI_ENV)


async def test_gemini_a_batch_named_batches_slash_id_is_collected_inline(
    pool: Any, tmp_path: Path
) -> None:
    """The job id is `batches/…`, read at /v1beta/batches/… ({+job_id}); SUCCEEDED
    carries its responses inline, one per request, the failed one recorded by its
    key."""
    fx = GeminiFixture()
    async with gemini(pool, tmp_path, fx) as r:
        op_id = await r.submit(GEMINI_BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        batch = fx.only()
        assert (await r.op(op_id)).remote_job_id == batch["id"]
        assert batch["input"]["batch"]["display_name"]  # our reference, for the lookup
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["inlinedResponses"] == GEMINI_ANSWERS
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_succeeded"], summary["items_failed"]) == (2, 1)


async def test_gemini_a_failed_batch_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = GeminiFixture()
    async with gemini(pool, tmp_path, fx) as r:
        op_id = await r.submit({**GEMINI_BATCH, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).last_error["message"] == GEMINI_FAILURE


async def test_gemini_an_expired_batch_is_failed_naming_expiry(pool: Any, tmp_path: Path) -> None:
    """BATCH_STATE_EXPIRED ("running or pending for more than 48 hours"): done, no
    response, no error. Failed, never running for ever, its reason the state."""
    fx = GeminiFixture()
    async with gemini(pool, tmp_path, fx) as r:
        op_id = await r.submit({**GEMINI_BATCH, "script": "expire"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        said = await reason(r, op_id)
        assert "BATCH_STATE_EXPIRED" in said, said


async def test_gemini_a_cancel_is_confirmed_by_the_cancelled_state(
    pool: Any, tmp_path: Path
) -> None:
    fx = GeminiFixture()
    async with gemini(pool, tmp_path, fx) as r:
        op_id = await r.submit({**GEMINI_BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        (cancel,) = fx.cancels
        assert cancel[0] == fx.only()["id"]
        assert "BATCH_STATE_CANCELLED" in await r.raw_states(op_id)


async def test_gemini_a_lost_create_is_found_by_its_display_name(pool: Any, tmp_path: Path) -> None:
    """The create's answer is lost (the batch was made): batches.list shows it by
    our display_name; it is adopted, never made twice, and collected."""
    fx = GeminiFixture(lose_first_create=True)
    async with gemini(pool, tmp_path, fx) as r:
        op_id = await r.submit(GEMINI_BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads >= 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


# --- Adobe PDF Services ------------------------------------------------------------

ADOBE_ENV = {"ADOBE_PDF_ACCESS_TOKEN": ADOBE_TOKEN, "ADOBE_CLIENT_ID": ADOBE_CLIENT_ID}
COMPRESS = {"assetID": "urn:aaid:AS:UE1:input-asset", "compressionLevel": "MEDIUM"}


def adobe(pool: Any, tmp_path: Path, fx: AdobeFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "adobe_pdf", ADOBE_ENV)


async def test_adobe_a_job_known_by_its_location_header_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """201 with no body, the job's URL in `location`: read there until done, the
    PDF at asset.downloadUri fetched and kept. Every call carries the client id
    (`x-api-key`) besides the token, as Adobe requires."""
    fx = AdobeFixture()
    async with adobe(pool, tmp_path, fx) as r:
        op_id = await r.submit(COMPRESS)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert (await r.op(op_id)).remote_job_id.endswith(f"/{job['id']}/status")
        assert await r.result_bytes(op_id) == PDF
        assert fx.downloads == 1
        assert {"in progress", "done"} <= await r.raw_states(op_id)


async def test_adobe_a_failed_job_is_failed_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = AdobeFixture()
    async with adobe(pool, tmp_path, fx) as r:
        op_id = await r.submit({**COMPRESS, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.last_error["message"] == ADOBE_FAILURE, op.last_error


async def test_adobe_a_cancel_sends_nothing_and_a_human_is_told_at_its_deadline(
    pool: Any, tmp_path: Path
) -> None:
    """Adobe has no call that cancels a job: nothing is sent; the job runs past the
    cancel deadline and a human is told why, never a cancel claimed."""
    fx = AdobeFixture()
    async with adobe(pool, tmp_path, fx) as r:
        op_id = await r.submit({**COMPRESS, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=1.0)
        end = await r.settle(op_id, ENDS | {S.CANCELLATION_UNCONFIRMED})
        assert end is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "has no cancel endpoint (Adobe PDF Services has no call" in said, said
        assert await r.calls(op_id, "cancel") == []


async def test_adobe_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = AdobeFixture(lose_first_create=True)
    async with adobe(pool, tmp_path, fx) as r:
        op_id = await r.submit(COMPRESS)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Mux ---------------------------------------------------------------------------

MUX_ENV = {"MUX_BASIC_CREDENTIALS": MUX_BASIC, "MUX_WEBHOOK_SECRET": MUX_SECRET}
ASSET = {
    "input": [{"url": "https://muxed.s3.amazonaws.com/leds.mp4"}],
    "playback_policy": ["public"],
}


def mux(pool: Any, tmp_path: Path, fx: MuxFixture, *, with_receiver: bool = False) -> Any:
    table = described("mux")
    if not with_receiver:
        del table["webhooks"]
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="mux",
        env=MUX_ENV,
        overrides=table,
        with_receiver=with_receiver,
    )


async def test_mux_an_asset_is_ready_and_kept(pool: Any, tmp_path: Path) -> None:
    fx = MuxFixture()
    async with mux(pool, tmp_path, fx) as r:
        op_id = await r.submit(ASSET)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        asset = fx.only()
        assert asset["input"]["passthrough"] == op_id
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["id"] == asset["id"] and kept["status"] == "ready"
        assert kept["playback_ids"][0]["policy"] == "public"


async def test_mux_an_errored_asset_is_failed_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = MuxFixture()
    async with mux(pool, tmp_path, fx) as r:
        op_id = await r.submit({**ASSET, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.last_error["message"] == MUX_FAILURE, op.last_error


async def test_mux_a_cancel_deletes_the_preparing_asset(pool: Any, tmp_path: Path) -> None:
    """DELETE 204, then the asset reads 404: with deletes_job that miss is the job
    cancelled."""
    fx = MuxFixture()
    async with mux(pool, tmp_path, fx) as r:
        op_id = await r.submit({**ASSET, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "preparing")]


async def test_mux_a_cancel_never_deletes_an_asset_that_became_ready(
    pool: Any, tmp_path: Path
) -> None:
    """The asset is ready before our DELETE would go: read first, no DELETE sent
    (it would destroy the video), the asset kept as the result."""
    fx = MuxFixture()
    async with mux(pool, tmp_path, fx) as r:
        op_id = await r.submit({**ASSET, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [] and fx.deleted == []


async def test_mux_a_lost_create_is_found_by_its_passthrough(pool: Any, tmp_path: Path) -> None:
    fx = MuxFixture(lose_first_create=True)
    async with mux(pool, tmp_path, fx) as r:
        op_id = await r.submit(ASSET)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_mux_signed_webhooks_wake_the_asset_and_a_stale_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """`Mux-Signature: t=…,v1=…` over "t.body": a delivery signed so reaches the
    receiver and is matched by its passthrough; one signed with another secret, or
    with a timestamp ten minutes old (a replay), is refused and stores nothing.
    video.asset.ready wakes the read long before the backstop."""
    fx = MuxFixture()
    async with mux(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**ASSET, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        aid = fx.only()["id"]
        fx.finish(aid)
        assert await fx.deliver(r.hook_url, aid, "video.asset.ready", secret="another") == 401
        stale = int(time.time()) - 600
        assert await fx.deliver(r.hook_url, aid, "video.asset.ready", timestamp=stale) == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, aid, "video.asset.ready") == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch(
            "SELECT operation_id, remote_state_raw FROM webhook_events WHERE provider = 'mux'"
        )
        assert [(e["operation_id"], e["remote_state_raw"]) for e in events] == [
            (op_id, "video.asset.ready")
        ]
