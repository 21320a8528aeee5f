"""`make run` itself, shortened: every demo operation ends in its expected state."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


async def test_make_run_shows_every_path_and_settles(db_url: str, db: Any) -> None:
    env = {**os.environ, "DATABASE_URL": db_url, "JW_DEMO_TIME_SCALE": "0.3"}
    done = subprocess.run(
        ["make", "-s", "run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("✓") == 7 and "✗" not in done.stdout
    rows = await db.fetch("SELECT client_reference, state::text FROM operations")
    by_ref = {r["client_reference"].rsplit("-", 1)[1]: r["state"] for r in rows}
    assert by_ref == {
        "0": "succeeded",
        "1": "succeeded",
        "2": "failed",
        "3": "cancelled",
        "4": "succeeded",
        "5": "succeeded",
        "6": "needs_attention",
    }
    webhooks = await db.fetchval(
        "SELECT count(*) FROM webhook_events WHERE operation_id IS NOT NULL"
    )
    assert webhooks >= 1, "the webhook path was not exercised"
    assert await db.fetchval("SELECT count(*) FROM escalations WHERE resolved_at IS NULL") == 1


def test_ctrl_c_stops_the_demo_and_every_process_it_started(db_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": db_url, "JW_DEMO_TIME_SCALE": "10", "COLUMNS": "200"}
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
