"""A reconciler started before `jobwarden migrate` waits for it (an upgrade's review).

Before: it exited 2 at once; systemd restarted it every 5 s and gave up after
10 starts in 5 minutes (the unit's start limit), so a migration applied a
minute late left it down for good. Now it waits (up to
`migration_wait`, 45 s, below the unit's TimeoutStartSec) and comes up once
the migration is applied. The real daemon, a real empty database.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from shared.db.connect import ResolvedDatabase, connect
from shared.db.migrate import apply_migrations, load_migrations
from shared.settings import Settings
from tests.processes import start_reconciler, write_config
from tests.support import dropped_afterwards, partly_migrated

WAIT_FOR_LOG_SECONDS = 30.0


def wait_for_line(log: Path, words: str) -> None:
    """Until the daemon's log holds `words` (bounded; the daemon writes as it goes)."""
    deadline = time.monotonic() + WAIT_FOR_LOG_SECONDS
    while time.monotonic() < deadline:
        if log.exists() and words in log.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{words!r} never logged:\n{log.read_text(errors='replace')[-3000:]}")


async def test_a_reconciler_started_before_migrate_comes_up_once_it_is_applied(
    tmp_path: Path, pg_server: ResolvedDatabase
) -> None:
    assert Settings().migration_wait < 60  # the unit's TimeoutStartSec
    async with dropped_afterwards(pg_server.admin_url, "jw_rec_wait") as name:
        url = await partly_migrated(pg_server.admin_url, name, 0)
        config = write_config(tmp_path / "jobwarden.toml", "http://127.0.0.1:9")
        daemon = start_reconciler(url, config, tmp_path, "w1", JW_LOG_LEVEL="INFO")
        log = tmp_path / "w1.log"
        try:
            wait_for_line(log, "waiting for `jobwarden migrate`")
            assert daemon.poll() is None  # before: exited 2 here
            conn = await connect(url)
            try:
                await apply_migrations(conn, load_migrations())
            finally:
                await conn.close()
            wait_for_line(log, "reconciler started")
        finally:
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=30)
    assert code == 0


async def test_a_reconciler_waiting_for_migrate_stops_at_once_on_sigterm(
    tmp_path: Path, pg_server: ResolvedDatabase
) -> None:
    """`docker stop`, `systemctl stop` while it waits: a clean exit, not a kill after the
    grace (as PID 1, which no default handler ends, the signal was ignored)."""
    async with dropped_afterwards(pg_server.admin_url, "jw_rec_stop") as name:
        url = await partly_migrated(pg_server.admin_url, name, 0)
        config = write_config(tmp_path / "jobwarden.toml", "http://127.0.0.1:9")
        daemon = start_reconciler(url, config, tmp_path, "w2", JW_LOG_LEVEL="INFO")
        log = tmp_path / "w2.log"
        try:
            wait_for_line(log, "waiting for `jobwarden migrate`")
            daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(timeout=10)  # the wait itself is 45 s
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
    assert code == 0
    assert "reconciler stopped while waiting for `jobwarden migrate`" in log.read_text()
