"""`audit verify` racing a real `audit archive` run: no false alarm.

The check waits for the sequencer to log the rows a queued change excused
in its first snapshot. `audit archive` sequences the log itself, signs a
checkpoint and may archive (list and delete) exactly those rows before the
check looks again: a cron job archiving while an operator verifies. Rows an
archive listed meanwhile are bound by that archive's record, which the
second snapshot checks as the first checks every archive; only a listing
under no archive made meanwhile is the hostile one (test_hostile_superuser).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.ledger import archive as archive_mod
from shared.ledger import log, log_audit
from shared.ledger.log_audit import LogReport, verify_log
from shared.ledger.states import LocalState
from shared.tlog import Signer
from tests.harness import rig
from tests.integration.test_evidence_log import SIGNER_KEY, superuser

S = LocalState
DONE = {S.SUCCEEDED, S.FAILED, S.CANCELLED}


async def _finished_unsequenced(pool: Any, tmp_path: Path) -> list[str]:
    """Two finished operations whose evidence the sequencer has yet to log."""
    async with rig(pool, tmp_path) as r:
        ops = [
            await r.submit("partial", duration=0.05, total=4, failed=2),
            await r.submit("success", duration=0.05),
        ]
        for op_id in ops:
            await r.settle(op_id, DONE)
    return ops


async def _verify_while_archiving(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[LogReport, archive_mod.Archived]:
    """verify_log, with a whole archive run once its first snapshot is taken."""
    settle = log_audit._settle_excused
    done: list[archive_mod.Archived] = []

    async def after_the_snapshot(conn: Any, report: LogReport, *rest: Any) -> None:
        assert report.excused, "nothing queued: the race is not exercised"
        done.append(await _archive(pool, tmp_path))
        await settle(conn, report, *rest)

    monkeypatch.setattr(log_audit, "_settle_excused", after_the_snapshot)
    async with pool.acquire() as conn:
        report = await verify_log(conn, None, settle_seconds=10.0)
    return report, done[0]


async def test_an_archive_run_while_verify_waits_is_no_problem(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _finished_unsequenced(pool, tmp_path)
    report, made = await _verify_while_archiving(pool, tmp_path, monkeypatch)
    assert made.rows > 0, made.skipped
    assert report.problems == []
    assert report.settled > 0
    # and a check after the run agrees
    async with pool.acquire() as conn:
        again = await verify_log(conn, None)
    assert again.problems == [] and again.archived_rows == made.rows


async def test_verify_looking_again_between_an_archives_commit_and_its_sequencing(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's first sequencing logs the rows the check waits for; the check
    looks again once the archive has deleted them, before the run's second
    sequencing logs the deletions: gone, listed by an archive made meanwhile,
    their deletions queued, as after any archive's commit. The check waits
    for those deletions (the run logs them), as its first pass would."""
    await _finished_unsequenced(pool, tmp_path)
    settle, sign = log_audit._settle_excused, archive_mod._sign
    wait = getattr(log_audit, "_wait_for_leaves", None)
    committed, looked = asyncio.Event(), asyncio.Event()
    signs: list[int] = []
    waits: list[int] = []

    async def sign_once_verify_looked(*args: Any) -> Any:
        signs.append(1)
        if len(signs) == 2:  # after the commit: the deletions are queued
            committed.set()
            await looked.wait()
        return await sign(*args)

    async def waiting_again(*args: Any) -> Any:
        waits.append(1)
        if len(waits) == 2:  # the check looked, and waits once more
            looked.set()
        assert wait is not None
        return await wait(*args)

    async def after_the_snapshot(conn: Any, report: LogReport, *rest: Any) -> None:
        assert report.excused
        run = asyncio.create_task(_archive(pool, tmp_path))
        await committed.wait()
        try:
            await settle(conn, report, *rest)
        finally:
            looked.set()  # a check that never waits again lets the run finish
            made = await run
        assert made.rows > 0

    monkeypatch.setattr(archive_mod, "_sign", sign_once_verify_looked)
    if wait is not None:
        monkeypatch.setattr(log_audit, "_wait_for_leaves", waiting_again)
    monkeypatch.setattr(log_audit, "_settle_excused", after_the_snapshot)
    async with pool.acquire() as conn, asyncio.timeout(60):
        report = await verify_log(conn, None, settle_seconds=10.0)
    assert report.problems == []
    assert len(waits) == 2


async def _archive(pool: Any, tmp_path: Path) -> archive_mod.Archived:
    async with pool.acquire() as conn:
        return await archive_mod.archive(
            conn,
            tmp_path / "archives",
            timedelta(0),
            Signer.from_key(SIGNER_KEY),
            tmp_path / "checkpoints",
        )


async def test_a_listing_under_an_archive_judged_before_the_wait_is_still_caught(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an archive made while the check waited excuses what it lists: a covered
    call deleted (its deletion queued, so excused) and listed, while the check
    waits, under a real archive its first snapshot had judged is caught."""
    ops = await _finished_unsequenced(pool, tmp_path)
    async with pool.acquire() as conn:
        made = await archive_mod.archive(
            conn,
            tmp_path / "archives",
            timedelta(0),
            Signer.from_key(SIGNER_KEY),
            tmp_path / "checkpoints",
            max_operations=1,
        )
    assert made.operations == 1
    [kept] = [op for op in ops if await _has_calls(pool, op)]
    async with superuser(pool) as conn:
        call = await conn.fetchrow(
            "SELECT c.call_id::text AS id, max(l.leaf_index) AS leaf FROM provider_calls c"
            " JOIN log_leaves l ON l.kind = 'call' AND l.row_id = c.call_id::text"
            " WHERE c.operation_id = $1 AND c.call_kind = 'create' GROUP BY c.call_id",
            kept,
        )
        await conn.execute("DELETE FROM provider_calls WHERE call_id::text = $1", call["id"])
        await conn.execute("INSERT INTO log_queue (kind, row_id) VALUES ('call', $1)", call["id"])
    settle = log_audit._settle_excused

    async def after_the_snapshot(conn: Any, report: LogReport, *rest: Any) -> None:
        async with superuser(pool) as other:
            await other.execute(
                "INSERT INTO log_archived (kind, row_id, archive_id, operation_id, leaf_index)"
                " SELECT 'call', $1, max(archive_id), $2, $3 FROM log_archives",
                call["id"],
                kept,
                call["leaf"],
            )
        async with pool.acquire() as other:
            await log.sequence_all(other)
        await settle(conn, report, *rest)

    monkeypatch.setattr(log_audit, "_settle_excused", after_the_snapshot)
    async with pool.acquire() as conn:
        report = await verify_log(conn, None, settle_seconds=10.0)
    assert report.problems == [
        f"provider_calls {call['id']}: listed as archived only while this check waited"
    ]


async def _has_calls(pool: Any, op_id: str) -> bool:
    """Whether the operation's create call is still in the database (not archived)."""
    found: bool = await pool.fetchval(
        "SELECT EXISTS (SELECT 1 FROM provider_calls WHERE operation_id = $1"
        " AND call_kind = 'create')",
        op_id,
    )
    return found
