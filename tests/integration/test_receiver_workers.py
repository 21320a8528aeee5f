"""`jobwarden receiver --workers N`: a real supervisor and real children on one port.

Readiness and stopping are observed the way systemd observes them (a
NOTIFY_SOCKET the test binds); a child is killed with SIGKILL and must be
replaced while the other keeps serving; SIGTERM drains every child.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import free_port, wait_until
from receiver.workers import child_argv
from tests.integration.test_receiver_support import (
    PROVIDER,
    SECRET,
    delivery,
    standard_headers,
    stored_events,
)

WAIT_SECONDS = 30.0  # children import the whole app; a loaded machine is slow


def _children(pid: int) -> set[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return {int(p) for p in text.split()}


async def _message(sock: socket.socket) -> str:
    loop = asyncio.get_running_loop()
    data = await asyncio.wait_for(loop.sock_recv(sock, 1024), WAIT_SECONDS)
    return data.decode()


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "jobwarden.toml"
    path.write_text(
        f'[providers.{PROVIDER}]\npreset = "simulator"\n'
        f'[providers.{PROVIDER}.webhooks]\nsecrets_env = ["JW_TEST_SECRET"]\n'
    )
    return path


async def _post(port: int, count: int, prefix: str) -> None:
    now = int(time.time())  # the children check signatures against the real clock
    for i in range(count):
        body, _ = delivery(f"job_{prefix}_{i}", f"{prefix}_{i}")
        # a connection per delivery, so SO_REUSEPORT spreads them over the children
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            resp = await client.post(
                f"/webhooks/{PROVIDER}",
                content=body,
                headers=standard_headers(body, f"{prefix}_{i}", timestamp=now),
            )
        assert resp.json() == {"status": "stored", "matched": False}


def test_child_argv_drops_what_the_supervisor_settled() -> None:
    argv = ["--embedded", "--database", "x", "receiver", "--workers", "3", "--port", "9"]
    assert child_argv(argv)[1:] == ["-m", "shared.cli", "receiver", "--port", "9", "--reuse-port"]
    assert child_argv(["receiver", "--workers=2"])[-2:] == ["receiver", "--reuse-port"]


async def test_workers_share_the_port_survive_a_killed_child_and_drain(
    db: Any, db_url: str, tmp_path: Path
) -> None:
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "JW_CONFIG": str(_config(tmp_path)),
        "JW_TEST_SECRET": SECRET,
        "NOTIFY_SOCKET": str(tmp_path / "notify"),
        "JW_LOG_LEVEL": "WARNING",
        # the variable, not the flag: children inherit the environment, and
        # must not each become a supervisor of their own
        "JW_RECEIVER_WORKERS": "2",
    }
    log = (tmp_path / "receiver.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.cli", "receiver", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        assert await _message(notify) == "READY=1"  # only once both children listen
        first = _children(proc.pid)
        assert len(first) == 2
        assert all(_children(pid) == set() for pid in first)  # workers, not supervisors
        await _post(port, 10, "before")

        victim = min(first)
        os.kill(victim, signal.SIGKILL)

        async def replaced() -> bool:  # the kernel's view: nothing announces it
            return len(_children(proc.pid) - {victim}) == 2

        await wait_until(replaced, WAIT_SECONDS, "the killed worker's replacement")
        replacement = _children(proc.pid) - first
        assert len(replacement) == 1
        # the survivor serves throughout; the replacement joins once it listens
        await _post(port, 10, "after")

        proc.send_signal(signal.SIGTERM)
        assert await _message(notify) == "STOPPING=1"
        assert await asyncio.to_thread(proc.wait, WAIT_SECONDS) == 0
        for pid in first | replacement:
            assert _stopped(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        notify.close()
    stored = {e["event_id"] for e in await stored_events(db)}
    assert stored == {f"{p}_{i}" for p in ("before", "after") for i in range(10)}


def _stopped(pid: int) -> bool:
    """Gone, or a zombie (its reaper may take it between two reads of /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_bad_worker_count_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "shared.cli", "receiver", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=False,
    )
    assert result.returncode == 2
    assert "--workers" in result.stderr and "from 1 to" in result.stderr
