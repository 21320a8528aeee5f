"""Crash-point enumeration, a bounded sample (the full run is `make chaos`).

For each step kind: the step's statements are counted in a fault-free run,
then one statement picked at random is dropped (the server executed it, the
answer was lost) and another SIGKILLs a real reconciler process as it
leaves; after each, a fresh reconciler runs the operation to its end and
every invariant of bench/crashpoints.py is checked.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bench.crashpoints import SCENARIOS, Databases, enumerate_kind
from shared.db.connect import with_database
from tests import conftest

# The same points every run, so a failure reproduces; `make chaos` covers them all.
SEED = 10


class SuiteDatabases(Databases):
    """Each run's database from the suite's own (`databases`): a clone of the same
    template, used by that run alone, made ahead and dropped behind in batches."""

    def __init__(self, pg_server: Any, template: str, made: conftest.Databases) -> None:
        super().__init__(pg_server, template)
        self._made = made

    @contextlib.asynccontextmanager
    async def clone(self) -> AsyncIterator[str]:
        name = await self._made.take()
        try:
            yield with_database(self.server.admin_url, name)
        finally:
            await self._made.done_with(name)


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
async def test_a_sampled_crash_point_of_each_step_kind_loses_nothing(
    pg_server: Any, template_db: str, databases: conftest.Databases, tmp_path: Path, kind: str
) -> None:
    async with SuiteDatabases(pg_server, template_db, databases) as dbs:
        report = await enumerate_kind(
            dbs,
            SCENARIOS[kind],
            tmp_path,
            sample=1,
            rng=random.Random(f"{SEED}:{kind}"),
            count_each_mode=False,
        )
    assert report.failures == []
    assert report.statements["drop"] >= 4  # a real step, not an empty one
    assert report.covered == {"drop": 1, "kill": 1}
