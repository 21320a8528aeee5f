"""API shapes no preset has, described in TOML alone, end to end (real reconciler, real
HTTP fixtures on loopback, real database).

Each case is one a reviewer found mishandled by running a provider jobwarden
had never seen: a lookup paged by a response header read only page 1 and the
create ran twice; a job finished by 303 See Other ended in needs_attention;
a pre-signed result link read from a header was fetched as the call log
stores it, its signature redacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import (
    PIPELINES,
    PipelinesFixture,
    RequestReplyFixture,
    request_reply,
)

S = LocalState
ENDS = {
    S.SUCCEEDED,
    S.FAILED,
    S.NEEDS_ATTENTION,
    S.RESULT_UNAVAILABLE,
    S.RESULT_VALIDATION_FAILED,
}


async def test_a_lookup_paged_by_a_header_reads_every_page_before_creating_again(
    pool: Any, tmp_path: Path
) -> None:
    """The lost create's pipeline is on page 2: proof of absence needs the last page."""
    fx = PipelinesFixture(lose_first_create=True)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="gitlab", env={}, overrides=PIPELINES
    ) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED
        assert fx.registry.calls["create"] == 1  # one pipeline: the lost one, found
        assert 2 in fx.pages
        op = await r.op(op_id)
        assert op.remote_job_id == "1001"
        assert "create_unknown" in await r.history(op_id)


async def _rendered(
    pool: Any, tmp_path: Path, done_by: Literal["303", "presigned"]
) -> tuple[RequestReplyFixture, list[Any]]:
    """One render job run to its end; the fixture and the status calls on record."""
    fx = RequestReplyFixture(done_by)
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="areply",
        env={},
        overrides=request_reply(done_by),
    ) as r:
        op_id = await r.submit({"scene": "x"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        return fx, await r.calls(op_id, "status")


async def test_a_job_done_by_303_see_other_is_collected_from_its_location(
    pool: Any, tmp_path: Path
) -> None:
    fx, reads = await _rendered(pool, tmp_path, "303")
    assert fx.result_queries == [""]
    assert reads[-1]["status_code"] == 303  # the read that decided is the one collected from


async def test_a_presigned_link_in_a_header_is_fetched_as_received_not_as_recorded(
    pool: Any, tmp_path: Path
) -> None:
    """The call log keeps the link's signature redacted; collecting from that record
    fetched a broken link (403) and gave up on a result that was there."""
    fx, reads = await _rendered(pool, tmp_path, "presigned")
    (query,) = fx.result_queries
    assert "X-Amz-Signature=c2lnbmF0dXJl" in query
    # what the log keeps of the deciding read is still redacted
    assert any("[redacted]" in c["response_headers"].get("location", "") for c in reads)
