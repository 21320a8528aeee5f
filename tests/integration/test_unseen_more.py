"""Six more APIs no preset covers, described in TOML as a user would from README.md
(tests/fixtures_providers/unseen/*.toml) and driven through the real reconciler
against fakes on loopback (tests/fixtures_providers/unseen_more.py): RunPod
serverless, Speechmatics batch, Shotstack render, LlamaParse, Gladia v2
pre-recorded; and Deepgram's callback-only pre-recorded API, which a description
cannot express (refused at load, never run half-described).
"""

from __future__ import annotations

import base64
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers import ConfigError, parse_providers
from tests.fixtures_providers.described import ENDS, UNSEEN, described
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.unseen_more import (
    GLADIA_KEY,
    LLAMA_KEY,
    MP4,
    RUNPOD_KEY,
    SHOTSTACK_KEY,
    SPEECHMATICS_KEY,
    GladiaFixture,
    LlamaParseFixture,
    RunPodFixture,
    ShotstackFixture,
    SpeechmaticsFixture,
)

S = LocalState
TOKEN = "cb_" + "a" * 30


def rig(pool: Any, tmp_path: Path, app: Any, name: str, env: dict[str, str], **over: Any) -> Any:
    """The description on the rig. With webhooks described but no receiver (no
    public_webhook_url: the callback is left out of every create), reads are only
    the backstop's (30 s in the rig, 300 s by default): a faster one here, so
    these tests poll as a deployment without callbacks would want to."""
    table = described(name)
    with_receiver = bool(over.pop("with_receiver", False))
    if "webhooks" in table and not with_receiver:
        table["limits"] = {"webhook_backstop_poll_seconds": 0.2}
    for key, value in over.items():
        table[key] = {**table.get(key, {}), **value}
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


async def stored(r: Any, op_id: str) -> Any:
    return json.loads(await r.result_bytes(op_id))


def file_part(data: bytes, filename: str, content_type: str) -> dict[str, str]:
    return {
        "content_base64": base64.b64encode(data).decode(),
        "filename": filename,
        "content_type": content_type,
    }


# --- RunPod serverless ------------------------------------------------------------

RUNPOD_ENV = {"RUNPOD_API_KEY": RUNPOD_KEY, "RUNPOD_CALLBACK_TOKEN": TOKEN}


def runpod(pool: Any, tmp_path: Path, fx: RunPodFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "runpod", RUNPOD_ENV)


async def test_runpod_a_job_runs_and_its_inline_output_is_kept(pool: Any, tmp_path: Path) -> None:
    fx = RunPodFixture()
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {"prompt": "a cat", "echo": {"images": ["x"]}}})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await stored(r, op_id) == {"images": ["x"]}
        (job,) = fx.jobs.values()
        # no public_webhook_url in this deployment: the webhook field is left out
        assert "webhook" not in job["request"]
        assert (await r.op(op_id)).remote_job_id == job["id"]


async def test_runpod_its_webhook_wakes_the_operation_and_a_read_collects_the_output(
    pool: Any, tmp_path: Path
) -> None:
    """With a receiver, the create's `webhook` is our URL with the token in its
    query; RunPod POSTs the status body there, unsigned. The delivery is only a
    hint: it wakes the operation long before the 30 s backstop read, and our own
    read of /status moves it."""
    fx = RunPodFixture()
    async with rig(pool, tmp_path, fx.app(), "runpod", RUNPOD_ENV, with_receiver=True) as r:
        op_id = await r.submit({"input": {"echo": [1, 2, 3]}})
        await r.settle(op_id, {S.ACCEPTED})
        (job,) = fx.jobs.values()
        assert job["request"]["webhook"] == f"{r.hook_url}?token={TOKEN}"
        assert await fx.finish(job["id"]) == 200
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await stored(r, op_id) == [1, 2, 3]
        assert fx.reads[job["id"]] >= 1


