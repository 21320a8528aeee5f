"""A lookup whose listed jobs carry no reference at `lookup.match` proves no absence.

Mistral-like batch jobs (page numbers, 100 a page, no idempotency) behind a
lost create. A `match` path with a typo, or a list whose items legitimately
lack the field (jobs created by other tools), read as "not ours" on every
item: the lookup called that absence, the lost create went out again and the
job ran twice. Now a listing that holds jobs, none of them (over every page
read) carrying a reference, is inconclusive: looked up again, and at the
create deadline a human is told why. An empty listing, or one where others'
jobs carry references and ours is not among them, is still absence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.harness import TestClock
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import BATCH_JOBS, BatchJobsFixture

S = LocalState
ENDS = {
    S.SUCCEEDED,
    S.FAILED,
    S.NEEDS_ATTENTION,
    S.RESULT_UNAVAILABLE,
    S.RESULT_VALIDATION_FAILED,
}
MATCH = "/metadata/jobwarden_operation_id"
TYPO = "/metadata/jobwarden_operation"  # the field is ..._operation_id


class ListedFixture(BatchJobsFixture):
    """Batch jobs of others ahead of ours: `others` carrying their own reference,
    `elsewhere` carrying none (made by other tools: an empty metadata), in the
    order `elsewhere_first` says (pages of 100)."""

    def __init__(
        self, *, others: int = 0, elsewhere: int = 0, elsewhere_first: bool = True, **kw: Any
    ) -> None:
        super().__init__(others=0, **kw)
        strangers = [{"jobwarden_operation_id": f"op_someone_else_{i}"} for i in range(others)]
        blank: list[dict[str, Any]] = [{} for _ in range(elsewhere)]
        for metadata in blank + strangers if elsewhere_first else strangers + blank:
            self._add({"metadata": metadata})


def described(match: str) -> dict[str, Any]:
    return {**BATCH_JOBS, "lookup": {**BATCH_JOBS["lookup"], "match": match}}


def rig(pool: Any, tmp_path: Path, fx: BatchJobsFixture, match: str, **kw: Any) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="mistral",
        env={},
        overrides=described(match),
        **kw,
    )


@pytest.mark.parametrize(
    ("listing", "match", "listed"),
    [
        # a typo in match; the lost create's job is on page 1 behind 150 others
        ({"others": 150}, TYPO, 151),
        # the right path, a list of jobs made elsewhere, the lost create made none
        ({"elsewhere": 120, "keep_lost": False}, MATCH, 120),
    ],
    ids=["typo_in_match", "jobs_made_elsewhere"],
)
async def test_a_listing_without_any_reference_never_sends_the_lost_create_again(
    pool: Any, tmp_path: Path, clock: TestClock, listing: dict[str, Any], match: str, listed: int
) -> None:
    """Both pages read, no item carrying a value at `match`: before, absence, the
    create sent again once the list had had time to show it (a second job, with
    the typo: the lost one ran too). Now no re-send; a human at the create
    deadline, told what the lookup saw and where it looked."""
    fx = ListedFixture(**listing)
    async with rig(pool, tmp_path, fx, match, clock=clock) as r:
        op_id = await r.submit({"model": "mistral-small-latest"}, create_deadline_s=60.0)
        await r.settle(op_id, {S.CREATE_UNKNOWN})
        for _ in range(6):  # far past the settle window in which an empty list proves nothing
            await clock.advance(5.0)
            await r.reconciler.run_once()
        assert fx.creates == 1, await r.history(op_id)
        assert set(fx.pages) == {0, 1} and len(fx.pages) >= 6  # each look read both pages
        await clock.advance(60.0)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
        assert f"the list holds {listed} job(s) and none carries a reference" in reason, reason
        assert f"lookup.match = {match}" in reason, reason
        assert "cannot tell whether the create arrived" in reason, reason


async def test_an_empty_listing_is_still_absence_and_the_create_goes_once_more(
    pool: Any, tmp_path: Path
) -> None:
    """Nothing listed proves absence whatever `match` says (here a typo): the lost
    create made nothing, it is sent again, and the job runs. (The re-send's
    cross-check cannot read our job's reference either: it gives up after its
    tries, and the same-token answer stands, as for any lookup that never lists
    the job.)"""
    fx = ListedFixture(keep_lost=False)
    async with rig(pool, tmp_path, fx, TYPO) as r:
        op_id = await r.submit({"model": "mistral-small-latest"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 2
        assert fx.ours(op_id) == [(await r.op(op_id)).remote_job_id]


@pytest.mark.parametrize("elsewhere_first", [True, False], ids=["blank_page_first", "blank_last"])
async def test_pages_where_only_some_jobs_carry_references_still_prove_absence(
    pool: Any, tmp_path: Path, elsewhere_first: bool
) -> None:
    """A page of jobs made elsewhere (no reference) and a page of others' jobs
    (their references, not ours), in either order: the path reads references on
    this list, ours is not among them, so the lost create made nothing and is
    sent once more. Judged over every page, never page by page."""
    fx = ListedFixture(others=50, elsewhere=100, elsewhere_first=elsewhere_first, keep_lost=False)
    async with rig(pool, tmp_path, fx, MATCH) as r:
        op_id = await r.submit({"model": "mistral-small-latest"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 2
        assert fx.ours(op_id) == [(await r.op(op_id)).remote_job_id]
        assert fx.pages[:2] == [0, 1]


async def test_others_references_only_are_absence_as_before(pool: Any, tmp_path: Path) -> None:
    """Every listed job carries a reference, none ours: absence, one re-send."""
    fx = ListedFixture(others=150, keep_lost=False)
    async with rig(pool, tmp_path, fx, MATCH) as r:
        op_id = await r.submit({"model": "mistral-small-latest"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 2


async def test_our_job_behind_a_page_of_jobs_without_references_is_found(
    pool: Any, tmp_path: Path
) -> None:
    """Page 0 holds only jobs made elsewhere, page 1 ours: adopted, never re-sent."""
    fx = ListedFixture(elsewhere=100)
    async with rig(pool, tmp_path, fx, MATCH) as r:
        op_id = await r.submit({"model": "mistral-small-latest"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.ours(op_id) == [(await r.op(op_id)).remote_job_id]


async def test_a_cancel_waiting_for_the_job_id_is_named_at_the_create_deadline(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A cancel asked while the create is uncertain waits for the job id; the lookups
    never settle it, and the create deadline sends the operation to a human. The
    reason said only that the create was unproven: the human was not told that a
    cancel was asked and never sent, so a job that does exist runs on unwatched."""
    fx = ListedFixture(others=150)
    async with rig(pool, tmp_path, fx, TYPO, clock=clock) as r:
        op_id = await r.submit({"model": "mistral-small-latest"}, create_deadline_s=60.0)
        await r.settle(op_id, {S.CREATE_UNKNOWN})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        await clock.advance(70.0)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
    assert "create deadline passed without proof" in reason, reason
    assert "a cancel was asked meanwhile and never sent" in reason, reason
