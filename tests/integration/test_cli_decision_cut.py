"""An operator's decision whose connection is cut at its COMMIT (the server has
committed, the answer is lost): applied once; the operator is told it may have
been recorded, not to "try again", and the retry says where the operation is."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bench.pgproxy import Fault, PgProxy
from shared import ledger
from shared.cli import operator as cli_operator
from shared.ledger.errors import StaleTransition
from shared.ledger.states import LocalState
from tests.integration.test_cli_operator import escalate, run
from tests.support import drive, submit

S = LocalState
COMMIT = re.compile(r"^\s*COMMIT", re.IGNORECASE)
PointAt = Callable[[PgProxy], None]


@pytest.fixture
def point_at(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PointAt:
    """As test_cli_operator's environment, with DATABASE_URL through a proxy."""
    config = tmp_path / "jobwarden.toml"
    config.write_text('[providers.sim]\npreset = "simulator"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JW_CONFIG", str(config))
    monkeypatch.setenv("USER", "dana")

    def through(proxy: PgProxy) -> None:
        monkeypatch.setenv("DATABASE_URL", f"{proxy.url_for(db_url)}&role=jobwarden_operator")

    return through


CUT = {
    "resolve": (
        S.NEEDS_ATTENTION,
        ["resolve", "OP", "--decision", "failed", "--reason", "vendor says failed"],
        re.compile(r"INSERT INTO decisions"),
        "failed",
    ),
    "reconcile": (
        S.RESULT_TIMED_OUT,
        ["reconcile", "OP", "--reason", "vendor fixed it"],
        re.compile(r"INSERT INTO decisions"),
        "observing",
    ),
    "cancel": (
        S.OBSERVING,
        ["cancel", "OP", "--reason", "not needed"],
        re.compile(r"cancel_requested_at"),
        "cancel_requested",
    ),
}


@pytest.mark.parametrize("case", CUT.values(), ids=CUT.keys())
async def test_a_decision_cut_at_its_commit_is_said_to_be_uncertain_and_applied_once(
    db: Any,
    db_url: str,
    point_at: PointAt,
    capsys: pytest.CaptureFixture[str],
    case: tuple[LocalState, list[str], re.Pattern[str], str],
) -> None:
    """It said 'the connection was lost', hint 'check that the server is running,
    then try again': the operator believed nothing was done, though it was."""
    state, argv, written, landed = case
    op_id = await escalate(db, state, "why") if state is not S.OBSERVING else None
    if op_id is None:
        op_id = await submit(db)
        await drive(db, op_id, S.OBSERVING)
    argv = [op_id if a == "OP" else a for a in argv]
    async with PgProxy.from_url(db_url) as proxy:
        point_at(proxy)
        proxy.arm(Fault(action="drop_after", match=COMMIT, after_match=written))
        assert await run(*argv) == 1
        assert proxy.fired.is_set()
    err = capsys.readouterr().err
    assert "the connection to PostgreSQL was lost while" in err, err
    assert "may have been recorded" in err and f"jobwarden show {op_id}" in err, err
    assert "then try again" not in err
    state_now = await db.fetchval(
        "SELECT state::text FROM operations WHERE operation_id = $1", op_id
    )
    assert state_now == landed  # the server did commit it


async def test_the_retry_of_a_resolution_already_applied_says_so_and_records_nothing(
    db: Any, db_url: str, point_at: PointAt, capsys: pytest.CaptureFixture[str]
) -> None:
    """The retry said 'failed -> failed is not an operator move; allowed from failed:
    none', a usage error: as if the operator had asked wrongly."""
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    argv = ["resolve", op_id, "--decision", "failed", "--reason", "vendor says failed"]
    async with PgProxy.from_url(db_url) as proxy:
        point_at(proxy)
        proxy.arm(Fault(action="drop_after", match=COMMIT, after_match=re.compile("decisions")))
        assert await run(*argv) == 1
        capsys.readouterr()
        assert await run(*argv) == 1
    err = capsys.readouterr().err
    assert f"{op_id} is already failed" in err and "nothing was changed" in err, err
    assert await db.fetchval("SELECT count(*) FROM decisions") == 1
    assert await db.fetchval("SELECT count(*) FROM history WHERE to_state = 'failed'") == 1


async def test_a_resume_overriding_back_pressure_is_one_decision_or_none(
    db: Any,
    db_url: str,
    point_at: PointAt,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`reconcile --override-back-pressure` resumed observation in one transaction and
    overrode in a second: the reconciler escalating the operation in between made the
    second refuse ('the database refused the move', exit 1) while the first had moved it
    and recorded its decision. Now both are one transaction: the reconciler's move
    waits for it (here its lock wait times out), and the command's answer is the truth."""
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "deadline passed")
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    loads = 0
    reloaded = cli_operator._load
    blocked: list[str] = []

    async def the_reconciler_escalates_between(conn: Any, operation_id: str) -> Any:
        nonlocal loads
        loads += 1
        if loads == 2:  # the reload before the override's read
            try:
                async with db.transaction():
                    await db.execute("SET LOCAL lock_timeout = '50ms'")
                    await ledger.transition(
                        db, operation_id, S.OBSERVING, S.NEEDS_ATTENTION,
                        actor="reconciler:test", cause="contradictory status",
                    )  # fmt: skip
            except (asyncpg.LockNotAvailableError, StaleTransition) as exc:
                blocked.append(type(exc).__name__)
        return await reloaded(conn, operation_id)

    monkeypatch.setattr(cli_operator, "_load", the_reconciler_escalates_between)
    code = await run("reconcile", op_id, "--override-back-pressure", "--reason", "vendor is up")
    err = capsys.readouterr().err
    decided = await db.fetchval("SELECT count(*) FROM decisions WHERE operation_id = $1", op_id)
    state = await db.fetchval("SELECT state::text FROM operations WHERE operation_id = $1", op_id)
    if code == 0:
        assert decided == 2 and blocked, (decided, blocked)
    else:  # refused: then nothing of it may be recorded
        assert (decided, state) == (0, "result_timed_out"), (code, err, decided, state)


async def test_a_resolution_of_an_operation_another_decision_finished_is_refused_not_usage(
    db: Any,
    db_url: str,
    point_at: PointAt,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two operators on one escalation: the second, loading after the first's commit,
    was told 'failed -> cancel_requested is not an operator move; allowed from failed:
    none', exit 2, as if they had typed the command wrongly."""
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    assert await run("resolve", op_id, "--decision", "failed", "--reason", "alice: failed") == 0
    capsys.readouterr()
    argv = ["resolve", op_id, "--decision", "cancel_requested", "--reason", "carol: stop"]
    assert await run(*argv) == 1
    err = capsys.readouterr().err
    assert f"{op_id} is already failed; nothing was changed" in err, err
    assert await db.fetchval("SELECT count(*) FROM decisions") == 1
