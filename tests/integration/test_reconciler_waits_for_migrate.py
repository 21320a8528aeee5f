"""A reconciler started before `jobwarden migrate` waits for it (an upgrade's review).

Before: it exited 2 at once; systemd restarted it every 5 s and gave up after
10 starts in 5 minutes (the unit's start limit), so a migration applied a
minute late left it down for good. Now it waits (up to `migration_wait`,
45 s, below the unit's TimeoutStartSec) and comes up once the migration is
applied. The real daemon, a real empty database; the test follows the
daemon's log lines as it writes them (its output pipe), never a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

from shared.db.connect import ResolvedDatabase, connect
from shared.db.migrate import apply_migrations, load_migrations
from shared.settings import Settings
from tests.processes import start_reconciler, write_config
from tests.support import dropped_afterwards, partly_migrated

# The most a log line the test expects may take to come (the daemon starts in
# about a second; a line never written fails the test at this bound).
EXPECT_SECONDS = 30.0


class Output:
    """A child's output lines, read as it writes them (a thread blocked on the pipe)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.seen: list[str] = []
        self._stream = proc.stdout
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self._stream:
            self._lines.put(raw.decode(errors="replace"))
        self._lines.put(None)  # end of output: the child exited

    async def expect(self, words: str) -> None:
        """Until a line holding `words` comes; fails if the child ends or falls silent first."""
        deadline = time.monotonic() + EXPECT_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = await asyncio.to_thread(self._lines.get, timeout=max(remaining, 0.0))
            except queue.Empty:
                raise AssertionError(f"{words!r} never logged:\n{''.join(self.seen)}") from None
            if line is None:
                raise AssertionError(f"exited before logging {words!r}:\n{''.join(self.seen)}")
            self.seen.append(line)
            if words in line:
                return

    def close(self) -> None:
        """Once the child has exited: the rest of its lines kept, the pipe closed."""
        self._reader.join()
        while (line := self._lines.get()) is not None:
            self.seen.append(line)
        self._stream.close()


@contextlib.asynccontextmanager
async def waiting_reconciler(
    tmp_path: Path, pg_server: ResolvedDatabase, name: str
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes], Output]]:
    """The real daemon on an empty database, once it says it waits for the migration."""
    async with dropped_afterwards(pg_server.admin_url, name) as database:
        url = await partly_migrated(pg_server.admin_url, database, 0)
        config = write_config(tmp_path / "jobwarden.toml", "http://127.0.0.1:9")
        daemon = start_reconciler(url, config, tmp_path, "w1", pipe=True, JW_LOG_LEVEL="INFO")
        output = Output(daemon)
        try:
            await output.expect("waiting for `jobwarden migrate`")
            assert daemon.poll() is None  # before: exited 2 here
            yield url, daemon, output
        finally:
            if daemon.poll() is None:
                daemon.kill()
            daemon.wait()
            output.close()


async def test_a_reconciler_started_before_migrate_comes_up_once_it_is_applied(
    tmp_path: Path, pg_server: ResolvedDatabase
) -> None:
    assert Settings().migration_wait < 60  # the unit's TimeoutStartSec
    async with waiting_reconciler(tmp_path, pg_server, "jw_rec_wait") as (url, daemon, output):
        conn = await connect(url)
        try:
            await apply_migrations(conn, load_migrations())
        finally:
            await conn.close()
        await output.expect("reconciler started")
        daemon.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(daemon.wait, 30)
    assert code == 0


async def test_a_reconciler_waiting_for_migrate_stops_at_once_on_sigterm(
    tmp_path: Path, pg_server: ResolvedDatabase
) -> None:
    """`docker stop`, `systemctl stop` while it waits: a clean exit, not a kill after the
    grace (as PID 1, which no default handler ends, the signal was ignored)."""
    async with waiting_reconciler(tmp_path, pg_server, "jw_rec_stop") as (_, daemon, output):
        daemon.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(daemon.wait, 10)  # the wait itself is 45 s
    assert code == 0
    assert "reconciler stopped while waiting for `jobwarden migrate`" in "".join(output.seen)
