"""Real reconciler processes for crash tests (SIGKILL means SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.harness import FAST_LIMITS


def write_config(path: Path, sim_url: str, *, limits: dict[str, Any] | None = None) -> Path:
    merged = {**FAST_LIMITS, **(limits or {})}
    lines = [
        "[providers.sim]",
        'preset = "simulator"',
        f'base_url = "{sim_url}"',
        "",
        "[providers.sim.limits]",
    ]
    lines += [f"{key} = {value}" for key, value in merged.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def start_reconciler(
    db_url: str,
    config: Path,
    tmp_path: Path,
    worker_id: str,
    *,
    pipe: bool = False,
    **env_extra: str,
) -> subprocess.Popen[bytes]:
    """The real `jobwarden reconciler`; its output goes to `<worker_id>.log` in
    `tmp_path`, or (`pipe`) to its stdout pipe, for a test to read as it comes."""
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "JW_CONFIG": str(config),
        "JW_WORKER_ID": worker_id,
        "JW_RESULTS_DIR": str(tmp_path / "results"),
        "JW_LEASE_SECONDS": "2",
        "JW_SWEEP_INTERVAL": "0.05",
        "JW_LOG_LEVEL": "WARNING",
        **env_extra,
    }
    argv = [sys.executable, "-m", "shared.cli", "reconciler"]
    if pipe:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with open(tmp_path / f"{worker_id}.log", "ab") as log:  # the child keeps its own fd
        return subprocess.Popen(argv, env=env, stdout=log, stderr=log)


def kill9(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
