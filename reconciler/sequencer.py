"""The evidence log's sequencer: a process of its own beside the reconciler.

Appending a leaf costs tens of microseconds of Python (canonical JSON, SHA-256,
the Merkle tree's stored hashes) plus its queries. Run in the reconciler's
event loop, that time was taken from status reads (bench.evidence_log
measured 0.84-0.99 of the log-off rate). As a child process it runs beside
the loop, on another core when there is one, and a slow pass delays nothing
but the log.

The daemon starts it (`SequencerProcess`) with the database it resolved and
its log settings, starts it again when it exits (backing off up to a
minute), and stops it at shutdown. The child dies with its parent
(PR_SET_PDEATHSIG), so a daemon killed outright leaves no sequencer behind;
each pass is one transaction, so a child killed at any line loses nothing
(the queue it was taking rolls back). Several reconcilers each start one:
one sequences (advisory lock), the others find the log taken and sign the
head they see, if new.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from typing import Any

from shared import logs, serve
from shared.child_process import die_with_parent
from shared.db.connect import connect
from shared.ledger import log as evidence_log
from shared.settings import Settings, load_settings
from shared.tlog import Signer

log = logging.getLogger("jobwarden.sequencer")

# Checkpoints are signed at most this often (and only when the log grew):
# each is a file and a row kept for good, so every 5 s would be 17,280 a day.
CHECKPOINT_MIN_SECONDS = 60.0
# A child that exits is started again after this long, doubled on each quick
# failure up to RESTART_MAX_SECONDS; one that ran that long starts over.
RESTART_MIN_SECONDS = 1.0
RESTART_MAX_SECONDS = 60.0
# SIGTERM: a pass in progress finishes (one transaction); past this it is killed.
STOP_SECONDS = 10.0


class LogKeeper:
    """One pass: append what was committed since the last, and sign the head when due."""

    def __init__(self, signer: Signer | None, settings: Settings) -> None:
        self.signer = signer
        self.directory = settings.log_checkpoint_dir
        self.signed_size = -1
        self.next_signing = 0.0

    async def pass_once(self, conn: Any, stop: asyncio.Event | None = None) -> int:
        """Leaves appended (the head is signed at most every CHECKPOINT_MIN_SECONDS).

        Batch by batch, each its own transaction, until the queue is empty or
        `stop` is set: a large backlog never holds up a SIGTERM for longer
        than one batch.
        """
        appended = 0
        while stop is None or not stop.is_set():
            batch = await evidence_log.sequence(conn)
            if batch is None or batch.leaves == 0:
                break
            appended += batch.leaves
        if self.signer is None or time.monotonic() < self.next_signing:
            return appended
        size, _ = await evidence_log.head(conn)
        if size == self.signed_size:
            return appended
        try:
            previous = evidence_log.published(self.directory, self.signer)
            note = await evidence_log.checkpoint(conn, self.signer, previous)
            evidence_log.publish(note, self.directory, size)
        except (evidence_log.LogForked, ValueError) as exc:
            # never sign a tree that does not extend what we published
            log.error("checkpoint NOT signed", extra={"ctx": {"problem": str(exc)}})
            return appended
        self.signed_size = size
        self.next_signing = time.monotonic() + CHECKPOINT_MIN_SECONDS
        log.info("checkpoint signed", extra={"ctx": {"tree_size": size, "appended": appended}})
        return appended


async def run_sequencer(
    settings: Settings, database_url: str, signer: Signer | None, stop: asyncio.Event
) -> None:
    """Pass every `log_interval` seconds until `stop`; a failed pass is retried on
    a new connection at the next interval (the database may be restarting)."""
    keeper = LogKeeper(signer, settings)
    conn: Any = None
    try:
        while not stop.is_set():
            try:
                if conn is None or conn.is_closed():
                    conn = await connect(database_url)
                await keeper.pass_once(conn, stop)
            except Exception:
                log.warning("sequencing pass failed; retrying", exc_info=True)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                conn = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.log_interval)
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


def child_environment(settings: Settings, database_url: str) -> dict[str, str]:
    """The child's environment: the parent's, with the database it resolved (an
    embedded server stays the parent's) and the log settings it loaded."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "JW_LOG_INTERVAL": repr(settings.log_interval),
        "JW_LOG_CHECKPOINT_DIR": str(settings.log_checkpoint_dir.absolute()),
        "JW_LOG_SIGNING_KEY_FILE": settings.log_signing_key_file,
    }
    if settings.config_path is not None:
        env["JW_CONFIG"] = str(settings.config_path.absolute())
    env.pop("NOTIFY_SOCKET", None)  # systemd hears from the daemon, not from its child
    return env


class SequencerProcess:
    """The daemon's sequencer child: started, restarted when it exits, stopped."""

    def __init__(self, settings: Settings, database_url: str) -> None:
        self.env = child_environment(settings, database_url)
        self.proc: asyncio.subprocess.Process | None = None
        self.stopping = False

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "reconciler.sequencer",
            env=self.env,
            preexec_fn=die_with_parent,
        )

    async def supervise(self) -> None:
        """Keep a child running until `stop()` (or until cancelled: the child goes too)."""
        delay = RESTART_MIN_SECONDS
        try:
            while not self.stopping:
                began = time.monotonic()
                await self.start()
                assert self.proc is not None
                code = await self.proc.wait()
                if self.stopping:
                    return
                if time.monotonic() - began >= RESTART_MAX_SECONDS:
                    delay = RESTART_MIN_SECONDS
                log.error(
                    "log sequencer exited; starting it again",
                    extra={"ctx": {"code": code, "in_seconds": delay}},
                )
                await asyncio.sleep(delay)
                delay = min(2 * delay, RESTART_MAX_SECONDS)
        finally:
            await asyncio.shield(self._end_child())

    async def stop(self) -> None:
        """Stop the child (it finishes its batch; SIGKILL after STOP_SECONDS);
        `supervise()` then returns."""
        self.stopping = True
        await self._end_child()

    async def _end_child(self) -> None:
        """SIGTERM, then SIGKILL after STOP_SECONDS."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), STOP_SECONDS)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def _main(env: Mapping[str, str]) -> int:
    settings = load_settings(env=env)
    signer = evidence_log.load_signer(settings.log_signing_key_file, env)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("log sequencer started", extra={"ctx": {"interval": settings.log_interval}})
    await run_sequencer(settings, env["DATABASE_URL"], signer, stop)
    return 0


if __name__ == "__main__":
    logs.configure()
    sys.exit(serve.run(_main(os.environ)))
