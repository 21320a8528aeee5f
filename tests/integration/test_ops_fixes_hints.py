"""Hints that offer only what is installed (shared/db/connect.py, shared/telemetry/setup.py).

A new operator's review: with no database reachable, the hint offered
`--embedded` on an install without the embedded extra, where that flag only
fails again. The real `jobwarden list` runs in a subprocess, with pgserver
hidden (as in the production image, where it is not installed) or not.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HIDE_PGSERVER = "sys.modules['pgserver'] = None"  # `import pgserver` fails: not installed


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _list_without_a_server(tmp_path: Path, *prelude: str) -> tuple[str, str]:
    """`jobwarden list` with no DATABASE_URL and nothing listening: its error and hint."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JW_FORCE_EMBEDDED")}
    env.update(
        JW_LOCAL_PG_PORT=str(_closed_port()),
        JW_EMBEDDED_PGDATA=str(tmp_path / "pg"),
        PYTHONPATH=str(ROOT),
    )
    code = "; ".join([*prelude, "from shared.cli.main import main", "sys.exit(main(sys.argv[1:]))"])
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; {code}", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    error, hint = done.stderr.splitlines()
    assert "nothing answers" in error
    return error, hint


def test_without_the_embedded_extra_the_hint_is_database_url_only(tmp_path: Path) -> None:
    _, hint = _list_without_a_server(tmp_path, HIDE_PGSERVER)
    assert hint == (
        "hint: set DATABASE_URL=postgresql://USER@HOST:PORT/DATABASE for a running server"
        " (--embedded needs jobwarden's embedded extra, not installed)"
    )
    assert "pass --embedded" not in hint


def test_with_the_embedded_extra_the_hint_offers_it(tmp_path: Path) -> None:
    if importlib.util.find_spec("pgserver") is None:
        pytest.skip("the embedded extra is not installed here")
    _, hint = _list_without_a_server(tmp_path)
    assert "set DATABASE_URL=postgresql://" in hint
    assert "pass --embedded (jobwarden --embedded COMMAND)" in hint
