"""The embedded PostgreSQL (the `jobwarden[embedded]` extra): when it starts, and when not.

`make run` and `make test` fall back to it on a machine without a server;
operator commands and daemons start it only when asked (`--embedded`). Runs
the real CLI in a subprocess with the local server hidden (a port where
nothing listens), so the path a fresh machine takes cannot rot.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from shared.db.connect import DEMO_DATABASE, Embedded, resolve_database
from shared.db.errors import DatabaseProblem, database_of
from shared.db.migrate import load_migrations
from shared.db.runtime import app_database

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the socket is


def _no_server_env(pgdata: Path) -> dict[str, str]:
    """No DATABASE_URL and nothing listening where the local server would be."""
    # and no XDG_RUNTIME_DIR, as in CI and containers (platformdirs then warns)
    dropped = ("DATABASE_URL", "JW_FORCE_EMBEDDED", "XDG_RUNTIME_DIR")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(JW_LOCAL_PG_PORT=str(_closed_port()), JW_EMBEDDED_PGDATA=str(pgdata))
    return env


def _jobwarden(args: list[str], pgdata: Path, *prelude: str) -> subprocess.CompletedProcess[str]:
    """`jobwarden ARGS`; `prelude` is Python run first (to hide a module)."""
    code = "; ".join([*prelude, "from shared.cli.main import main", "sys.exit(main(sys.argv[1:]))"])
    return subprocess.run(
        [sys.executable, "-c", f"import sys; {code}", *args],
        env={**_no_server_env(pgdata), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_embedded_postgres_is_started_migrated_and_stopped_when_asked(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    first = _jobwarden(["--embedded", "migrate"], pgdata)
    assert first.returncode == 0, first.stderr
    expected = len(load_migrations())
    assert f"applied {expected} migration(s) to embedded database" in first.stdout
    assert not (pgdata / "postmaster.pid").exists(), "embedded server left running"

    second = _jobwarden(["--embedded", "migrate"], pgdata)
    assert second.returncode == 0, second.stderr
    assert "embedded database" in second.stdout and "up to date" in second.stdout

    audit = _jobwarden(["--embedded", "audit", "verify"], pgdata)
    assert audit.returncode == 0, audit.stderr
    assert "0 broken chain(s)" in audit.stdout
    # nothing but our own words on stderr: no library's warning about its runtime dir
    for done in (first, second, audit):
        assert "Warning" not in done.stderr, done.stderr


def test_operator_commands_do_not_start_it_unasked(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    done = _jobwarden(["migrate"], pgdata)
    assert done.returncode == 1
    assert "no PostgreSQL to use" in done.stderr and "--embedded" in done.stderr
    assert not pgdata.exists()


async def test_the_demo_falls_back_to_it_in_a_database_of_its_own(tmp_path: Path) -> None:
    """What `make run` does on a machine without PostgreSQL (the demo's own call)."""
    env = _no_server_env(tmp_path / "pg")
    async with app_database(env, create="always", fallback=True, database=DEMO_DATABASE) as db:
        assert db.source == "embedded"
        assert database_of(db.app_url) == DEMO_DATABASE
        assert str(tmp_path / "pg") in db.server
    assert not (tmp_path / "pg" / "postmaster.pid").exists()


def test_the_test_suite_falls_back_to_it(tmp_path: Path) -> None:
    """`make test` on a machine without PostgreSQL: the library default is the fallback."""
    resolved = resolve_database(_no_server_env(tmp_path / "pg"))
    try:
        assert resolved.source == "embedded"
    finally:
        resolved.stop()
    with pytest.raises(DatabaseProblem, match="nothing answers"):
        resolve_database(_no_server_env(tmp_path / "never"), embedded=Embedded.NEVER)
    assert not (tmp_path / "never").exists()


def test_without_the_extra_asking_for_it_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    # The production image: pgserver is not installed (hidden here, as if absent).
    done = _jobwarden(["--embedded", "list"], tmp_path / "pg", "sys.modules['pgserver'] = None")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        "jobwarden: the embedded PostgreSQL is not installed (the jobwarden[embedded] extra)",
        "hint: pip install 'jobwarden[embedded]' (make setup does), or set DATABASE_URL to a "
        "server",
    ]
