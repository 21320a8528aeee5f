"""`cancel.use_status_url`: the cancel goes to the status URL the create answer gave.

Azure AI Speech names a transcription only by its absolute `self` URL, and
cancels one by DELETE on that URL; a cancel path is a template under
`base_url`, so no description could say it, and such a job could only run on
until a human took it at the cancel deadline. With the key, the cancel goes
where status reads go (`status.use_status_url`), checked as they are (an
address outside the provider's origins is refused, and the credential goes
only to `base_url`'s origin). Azure's DELETE removes the transcription, so
`deletes_job` says a read answering 404 after it is the job cancelled by us,
and `read_first` (on with `deletes_job`) keeps a finished one's result from
being deleted. Driven through the real reconciler against round 52b's Azure
fake (tests/fixtures_providers/unseen_round52b.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers.errors import ConfigError
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import load
from tests.fixtures_providers.unseen_round52b import AZURE_KEY, AzureSpeechFixture
from tests.integration.test_unseen_round52b import AUDIO, AZURE_ENV, azure

S = LocalState
DELETE_SELF = {"cancel": {"method": "DELETE", "use_status_url": True, "deletes_job": True}}


async def test_a_running_transcription_is_cancelled_at_its_own_url(
    pool: Any, tmp_path: Path
) -> None:
    fx = AzureSpeechFixture()
    async with azure(pool, tmp_path, fx, over=DELETE_SELF) as r:
        op_id = await r.submit({**AUDIO, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        [tid] = list(fx.jobs)
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.deletes == [tid]  # the transcription's own URL, once
        [call] = await r.calls(op_id, "cancel")
        assert (call["method"], call["url"]) == ("DELETE", fx.self_url(tid))
        assert call["status_code"] == 204
        assert AZURE_KEY not in str(dict(call))


async def test_a_finished_transcription_is_read_first_and_never_deleted(
    pool: Any, tmp_path: Path
) -> None:
    fx = AzureSpeechFixture()
    async with azure(pool, tmp_path, fx, over=DELETE_SELF) as r:
        op_id = await r.submit({**AUDIO, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        [tid] = list(fx.jobs)
        fx.finish(tid)
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.deletes == []


def test_a_cancel_at_the_status_url_needs_one_from_the_create() -> None:
    table = described("azure_speech", **DELETE_SELF)
    del table["create"]["status_url"]
    table["status"] = {**table["status"], "use_status_url": False, "path": "/t/{job_id}"}
    with pytest.raises(ConfigError) as refused:
        load("azure_speech", None, "http://127.0.0.1:9", AZURE_ENV, table)
    assert "cancel.use_status_url" in str(refused.value)
    assert "create.status_url" in str(refused.value)


def test_without_the_key_a_cancel_still_needs_a_path() -> None:
    table = described("azure_speech", cancel={"method": "DELETE"})
    with pytest.raises(ConfigError, match=r"cancel\.path"):
        load("azure_speech", None, "http://127.0.0.1:9", AZURE_ENV, table)
