"""Amazon Transcribe batch jobs, D-ID talks, Cloudinary eager transformations and
Novita AI async tasks, described in TOML as a new user would
(tests/fixtures_providers/unseen/: transcribe, did_talks, cloudinary_eager, novita)
and driven through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round57b.py): success with the result collected,
failure with its reason, cancel where there is one, a lost create answer, and each
API's own edge: Transcribe's every call a signed POST / (the status read a POST
with a JSON body naming the job), its job named by us and a resent Start answered
400 ConflictException, no cancel; D-ID's rejected talk, its DELETE that removes a
talk whatever its status and its unsigned webhook carrying our token; Cloudinary's
asset read for the derived image (no state word), its public_id with slashes and
its notification no scheme verifies; Novita's task read by a query parameter, its
images kept as files and its unsigned webhook.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round57b import (
    CLD_IMAGE,
    CLD_KEY,
    CLD_SECRET,
    DID_ERROR,
    DID_KEY,
    DID_REJECTED,
    DID_VIDEO,
    NV_FAILURE,
    NV_IMAGE,
    NV_KEY,
    TR_FAILURE,
    TR_KEYS,
    TR_TEXT,
    CloudinaryFixture,
    DidFixture,
    NovitaFixture,
    TranscribeFixture,
)

S = LocalState
ALLOWED = {"allowed_hosts": ["localhost"]}


@contextlib.asynccontextmanager
async def rig(
    pool: Any,
    tmp_path: Path,
    fx: Any,
    name: str,
    env: dict[str, str],
    table: dict[str, Any],
    *,
    with_receiver: bool = False,
) -> AsyncIterator[PresetRig]:
    """The rig, with the provider's object store on `localhost` beside it (S3's
    signed links, res.cloudinary.com), a host the operator allows."""
    async with serve_app(fx.storage()) as storage_url:
        fx.url = storage_url.replace("127.0.0.1", "localhost")
        table = {**table, "result": {**table.get("result", {}), **ALLOWED}}
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name=name,
            env=env,
            overrides=table,
            with_receiver=with_receiver,
        ) as r:
            yield r


# --- Amazon Transcribe -------------------------------------------------------------

((TR_ID, TR_SECRET),) = TR_KEYS.items()
TR_ENV = {"AWS_ACCESS_KEY_ID": TR_ID, "AWS_SECRET_ACCESS_KEY": TR_SECRET}


def transcription(script: str | None = None) -> dict[str, Any]:
    tags = [{"Key": "team", "Value": "comms"}]
    if script:
        tags.append({"Key": "script", "Value": script})
    return {
        "LanguageCode": "en-US",
        "Media": {"MediaFileUri": "s3://my-bucket/all-hands.mp4"},
        "Tags": tags,
    }


def transcribe(pool: Any, tmp_path: Path, fx: TranscribeFixture) -> Any:
    return rig(pool, tmp_path, fx, "transcribe", TR_ENV, described("transcribe"))


async def test_transcribe_a_job_named_by_us_is_read_by_a_signed_post_and_its_transcript_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = TranscribeFixture()
    async with transcribe(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcription())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        op = await r.op(op_id)
        assert op.remote_job_id == job["id"] and job["id"].startswith("idem_")
        assert set(fx.targets) == {
            "Transcribe.StartTranscriptionJob",
            "Transcribe.GetTranscriptionJob",
        }
        assert fx.signed_by and set(fx.signed_by) == {TR_ID}
        assert {"IN_PROGRESS", "COMPLETED"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["results"]["transcripts"][0]["transcript"] == TR_TEXT
        # the pre-signed S3 link was fetched without our signature
        assert fx.auth == [None] * len(fx.auth) and fx.auth


async def test_transcribe_a_failed_job_is_failed_with_its_failure_reason(
    pool: Any, tmp_path: Path
) -> None:
    fx = TranscribeFixture()
    async with transcribe(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcription("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == TR_FAILURE


async def test_transcribe_an_expired_transcript_link_is_fetched_again_from_a_fresh_get(
    pool: Any, tmp_path: Path
) -> None:
    """The transcript's link is pre-signed and expires; the first one handed out
    answers 403 AccessDenied "Request has expired": the job is read again for a
    freshly signed link, and the transcript kept from it."""
    fx = TranscribeFixture()
    fx.expired_links = frozenset(f"20261206T1000{n:02d}Z" for n in range(1, 4))
    async with transcribe(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcription())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["results"]["transcripts"][0]["transcript"] == TR_TEXT
        assert len(fx.auth) >= 2 and fx.auth == [None] * len(fx.auth)


async def test_transcribe_a_start_over_the_limit_is_sent_again_and_one_job_runs(
    pool: Any, tmp_path: Path
) -> None:
    """400 LimitExceededException made nothing (create.not_created_codes): the same
    Start, the same name, goes again; one job."""
    fx = TranscribeFixture()
    fx.limit_first = True
    async with transcribe(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcription())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.starts == 2 and len(fx.jobs) == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_transcribe_a_cancel_sends_nothing_and_the_job_is_read_to_its_end(
    pool: Any, tmp_path: Path
) -> None:
    """No [cancel]: DeleteTranscriptionJob refuses a running job and deletes an ended
    one's transcript. A cancel asked for is never sent: the job is read to its end
    and its transcript kept."""
    fx = TranscribeFixture()
    async with transcribe(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcription("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        fx.only()["script"] = None
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id))["jobName"] == fx.only()["id"]
        assert fx.deletes == []
        assert "Transcribe.DeleteTranscriptionJob" not in fx.targets


async def test_transcribe_a_lost_start_is_adopted_by_its_name_at_the_conflict(
    pool: Any, tmp_path: Path
) -> None:
    """The Start whose answer was lost made the job; the resent Start (the same
    name) answers 400 ConflictException (AWS JSON's client errors are all 400s):
    create.already_exists_codes reads it as the job we named, read by that name
    through the lookup (a POST naming it in its body: lookup.body) and adopted.
    Before, no lookup could name the job in a body, and the 400 was read as a
    refusal: a human was told of a job that ran."""
    fx = TranscribeFixture(lose_first_create=True)
    async with transcribe(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcription())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert len(fx.jobs) == 1 and fx.creates == 2
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["jobName"] == fx.only()["id"]


# --- D-ID talks --------------------------------------------------------------------

DID_TOKEN = "didhook_4c2e8a6f1b3d5e7a9c0b2d4f"
DID_ENV = {"DID_API_KEY": DID_KEY, "DID_WEBHOOK_TOKEN": DID_TOKEN}


def talk(script: str = "Hello from the team") -> dict[str, Any]:
    return {
        "source_url": "https://example.com/presenter.jpg",
        "script": {"type": "text", "input": script, "provider": {"type": "microsoft"}},
        "config": {"fluent": True},
    }


def did(pool: Any, tmp_path: Path, fx: DidFixture, *, with_receiver: bool = False) -> Any:
    table = described("did_talks")
    if not with_receiver:
        table.pop("webhooks")
        table["create"] = {k: v for k, v in table["create"].items() if k != "set_body"}
    return rig(pool, tmp_path, fx, "did_talks", DID_ENV, table, with_receiver=with_receiver)


async def test_did_a_talk_is_read_and_its_video_kept(pool: Any, tmp_path: Path) -> None:
    fx = DidFixture()
    async with did(pool, tmp_path, fx) as r:
        op_id = await r.submit(talk())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.only()["body"]["user_data"] == op_id
        assert {"started", "done"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == DID_VIDEO
        assert fx.auth == [None] * len(fx.auth) and fx.auth


async def test_did_an_error_and_a_rejection_are_failed_with_their_description(
    pool: Any, tmp_path: Path
) -> None:
    fx = DidFixture()
    async with did(pool, tmp_path, fx) as r:
        failed = await r.submit(talk("fail"))
        rejected = await r.submit(talk("reject"))
        assert await r.settle(failed, ENDS) is S.FAILED, await r.history(failed)
        assert await r.settle(rejected, ENDS) is S.FAILED, await r.history(rejected)
        assert await reason(r, failed) == DID_ERROR[1]
        assert (await r.op(failed)).last_error["code"] == DID_ERROR[0]
        assert await reason(r, rejected) == DID_REJECTED[1]
        assert "rejected" in await r.raw_states(rejected)


async def test_did_a_deleted_talk_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = DidFixture()
    async with did(pool, tmp_path, fx) as r:
        op_id = await r.submit(talk("slow"))
        await r.settle(op_id, {S.OBSERVING})
        tid = fx.only()["id"]
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [tid]


async def test_did_a_cancel_of_a_finished_talk_deletes_nothing(pool: Any, tmp_path: Path) -> None:
    fx = DidFixture()
    async with did(pool, tmp_path, fx) as r:
        op_id = await r.submit(talk("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == []
        assert await r.result_bytes(op_id) == DID_VIDEO


async def test_did_a_lost_create_is_found_by_its_user_data(pool: Any, tmp_path: Path) -> None:
    fx = DidFixture(lose_first_create=True)
    async with did(pool, tmp_path, fx) as r:
        op_id = await r.submit(talk())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads >= 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_did_its_unsigned_webhook_carrying_our_token_wakes_the_talk(
    pool: Any, tmp_path: Path
) -> None:
    """D-ID signs nothing: the webhook URL carries our token. A delivery without
    it is refused; with it, the talk is read and collected."""
    fx = DidFixture()
    async with did(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(talk("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        tid = fx.only()["id"]
        hook = fx.only()["body"]["webhook"]
        assert hook == f"{r.hook_url}?token={DID_TOKEN}"
        fx.finish(tid)
        assert await fx.deliver(r.hook_url, tid) == 400
        assert await fx.deliver(f"{r.hook_url}?token=didhook_forged0000000000000000", tid) == 401
        assert await fx.deliver(hook, tid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, tid)]


# --- Cloudinary --------------------------------------------------------------------

CLD_ENV = {"CLOUDINARY_BASIC": base64.b64encode(f"{CLD_KEY}:{CLD_SECRET}".encode()).decode()}


def explicit(public_id: str) -> dict[str, Any]:
    return {
        "public_id": public_id,
        "type": "upload",
        "eager": "c_scale,w_320",
        "eager_async": True,
    }


def cloudinary(
    pool: Any, tmp_path: Path, fx: CloudinaryFixture, *, with_receiver: bool = False
) -> Any:
    table = described("cloudinary_eager")
    if not with_receiver:
        table.pop("webhooks")
        table["create"] = {k: v for k, v in table["create"].items() if k != "set_body"}
    env = {**CLD_ENV, "CLOUDINARY_API_SECRET": CLD_SECRET}
    return rig(pool, tmp_path, fx, "cloudinary_eager", env, table, with_receiver=with_receiver)


async def test_cloudinary_the_derived_image_of_a_foldered_asset_is_read_and_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The public_id holds a folder's slash ({+job_id}); the asset names no state:
    its derived list, once it holds the transformation, is the job done."""
    fx = CloudinaryFixture()
    fx.upload("samples/people/jazz")
    async with cloudinary(pool, tmp_path, fx) as r:
        op_id = await r.submit(explicit("samples/people/jazz"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == "samples/people/jazz"
        assert {"upload", "c_scale,w_320"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == CLD_IMAGE
        assert fx.auth == [None] * len(fx.auth) and fx.auth


async def test_cloudinary_a_refused_explicit_is_failed_with_its_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = CloudinaryFixture()
    async with cloudinary(pool, tmp_path, fx) as r:
        op_id = await r.submit(explicit("never-uploaded"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Resource not found - never-uploaded"


async def test_cloudinary_a_failed_eager_is_never_told_and_times_out(
    pool: Any, tmp_path: Path
) -> None:
    """A failed eager transformation is told only in the notification (in a shape
    the docs do not give): polled, the asset never lists the derived image, and
    the operation ends at its result deadline rather than with a guessed failure."""
    fx = CloudinaryFixture()
    fx.upload("fail")
    async with cloudinary(pool, tmp_path, fx) as r:
        op_id = await r.submit(explicit("fail"), result_deadline_s=1.5)
        assert await r.settle(op_id, ENDS) is S.RESULT_TIMED_OUT, await r.history(op_id)


async def test_cloudinary_a_lost_explicit_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = CloudinaryFixture(lose_first_create=True)
    fx.upload("sample")
    async with cloudinary(pool, tmp_path, fx) as r:
        op_id = await r.submit(explicit("sample"))
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_cloudinary_its_signed_notification_wakes_the_asset(
    pool: Any, tmp_path: Path
) -> None:
    """X-Cld-Signature is SHA-1(body + timestamp + api_secret), no HMAC: verified by
    the hmac family's construction = "secret_suffix". One signed under another
    secret is refused; the genuine one wakes the asset's read (polling is 30 s
    away). Before, no scheme computed the digest: the notification could not be
    verified, and the description had to leave it out."""
    fx = CloudinaryFixture()
    fx.upload("campaign/slow")
    async with cloudinary(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(explicit("campaign/slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        assert fx.only()["body"]["eager_notification_url"] == r.hook_url
        fx.finish("campaign/slow")
        assert await fx.notify(r.hook_url, "campaign/slow", secret="another-secret") == 401
        assert await fx.notify(r.hook_url, "campaign/slow") == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, "campaign/slow")]
        assert await r.result_bytes(op_id) == CLD_IMAGE


# --- Novita AI ---------------------------------------------------------------------

NV_TOKEN = "nvhook_9a7c5e3b1d2f4a6c8e0b1d3f"
NV_ENV = {"NOVITA_API_KEY": NV_KEY, "NOVITA_WEBHOOK_TOKEN": NV_TOKEN}


def txt2img(prompt: str = "a lighthouse at dusk", images: int = 1) -> dict[str, Any]:
    return {
        "extra": {"response_image_type": "png"},
        "request": {
            "model_name": "sd_xl_base_1.0.safetensors",
            "prompt": prompt,
            "width": 1024,
            "height": 1024,
            "image_num": images,
            "steps": 20,
            "sampler_name": "Euler a",
            "guidance_scale": 7.5,
            "seed": -1,
        },
    }


def novita(pool: Any, tmp_path: Path, fx: NovitaFixture, *, with_receiver: bool = False) -> Any:
    table = described("novita")
    if not with_receiver:
        table.pop("webhooks")
        table["create"] = {k: v for k, v in table["create"].items() if k != "set_body"}
    return rig(pool, tmp_path, fx, "novita", NV_ENV, table, with_receiver=with_receiver)


async def test_novita_a_task_is_read_by_its_query_and_its_images_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = NovitaFixture()
    async with novita(pool, tmp_path, fx) as r:
        op_id = await r.submit(txt2img())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"TASK_STATUS_PROCESSING", "TASK_STATUS_SUCCEED"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == NV_IMAGE + b"\x01"
        assert fx.auth == [None] * len(fx.auth) and fx.auth


async def test_novita_several_images_are_refused_as_one_binary_result_not_one_kept(
    pool: Any, tmp_path: Path
) -> None:
    """image_num = 2: two links, and a binary result is one file. The operation
    ends result_validation_failed saying so (a human told), never succeeded with
    one image of the two."""
    fx = NovitaFixture()
    async with novita(pool, tmp_path, fx) as r:
        op_id = await r.submit(txt2img(images=2))
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        esc = await r.escalation(op_id)
        assert "a binary result is one file, and the status named 2" in esc["reason"], esc


async def test_novita_a_failed_task_is_failed_with_its_reason(pool: Any, tmp_path: Path) -> None:
    fx = NovitaFixture()
    async with novita(pool, tmp_path, fx) as r:
        op_id = await r.submit(txt2img("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == NV_FAILURE


async def test_novita_a_cancel_sends_nothing_and_the_task_is_read_to_its_end(
    pool: Any, tmp_path: Path
) -> None:
    """No [cancel]: Novita has no way to stop a task. The cancel asked for is never
    sent anywhere; the task is read to its end and its image kept."""
    fx = NovitaFixture()
    async with novita(pool, tmp_path, fx) as r:
        op_id = await r.submit(txt2img("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        fx.finish(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == NV_IMAGE + b"\x01"


async def test_novita_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = NovitaFixture(lose_first_create=True)
    async with novita(pool, tmp_path, fx) as r:
        op_id = await r.submit(txt2img())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_novita_its_unsigned_webhook_carrying_our_token_wakes_the_task(
    pool: Any, tmp_path: Path
) -> None:
    fx = NovitaFixture()
    async with novita(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(txt2img("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        tid = fx.only()["id"]
        hook = fx.only()["body"]["extra"]["webhook"]["url"]
        assert hook == f"{r.hook_url}?token={NV_TOKEN}"
        fx.finish(tid)
        assert await fx.deliver(r.hook_url, tid) == 400
        assert await fx.deliver(f"{r.hook_url}?token=nvhook_forged00000000000000000", tid) == 401
        assert await fx.deliver(hook, tid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, tid)]
