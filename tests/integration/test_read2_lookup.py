"""A lookup's `match` reading numbers on every job proves no absence (second
reading of 24885e6).

A listing none of whose jobs carries a reference at `lookup.match` is
inconclusive; a reference of ours is text (an operation id), yet a number
read there counted as "a reference, not ours". A `match` pointing at the
wrong field (Mistral's batch jobs carry an integer `created_at`) read as
others' references on every item: absence, the lost create sent again, the
job run twice. Objects, booleans, null and "" already counted as none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.harness import TestClock
from shared.ledger.states import LocalState
from shared.providers import parse_lookup
from shared.providers.messages import HttpResponse
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import BatchJobsFixture
from tests.integration.test_lookup_unreferenced import ENDS, described
from tests.unit.test_providers_lookup_paging import LIST, OP, provider

S = LocalState
WRONG_FIELD = "/created_at"


class Dated(BatchJobsFixture):
    """Every job carries `created_at`, epoch seconds, as Mistral's do."""

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        job = super()._add(body)
        job["created_at"] = 1_765_000_000 + len(self.jobs)
        return job


async def test_a_match_reading_numbers_never_sends_the_lost_create_again(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = Dated(others=150)
    rig = preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="mistral",
        env={},
        overrides=described(WRONG_FIELD),
        clock=clock,
    )
    async with rig as r:
        op_id = await r.submit({"model": "mistral-small-latest"}, create_deadline_s=60.0)
        await r.settle(op_id, {S.CREATE_UNKNOWN})
        for _ in range(6):
            await clock.advance(5.0)
            await r.reconciler.run_once()
        assert fx.creates == 1, await r.history(op_id)
        await clock.advance(60.0)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "the list holds 151 job(s) and none carries a reference" in reason, reason


@pytest.mark.parametrize(
    ("value", "referenced"),
    [("op_someone_else", 1), (7, 0), (7.5, 0), ({"ref": "x"}, 0), (None, 0), ("", 0), (True, 0)],
    ids=["text", "int", "float", "object", "null", "empty", "bool"],
)
def test_only_text_at_match_counts_as_a_reference(value: Any, referenced: int) -> None:
    desc = provider(LIST)
    body = {"data": [{"id": "b1", "metadata": {"op": value}}], "object": "list"}
    resp = HttpResponse(status_code=200, headers={}, body=json.dumps(body).encode())
    fact = parse_lookup(desc, resp, OP)
    assert (fact.referenced, fact.unreferenced) == (referenced, 1 - referenced)
    assert fact.proven_absent is bool(referenced)
