"""The daemon's log sequencer is a child process: it sequences and signs, comes
back when killed, and never outlives the daemon (real processes, real SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench.evidence_log import seed_log_bulk
from reconciler.sequencer import STARTUP_SECONDS
from shared.ledger.log_audit import open_checkpoint
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from shared.tlog import Verifier, generate_key
from tests.integration.test_reconciler_crashes import submit, wait_for
from tests.processes import kill9, start_reconciler, write_config

SIGNER, VERIFIER = generate_key("jobwarden.test/sequencer")


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper has stopped already)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def sequencer_of(daemon: subprocess.Popen[bytes]) -> int | None:
    for pid in children(daemon.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue  # a child that exited between the listing and the read
        if b"reconciler.sequencer" in cmdline and alive(pid):
            return pid
    return None


async def queue_drained(pool: Any) -> bool:
    return bool(await pool.fetchval("SELECT NOT EXISTS (SELECT 1 FROM log_queue)"))


@pytest.fixture
async def sim_url() -> Any:
    async with serve_app(build_app(SimulatorSettings())) as url:
        yield url


async def test_the_daemons_child_sequences_signs_and_comes_back_when_killed(
    pool: Any, db_url: str, tmp_path: Path, sim_url: str
) -> None:
    config = write_config(tmp_path / "jw.toml", sim_url)
    checkpoints = tmp_path / "checkpoints"
    await submit(pool, "success", duration=0.1)
    daemon = start_reconciler(
        db_url,
        config,
        tmp_path,
        "seq",
        JW_LOG_SIGNING_KEY=SIGNER,
        JW_LOG_INTERVAL="0.05",
        JW_LOG_CHECKPOINT_DIR=str(checkpoints),
    )
    try:

        async def first_child() -> int | None:
            return sequencer_of(daemon)

        child = await wait_for(first_child, 20, "the sequencer child to start")

        async def signed() -> bool:
            return (checkpoints / "checkpoint").exists() and await queue_drained(pool)

        await wait_for(signed, 30, "a signed checkpoint and a drained queue")
        note = (checkpoints / "checkpoint").read_text()
        first_size = open_checkpoint(note, [Verifier.from_key(VERIFIER)]).size
        assert first_size > 0

        os.kill(child, signal.SIGKILL)  # mid-pass or between passes: either loses nothing

        async def replaced() -> int | None:
            pid = sequencer_of(daemon)
            return pid if pid not in (None, child) else None

        await wait_for(replaced, 20, "the daemon to start the sequencer again")
        await submit(pool, "success", duration=0.1)

        async def caught_up() -> bool:
            queued = await pool.fetchval("SELECT count(*) FROM log_queue")
            leaves = await pool.fetchval("SELECT count(*) FROM log_leaves")
            return queued == 0 and leaves > first_size

        await wait_for(caught_up, 30, "the new child to sequence the second operation")
        assert daemon.poll() is None, "a sequencer's death is not the daemon's"
    finally:
        kill9(daemon)


def seconds_running(pid: int) -> float:
    """How long the process has existed (its start time against the system's uptime)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime - int(stat[19]) / os.sysconf("SC_CLK_TCK")


async def test_a_child_that_stops_passing_is_killed_and_replaced(
    pool: Any, db_url: str, tmp_path: Path, sim_url: str
) -> None:
    """The watchdog: alive but silent (here SIGSTOP) past log_watchdog_seconds."""
    config = write_config(tmp_path / "jw.toml", sim_url)
    watchdog = 2.0
    daemon = start_reconciler(
        db_url,
        config,
        tmp_path,
        "seq",
        JW_LOG_INTERVAL="0.05",
        JW_LOG_WATCHDOG_SECONDS=str(watchdog),
    )
    try:

        async def started() -> int | None:
            return sequencer_of(daemon)

        child = await wait_for(started, 20, "the sequencer child to start")

        async def outlived_the_watchdog() -> bool:
            # past its start-up allowance too: only its beats can have kept it
            return seconds_running(child) > max(watchdog, STARTUP_SECONDS) + 1

        await wait_for(outlived_the_watchdog, STARTUP_SECONDS + 20, "the child to run past it")
        assert sequencer_of(daemon) == child, "an idle child that passes is left alone"
        os.kill(child, signal.SIGSTOP)  # alive, holding its pipe open, saying nothing

        async def replaced() -> int | None:
            pid = sequencer_of(daemon)
            return pid if pid not in (None, child) else None

        await wait_for(replaced, watchdog + 20, "the daemon to replace the silent child")

        async def gone() -> bool:
            return not alive(child)

        await wait_for(gone, 10, "the silent child to be killed")
        await submit(pool, "success", duration=0.1)
        await wait_for(
            lambda: queue_drained(pool), 30, "the new child to sequence the new operation"
        )
        assert daemon.poll() is None
        assert "log sequencer stopped passing" in (tmp_path / "seq.log").read_text()
    finally:
        kill9(daemon)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
async def test_the_sequencer_never_outlives_the_daemon(
    pool: Any, db_url: str, tmp_path: Path, sim_url: str, how: str
) -> None:
    config = write_config(tmp_path / "jw.toml", sim_url)
    daemon = start_reconciler(db_url, config, tmp_path, "seq", JW_LOG_INTERVAL="0.05")
    try:

        async def started() -> int | None:
            return sequencer_of(daemon)

        child = await wait_for(started, 20, "the sequencer child to start")
    finally:
        if how == "SIGKILL":
            kill9(daemon)
        else:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=30) == 0

    async def gone() -> bool:
        return not alive(child)

    await wait_for(gone, 10, f"the sequencer to exit after the daemon's {how}")


async def test_a_sigterm_does_not_wait_for_a_backlog(
    pool: Any, db_url: str, tmp_path: Path, sim_url: str
) -> None:
    """The child stops after its current batch: a daemon asked to stop while the
    sequencer works through a large backlog exits at once, the rest left queued."""
    async with pool.acquire() as conn:
        await seed_log_bulk(conn, 4_000)  # 28,000 queued rows: many batches
    config = write_config(tmp_path / "jw.toml", sim_url)
    daemon = start_reconciler(db_url, config, tmp_path, "seq", JW_LOG_INTERVAL="0.05")
    try:

        async def sequencing() -> bool:
            return bool(await pool.fetchval("SELECT EXISTS (SELECT 1 FROM log_leaves)"))

        await wait_for(sequencing, 30, "the sequencer to start on the backlog")
        daemon.send_signal(signal.SIGTERM)
        # well inside STOP_SECONDS (10 s): the child stopped, it was not killed
        assert daemon.wait(timeout=8) == 0
    finally:
        if daemon.poll() is None:
            kill9(daemon)
    assert await pool.fetchval("SELECT count(*) FROM log_queue") > 0, "stopped mid-backlog"
