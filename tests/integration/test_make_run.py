"""`make run` itself, shortened: every demo operation ends in its expected state."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rich.console import Console

from shared.cli.demo import Scenario, live_table
from shared.cli.main import build_parser
from shared.db.connect import DEMO_DATABASE, ResolvedDatabase, connect, with_database
from shared.ids import ulid
from shared.ledger.states import LocalState
from tests.support import dropped_afterwards

REPO = Path(__file__).resolve().parents[2]
EXPECTED = {
    "0": "succeeded",
    "1": "succeeded",
    "2": "failed",
    "3": "cancelled",
    "4": "succeeded",
    "5": "succeeded",
    "6": "needs_attention",
}
SETTLED = "'succeeded', 'failed', 'cancelled', 'needs_attention'"
SUMMARY = re.compile(r"^([✓✗]) (.+?) +([a-z_]+) +(op_[0-9A-Z]+)", re.M)
OPERATION_ID = re.compile(r"op_[0-9A-Z]{26}")


@pytest_asyncio.fixture
async def demo_database(pg_server: ResolvedDatabase) -> AsyncIterator[str]:
    """The name the demo is told to use (JW_DEMO_DATABASE); dropped afterwards."""
    async with dropped_afterwards(pg_server.admin_url, "jw_demo_t") as name:
        yield name


def _read_until_first_settled(proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("settled "):
            return
    raise AssertionError("no 'settled' line before the end:\n" + "".join(lines))


async def test_make_run_shows_every_path_and_settles(
    pg_server: ResolvedDatabase, db_url: str, db: Any, demo_database: str
) -> None:
    # DATABASE_URL names a database of its own: the demo must not write there.
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "JW_DEMO_DATABASE": demo_database,
        "JW_DEMO_TIME_SCALE": "0.3",
    }
    proc = subprocess.Popen(
        ["make", "-s", "run"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        _read_until_first_settled(proc, lines)
        # Printed as it happens, not all at the end: some are still running now.
        demo = await connect(with_database(pg_server.admin_url, demo_database))
        try:
            unsettled = await demo.fetchval(
                f"SELECT count(*) FROM operations WHERE state::text NOT IN ({SETTLED})"
            )
        finally:
            await demo.close()
        assert unsettled > 0, "the settled lines were held back until every operation settled"
        lines.extend(proc.stdout)  # the same reader: what it buffered is not lost
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)  # reaped: a failure here is one failure, not a stray process
        proc.stdout.close()
    stdout = "".join(lines)
    assert proc.returncode == 0, stdout[-3000:]
    _check_output(stdout, demo_database)
    await _check_demo_database(pg_server, demo_database)
    assert await db.fetchval("SELECT count(*) FROM operations") == 0, "wrote to DATABASE_URL's"
    _inspect_as_told(stdout, db_url)


def _check_output(stdout: str, name: str) -> None:
    assert re.search(rf"^database: {name} on \S.* \(from DATABASE_URL\)$", stdout, re.M), stdout
    summary = SUMMARY.findall(stdout)
    assert [mark for mark, *_ in summary] == ["✓"] * 7, stdout
    lines = [line for line in stdout.splitlines() if line[:1] in ("✓", "✗")]
    assert all(len(line) <= 80 for line in lines), "the summary is wider than 80 columns"
    settled = [line for line in stdout.splitlines() if line.startswith("settled ")]
    settled_ids = [m[0] for line in settled if (m := OPERATION_ID.findall(line))]
    assert sorted(settled_ids) == sorted(op_id for *_, op_id in summary), settled
    assert stdout.index(settled[-1]) < stdout.index(lines[0])


async def _check_demo_database(pg_server: ResolvedDatabase, name: str) -> None:
    demo = await connect(with_database(pg_server.admin_url, name))
    try:
        rows = await demo.fetch("SELECT client_reference, state::text FROM operations")
        by_ref = {r["client_reference"].rsplit("-", 1)[1]: r["state"] for r in rows}
        assert by_ref == EXPECTED
        webhooks = await demo.fetchval(
            "SELECT count(*) FROM webhook_events WHERE operation_id IS NOT NULL"
        )
        assert webhooks >= 1, "the webhook path was not exercised"
        open_escalations = "SELECT count(*) FROM escalations WHERE resolved_at IS NULL"
        assert await demo.fetchval(open_escalations) == 1
    finally:
        await demo.close()


def _inspect_as_told(stdout: str, db_url: str) -> None:
    """The summary's own `inbox` command finds the token conflict in the demo's database."""
    command = next(line.split() for line in stdout.splitlines() if line.endswith(" inbox"))
    assert command[0] == ".venv/bin/jobwarden"
    conflict = next(op_id for _, label, _, op_id in SUMMARY.findall(stdout) if "conflict" in label)
    shown = subprocess.run(
        [str(REPO / command[0]), *command[1:], "--json"],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": db_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert conflict in shown.stdout


def test_the_demo_database_has_its_own_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JW_DEMO_DATABASE", raising=False)
    from shared.cli.demo import demo_database

    assert build_parser().parse_args(["demo"]).database is None
    assert demo_database() == DEMO_DATABASE != "jobwarden"


def test_the_live_table_at_80_columns_tells_every_operation_apart() -> None:
    """Ids minted in one millisecond share their first 13 characters; cut, they all look alike."""
    now_ms = int(time.time() * 1000)
    ids = [f"op_{ulid(now_ms)}" for _ in range(7)]
    plan = [
        Scenario(f"scenario {n} with a long label", "sim", "s", {}, LocalState.SUCCEEDED)
        for n in range(7)
    ]
    row = {
        "state": "result_collecting",
        "remote_state": "succeeded",
        "progress_total": 500,
        "progress_completed": 498,
        "calls": 12,
    }
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True, color_system=None)
    console.print(live_table(console, [(sc, i, row) for sc, i in zip(plan, ids, strict=True)]))
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.count("result_collecting") == 7, text  # states whole too
    shown = [
        next(part for part in line.split() if part.startswith("op_"))
        for line in text.splitlines()
        if "op_" in line
    ]
    assert len(shown) == 7 and len(set(shown)) == 7, text
    for op_id, cell in zip(ids, shown, strict=True):
        assert op_id.endswith(cell.removeprefix("op_").lstrip("…")), (op_id, cell)


def test_the_live_table_keeps_whole_ids_when_they_fit() -> None:
    ids = [f"op_{ulid()}" for _ in range(2)]
    plan = [Scenario("ok", "sim", "s", {}, LocalState.SUCCEEDED)] * 2
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    console.print(live_table(console, [(sc, i, None) for sc, i in zip(plan, ids, strict=True)]))
    assert all(op_id in out.getvalue() for op_id in ids)


def test_ctrl_c_stops_the_demo_and_every_process_it_started(
    db_url: str, demo_database: str
) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "JW_DEMO_DATABASE": demo_database,
        "JW_DEMO_TIME_SCALE": "10",
        "COLUMNS": "200",
    }
    proc = subprocess.Popen(
        [str(REPO / ".venv/bin/jobwarden"), "demo"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    ports: list[int] = []
    for line in proc.stdout:
        if line.startswith("started"):
            ports = [int(p) for p in re.findall(r"(?:127\.0\.0\.1|receiver ):(\d+)", line)]
            break
    assert len(ports) == 2, "the demo did not report its simulator and receiver"
    time.sleep(1.0)  # operations are in flight
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    proc.stdout.close()
    for port in ports:
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still served"
