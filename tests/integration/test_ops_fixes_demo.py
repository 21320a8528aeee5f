"""The demo's closing `audit verify` answers about every change (shared/cli/demo.py).

A new operator's review: run right after the demo, the verify command it
prints said `N change(s) not sequenced yet`: the reconciler's sequencer
appends every few seconds and stopped with the demo. The demo now appends
the queue itself once its daemons have stopped. It still has no signing key,
so verify says NOT PROVEN, as the summary's comment says. The real demo runs
in a subprocess (a pipe, so it ends after its summary), then the command it
printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from shared.db.connect import ResolvedDatabase
from tests.support import dropped_afterwards

REPO = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture
async def demo_database(pg_server: ResolvedDatabase) -> AsyncIterator[str]:
    async with dropped_afterwards(pg_server.admin_url, "jw_demo_ops") as name:
        yield name


def test_the_printed_audit_verify_finds_nothing_left_to_sequence(
    pg_server: ResolvedDatabase, demo_database: str
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": pg_server.admin_url,
        "JW_DEMO_DATABASE": demo_database,
        "JW_DEMO_TIME_SCALE": "0.3",
        "PYTHONPATH": str(REPO),
    }
    demo = subprocess.run(
        [sys.executable, "-m", "shared.cli", "demo"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    lines = demo.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(" audit verify"))
    command = lines[at].split()
    assert command[0] == ".venv/bin/jobwarden"
    verify = subprocess.run(
        [sys.executable, "-m", "shared.cli", *command[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "not sequenced yet" not in verify.stdout, verify.stdout
    assert verify.stdout.splitlines()[-1] == "OK", verify.stdout
    assert "NOT PROVEN: no checkpoint given" in verify.stdout
    assert "NOT PROVEN: the demo signs no checkpoint" in lines[at - 1]  # and the demo says so