@pytest.mark.parametrize("script", ["fail", "timeout"])
async def test_runpod_a_failed_or_timed_out_job_is_failed(
    pool: Any, tmp_path: Path, script: str
) -> None:
    fx = RunPodFixture()
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {"script": script}})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.result_id is None
        if script == "fail":
            assert "CUDA out of memory" in json.dumps(op.last_error)


async def test_runpod_a_handler_that_returned_nothing_is_not_called_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """A handler returning None completes COMPLETED with no `output` member at all.
    The result described at `/output` is absent: jobwarden must not store an empty
    result and call it a success."""
    fx = RunPodFixture()
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {"script": "no_output"}})
        end = await r.settle(op_id, ENDS, timeout=20)
        assert end is not S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).result_id is None


async def test_runpod_a_job_forgotten_before_it_was_read_goes_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """/run results are kept 30 minutes after the end; a reconciler away longer reads
    404 "request does not exist". The output is lost at the provider: the operation
    must not end as a success or a plain failure, but stop for a human."""
    fx = RunPodFixture()
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {"script": "expired"}})
        assert await r.settle(op_id, ENDS, timeout=30) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert "does not exist" in (await r.escalation(op_id))["reason"]


async def test_runpod_a_cancel_is_sent_once_and_read_back_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    fx = RunPodFixture()
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {"script": "slow"}})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == 1


async def test_runpod_a_job_done_before_the_cancel_is_collected(pool: Any, tmp_path: Path) -> None:
    fx = RunPodFixture()
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {"script": "race"}})
        await r.settle(op_id, {S.OBSERVING, S.RESULT_COLLECTING, S.SUCCEEDED})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)


async def test_runpod_a_lost_run_is_never_sent_again_and_goes_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """No idempotency and no list of jobs: the one job that may run is not doubled."""
    fx = RunPodFixture(lose_first_create=True)
    async with runpod(pool, tmp_path, fx) as r:
        op_id = await r.submit({"input": {}})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Speechmatics batch ----------------------------------------------------------------

SM_ENV = {"SPEECHMATICS_API_KEY": SPEECHMATICS_KEY}
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "


def speechmatics(pool: Any, tmp_path: Path, fx: SpeechmaticsFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "speechmatics", SM_ENV)


def audio(name: str) -> dict[str, Any]:
    return {
        "config": {"type": "transcription", "transcription_config": {"language": "en"}},
        "data_file": file_part(WAV, name, "audio/wav"),
    }


