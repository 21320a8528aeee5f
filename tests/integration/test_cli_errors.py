"""The command line's failures: one line saying what, one saying how to fix it, no traceback.

Each case runs the real `jobwarden` in a subprocess, as an operator would,
against the real server, a port where nothing listens, or a database that is
missing or not migrated; and each hint is followed to show it is the fix.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from shared.cli.errors import failure_of
from shared.db.connect import ResolvedDatabase, connect, with_database
from shared.db.migrate import load_migrations
from tests.support import dropped_afterwards, partly_migrated

ROOT = Path(__file__).resolve().parents[2]
# The variables that choose a database: cleared so the host's own cannot leak in.
DATABASE_VARIABLES = (
    "DATABASE_URL",
    "JW_FORCE_EMBEDDED",
    "JW_EMBEDDED_PGDATA",
    "JW_LOCAL_PG_HOST",
    "JW_LOCAL_PG_PORT",
)


def free_port() -> int:
    """A port nothing listens on (bound, then closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def jobwarden(cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", *argv],
        cwd=cwd,
        env={**base, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_line_and_hint(done: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """The error and its hint; fails unless that is all stderr holds."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    error, hint = lines
    assert error.startswith("jobwarden: ") and hint.startswith("hint: "), done.stderr
    return error, hint


def no_server() -> dict[str, str]:
    """No DATABASE_URL, and nothing where the local server would be."""
    return {"JW_LOCAL_PG_PORT": str(free_port())}


@pytest.fixture
def local_server(pg_server: ResolvedDatabase) -> dict[str, str]:
    """JW_LOCAL_PG_HOST/PORT of the test server, when it is one the local probe can reach."""
    parts = urlsplit(pg_server.admin_url)
    if pg_server.source != "local" or not parts.hostname or not parts.port:
        pytest.skip("the test server is not a local TCP server reachable as postgres")
    return {"JW_LOCAL_PG_HOST": parts.hostname, "JW_LOCAL_PG_PORT": str(parts.port)}


@pytest_asyncio.fixture
async def fresh_name(pg_server: ResolvedDatabase) -> AsyncIterator[str]:
    """A database name no one uses; dropped after the test if something created it."""
    async with dropped_afterwards(pg_server.admin_url, "jw_cli_err") as name:
        yield name


# ------------------------------------------------------------------ no server


@pytest.mark.parametrize(
    "argv",
    [["list"], ["show", "op_01J00000000000000000000000"], ["migrate"], ["reconciler"]],
    ids=["list", "show", "migrate", "reconciler"],
)
def test_without_a_server_commands_say_how_to_point_at_one_and_start_nothing(
    tmp_path: Path, argv: list[str]
) -> None:
    done = jobwarden(tmp_path, *argv, **no_server())
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert "DATABASE_URL is not set and nothing answers on 127.0.0.1:" in error
    assert "DATABASE_URL=postgresql://" in hint and "--embedded" in hint
    assert not (tmp_path / ".pgdata").exists(), "an embedded PostgreSQL was started unasked"


def test_without_a_server_json_commands_answer_a_json_error(tmp_path: Path) -> None:
    done = jobwarden(tmp_path, "list", "--json", **no_server())
    assert done.returncode == 1
    assert done.stderr == ""
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "no_database"
    assert "nothing answers" in error["message"] and "--embedded" in error["hint"]


def test_embedded_and_database_url_together_are_refused(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/jobwarden"
    done = jobwarden(tmp_path, "--embedded", "list", DATABASE_URL=url)
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert "both DATABASE_URL and --embedded" in error and "unset DATABASE_URL" in hint
    assert not (tmp_path / ".pgdata").exists()


# ------------------------------------------------------------------ connection refused


def test_connection_refused_names_the_server_without_credentials(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://ops:s3cret@127.0.0.1:{port}/jobwarden"
    done = jobwarden(tmp_path, "inbox", DATABASE_URL=url)
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert f"cannot connect to PostgreSQL on 127.0.0.1:{port}" in error
    assert "connection refused" in error and "DATABASE_URL" in hint
    assert "s3cret" not in done.stderr


# ------------------------------------------------------------------ missing database


def test_missing_database_of_database_url_says_create_then_migrate(
    tmp_path: Path, pg_server: ResolvedDatabase, fresh_name: str
) -> None:
    url = with_database(pg_server.admin_url, fresh_name)
    done = jobwarden(tmp_path, "list", DATABASE_URL=url)
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert f'database "{fresh_name}" does not exist on' in error and "DATABASE_URL" in error
    assert "CREATE DATABASE" in hint and "jobwarden migrate" in hint


def test_missing_database_on_the_local_server_hint_is_the_fix(
    tmp_path: Path, local_server: dict[str, str], fresh_name: str
) -> None:
    done = jobwarden(tmp_path, "--database", fresh_name, "list", **local_server)
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert f'database "{fresh_name}" does not exist' in error and "local server" in error
    command = hint.split("`")[1]
    assert command == f"jobwarden --database {fresh_name} migrate"
    fixed = jobwarden(tmp_path, *command.split()[1:], **local_server)
    assert fixed.returncode == 0, fixed.stderr
    listed = jobwarden(tmp_path, "--database", fresh_name, "list", "--json", **local_server)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []


# ------------------------------------------------------------------ pending migrations


async def test_an_empty_database_is_reported_unmigrated_and_migrate_fixes_it(
    tmp_path: Path, pg_server: ResolvedDatabase, fresh_name: str
) -> None:
    url = await partly_migrated(pg_server.admin_url, fresh_name, 0)
    done = jobwarden(tmp_path, "inbox", DATABASE_URL=url)
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    total = len(load_migrations())
    assert f"is not migrated: {total} migration(s) pending (001_" in error
    assert "`jobwarden migrate`" in hint
    assert jobwarden(tmp_path, "migrate", DATABASE_URL=url).returncode == 0
    assert jobwarden(tmp_path, "inbox", DATABASE_URL=url).returncode == 0


async def test_a_partly_migrated_database_names_what_is_pending(
    tmp_path: Path, pg_server: ResolvedDatabase, fresh_name: str
) -> None:
    migrations = load_migrations()
    url = await partly_migrated(pg_server.admin_url, fresh_name, len(migrations) - 1)
    done = jobwarden(tmp_path, "list", "--json", DATABASE_URL=url)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "migrations_pending"
    assert f"1 migration(s) pending ({migrations[-1].name})" in error["message"]


async def test_the_operator_role_on_an_empty_database_is_told_to_migrate(
    tmp_path: Path, pg_server: ResolvedDatabase, template_db: str, fresh_name: str
) -> None:
    """The operator role may not read schema_migrations; an absent schema is still named.

    (`template_db`: its migrations create the cluster's roles.)
    """
    url = await partly_migrated(pg_server.admin_url, fresh_name, 0)
    sep = "&" if "?" in url else "?"
    done = jobwarden(tmp_path, "list", DATABASE_URL=f"{url}{sep}role=jobwarden_operator")
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert "is not migrated" in error and "`jobwarden migrate`" in hint


# ------------------------------------------------------------------ version, usage, bugs


def test_version_is_the_installed_distributions() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "jobwarden"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"jobwarden {project['version']}"


def test_a_usage_error_under_json_is_json(tmp_path: Path) -> None:
    done = jobwarden(tmp_path, "list", "--no-such-flag", "--json")
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "usage" and "--no-such-flag" in error["message"]


def test_a_bug_keeps_its_traceback() -> None:
    """Only what an operator fixes is reduced to a line; a bug must stay debuggable."""
    assert failure_of(RuntimeError("a bug")) is None
    assert failure_of(KeyError("column")) is None


async def test_a_schema_a_newer_jobwarden_migrated_is_refused(
    tmp_path: Path, pg_server: ResolvedDatabase, fresh_name: str
) -> None:
    """After a rollback of the code: the commands refuse (their rules may be older than
    the schema's), naming the migration they do not know; so does the reconciler."""
    url = await partly_migrated(pg_server.admin_url, fresh_name, len(load_migrations()))
    conn = await connect(url)
    try:
        await conn.execute(
            "INSERT INTO schema_migrations (version, name, checksum)"
            " VALUES (999, '999_later.sql', 'x')"
        )
    finally:
        await conn.close()
    done = jobwarden(tmp_path, "inbox", DATABASE_URL=url)
    assert done.returncode == 1
    error, hint = one_line_and_hint(done)
    assert "999_later.sql which this code does not know" in error and "newer jobwarden" in error
    assert "run the jobwarden version that migrated it" in hint
    reconciler = jobwarden(tmp_path, "reconciler", DATABASE_URL=url, JW_RESULTS_DIR=str(tmp_path))
    assert reconciler.returncode == 2
    assert "999_later.sql" in reconciler.stdout and "newer jobwarden" in reconciler.stdout


def test_a_reader_gone_is_no_traceback(tmp_path: Path) -> None:
    """`jobwarden … | head -1`, the reader gone before the output is written: the
    command ends as a shell's SIGPIPE does, with no traceback (there was one)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the first write fails with EPIPE
    base = {k: v for k, v in os.environ.items() if k not in DATABASE_VARIABLES}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "shared.cli", "providers", "show", "openai_batch"],
            cwd=tmp_path,
            env={**base, "PYTHONPATH": str(ROOT)},
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == 141
