"""OpenAI's Videos API (Sora), OpenAI's Responses API in background mode,
ElevenLabs' dubbing, Groq's Batch API and Fireworks' batch inference jobs, described
in TOML as a new user would from README.md (tests/fixtures_providers/unseen/
openai_videos.toml, openai_responses.toml, elevenlabs_dubbing.toml, groq_batch.toml,
fireworks_batch.toml) and driven
through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round54.py): success with the result collected and
validated, failure with its reason, cancel (confirmed, or refused as the API
documents), a lost create answer, and each API's own edge: Sora's progress in
percent, its MP4 at `/content` gone once the assets expired, a DELETE that must
never reach a completed video, thin Standard Webhooks; the Responses API's
`background`/`store` set by the description, `incomplete` with its reason, and a
cancel of a response that already ended refused; ElevenLabs' multipart create with
the agent's audio as a file, a file per target language, the create answer's
`expected_duration_sec` (`create.poll_after_seconds`); Groq through the
openai_batch preset at its own paths, an expired batch's partial output, a list
with no cursor, and no OpenAI webhook secret taken by mistake; Fireworks' job id
chosen by us (`client_job_id`, a UUID behind a letter for its id alphabet), its
JSONL one hop past the output dataset's download endpoint (`result.follow`), and
EXPIRED failed.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers import parse_providers
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.unseen_media import MP4
from tests.fixtures_providers.unseen_round54 import (
    ANSWER,
    DUB_FAILURE,
    ELEVENLABS_KEY,
    FIREWORKS_ACCOUNT,
    FIREWORKS_FAILURE,
    FIREWORKS_KEY,
    GROQ_FAILURE,
    GROQ_KEY,
    OPENAI_KEY,
    OPENAI_WEBHOOK_SECRET,
    RESPONSES_FAILURE,
    SORA_FAILURE,
    DubbingFixture,
    FireworksFixture,
    GroqFixture,
    ResponsesFixture,
    SoraFixture,
    deliver_standard,
    dubbed_audio,
)

S = LocalState
OPENAI_ENV = {"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_WEBHOOK_SECRET": OPENAI_WEBHOOK_SECRET}


def rig(
    pool: Any,
    tmp_path: Path,
    app: Any,
    name: str,
    env: dict[str, str],
    *,
    with_receiver: bool = False,
    **over: dict[str, Any],
) -> Any:
    """Provider `name` as described in unseen/<name>.toml, served by `app`; without
    the receiver, without its webhooks (polling is then no 30 s backstop)."""
    table = described(name, **over)
    if not with_receiver:
        table.pop("webhooks", None)
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


async def reason(r: Any, op_id: str) -> str:
    """What the operation's record says went wrong (its last error, or escalation)."""
    op = await r.op(op_id)
    if op.last_error:
        return json.dumps(op.last_error)
    esc = await r.escalation(op_id)
    return str(esc["reason"]) if esc else ""


# --- OpenAI Videos (Sora) ----------------------------------------------------------

VIDEO = {"model": "sora-2", "prompt": "A calico cat playing a piano on stage", "seconds": "4"}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)
REFERENCE = {
    "content_base64": base64.b64encode(PNG).decode(),
    "filename": "first-frame.png",
    "content_type": "image/png",
}


def sora(pool: Any, tmp_path: Path, fx: SoraFixture, *, with_receiver: bool = False) -> Any:
    return rig(pool, tmp_path, fx.app(), "openai_videos", OPENAI_ENV, with_receiver=with_receiver)


async def test_sora_a_video_is_collected_from_its_content(pool: Any, tmp_path: Path) -> None:
    """Sent as a form (multipart), with the agent's reference image as a file part;
    queued, in_progress (42 %), completed: the MP4 at /v1/videos/{id}/content is
    fetched once and kept, its type checked; the progress is read as a percent."""
    fx = SoraFixture()
    async with sora(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "input_reference": REFERENCE})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        video = fx.only()
        assert fx.encodings == ["multipart/form-data"]
        assert video["input"]["input_reference"] == ("first-frame.png", "image/png", PNG)
        assert (video["input"]["seconds"], video["input"]["model"]) == ("4", "sora-2")
        assert (await r.op(op_id)).remote_job_id == video["id"]
        assert await r.result_bytes(op_id) == MP4
        assert fx.contents == {video["id"]: 1}
        assert {"in_progress", "completed"} <= await r.raw_states(op_id)
        read = await r.pool.fetch(
            "SELECT remote_state_raw, progress_percent FROM observations"
            " WHERE operation_id = $1 AND remote_state_raw = 'in_progress'",
            op_id,
        )
        assert read and all(row["progress_percent"] == 42 for row in read), read


