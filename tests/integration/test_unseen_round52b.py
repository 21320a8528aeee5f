"""Azure AI Speech batch transcription, Kling AI's video generation and Hume AI's
batch expression measurement, described in TOML as a new user would from README.md
(tests/fixtures_providers/unseen/azure_speech.toml, kling.toml, hume.toml) and driven
through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round52b.py): success with the result stored,
failure with its reason, a lost create answer, throttling, cancel where the API has
one, and callbacks where the provider sends them.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import shared.secret
from shared.ledger.states import LocalState
from shared.providers import ConfigError, parse_providers
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_media import MP4
from tests.fixtures_providers.unseen_round52b import (
    AZURE_FAILURE,
    AZURE_HOOK_SECRET,
    AZURE_KEY,
    HUME_FAILURE,
    HUME_KEY,
    HUME_TOKEN,
    KLING_FAILURE,
    KLING_SECRET_KEY,
    KLING_TOKEN,
    PREDICTIONS,
    TRANSCRIPT,
    AzureSpeechFixture,
    HumeFixture,
    KlingFixture,
    kling_token,
)

S = LocalState


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """What jobwarden logged, context included; not the test's own HTTP client's lines
    (httpx logs each URL it calls at INFO: the fakes' callbacks, a token in theirs;
    the daemons run it at WARNING, shared/logs.py)."""
    return "\n".join(
        f"{record.getMessage()} {record.__dict__.get('ctx')}"
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    )


async def waits_after_429(r: PresetRig, op_id: str, kind: str) -> list[float]:
    """Seconds from each 429 answer to the next call of its kind (Retry-After: 1)."""
    calls = await r.calls(op_id, kind)
    return [
        (later["started_at"] - call["finished_at"]).total_seconds()
        for call, later in itertools.pairwise(calls)
        if call["status_code"] == 429
    ]


# --- Azure AI Speech ------------------------------------------------------------------

AZURE_ENV = {"AZURE_SPEECH_KEY": AZURE_KEY, "AZURE_SPEECH_WEBHOOK_SECRET": AZURE_HOOK_SECRET}
AUDIO = {"contentUrls": ["https://contoso.example/audio.wav"], "locale": "en-US"}


@contextlib.asynccontextmanager
async def azure(
    pool: Any, tmp_path: Path, fx: AzureSpeechFixture, *, with_receiver: bool = False, **kw: Any
) -> AsyncIterator[PresetRig]:
    over = kw.pop("over", {})
    # the blob storage is another server on `localhost`, which the operator names
    # (a loopback name is refused otherwise)
    over["result"] = {"allowed_hosts": ["localhost"], **over.get("result", {})}
    table = described("azure_speech", **over)
    if not with_receiver:
        del table["webhooks"]
    async with serve_app(fx.storage()) as storage:
        fx.storage_url = storage.replace("127.0.0.1", "localhost")
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="azure_speech",
            env=AZURE_ENV,
            overrides=table,
            with_receiver=with_receiver,
            **kw,
        ) as r:
            fx.url = r.url
            yield r


async def test_azure_a_transcription_succeeds_and_its_files_are_stored(
    pool: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Read at its `self` URL until Succeeded; the files list (a file a page, paged by
    `@nextLink`) read whole, with the key (the API's own host), and the transcript at
    the Transcription file's contentUrl (`result.follow`) kept, fetched from blob
    storage without it. Before, the list was kept, its SAS links soon expired, and
    the transcript never read."""
    fx = AzureSpeechFixture()
    caplog.set_level(logging.DEBUG)
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.only()["input"]["displayName"] == op_id
        assert json.loads(await r.result_bytes(op_id)) == TRANSCRIPT
        assert fx.file_reads == [AZURE_KEY, AZURE_KEY]  # both pages of the list
        assert fx.blob_auth == [None]
        assert fx.blob_reads == ["contenturl_0.json"]
        assert {"NotStarted", "Running", "Succeeded"} <= await r.raw_states(op_id)
        assert await kept_anywhere(r.pool, AZURE_KEY) == []
        assert AZURE_KEY not in logged(caplog)


