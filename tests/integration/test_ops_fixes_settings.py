"""A config file the daemons cannot read is a configuration error, not a traceback.

A new operator's review: `jobwarden reconciler` with a jobwarden.toml readable by
root only ended in a PermissionError traceback. Each case runs the real daemon
command in a subprocess, as systemd would; the test's own user may read any
file when it is root, so it then runs the command as `nobody` (setpriv).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _daemon(command: str, config: Path, *, as_nobody: bool) -> subprocess.CompletedProcess[str]:
    """`jobwarden <command>` with JW_CONFIG=`config`; no database it could reach."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JW_CONFIG": str(config),
        "DATABASE_URL": f"postgresql://nobody@127.0.0.1:{_free_port()}/none",
    }
    argv = [sys.executable, "-m", "shared.cli", command]
    if as_nobody:
        _traversable(Path(sys.executable).parent, ROOT)
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
    return subprocess.run(
        argv, cwd="/", env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _traversable(*folders: Path) -> None:
    """Let `nobody` reach the interpreter and the code: each folder and its parents
    get the others' search bit (no listing), as the embedded PostgreSQL's own setup
    does for its data. A checkout in a private temporary folder (a fresh clone's
    `mktemp -d`, mode 0700) ran this test before or after that setup, by the
    scheduling of the test workers: "No module named 'shared'" when before."""
    for folder in folders:
        for path in (folder, *folder.parents):
            mode = path.stat().st_mode
            if not mode & 0o001:
                path.chmod(mode | 0o001)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["reconciler", "receiver"])
def test_an_unreadable_config_file_is_one_line_naming_it(tmp_path: Path, command: str) -> None:
    root = os.geteuid() == 0
    if root and shutil.which("setpriv") is None:
        pytest.skip("running as root, and no setpriv to run the daemon as another user")
    config = tmp_path / "jobwarden.toml"
    config.write_text("[jobwarden]\n")
    config.chmod(0)
    line = _one_line(_daemon(command, config, as_nobody=root))
    assert line == (
        f"jobwarden: configuration error: {config}: permission denied"
        " (the user running jobwarden must be able to read it)"
    )


def test_a_config_path_that_is_a_folder_is_one_line_naming_it(tmp_path: Path) -> None:
    line = _one_line(_daemon("reconciler", tmp_path, as_nobody=False))
    assert line.startswith(f"jobwarden: configuration error: {tmp_path}: cannot be read (")