async def test_sora_a_failed_video_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = SoraFixture()
    async with sora(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert (error["code"], error["message"]) == ("moderation_blocked", SORA_FAILURE), error
        assert fx.contents == {}


async def test_sora_a_cancel_deletes_the_running_video_and_its_404_is_the_cancel(
    pool: Any, tmp_path: Path
) -> None:
    """No cancel call: DELETE removes the video; read first (it is still running),
    then the 404 after our accepted DELETE is the job cancelled, by us."""
    fx = SoraFixture()
    async with sora(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "in_progress")]


async def test_sora_a_cancel_never_deletes_a_video_that_completed(
    pool: Any, tmp_path: Path
) -> None:
    """The video completed before our DELETE would go: the read first sees it, no
    DELETE is sent (it would destroy the MP4), and the video is kept."""
    fx = SoraFixture()
    async with sora(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [] and fx.deleted == []
        assert await r.result_bytes(op_id) == MP4


async def test_sora_content_gone_after_expiry_is_never_a_success(pool: Any, tmp_path: Path) -> None:
    """The video reads completed but its assets have expired (/content 404): the
    result is unavailable, in OpenAI's words, never an empty success."""
    fx = SoraFixture()
    async with sora(pool, tmp_path, fx) as r:
        op_id = await r.submit({**VIDEO, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        vid = fx.only()["id"]
        fx.expired.add(vid)
        fx.finish(vid)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        said = await reason(r, op_id)
        assert "404" in said and "expired" in said, said
        assert (await r.op(op_id)).result_id is None


async def test_sora_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = SoraFixture(lose_first_create=True)
    async with sora(pool, tmp_path, fx) as r:
        op_id = await r.submit(VIDEO)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        said = (await r.escalation(op_id))["reason"]
        assert "cannot deduplicate creates and offers no lookup" in said, said


async def test_sora_a_signed_video_completed_webhook_wakes_the_read(
    pool: Any, tmp_path: Path
) -> None:
    """video.completed, Standard Webhooks signed, thin ({"data": {"id"}}): matched by
    the video id and answered 200; the read it wakes decides, long before the
    backstop. One signed with another secret is refused and stores nothing."""
    fx = SoraFixture()
    async with sora(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**VIDEO, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        vid = fx.only()["id"]
        fx.finish(vid)
        other = "whsec_" + "YW5vdGhlci1zZWNyZXQtYWx0b2dldGhlcg=="
        assert await deliver_standard(r.hook_url, "video.completed", vid, secret=other) == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await deliver_standard(r.hook_url, "video.completed", vid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch(
            "SELECT operation_id, remote_state_raw FROM webhook_events"
            " WHERE provider = 'openai_videos'"
        )
        assert [(e["operation_id"], e["remote_state_raw"]) for e in events] == [
            (op_id, "video.completed")
        ]
        assert await r.result_bytes(op_id) == MP4


# --- OpenAI Responses, background mode ---------------------------------------------

QUESTION = {"model": "o3", "input": "What is the capital of France?"}


def responses(
    pool: Any, tmp_path: Path, fx: ResponsesFixture, *, with_receiver: bool = False
) -> Any:
    return rig(
        pool, tmp_path, fx.app(), "openai_responses", OPENAI_ENV, with_receiver=with_receiver
    )


async def test_responses_a_background_response_is_collected(pool: Any, tmp_path: Path) -> None:
    """The description sets `background` and `store` on every create (the agent's
    body need not); queued, in_progress, completed: the response, its output, kept."""
    fx = ResponsesFixture()
    async with responses(pool, tmp_path, fx) as r:
        op_id = await r.submit(QUESTION)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.backgrounds == [True] and fx.stores == [True]
        resp = fx.only()
        assert resp["input"]["metadata"] == {"jobwarden_operation": op_id}
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["id"] == resp["id"]
        assert kept["output"][0]["content"][0]["text"] == ANSWER
        assert {"in_progress", "completed"} <= await r.raw_states(op_id)


async def test_responses_a_failed_response_is_failed_with_its_error(
    pool: Any, tmp_path: Path
) -> None:
    fx = ResponsesFixture()
    async with responses(pool, tmp_path, fx) as r:
        op_id = await r.submit({**QUESTION, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert (error["code"], error["message"]) == ("server_error", RESPONSES_FAILURE), error


async def test_responses_an_incomplete_response_is_failed_naming_why(
    pool: Any, tmp_path: Path
) -> None:
    """`incomplete` (its output cut short) carries no error, only
    incomplete_details.reason: failed, that reason on record, never a success with
    half an answer."""
    fx = ResponsesFixture()
    async with responses(pool, tmp_path, fx) as r:
        op_id = await r.submit({**QUESTION, "max_output_tokens": 16, "script": "incomplete"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "incomplete" in await r.raw_states(op_id)
        said = await reason(r, op_id)
        assert "max_output_tokens" in said, said
        assert (await r.op(op_id)).result_id is None


async def test_responses_a_queued_response_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = ResponsesFixture()
    async with responses(pool, tmp_path, fx) as r:
        op_id = await r.submit({**QUESTION, "script": "queued"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels[0] == (fx.only()["id"], "queued")
        assert "cancelled" in await r.raw_states(op_id)


@pytest.mark.parametrize("noop", [False, True], ids=["refused", "no-op"])
async def test_responses_a_cancel_of_a_response_that_completed_is_refused_and_it_is_kept(
    pool: Any, tmp_path: Path, noop: bool
) -> None:
    """The response completed before the cancel arrived: 400 "Cannot cancel a
    completed response", or (the docs' other reading) a 200 no-op answering it
    completed. No cancel is claimed either way: it reads completed, and the answer
    is collected."""
    fx = ResponsesFixture()
    fx.noop_cancel = noop
    async with responses(pool, tmp_path, fx) as r:
        op_id = await r.submit({**QUESTION, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, (await r.history(op_id), await r.escalation(op_id))
        assert fx.cancels == [(fx.only()["id"], "completed")]
        assert "cancelled" not in await r.history(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["output"][0]["content"][0]["text"] == ANSWER


async def test_responses_a_signed_response_incomplete_webhook_wakes_the_read(
    pool: Any, tmp_path: Path
) -> None:
    """response.incomplete, Standard Webhooks signed and thin: matched by the
    response id; the read it wakes decides (failed, naming max_output_tokens), long
    before the backstop."""
    fx = ResponsesFixture()
    async with responses(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**QUESTION, "script": "slow", "max_output_tokens": 16})
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        fx.jobs[rid]["input"]["script"] = "incomplete"
        fx.finish(rid)
        assert await deliver_standard(r.hook_url, "response.incomplete", rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.FAILED, await r.history(op_id)
        said = await reason(r, op_id)
        assert "max_output_tokens" in said, said
        events = await r.pool.fetch(
            "SELECT operation_id, remote_state_raw FROM webhook_events"
            " WHERE provider = 'openai_responses'"
        )
        assert [(e["operation_id"], e["remote_state_raw"]) for e in events] == [
            (op_id, "response.incomplete")
        ]


async def test_responses_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = ResponsesFixture(lose_first_create=True)
    async with responses(pool, tmp_path, fx) as r:
        op_id = await r.submit(QUESTION)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- ElevenLabs dubbing ------------------------------------------------------------

ELEVENLABS_ENV = {"ELEVENLABS_API_KEY": ELEVENLABS_KEY}
SPEECH = b"ID3\x04\x00\x00" + b"hello, world " * 16
DUB = {
    "file": {
        "content_base64": base64.b64encode(SPEECH).decode(),
        "filename": "hello.mp3",
        "content_type": "audio/mpeg",
    },
    "source_lang": "en",
    "target_lang": "es",
    "num_speakers": 1,
}


def dubbing(pool: Any, tmp_path: Path, fx: DubbingFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "elevenlabs_dubbing", ELEVENLABS_ENV)


async def test_elevenlabs_a_dub_sent_as_multipart_is_collected_per_language(
    pool: Any, tmp_path: Path
) -> None:
    """The create is multipart/form-data: the agent's audio as the `file` part, its
    options as fields, our operation id as the dub's `name`; dubbing, dubbed: the
    Spanish audio at /audio/es fetched once and kept."""
    fx = DubbingFixture()
    async with dubbing(pool, tmp_path, fx) as r:
        op_id = await r.submit(DUB)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (form,) = fx.forms
        assert form["file"] == ("hello.mp3", "audio/mpeg", SPEECH)
        assert (form["target_lang"], form["num_speakers"], form["name"]) == ("es", "1", op_id)
        dub = fx.only()
        assert (await r.op(op_id)).remote_job_id == dub["id"]
        assert fx.audio_reads == [(dub["id"], "es")]
        assert await r.result_bytes(op_id) == dubbed_audio("es")
        assert {"dubbing", "dubbed"} <= await r.raw_states(op_id)


async def test_elevenlabs_a_failed_dub_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    """`error` is text beside "failed": the reason on record."""
    fx = DubbingFixture()
    async with dubbing(pool, tmp_path, fx) as r:
        op_id = await r.submit({**DUB, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).last_error["message"] == DUB_FAILURE
        assert fx.audio_reads == []


async def test_elevenlabs_a_cancel_deletes_the_dub_in_progress(pool: Any, tmp_path: Path) -> None:
    fx = DubbingFixture()
    async with dubbing(pool, tmp_path, fx) as r:
        op_id = await r.submit({**DUB, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "dubbing")]


async def test_elevenlabs_a_cancel_never_deletes_a_finished_dub(pool: Any, tmp_path: Path) -> None:
    fx = DubbingFixture()
    async with dubbing(pool, tmp_path, fx) as r:
        op_id = await r.submit({**DUB, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [] and fx.deleted == []
        assert await r.result_bytes(op_id) == dubbed_audio("es")


async def test_elevenlabs_a_lost_create_is_found_by_the_dubs_name(
    pool: Any, tmp_path: Path
) -> None:
    """The create's answer is lost (the dub was made): the list of dubs, paged by
    its cursor, shows it by our operation id in `name`; adopted, never made twice."""
    fx = DubbingFixture(lose_first_create=True)
    async with dubbing(pool, tmp_path, fx) as r:
        op_id = await r.submit(DUB)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert await r.result_bytes(op_id) == dubbed_audio("es")


async def test_elevenlabs_the_first_read_waits_for_the_expected_duration(
    pool: Any, tmp_path: Path
) -> None:
    """`expected_duration_sec` is in the create's answer alone: read with
    `create.poll_after_seconds`, the first status read waits that long (0.6 s here;
    the backoff's first step is 50 ms). Before, no key could read it: a status
    path reads status answers only, and the dub was read at the backoff's pace."""
    fx = DubbingFixture()
    async with dubbing(pool, tmp_path, fx) as r:
        op_id = await r.submit(DUB)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        dub = fx.only()
        assert dub["read_at"] - dub["answered_at"] >= 0.5, dub


# --- Groq Batch --------------------------------------------------------------------

GROQ_ENV = {"GROQ_API_KEY": GROQ_KEY}
BATCH = {
    "input_file_id": "file_01jh6x76wtemjr74t1fh0faj5t",
    "endpoint": "/v1/chat/completions",
    "completion_window": "24h",
}


def groq(pool: Any, tmp_path: Path, fx: GroqFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "groq_batch", GROQ_ENV)


async def lines(r: Any, op_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (await r.result_bytes(op_id)).splitlines() if line]


async def test_groq_a_batch_through_the_openai_preset_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """The openai_batch preset with Groq's /openai/v1 paths: validating, in_progress,
    finalizing, completed; the output file's four lines kept, counted against
    request_counts, our operation id in the batch's metadata."""
    fx = GroqFixture()
    async with groq(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        batch = fx.only()
        assert batch["input"]["metadata"] == {"jobwarden_operation_id": op_id}
        assert [line["custom_id"] for line in await lines(r, op_id)] == [
            f"request-{n}" for n in range(1, 5)
        ]
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (4, 4), summary
        assert {"in_progress", "finalizing", "completed"} <= await r.raw_states(op_id)
        assert fx.file_reads == [batch["output_file_id"]]


async def test_groq_a_batch_that_fails_validation_is_failed_with_its_reason(
    pool: Any, tmp_path: Path
) -> None:
    fx = GroqFixture()
    async with groq(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert (error["code"], error["message"]) == ("invalid_json_line", GROQ_FAILURE), error
        assert fx.file_reads == []


async def test_groq_an_expired_batch_keeps_what_it_finished(pool: Any, tmp_path: Path) -> None:
    """`expired` (the completion window ran out) after one of four requests: a partial
    result, both files read, the three cut off recorded as batch_expired, never a
    plain failure that drops the answer Groq billed for."""
    fx = GroqFixture()
    async with groq(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "expire"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.remote_state == "partially_succeeded"
        summary = op.result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (4, 1), summary
        codes = await pool.fetch(
            "SELECT code FROM result_item_failures WHERE result_id = $1", op.result_id
        )
        assert [c[0] for c in codes] == ["batch_expired"] * 3


async def test_groq_a_cancel_goes_through_cancelling_and_keeps_the_partial_output(
    pool: Any, tmp_path: Path
) -> None:
    """POST …/cancel: cancelling, then cancelled with one request done; that answer
    is fetched and kept before the operation ends cancelled."""
    fx = GroqFixture()
    async with groq(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        batch = fx.only()
        assert fx.cancels[0][0] == batch["id"]
        assert {"cancelling", "cancelled"} <= await r.raw_states(op_id)
        assert batch["output_file_id"] in fx.file_reads


async def test_groq_a_lost_create_is_found_by_its_metadata_in_an_unpaged_list(
    pool: Any, tmp_path: Path
) -> None:
    """The create's answer is lost (the batch was made): Groq's list, one page with no
    cursor, shows it by our metadata; adopted, never made twice, and collected."""
    fx = GroqFixture(lose_first_create=True)
    async with groq(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


def test_groq_takes_no_webhook_secret_meant_for_openai() -> None:
    """The preset's webhooks read OPENAI_WEBHOOK_SECRET: set for an OpenAI provider
    beside this one, Groq's batches would be read at the webhook backstop's pace,
    waiting for deliveries Groq never sends. The description turns them off
    (`webhooks.supported = false`)."""
    table = {"base_url": "https://api.groq.com", **described("groq_batch")}
    env = {**GROQ_ENV, "OPENAI_WEBHOOK_SECRET": OPENAI_WEBHOOK_SECRET}
    desc = parse_providers({"providers": {"groq_batch": table}}, "jobwarden.toml", env)
    assert desc["groq_batch"].webhooks is None
    openai_too = {**table, "webhooks": {}}
    desc = parse_providers({"providers": {"groq_batch": openai_too}}, "jobwarden.toml", env)
    assert desc["groq_batch"].webhooks is not None  # what the override prevents


# --- Fireworks batch inference jobs ------------------------------------------------

FIREWORKS_ENV = {"FIREWORKS_API_KEY": FIREWORKS_KEY}
JOB = {
    "model": "accounts/fireworks/models/llama-v3p1-8b-instruct",
    "inputDatasetId": f"accounts/{FIREWORKS_ACCOUNT}/datasets/my-input",
    "inferenceParameters": {"maxTokens": 256},
}


@contextlib.asynccontextmanager
async def fireworks(pool: Any, tmp_path: Path, fx: FireworksFixture) -> AsyncIterator[Any]:
    """The rig, with the signed URLs' storage on `localhost` beside it, another
    server (named in result.allowed_hosts: a loopback name is refused otherwise)."""
    async with serve_app(fx.storage()) as storage_url:
        fx.storage_url = storage_url.replace("127.0.0.1", "localhost")
        allowed = {"allowed_hosts": ["localhost"]}
        async with rig(
            pool, tmp_path, fx.app(), "fireworks_batch", FIREWORKS_ENV, result=allowed
        ) as r:
            yield r


async def test_fireworks_a_job_named_by_us_is_collected_from_its_output_dataset(
    pool: Any, tmp_path: Path
) -> None:
    """The job's id is ours (`jw-` and a UUID of our token: Fireworks' id alphabet);
    CREATING, QUEUED, RUNNING, COMPLETED; the output dataset's download endpoint
    names the file's signed URL, on the storage's server, which is followed without
    our key and its JSONL kept and counted."""
    fx = FireworksFixture()
    async with fireworks(pool, tmp_path, fx) as r:
        op_id = await r.submit(JOB)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (asked,) = fx.ids_asked
        assert asked is not None and asked.startswith("jw-") and len(asked) == 39, asked
        job = fx.only()
        op = await r.op(op_id)
        assert op.remote_job_id == f"accounts/{FIREWORKS_ACCOUNT}/batchInferenceJobs/{asked}"
        kept = [json.loads(line) for line in (await r.result_bytes(op_id)).splitlines()]
        assert [line["custom_id"] for line in kept] == ["request-1", "request-2", "request-3"]
        assert (fx.endpoint_reads, fx.downloads) == (1, 1)
        assert fx.download_auth == [None]
        assert op.result_summary["items_total"] == 3, op.result_summary
        assert {"JOB_STATE_QUEUED", "JOB_STATE_RUNNING", "JOB_STATE_COMPLETED"} <= (
            await r.raw_states(op_id)
        )
        assert job["id"] == asked


async def test_fireworks_a_failed_job_is_failed_with_its_status_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = FireworksFixture()
    async with fireworks(pool, tmp_path, fx) as r:
        op_id = await r.submit({**JOB, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert (error["code"], error["message"]) == ("INVALID_ARGUMENT", FIREWORKS_FAILURE)
        assert fx.downloads == 0


async def test_fireworks_an_expired_job_is_failed_naming_its_state(
    pool: Any, tmp_path: Path
) -> None:
    fx = FireworksFixture()
    async with fireworks(pool, tmp_path, fx) as r:
        op_id = await r.submit({**JOB, "script": "expire"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        said = await reason(r, op_id)
        assert "JOB_STATE_EXPIRED" in said, said


async def test_fireworks_a_cancel_deletes_the_running_job(pool: Any, tmp_path: Path) -> None:
    fx = FireworksFixture()
    async with fireworks(pool, tmp_path, fx) as r:
        op_id = await r.submit({**JOB, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        ((jid, state),) = fx.cancels
        assert jid.startswith("jw-") and state in ("JOB_STATE_QUEUED", "JOB_STATE_RUNNING")


async def test_fireworks_a_lost_create_is_the_job_of_the_id_we_chose(
    pool: Any, tmp_path: Path
) -> None:
    """The create's answer is lost (the job was made under our id): the resend, with
    the same id, is refused 409 ALREADY_EXISTS; that 409 to an id we chose sends
    the operation to the lookup (a GET of that id), which finds the job: adopted,
    never made twice, and collected. Before, the create was resent at the backoff
    (409 after 409) until the create deadline's lookup, or ten minutes of 409s sent
    it to a human."""
    fx = FireworksFixture(lose_first_create=True)
    async with fireworks(pool, tmp_path, fx) as r:
        op_id = await r.submit(JOB)
        end = await r.settle(op_id, ENDS)
        assert fx.creates == 1
        assert len(set(fx.ids_asked)) == 1, fx.ids_asked
        assert fx.conflicts == 1, fx.ids_asked
        assert len(await r.calls(op_id, "lookup")) >= 1
        assert end is S.SUCCEEDED, (await r.history(op_id), await r.escalation(op_id))
        assert (await r.op(op_id)).remote_job_id.endswith(fx.only()["id"])
