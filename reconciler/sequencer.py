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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from shared import logs, serve
from shared.child_process import die_with_parent
from shared.db.connect import connect
from shared.ledger import log as evidence_log
from shared.settings import Settings
from shared.tlog import Signer, Verifier

log = logging.getLogger("jobwarden.sequencer")

# Checkpoints are signed at most this often (and only when the log grew):
# each is a file and a row kept for good, so every 5 s would be 17,280 a day.
CHECKPOINT_MIN_SECONDS = 60.0
# A child that exits is started again after this long, doubled on each quick
# failure up to RESTART_MAX_SECONDS; one that ran that long starts over.
RESTART_MIN_SECONDS = 1.0
RESTART_MAX_SECONDS = 60.0
# SIGTERM: the batch in progress finishes (one transaction); past this it is killed.
STOP_SECONDS = 10.0
# The watchdog (log_watchdog_seconds): a child that has not said it is still
# passing for that long is killed and started again. It says so when it
# starts, before each connection attempt and after every batch and pass, so
# only one of those stuck that long trips it: a stopped process, a query
# waiting on a lock or a dead peer, or a batch too slow for the setting.
# Killing it mid-batch loses nothing (each batch is one transaction). Until
# its first word a child gets at least STARTUP_SECONDS (a loaded host
# starting an interpreter).
STARTUP_SECONDS = 10.0
HEARTBEAT_FD_VARIABLE = "JW_SEQUENCER_HEARTBEAT_FD"
# How the child's connection shows in pg_stat_activity.
APPLICATION_NAME = "jobwarden-sequencer"
# What the child keeps of the daemon's environment: the interpreter's, libpq's
# (PG*: TLS files, a password file), logging, and the inline signing key;
# never the provider credentials or the console's login.
PASSED_ON = ("PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "TZ", "JW_LOG_LEVEL")
PASSED_ON_PREFIXES = ("PG",)
SIGNING_KEY_VARIABLE = "JW_LOG_SIGNING_KEY"
# comma-separated, as an operator sets it (shared/settings.py refuses a comma in a name)
PREVIOUS_KEYS_VARIABLE = "JW_LOG_PREVIOUS_KEY_FILES"


@dataclass(frozen=True)
class LogSettings:
    """The settings the sequencer uses, and all the child is given."""

    interval: float
    checkpoint_dir: Path
    signing_key_file: str = ""
    # the daemon's watchdog; the child bounds its idle transactions by it
    watchdog: float = Settings.log_watchdog_seconds
    # the public keys of signing keys rotated out (log_previous_key_files)
    previous_key_files: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: Settings) -> LogSettings:
        return cls(
            settings.log_interval,
            settings.log_checkpoint_dir,
            settings.log_signing_key_file,
            settings.log_watchdog_seconds,
            settings.log_previous_key_files,
        )


class LogKeeper:
    """One pass: append what was committed since the last, and sign the head when due."""

    def __init__(
        self, signer: Signer | None, directory: Path, previous_keys: Sequence[Verifier] = ()
    ) -> None:
        self.signer = signer
        self.directory = directory
        # a checkpoint published under a key rotated out is held to as one of ours
        self.previous_keys = tuple(previous_keys)
        self.signed_size = -1
        self.next_signing = 0.0

    async def pass_once(self, conn: Any, stopped: Callable[[], bool] = lambda: False) -> int:
        """Leaves appended (the head is signed at most every CHECKPOINT_MIN_SECONDS).

        Batch by batch, each its own transaction, until the queue is empty or
        `stopped()` says so (asked between batches): a large backlog never
        holds up a SIGTERM for longer than one batch.
        """
        appended = await evidence_log.sequence_all(conn, stopped=stopped)
        if self.signer is None or time.monotonic() < self.next_signing:
            return appended
        size, _ = await evidence_log.head(conn)
        if size == self.signed_size:
            return appended
        try:
            previous = evidence_log.published(self.directory, self.signer, self.previous_keys)
            note = await evidence_log.checkpoint(conn, self.signer, previous, self.previous_keys)
            # the size signed, perhaps past the head read above
            size = evidence_log.publish(note, self.directory).size
        except (evidence_log.LogForked, ValueError) as exc:
            # never sign a tree that does not extend what we published
            log.error("checkpoint NOT signed", extra={"ctx": {"problem": str(exc)}})
            return appended
        self.signed_size = size
        self.next_signing = time.monotonic() + CHECKPOINT_MIN_SECONDS
        log.info("checkpoint signed", extra={"ctx": {"tree_size": size, "appended": appended}})
        return appended


# Keepalives on the sequencer's session, in seconds: the server notices a peer
# gone silent (its host lost, a partition) in about a minute, not the system's
# two hours.
KEEPALIVES = {"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10"}


