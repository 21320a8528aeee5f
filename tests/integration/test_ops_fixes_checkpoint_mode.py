"""Checkpoint files are public, results are not (shared/ledger/log.py publish,
shared/atomic_file.py).

A new operator's review: checkpoints were written 0600 (mkstemp's mode), so
the job shipping them off the host had to run as the reconciler's user. The
real `jobwarden audit keygen` and `audit sequence` run in subprocesses
against a migrated database; a result stored the way the reconciler stores
one keeps its owner-only mode.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from shared.result_store import ResultStore

REPO = Path(__file__).resolve().parents[2]


def _jobwarden(env: dict[str, str], *argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shared.cli", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_checkpoints_are_written_readable_by_all(db_url: str, tmp_path: Path) -> None:
    sep = "&" if "?" in db_url else "?"
    keys, checkpoints = tmp_path / "keys", tmp_path / "checkpoints"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DATABASE_URL": f"{db_url}{sep}role=jobwarden_operator",
        "JW_LOG_SIGNING_KEY_FILE": str(keys / "jobwarden.test_log.key"),
        "JW_LOG_CHECKPOINT_DIR": str(checkpoints),
    }
    env.pop("JW_LOG_SIGNING_KEY", None)
    _jobwarden(env, "audit", "keygen", "jobwarden.test/log", "--out", str(keys))
    _jobwarden(env, "audit", "sequence")
    written = sorted(checkpoints.iterdir())
    assert [p.name for p in written] == ["checkpoint", "checkpoint.0"]
    assert {p.name: _mode(p) for p in written} == {"checkpoint": 0o644, "checkpoint.0": 0o644}
    assert _mode(keys / "jobwarden.test_log.key") & 0o077 == 0  # the key stays private


def test_a_result_file_stays_readable_by_its_owner_only(tmp_path: Path) -> None:
    _, reference = ResultStore(tmp_path / "results").put(b'{"secret": "a customer\'s data"}\n')
    assert _mode(Path(reference.removeprefix("file:"))) == 0o600
