"""`lookup.status_url`: a job found after a lost create is read at its own URL.

Azure AI Speech names a transcription only by its `self` URL, and status reads
go only there (`status.use_status_url`). A lookup found the job by our
reference (`displayName`) but knew it by its id alone, so the job could never
be read; the load refused such a lookup (round 52b), and a lost create went
to a human. With `lookup.status_url` (where the found item names its URL) the
job found is recorded with that URL and read there as if its create had
answered. Driven through the real reconciler against round 52b's Azure fake
(tests/fixtures_providers/unseen_round52b.py), its list paged by skip/top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.providers.config import parse_providers
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.unseen_round52b import AzureSpeechFixture
from tests.integration.test_unseen_round52b import AUDIO, AZURE_ENV, AZURE_LOOKUP, azure

S = LocalState
FOUND_AT_SELF = {**AZURE_LOOKUP, "status_url": "/self"}


async def test_a_lost_create_is_found_and_read_at_the_url_its_item_names(
    pool: Any, tmp_path: Path
) -> None:
    fx = AzureSpeechFixture(others=150, lose_first_create=True)  # two pages of others
    async with azure(pool, tmp_path, fx, over={"lookup": FOUND_AT_SELF}) as r:
        op_id = await r.submit(AUDIO)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1  # found, never sent twice
        [ours] = [tid for tid, job in fx.jobs.items() if job["input"].get("displayName") == op_id]
        op = await r.op(op_id)
        assert (op.remote_job_id, op.status_url) == (fx.self_url(ours), fx.self_url(ours))
        assert "lookup" in str(
            await r.pool.fetch(
                "SELECT call_kind FROM provider_calls WHERE operation_id = $1", op_id
            )
        )
        assert fx.jobs[ours]["reads"] >= 1  # read at its own URL


def test_the_lookup_that_names_the_url_loads() -> None:
    table = {**described("azure_speech", lookup=FOUND_AT_SELF), "base_url": "https://x.test"}
    loaded = parse_providers({"providers": {"azure_speech": table}}, "jobwarden.toml", AZURE_ENV)
    assert loaded["azure_speech"].lookup.status_url is not None