async def test_speechmatics_a_file_is_transcribed_and_the_json_v2_transcript_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = SpeechmaticsFixture()
    async with speechmatics(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("a.wav"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        # `config` went as its JSON part, our operation id in tracking.reference
        assert fx.configs == [
            {
                "type": "transcription",
                "transcription_config": {"language": "en"},
                "tracking": {"reference": op_id},
            }
        ]
        transcript = await stored(r, op_id)
        assert transcript["format"] == "2.9"
        assert transcript["results"][0]["alternatives"][0]["content"] == "hello"


async def test_speechmatics_a_rejected_job_is_failed_with_its_error(
    pool: Any, tmp_path: Path
) -> None:
    fx = SpeechmaticsFixture()
    async with speechmatics(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("fail.wav"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "Unsupported audio format" in json.dumps((await r.op(op_id)).last_error)


@pytest.mark.parametrize("gone", [False, True], ids=["reads-deleted", "reads-404"])
async def test_speechmatics_a_cancel_force_deletes_the_running_job(
    pool: Any, tmp_path: Path, gone: bool
) -> None:
    """Whether a deleted job then reads `deleted` or 404, it is cancelled, by us
    (`cancel.deletes_job`)."""
    fx = SpeechmaticsFixture(gone_after_delete=gone)
    async with speechmatics(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("slow.wav"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.forced_deletes == 1


async def test_speechmatics_a_job_done_before_the_cancel_keeps_its_transcript(
    pool: Any, tmp_path: Path
) -> None:
    """The DELETE also deletes a finished job's transcript: read_first reads the job
    done, sends no DELETE, and collects the transcript."""
    fx = SpeechmaticsFixture()
    async with speechmatics(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("race.wav"))
        await r.settle(op_id, {S.OBSERVING, S.RESULT_COLLECTING, S.SUCCEEDED})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.deleted_done == 0


async def test_speechmatics_a_lost_create_is_found_by_its_tracking_reference(
    pool: Any, tmp_path: Path
) -> None:
    """150 other jobs on the account: the list is read newest first, 100 a page,
    and the job carrying our operation id in tracking.reference is adopted."""
    fx = SpeechmaticsFixture(others=150, lose_first_create=True)
    async with speechmatics(pool, tmp_path, fx) as r:
        op_id = await r.submit(audio("a.wav"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.named(op_id) == [(await r.op(op_id)).remote_job_id]


# --- Shotstack ---------------------------------------------------------------------

SS_ENV = {"SHOTSTACK_API_KEY": SHOTSTACK_KEY, "SHOTSTACK_CALLBACK_TOKEN": TOKEN}


def shotstack(pool: Any, tmp_path: Path, fx: ShotstackFixture) -> Any:
    # the fake's CDN is "localhost", a loopback address only a named host may reach
    return rig(
        pool, tmp_path, fx.app(), "shotstack", SS_ENV, result={"allowed_hosts": ["localhost"]}
    )


EDIT: dict[str, Any] = {
    "timeline": {"tracks": [{"clips": [{"asset": {"type": "title", "text": "hi"}, "length": 5}]}]},
    "output": {"format": "mp4", "resolution": "sd"},
}


async def test_shotstack_a_render_is_collected_from_its_cdn_without_the_api_key(
    pool: Any, tmp_path: Path
) -> None:
    fx = ShotstackFixture()
    async with shotstack(pool, tmp_path, fx) as r:
        op_id = await r.submit(EDIT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        (fetch,) = fx.cdn_fetches
        assert "x-api-key" not in fetch


async def test_shotstack_a_failed_render_is_failed_with_its_error(
    pool: Any, tmp_path: Path
) -> None:
    fx = ShotstackFixture()
    async with shotstack(pool, tmp_path, fx) as r:
        op_id = await r.submit({**EDIT, "timeline": {**EDIT["timeline"], "background": "#fail"}})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "could not be fetched" in json.dumps((await r.op(op_id)).last_error)


async def test_shotstack_has_no_cancel_and_the_render_is_read_to_its_end(
    pool: Any, tmp_path: Path
) -> None:
    fx = ShotstackFixture()
    async with shotstack(pool, tmp_path, fx) as r:
        op_id = await r.submit(EDIT)
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, (end, await r.history(op_id))


# --- LlamaParse ---------------------------------------------------------------------

LP_ENV = {"LLAMA_CLOUD_API_KEY": LLAMA_KEY}
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


def llamaparse(pool: Any, tmp_path: Path, fx: LlamaParseFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "llamaparse", LP_ENV)


async def test_llamaparse_a_pdf_is_uploaded_parsed_and_its_markdown_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = LlamaParseFixture()
    async with llamaparse(pool, tmp_path, fx) as r:
        op_id = await r.submit(
            {"file": file_part(PDF, "invoice.pdf", "application/pdf"), "premium_mode": True}
        )
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (upload,) = fx.uploads
        assert upload["bytes"] == PDF and upload["premium_mode"] == "true"
        assert (await stored(r, op_id))["markdown"].startswith("# Invoice 42")


async def test_llamaparse_an_error_is_failed_with_its_code(pool: Any, tmp_path: Path) -> None:
    fx = LlamaParseFixture()
    async with llamaparse(pool, tmp_path, fx) as r:
        op_id = await r.submit({"file": file_part(PDF, "fail.pdf", "application/pdf")})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "PDF_IS_PROTECTED" in json.dumps((await r.op(op_id)).last_error)


# --- Gladia ---------------------------------------------------------------------------

GL_ENV = {"GLADIA_API_KEY": GLADIA_KEY, "GLADIA_CALLBACK_TOKEN": TOKEN}


def gladia(pool: Any, tmp_path: Path, fx: GladiaFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "gladia", GL_ENV)


async def test_gladia_a_transcription_is_read_at_its_result_url_and_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = GladiaFixture()
    async with gladia(pool, tmp_path, fx) as r:
        op_id = await r.submit({"audio_url": "https://audio.test/a.mp3"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        result = await stored(r, op_id)
        assert result["transcription"]["full_transcript"] == "hello world"
        assert fx.named(op_id) == [(await r.op(op_id)).remote_job_id]


async def test_gladia_its_callback_wakes_the_operation_and_its_token_is_kept_nowhere(
    pool: Any, tmp_path: Path
) -> None:
    """The callback URL carries the token; Gladia echoes it in every GET
    (`request_params.callback_config.url`) and in the callback. The callback wakes
    the operation, our read moves it, and the token is in no row of the database."""
    fx = GladiaFixture()
    fx.held = True
    async with rig(pool, tmp_path, fx.app(), "gladia", GL_ENV, with_receiver=True) as r:
        op_id = await r.submit({"audio_url": "https://audio.test/a.mp3"})
        await r.settle(op_id, {S.ACCEPTED})
        (job,) = fx.jobs.values()
        assert job["request_params"]["callback_config"] == {
            "url": f"{r.hook_url}?token={TOKEN}",
            "method": "POST",
        }
        assert job["request_params"]["callback"] is True
        assert await fx.finish(job["id"]) == 200
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.reads[job["id"]] >= 1
        tables = await pool.fetch(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
        assert {"provider_calls", "operations"} <= {t for (t,) in tables}
        for (table,) in tables:
            leaked = await pool.fetchval(
                f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE $1',
                f"%{TOKEN}%",
            )
            assert leaked == 0, table


async def test_gladia_an_error_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = GladiaFixture()
    async with gladia(pool, tmp_path, fx) as r:
        op_id = await r.submit({"audio_url": "https://audio.test/fail.mp3"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)


async def test_gladia_a_lost_create_is_found_by_its_custom_metadata(
    pool: Any, tmp_path: Path
) -> None:
    fx = GladiaFixture(others=130, lose_first_create=True)
    async with gladia(pool, tmp_path, fx) as r:
        op_id = await r.submit({"audio_url": "https://audio.test/a.mp3"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.named(op_id) == [(await r.op(op_id)).remote_job_id]
        # one page, filtered by the provider on our operation id
        assert [json.loads(q["custom_metadata"]) for q in fx.list_reads] == [
            {"jobwarden_operation": op_id}
        ]


async def test_gladia_a_lookup_that_cannot_read_our_jobs_id_never_sends_the_create_again(
    pool: Any, tmp_path: Path
) -> None:
    """A user writes `lookup.job_id = "/job_id"` (the create's word) where the list's
    items say `id`. After a lost create, the list shows our job, its id unread: it
    was dropped, the page read as absence, and the create sent again, a second
    transcription billed. Now the lookup is inconclusive and, at the create
    deadline, a human decides; the create went out once."""
    fx = GladiaFixture(lose_first_create=True)
    async with rig(pool, tmp_path, fx.app(), "gladia", GL_ENV, lookup={"job_id": "/job_id"}) as r:
        op_id = await r.submit({"audio_url": "https://audio.test/a.mp3"}, create_deadline_s=3)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        # the human is told why the lookup proved nothing
        escalation = await r.escalation(op_id)
        assert "no job id at /job_id" in str(escalation), escalation


# --- Deepgram ---------------------------------------------------------------------------


def test_deepgram_callback_only_results_cannot_be_described_and_are_refused_at_load() -> None:
    """Deepgram answers a pre-recorded request with {"request_id"} only and POSTs the
    transcript to the `callback` query parameter; nothing reads a request's status or
    its transcript afterwards. jobwarden moves an operation only on its own status
    read, so the description is refused at load rather than run half-described."""
    with (UNSEEN / "deepgram.toml").open("rb") as f:
        document = tomllib.load(f)
    with pytest.raises(ConfigError) as caught:
        parse_providers(document, "deepgram.toml", {"DEEPGRAM_API_KEY": "k"})
    assert "providers.deepgram.status" in str(caught.value)
