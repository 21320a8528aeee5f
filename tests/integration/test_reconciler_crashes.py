"""Crash claims tested with real processes and real SIGKILL / SIGTERM."""

from __future__ import annotations

import asyncio
import random
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from shared import ledger
from shared.ledger import RequestSpec
from shared.ledger.states import TERMINAL, LocalState
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from tests.processes import kill9, start_reconciler, write_config

S = LocalState


async def wait_for(cond: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await cond()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def submit(pool: Any, script: str, **params: Any) -> str:
    body = {"script": script, "params": params}
    sub = await ledger.submit_operation(
        pool,
        provider="sim",
        kind="export",
        request=RequestSpec("POST", "/v1/jobs", body),
        requested_by="agent:test",
        result_deadline_s=120,
    )
    return sub.operation_id


async def test_sigkill_after_recording_the_job_id_before_the_first_poll(
    pool: Any, db_url: str, tmp_path: Path
) -> None:
    # status reads take 1.5 s, so the process dies with its first poll unrecorded
    sim_settings = SimulatorSettings(status_latency=1.5)
    async with serve_app(build_app(sim_settings)) as sim_url:
        config = write_config(tmp_path / "jw.toml", sim_url, limits={"request_timeout": 5})
        lease = {"JW_LEASE_SECONDS": "6"}  # a 5 s call must fit in the lease
        op_id = await submit(pool, "success", duration=0.5)
        first = start_reconciler(db_url, config, tmp_path, "first", **lease)
        try:

            async def job_recorded() -> Any:
                return (await ledger.load_operation(pool, op_id)).remote_job_id

            job_id = await wait_for(job_recorded, 20, "the job id to be recorded")
        finally:
            kill9(first)
        polls = await pool.fetchval(
            "SELECT count(*) FROM observations WHERE operation_id = $1 AND source = 'poll'", op_id
        )
        assert polls == 0, "the first poll must not have been recorded before the kill"
        second = start_reconciler(db_url, config, tmp_path, "second", **lease)
        try:

            async def finished() -> Any:
                return (await ledger.load_operation(pool, op_id)).state in TERMINAL

            await wait_for(finished, 30, "the restarted reconciler to finish the job")
        finally:
            second.terminate()
            second.wait(timeout=30)
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.SUCCEEDED and op.remote_job_id == job_id
        async with httpx.AsyncClient() as client:
            stats = (await client.get(f"{sim_url}/_sim/stats")).json()
        assert stats["creates_total"] == 1 and stats["jobs_total"] == 1
        assert max(stats["max_overlapping_status_calls"].values()) == 1


async def test_sigterm_releases_leases_and_exits_zero(
    pool: Any, db_url: str, tmp_path: Path
) -> None:
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        config = write_config(tmp_path / "jw.toml", sim_url)
        ids = [await submit(pool, "never_finishes") for _ in range(5)]
        proc = start_reconciler(db_url, config, tmp_path, "graceful")

        async def all_observing() -> bool:
            states = {(await ledger.load_operation(pool, i)).state for i in ids}
            return states == {S.OBSERVING}

        await wait_for(all_observing, 20, "operations to be observed")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
        held = await pool.fetchval("SELECT count(*) FROM operations WHERE lease_owner IS NOT NULL")
        assert held == 0


async def test_three_reconcilers_with_random_sigkills(
    pool: Any, db_url: str, tmp_path: Path
) -> None:
    """Scaled-down chaos run (the 500-operation version is `make chaos`)."""
    rng = random.Random(7)
    scripts = [
        "success",
        "late_failure",
        "partial",
        "lost_create_response",
        "create_5xx",
        "rate_limited",
    ]
    expected = {
        "success": S.SUCCEEDED,
        "late_failure": S.FAILED,
        "partial": S.SUCCEEDED,
        "lost_create_response": S.SUCCEEDED,
        "create_5xx": S.SUCCEEDED,
        "rate_limited": S.SUCCEEDED,
    }
    async with serve_app(build_app(SimulatorSettings(status_latency=0.01))) as sim_url:
        config = write_config(tmp_path / "jw.toml", sim_url)
        plan = []
        for _ in range(60):
            script = rng.choice(scripts)
            params: dict[str, Any] = {"duration": rng.uniform(0.1, 1.5)}
            if script == "lost_create_response":
                params["hang_seconds"] = 3
            plan.append((await submit(pool, script, **params), script))
        procs = {f"w{i}": start_reconciler(db_url, config, tmp_path, f"w{i}") for i in range(3)}
        try:
            deadline = time.monotonic() + 60
            kills = 0
            while time.monotonic() < deadline:
                done = await pool.fetchval(
                    "SELECT count(*) FROM operations WHERE finished_at IS NOT NULL"
                )
                if done == len(plan):
                    break
                await asyncio.sleep(rng.uniform(0.3, 0.8))
                if kills < 6:
                    victim = rng.choice(sorted(procs))
                    kill9(procs[victim])
                    kills += 1
                    procs[victim] = start_reconciler(db_url, config, tmp_path, f"{victim}-{kills}")
        finally:
            for proc in procs.values():
                proc.terminate()
            for proc in procs.values():
                proc.wait(timeout=30)
        for op_id, script in plan:
            assert (await ledger.load_operation(pool, op_id)).state is expected[script], script
        async with httpx.AsyncClient() as client:
            stats = (await client.get(f"{sim_url}/_sim/stats")).json()
        assert stats["jobs_total"] == len(plan), "a job ran twice or not at all"
        assert set(stats["creates_per_token"].values()) == {1}
        assert max(stats["max_overlapping_status_calls"].values()) == 1


async def test_the_reconciler_refuses_to_start_while_a_migration_is_pending(
    db: Any, db_url: str, tmp_path: Path
) -> None:
    await db.execute(
        "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)"
    )
    config = write_config(tmp_path / "jw.toml", "http://127.0.0.1:9")
    # past its wait for the migration (a real one's is 45 s: see
    # test_reconciler_waits_for_migrate.py), it exits for systemd to start it again
    proc = start_reconciler(db_url, config, tmp_path, "early", JW_MIGRATION_WAIT="0.5")
    assert await asyncio.to_thread(proc.wait, 30) == 2
    assert "jobwarden migrate" in (tmp_path / "early.log").read_text()


async def test_the_reconciler_speaks_systemd_notify(db_url: str, tmp_path: Path) -> None:
    """READY once started, WATCHDOG while running, STOPPING on SIGTERM (Type=notify units)."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    loop = asyncio.get_running_loop()

    async def message() -> str:
        return (await asyncio.wait_for(loop.sock_recv(notify, 1024), 20)).decode()

    config = write_config(tmp_path / "jw.toml", "http://127.0.0.1:9")
    proc = start_reconciler(
        db_url,
        config,
        tmp_path,
        "notified",
        NOTIFY_SOCKET=str(tmp_path / "notify"),
        WATCHDOG_USEC="400000",  # a ping every 0.2 s
    )
    try:
        assert await message() == "READY=1"
        assert await message() == "WATCHDOG=1"
        proc.send_signal(signal.SIGTERM)
        last = await message()
        while last == "WATCHDOG=1":  # pings sent before the signal may still be queued
            last = await message()
        assert last == "STOPPING=1"
        assert await asyncio.to_thread(proc.wait, 30) == 0
    finally:
        if proc.poll() is None:
            kill9(proc)
        notify.close()
