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
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers import ConfigError, parse_providers
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round52b import (
    AZURE_FAILURE,
    AZURE_HOOK_SECRET,
    AZURE_KEY,
    AzureSpeechFixture,
)

S = LocalState


# --- Azure AI Speech ------------------------------------------------------------------

AZURE_ENV = {"AZURE_SPEECH_KEY": AZURE_KEY, "AZURE_SPEECH_WEBHOOK_SECRET": AZURE_HOOK_SECRET}
AUDIO = {"contentUrls": ["https://contoso.example/audio.wav"], "locale": "en-US"}


@contextlib.asynccontextmanager
async def azure(
    pool: Any, tmp_path: Path, fx: AzureSpeechFixture, *, with_receiver: bool = False, **kw: Any
) -> AsyncIterator[PresetRig]:
    table = described("azure_speech", **kw.pop("over", {}))
    if not with_receiver:
        del table["webhooks"]
    async with serve_app(fx.storage()) as storage:
        fx.storage_url = storage
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
    pool: Any, tmp_path: Path
) -> None:
    """Read at its `self` URL until Succeeded; the files list (a file a page, paged by
    `@nextLink`) collected whole, with the key (the API's own host)."""
    fx = AzureSpeechFixture()
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.only()["input"]["displayName"] == op_id
        kept = await r.result_bytes(op_id)
        assert b"contenturl_0.json" in kept and b"report.json" in kept, kept
        assert set(fx.file_reads) == {AZURE_KEY}
        assert {"NotStarted", "Running", "Succeeded"} <= await r.raw_states(op_id)


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
    fx = AzureSpeechFixture()
    fx.throttled_reads = 2
    fx.throttled_creates = 1
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1


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
