"""The no-server path of `make run` / `make test`: an embedded PostgreSQL.

Runs the real CLI in a subprocess with the local server hidden, so the path a
fresh machine without PostgreSQL takes cannot rot.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from shared.db.migrate import load_migrations


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the socket is


def _jobwarden(args: list[str], pgdata: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    # No DATABASE_URL and nothing listening where the local server would be:
    # the same probe a fresh machine goes through, not a forced switch.
    env.update(JW_LOCAL_PG_PORT=str(_closed_port()), JW_EMBEDDED_PGDATA=str(pgdata))
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_embedded_postgres_is_started_migrated_and_stopped(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    first = _jobwarden(["migrate"], pgdata)
    assert first.returncode == 0, first.stderr
    expected = len(load_migrations())
    assert f"applied {expected} migration(s) to embedded database" in first.stdout
    assert not (pgdata / "postmaster.pid").exists(), "embedded server left running"

    second = _jobwarden(["migrate"], pgdata)
    assert second.returncode == 0, second.stderr
    assert "embedded database" in second.stdout and "up to date" in second.stdout

    audit = _jobwarden(["audit", "verify"], pgdata)
    assert audit.returncode == 0, audit.stderr
    assert "0 broken chain(s)" in audit.stdout