def named_connection(database_url: str, idle_seconds: float | None = None) -> str:
    """The URL with this process's application_name and session bounds (asyncpg
    passes unknown query parameters on as server settings): operators and
    benchmarks can tell the sequencer's session apart.

    `idle_seconds` (the watchdog's, which one batch must fit in anyway) ends a
    session left idle inside its transaction: one whose client vanished without
    the server seeing a close held the sequencing lock, and every sequencer
    appended nothing, for as long as the server kept it (a reviewer's run: the
    queue and the log stood still; the watchdog saw passes complete).
    """
    parts = urlsplit(database_url)
    ours = {"application_name", "idle_in_transaction_session_timeout", *KEEPALIVES}
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in ours]
    query.append(("application_name", APPLICATION_NAME))
    if idle_seconds is not None:
        query.append(("idle_in_transaction_session_timeout", f"{round(idle_seconds * 1000)}"))
        query.extend(KEEPALIVES.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


class Heartbeat:
    """The child's "still passing": a byte down the daemon's pipe, never blocking."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        if fd is not None:
            try:
                os.set_blocking(fd, False)
            except OSError:  # not open: a copied environment, not the daemon's pipe
                self.fd = None

    def beat(self) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, b".")
        except BlockingIOError:
            pass  # the daemon has not read the last beats yet: it knows we live
        except OSError:
            self.fd = None  # the daemon is gone (and this child goes with it)


async def run_sequencer(
    settings: LogSettings,
    database_url: str,
    signer: Signer | None,
    stop: asyncio.Event,
    heartbeat: Heartbeat | None = None,
    previous_keys: Sequence[Verifier] = (),
) -> None:
    """Pass every `interval` seconds until `stop`; a failed pass is retried on a
    new connection at the next interval (the database may be restarting).
    `heartbeat` beats after every batch and every pass (the daemon's watchdog)."""
    keeper = LogKeeper(signer, settings.checkpoint_dir, previous_keys)
    url = named_connection(database_url, settings.watchdog)
    beats = heartbeat or Heartbeat(None)

    def stopped() -> bool:
        """Asked between batches: the child beats each time."""
        beats.beat()
        return stop.is_set()

    conn: Any = None
    try:
        while not stop.is_set():
            try:
                if conn is None or conn.is_closed():
                    beats.beat()  # a connection attempt may take a while, not forever
                    conn = await connect(url)
                await keeper.pass_once(conn, stopped)
            except Exception:
                log.warning("sequencing pass failed; retrying", exc_info=True)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                conn = None
            beats.beat()  # a pass done, whatever it found
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.interval)
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


def child_environment(
    settings: LogSettings, database_url: str, parent: int, env: Mapping[str, str]
) -> dict[str, str]:
    """The child's whole environment: the database the daemon resolved (an
    embedded server stays the daemon's), its log settings, and PASSED_ON."""
    kept = {k: v for k, v in env.items() if k in PASSED_ON or k.startswith(PASSED_ON_PREFIXES)}
    if SIGNING_KEY_VARIABLE in env:
        kept[SIGNING_KEY_VARIABLE] = env[SIGNING_KEY_VARIABLE]
    key_file = settings.signing_key_file
    if settings.previous_key_files:
        kept[PREVIOUS_KEYS_VARIABLE] = ",".join(
            str(Path(name).absolute()) for name in settings.previous_key_files
        )
    return {
        **kept,
        "DATABASE_URL": database_url,
        "JW_LOG_INTERVAL": repr(settings.interval),
        "JW_LOG_WATCHDOG_SECONDS": repr(settings.watchdog),
        "JW_LOG_CHECKPOINT_DIR": str(settings.checkpoint_dir.absolute()),
        "JW_LOG_SIGNING_KEY_FILE": str(Path(key_file).absolute()) if key_file else "",
        "JW_SEQUENCER_PARENT": str(parent),
    }


class SequencerProcess:
    """The daemon's sequencer child: started, started again when it exits, stopped."""

    def __init__(self, settings: LogSettings, database_url: str) -> None:
        self.env = child_environment(settings, database_url, os.getpid(), os.environ)
        self.proc: asyncio.subprocess.Process | None = None
        self.stopped = asyncio.Event()
        self.watchdog_seconds = settings.watchdog
        self.last_beat = time.monotonic()
        self.heard = False  # from the running child, since it started
        self._beats: int | None = None  # our end of the child's heartbeat pipe

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    async def start(self) -> None:
        # -P: the working directory (the service's writable state) is not on
        # sys.path. The child sets PR_SET_PDEATHSIG itself: no preexec_fn in a
        # daemon that has threads.
        self._close_beats()
        readable, writable = os.pipe()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-P",
                "-m",
                "reconciler.sequencer",
                env={**self.env, HEARTBEAT_FD_VARIABLE: str(writable)},
                pass_fds=(writable,),
            )
        except BaseException:
            os.close(readable)
            raise
        finally:
            os.close(writable)  # the child's end now; a dead child closes the pipe
        self._beats = readable
        os.set_blocking(readable, False)
        self.last_beat = time.monotonic()
        self.heard = False
        asyncio.get_running_loop().add_reader(readable, self._heard)

    def _heard(self) -> None:
        if self._beats is None:
            return
        try:
            if os.read(self._beats, 4096):
                self.last_beat = time.monotonic()
                self.heard = True
                return
        except BlockingIOError:
            return
        self._close_beats()  # end of file: the child is gone, its exit tells the rest

    def _close_beats(self) -> None:
        if self._beats is not None:
            asyncio.get_running_loop().remove_reader(self._beats)
            os.close(self._beats)
            self._beats = None

    async def supervise(self) -> None:
        """Keep a child running until `stop()` (or cancellation): the child goes too."""
        delay = RESTART_MIN_SECONDS
        try:
            while not self.stopped.is_set():
                began = time.monotonic()
                try:
                    await self.start()
                except OSError:
                    log.exception("could not start the log sequencer")
                    code: int | None = None
                else:
                    code = await self._exit_or_stop()
                if self.stopped.is_set():
                    return
                if time.monotonic() - began >= RESTART_MAX_SECONDS:
                    delay = RESTART_MIN_SECONDS
                log.log(
                    logging.WARNING if code == 0 else logging.ERROR,
                    "log sequencer exited; starting it again",
                    extra={"ctx": {"code": code, "in_seconds": delay}},
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopped.wait(), delay)
                delay = min(2 * delay, RESTART_MAX_SECONDS)
        finally:
            try:
                await asyncio.shield(self._end_child())
            finally:
                self._close_beats()

    def stop(self) -> None:
        """Ask for the child's end; `supervise()` then ends it (its batch finishes,
        SIGKILL after STOP_SECONDS) and returns."""
        self.stopped.set()

    async def _exit_or_stop(self) -> int | None:
        """The child's exit code, or None once `stop()` was called.

        A child silent for `watchdog_seconds` is killed (SIGKILL: one that is
        stuck would not finish its batch on SIGTERM either) and its exit
        code returned, so it is started again like one that died.
        """
        proc = self.proc
        assert proc is not None
        exited = asyncio.ensure_future(proc.wait())
        stopping = asyncio.ensure_future(self.stopped.wait())
        try:
            while not (exited.done() or stopping.done()):
                self._heard()  # beats already in the pipe, even if our own loop stalled
                silent, allowed = self._silence()
                if silent >= allowed:
                    log.error(
                        "log sequencer stopped passing; killing it",
                        extra={"ctx": {"pid": proc.pid, "silent_seconds": round(silent, 1)}},
                    )
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    return await proc.wait()
                await asyncio.wait(
                    {exited, stopping},
                    timeout=allowed - silent,
                    return_when=asyncio.FIRST_COMPLETED,
                )
        finally:
            for waiting in (exited, stopping):
                waiting.cancel()
        return None if self.stopped.is_set() or not exited.done() else exited.result()

    def _silence(self) -> tuple[float, float]:
        """Seconds since the child last spoke, and how long it may stay silent."""
        allowed = (
            self.watchdog_seconds if self.heard else max(self.watchdog_seconds, STARTUP_SECONDS)
        )
        return time.monotonic() - self.last_beat, allowed

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


