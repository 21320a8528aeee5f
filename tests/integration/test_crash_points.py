"""Crash-point enumeration, a bounded sample (the full run is `make chaos`).

For each step kind: the step's statements are counted in a fault-free run,
then one statement picked at random is dropped (the server executed it, the
answer was lost) and another SIGKILLs a real reconciler process as it
leaves; after each, a fresh reconciler runs the operation to its end and
every invariant of bench/crashpoints.py is checked.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bench.crashpoints import SCENARIOS, Databases, enumerate_kind

# The same points every run, so a failure reproduces; `make chaos` covers them all.
SEED = 10


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
async def test_a_sampled_crash_point_of_each_step_kind_loses_nothing(
    pg_server: Any, template_db: str, tmp_path: Path, kind: str
) -> None:
    async with Databases(pg_server, template_db) as dbs:
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