async def test_azure_a_failed_transcription_fails_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = AzureSpeechFixture()
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit({**AUDIO, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = json.dumps((await r.op(op_id)).last_error)
        assert AZURE_FAILURE["code"] in error and AZURE_FAILURE["message"] in error, error
        assert (await r.op(op_id)).result_id is None
        assert fx.file_reads == []


# What a user would add to find a lost create: the list shows our displayName.
AZURE_LOOKUP = {
    "kind": "list",
    "path": "/speechtotext/v3.2/transcriptions",
    "list": "/values",
    "match": "/displayName",
    "job_id": "/self",
    "offset_param": "skip",
    "page_size": 100,
    "page_size_param": "top",
}


def test_azure_a_lookup_whose_job_could_never_be_read_is_refused_at_load() -> None:
    """Status reads go only to the create answer's `self` URL (use_status_url, no
    status.path: a path must start with '/', and Azure names a transcription by that
    URL alone). A job a lookup finds has no such URL: before, the description loaded,
    a lost create's job was found and then never read ("request cannot be built"),
    the operation sent to a human. Now the load refuses it, naming the way out."""
    table = {**described("azure_speech", lookup=AZURE_LOOKUP), "base_url": "https://x.test"}
    with pytest.raises(ConfigError) as refused:
        parse_providers({"providers": {"azure_speech": table}}, "jobwarden.toml", AZURE_ENV)
    message = str(refused.value)
    assert "providers.azure_speech.lookup:" in message, message
    assert "could never be read" in message and "status.path" in message, message


async def test_azure_a_lost_create_goes_to_a_human_never_sent_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = AzureSpeechFixture(others=3, lose_first_create=True)
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "offers no lookup" in reason, reason


async def test_azure_throttled_reads_wait_and_the_job_still_ends(pool: Any, tmp_path: Path) -> None:
    """429 with Retry-After: 1 to the create (not_created_statuses: sent again) and
    to two reads: each next call waits the second out, and the job still ends."""
    fx = AzureSpeechFixture()
    fx.throttled_reads = 2
    fx.throttled_creates = 1
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        waits = await waits_after_429(r, op_id, "create") + await waits_after_429(
            r, op_id, "status"
        )
        assert len(waits) == 3 and min(waits) >= 0.95, waits


async def test_azure_a_throttled_files_page_is_read_again_not_judged(
    pool: Any, tmp_path: Path
) -> None:
    """The second page of the files list answers 429: it is asked again after the
    Retry-After, the list read whole, never cut at the first page, and the transcript
    its Transcription file links to kept."""
    fx = AzureSpeechFixture()
    fx.throttled_files = 1
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.throttled_files == 0
        assert json.loads(await r.result_bytes(op_id)) == TRANSCRIPT
        # page 1, page 2 refused; then page 1 again (the same result?), page 2
        assert len(fx.file_reads) == 4 and fx.blob_reads == ["contenturl_0.json"]
        pages = [c["status_code"] for c in await r.calls(op_id, "result")]
        assert 429 in pages, pages


async def test_azure_its_signed_web_hook_wakes_the_operation(pool: Any, tmp_path: Path) -> None:
    fx = AzureSpeechFixture()
    async with azure(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**AUDIO, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED, S.OBSERVING})
        tid = next(iter(fx.jobs))
        fx.finish(tid)
        assert await fx.deliver(r.hook_url, tid, secret="forged-secret") == 401
        assert await fx.deliver(r.hook_url, tid) in (200, 202)
        assert await r.settle(op_id, ENDS, timeout=5.0) is S.SUCCEEDED, await r.history(op_id)


async def kept_anywhere(pool: Any, text: str) -> list[str]:
    """Every table whose rows hold `text` (a secret must be in none)."""
    tables = [
        "operations",
        "provider_calls",
        "webhook_events",
        "observations",
        "results",
        "escalations",
        "history",
        "decisions",
        "log_queue",
    ]
    found = []
    for table in tables:
        hit = await pool.fetchval(
            f"SELECT count(*) FROM {table} t WHERE strpos(row_to_json(t)::text, $1) > 0", text
        )
        if hit:
            found.append(table)
    return found


# --- Kling AI ---------------------------------------------------------------------------

KLING_ENV = {"KLING_CALLBACK_TOKEN": KLING_TOKEN}
PROMPT = {"model_name": "kling-v2-1", "prompt": "A cat surfing at dawn", "duration": "5"}


class Looks:
    """The clock a followed secret file is looked at by (at most once a second):
    moved past that second at each rewrite, so the next call reads the new file."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> Looks:
    moved = Looks()
    monkeypatch.setattr(shared.secret, "clock", moved)
    return moved


def write_token(path: Path, token: str, looks: Looks | None = None) -> None:
    """As the README's timer does: a new file moved over the old one."""
    fresh = path.with_suffix(".new")
    fresh.write_text(token + "\n")
    os.replace(fresh, path)
    if looks is not None:
        looks.now += 2.0


async def until(r: PresetRig, clock: Any, done: Any, rounds: int = 200) -> None:
    """Run the reconciler until `done()` holds (a bounded wait on the fake's record),
    the test clock moved past the rig's backoff cap (0.2 s) between rounds."""
    for _ in range(rounds):
        if done():
            return
        await r.reconciler.run_once()
        await clock.advance(0.25)
    raise AssertionError("never happened")


@contextlib.asynccontextmanager
async def kling(
    pool: Any, tmp_path: Path, fx: KlingFixture, *, with_receiver: bool = False, **kw: Any
) -> AsyncIterator[PresetRig]:
    token_file = tmp_path / "kling.jwt"
    if not token_file.exists():
        write_token(token_file, kling_token())
    table = described("kling", **kw.pop("over", {}))
    table["auth"] = {**table["auth"], "secret_file": str(token_file)}
    if not with_receiver:
        del table["webhooks"]
        table["create"] = {k: v for k, v in table["create"].items() if k != "set_body"}
    async with serve_app(fx.cdn()) as cdn:
        fx.cdn_url = cdn
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="kling",
            env=KLING_ENV,
            overrides=table,
            with_receiver=with_receiver,
            **kw,
        ) as r:
            yield r


