"""History is append-only and tamper-evident; `audit verify` finds rewrites."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from typing import Any

import asyncpg
import pytest

from shared import ledger
from shared.ledger import audit, log
from shared.ledger.states import LocalState
from tests.support import drive, prepare_and_evidence, submit

S = LocalState


async def _operation_with_history(db: Any) -> str:
    """create_pending -> accepted -> observing -> result_collecting -> succeeded."""
    op_id = await submit(db)
    await drive(db, op_id, LocalState.OBSERVING)
    for src, dst in [(S.OBSERVING, S.RESULT_COLLECTING), (S.RESULT_COLLECTING, S.SUCCEEDED)]:
        evidence = await prepare_and_evidence(db, op_id, src, dst)
        await ledger.transition(db, op_id, src, dst, actor="r", cause="t", evidence=evidence)
    return op_id


async def _as_saboteur(db: Any, sql: str, *args: Any) -> None:
    """A superuser who disables triggers to rewrite history behind our back."""
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")
        await db.execute(sql, *args)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE history SET cause = 'rewritten' WHERE operation_id = $1",
        "DELETE FROM history WHERE operation_id = $1",
    ],
    ids=["update", "delete"],
)
async def test_history_refuses_update_and_delete(db: Any, sql: str) -> None:
    op_id = await _operation_with_history(db)
    with pytest.raises(asyncpg.PostgresError) as info:
        await db.execute(sql, op_id)
    assert info.value.sqlstate == "JW010"


async def test_history_refuses_truncate(db: Any) -> None:
    await _operation_with_history(db)
    with pytest.raises(asyncpg.PostgresError) as info:
        await db.execute("TRUNCATE history CASCADE")
    assert info.value.sqlstate == "JW010"


async def test_every_transition_has_a_chained_history_row(db: Any) -> None:
    op_id = await _operation_with_history(db)
    rows = await db.fetch("SELECT * FROM history WHERE operation_id = $1 ORDER BY seq", op_id)
    assert [r["to_state"] for r in rows] == [
        "create_pending",
        "accepted",
        "observing",
        "result_collecting",
        "succeeded",
    ]
    assert rows[0]["prev_hash"] == audit.genesis_hash(op_id)
    for earlier, later in itertools.pairwise(rows):
        assert later["prev_hash"] == earlier["row_hash"]
    assert all(audit.row_hash(r) == r["row_hash"] for r in rows)
    assert await audit.verify(db) == (1, [])


async def test_audit_finds_a_row_altered_with_triggers_disabled(db: Any) -> None:
    op_id = await _operation_with_history(db)
    other = await _operation_with_history(db)
    await _as_saboteur(
        db, "UPDATE history SET actor = 'nobody' WHERE operation_id = $1 AND seq = 3", op_id
    )
    checked, breaks = await audit.verify(db)
    assert checked == 2
    assert [(b.operation_id, b.seq) for b in breaks] == [(op_id, 3)]
    assert "altered" in breaks[0].problem
    assert await audit.verify(db, other) == (1, [])


async def test_audit_finds_a_deleted_middle_row(db: Any) -> None:
    op_id = await _operation_with_history(db)
    await _as_saboteur(db, "DELETE FROM history WHERE operation_id = $1 AND seq = 2", op_id)
    _, breaks = await audit.verify(db, op_id)
    assert [(b.seq, "missing" in b.problem) for b in breaks] == [(3, True)]


async def test_audit_finds_deleted_newest_rows(db: Any) -> None:
    op_id = await _operation_with_history(db)
    await _as_saboteur(db, "DELETE FROM history WHERE operation_id = $1 AND seq >= 4", op_id)
    _, breaks = await audit.verify(db, op_id)
    assert len(breaks) == 1 and breaks[0].seq is None


async def test_audit_finds_reordered_rows(db: Any) -> None:
    op_id = await _operation_with_history(db)
    for src, dst in [(2, 1000), (3, 2), (1000, 3)]:
        await _as_saboteur(
            db, "UPDATE history SET seq = $3 WHERE operation_id = $1 AND seq = $2", op_id, src, dst
        )
    _, breaks = await audit.verify(db, op_id)
    assert len(breaks) == 1 and breaks[0].seq == 2


def _audit_cli(db_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db_url}
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", "audit", "verify"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_audit_verify_command_exits_1_and_names_the_broken_row(db: Any, db_url: str) -> None:
    op_id = await _operation_with_history(db)
    await log.sequence_all(db)  # as the reconciler's sequencer does: nothing left queued
    clean = await asyncio.to_thread(_audit_cli, db_url)
    assert clean.returncode == 0 and "0 broken chain(s)" in clean.stdout
    await _as_saboteur(
        db, "UPDATE history SET cause = 'nothing to see' WHERE operation_id = $1 AND seq = 4", op_id
    )
    broken = await asyncio.to_thread(_audit_cli, db_url)
    assert broken.returncode == 1
    assert f"BROKEN {op_id} seq 4" in broken.stdout