def child_settings(env: Mapping[str, str]) -> LogSettings:
    """What child_environment handed over, the watchdog included (it was dropped,
    so the child's session bound stayed the default whatever the operator set)."""
    return LogSettings(
        float(env["JW_LOG_INTERVAL"]),
        Path(env["JW_LOG_CHECKPOINT_DIR"]),
        env.get("JW_LOG_SIGNING_KEY_FILE", ""),
        float(env.get("JW_LOG_WATCHDOG_SECONDS", Settings.log_watchdog_seconds)),
        tuple(name for name in env.get(PREVIOUS_KEYS_VARIABLE, "").split(",") if name),
    )


async def _main(env: Mapping[str, str]) -> int:
    settings = child_settings(env)
    signer = evidence_log.load_signer(settings.signing_key_file, env)
    previous_keys = evidence_log.load_previous_keys(settings.previous_key_files)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    fd = env.get(HEARTBEAT_FD_VARIABLE)
    heartbeat = Heartbeat(int(fd) if fd and fd.isdigit() else None)
    heartbeat.beat()  # started: the watchdog's own clock runs from here
    log.info("log sequencer started", extra={"ctx": {"interval": settings.interval}})
    await run_sequencer(settings, env["DATABASE_URL"], signer, stop, heartbeat, previous_keys)
    return 0


def main() -> int:
    die_with_parent()  # here, not in a preexec_fn: the daemon has threads
    if str(os.getppid()) != os.environ.get("JW_SEQUENCER_PARENT"):
        return 0  # the daemon died before the line above took effect
    logs.configure()
    return serve.run(_main(os.environ))


if __name__ == "__main__":
    sys.exit(main())