async def test_kling_a_video_is_generated_and_kept_and_no_token_is_stored(
    pool: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every call carries the token the timer wrote; the video is fetched from the CDN
    without it and kept; the token is in no row, and the secret key never left."""
    fx = KlingFixture()
    caplog.set_level(logging.DEBUG)
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.creates == 1
        assert fx.only()["input"]["external_task_id"] == op_id
        assert fx.cdn_auth == [None]
        assert fx.refusals == []
        assert {"submitted", "processing", "succeed"} <= await r.raw_states(op_id)
        token = (tmp_path / "kling.jwt").read_text().strip()
        assert await kept_anywhere(r.pool, token) == []
        assert await kept_anywhere(r.pool, KLING_SECRET_KEY) == []
        assert token not in logged(caplog)


async def test_kling_a_failed_task_fails_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = KlingFixture()
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert KLING_FAILURE in json.dumps((await r.op(op_id)).last_error)
        assert fx.cdn_auth == []


async def test_kling_a_lost_create_is_found_by_its_external_task_id(
    pool: Any, tmp_path: Path
) -> None:
    fx = KlingFixture(lose_first_create=True)
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert await r.result_bytes(op_id) == MP4


async def test_kling_a_create_that_never_arrived_is_sent_again_once_proven_absent(
    pool: Any, tmp_path: Path
) -> None:
    """The first create never reached Kling: the read by our external_task_id answers
    404 (1203), which proves it absent, and the create is sent again: one task."""
    fx = KlingFixture(drop_first_create=True)
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (fx.create_calls, fx.creates) == (2, 1)
        assert len(await r.calls(op_id, "lookup")) >= 1


async def test_kling_throttled_calls_wait_and_the_task_still_ends(
    pool: Any, tmp_path: Path
) -> None:
    fx = KlingFixture()
    fx.throttled_creates = 1
    fx.throttled_reads = 2
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        waits = await waits_after_429(r, op_id, "create") + await waits_after_429(
            r, op_id, "status"
        )
        assert len(waits) == 3 and min(waits) >= 0.95, waits


async def test_kling_a_token_rewritten_by_the_timer_is_used_from_the_next_call(
    pool: Any, tmp_path: Path, looks: Looks
) -> None:
    fx = KlingFixture()
    first = kling_token(issued=int(time.time()) - 60)
    write_token(tmp_path / "kling.jwt", first)
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        second = kling_token()
        assert second != first
        write_token(tmp_path / "kling.jwt", second, looks)
        fx.finish(next(iter(fx.jobs)))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.tokens[0] == first and fx.tokens[-1] == second, fx.tokens
        assert fx.refusals == []


async def test_kling_an_expired_token_is_never_a_verdict_on_the_task(
    pool: Any, tmp_path: Path, looks: Looks, clock: Any
) -> None:
    """The timer stopped: Kling refuses every read 401 (1004, expired). The task is
    not failed for it; once a fresh token is written, it is read to its end."""
    fx = KlingFixture()
    async with kling(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        write_token(tmp_path / "kling.jwt", kling_token(issued=int(time.time()) - 3600), looks)
        await until(r, clock, lambda: fx.refusals.count(1004) >= 3)
        state = await r.state(op_id)
        assert state not in (S.FAILED, S.SUCCEEDED, S.CANCELLED), await r.history(op_id)
        write_token(tmp_path / "kling.jwt", kling_token(), looks)
        fx.finish(next(iter(fx.jobs)))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.escalation(op_id) is None


def test_kling_a_token_jobwarden_would_have_to_make_is_refused_at_load() -> None:
    """A user looking for a JWT auth scheme (Kling's token is made by the caller from
    an access key and a secret key) is told at load which schemes exist, never
    loaded with the key sent as it is; the documented way is a timer writing the
    token to `secret_file` (the description's comment, the tests above)."""
    table = {**described("kling"), "base_url": "https://x.test"}
    table["auth"] = {"scheme": "jwt", "secret_env": "KLING_SECRET_KEY"}
    env = {**KLING_ENV, "KLING_SECRET_KEY": KLING_SECRET_KEY}
    with pytest.raises(ConfigError) as refused:
        parse_providers({"providers": {"kling": table}}, "jobwarden.toml", env)
    message = str(refused.value)
    assert "providers.kling.auth.scheme" in message and "aws_sigv4" in message, message
    assert KLING_SECRET_KEY not in message


async def test_kling_its_callback_wakes_the_operation(pool: Any, tmp_path: Path) -> None:
    fx = KlingFixture()
    async with kling(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**PROMPT, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED, S.OBSERVING})
        tid = next(iter(fx.jobs))
        sent = fx.jobs[tid]["input"]["callback_url"]
        assert KLING_TOKEN in sent
        assert await kept_anywhere(r.pool, KLING_TOKEN) == []
        fx.finish(tid)
        forged = sent.replace(KLING_TOKEN, "x" * len(KLING_TOKEN))
        assert await fx.call_back(tid, forged) == 401
        assert await fx.call_back(tid) in (200, 202)
        assert await r.settle(op_id, ENDS, timeout=5.0) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4


async def test_kling_a_create_refused_for_an_expired_token_fails_with_klings_words(
    pool: Any, tmp_path: Path
) -> None:
    """401 (1004) to the create: nothing was made, so the operation fails with Kling's
    code and message, sent once; no lookup, no second create."""
    fx = KlingFixture()
    write_token(tmp_path / "kling.jwt", kling_token(issued=int(time.time()) - 3600))
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit(PROMPT)
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert error["code"] == "1004" and error["message"] == "Authorization is expired", error
        assert fx.refusals == [1004] and fx.creates == 0
        expired = (tmp_path / "kling.jwt").read_text().strip()
        assert await kept_anywhere(r.pool, expired) == []


# --- Hume AI ------------------------------------------------------------------------------

HUME_ENV = {"HUME_API_KEY": HUME_KEY, "HUME_CALLBACK_TOKEN": HUME_TOKEN}
MEDIA = {"urls": ["https://hume-tutorials.s3.amazonaws.com/faces.zip"], "models": {"face": {}}}


def hume(
    pool: Any, tmp_path: Path, fx: HumeFixture, *, with_receiver: bool = False, **kw: Any
) -> Any:
    table = described("hume")
    if not with_receiver:
        del table["webhooks"]
        table["create"] = {k: v for k, v in table["create"].items() if k != "set_body"}
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="hume",
        env=HUME_ENV,
        overrides=table,
        with_receiver=with_receiver,
        **kw,
    )


async def test_hume_a_job_completes_and_its_predictions_are_stored(
    pool: Any, tmp_path: Path
) -> None:
    fx = HumeFixture()
    async with hume(pool, tmp_path, fx) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == PREDICTIONS * 2
        assert fx.creates == 1 and fx.prediction_reads == 1
        assert {"QUEUED", "IN_PROGRESS", "COMPLETED"} <= await r.raw_states(op_id)


async def test_hume_a_failed_job_fails_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = HumeFixture()
    async with hume(pool, tmp_path, fx) as r:
        op_id = await r.submit({**MEDIA, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert HUME_FAILURE in json.dumps((await r.op(op_id)).last_error)
        assert fx.prediction_reads == 0


async def test_hume_a_job_completed_with_no_source_read_fails_saying_why(
    pool: Any, tmp_path: Path
) -> None:
    """COMPLETED, but not one source could be read (num_predictions 0, num_errors 2):
    the counts make it a failure (`outcome_from_counts`). Before, it ended `failed`
    with no error at all (the read carries none: Hume's `message` is a FAILED job's),
    the agent told nothing of why; now the reason names the counts."""
    fx = HumeFixture()
    async with hume(pool, tmp_path, fx) as r:
        op_id = await r.submit({**MEDIA, "script": "allbad"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = (await r.op(op_id)).last_error
        assert error is not None, await r.history(op_id)
        text = json.dumps(error)
        assert "COMPLETED" in text and "0 succeeded" in text and "2 failed" in text, text


async def test_hume_a_job_with_some_sources_unread_is_completed_with_errors(
    pool: Any, tmp_path: Path
) -> None:
    fx = HumeFixture()
    async with hume(pool, tmp_path, fx) as r:
        op_id = await r.submit({**MEDIA, "script": "partial"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.remote_state == "partially_succeeded", op.remote_state
        # the counts are Hume's (by file: 5 read, 1 error), all three of them: before,
        # the total was the result's item count (2 sources) beside the status's
        # successes, and the agent read 5 of 2 items succeeded
        summary = op.result_summary
        counted = (summary["items_total"], summary["items_succeeded"], summary["items_failed"])
        assert counted == (6, 5, 1), summary
        row = await r.pool.fetchrow(
            "SELECT items_total, items_succeeded, items_failed FROM results WHERE result_id = $1",
            op.result_id,
        )
        assert tuple(row) == (6, 5, 1), dict(row)
        failed = await r.pool.fetchval(
            "SELECT count(*) FROM result_item_failures WHERE result_id = $1", op.result_id
        )
        assert failed == 1


async def test_hume_a_lost_create_goes_to_a_human_never_sent_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = HumeFixture(lose_first_create=True)
    async with hume(pool, tmp_path, fx) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "offers no lookup" in reason, reason


async def test_hume_throttled_calls_wait_and_the_job_still_ends(pool: Any, tmp_path: Path) -> None:
    fx = HumeFixture()
    fx.throttled_creates = 1
    fx.throttled_reads = 2
    async with hume(pool, tmp_path, fx) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        waits = await waits_after_429(r, op_id, "create") + await waits_after_429(
            r, op_id, "status"
        )
        assert len(waits) == 3 and min(waits) >= 0.95, waits


async def test_hume_its_callback_wakes_the_operation_and_its_token_is_kept_nowhere(
    pool: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Hume echoes the callback URL (our token in it) in every read of the job: the
    token is scrubbed from what is recorded."""
    fx = HumeFixture()
    caplog.set_level(logging.DEBUG)
    async with hume(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**MEDIA, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED, S.OBSERVING})
        jid = next(iter(fx.jobs))
        sent = fx.jobs[jid]["input"]["callback_url"]
        assert HUME_TOKEN in sent
        fx.finish(jid)
        forged = sent.replace(HUME_TOKEN, "y" * len(HUME_TOKEN))
        assert await fx.call_back(jid, forged) == 401
        assert await fx.call_back(jid) in (200, 202)
        assert await r.settle(op_id, ENDS, timeout=5.0) is S.SUCCEEDED, await r.history(op_id)
        assert await kept_anywhere(r.pool, HUME_TOKEN) == []
        assert await kept_anywhere(r.pool, HUME_KEY) == []
        assert HUME_TOKEN not in logged(caplog) and HUME_KEY not in logged(caplog)


async def test_hume_a_cancel_asked_of_a_job_that_cannot_be_cancelled_claims_none(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    """Hume has no cancel: the request stays a request, nothing is sent, the job is
    read on, and its end is the job's own (never `cancelled`)."""
    fx = HumeFixture()
    async with hume(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit({**MEDIA, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        reads = fx.reads
        await until(r, clock, lambda: fx.reads >= reads + 2)
        assert await r.state(op_id) is S.CANCEL_REQUESTED, await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []
        fx.finish(next(iter(fx.jobs)))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)


async def test_kling_a_task_that_succeeded_without_a_video_is_never_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """`succeed` with `task_result.videos` empty: no result to keep, so no success;
    the operation stops for a human saying no file was named."""
    fx = KlingFixture()
    async with kling(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PROMPT, "script": "novideo"})
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        assert (await r.op(op_id)).result_id is None
        reason = (await r.escalation(op_id))["reason"]
        assert "named no result files" in reason, reason
