"""`jobwarden receiver --workers N`: N receiver processes on one port, one supervisor.

One receiver process is one core: Python verifies signatures and parses
events on the event loop. With N workers, each child binds the port with
SO_REUSEPORT and the kernel spreads connections among them; the database
stays the only shared state (dedupe is its UNIQUE index, group commit is per
process), so nothing changes for correctness.

The supervisor speaks systemd's notify protocol both ways: each child talks
to it exactly as it would to systemd (NOTIFY_SOCKET points at the
supervisor's own datagram socket; shared/sdnotify.py is unchanged), and it
tells systemd READY=1 once every child is listening, WATCHDOG=1 only while
every child's event loop has pinged recently, STOPPING=1 when it drains. A
child that dies or wedges (no ping for two intervals; it is killed) is
started again; more than RESTART_BURST restarts in RESTART_WINDOW_SECONDS
means something is wrong beyond one process, and the supervisor stops with
an error so systemd's own restart policy and logs take over. SIGTERM/SIGINT
are passed on: each child stops accepting, finishes its requests and
commits its queue before the supervisor exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shared import sdnotify
from shared.child_process import die_with_parent

logger = logging.getLogger(__name__)

# Children's watchdog interval when systemd set none: half of it between
# pings, so a loop wedged for this long is noticed.
DEFAULT_CHILD_WATCHDOG_SECONDS = 20.0
RESTART_BURST = 5
RESTART_WINDOW_SECONDS = 60.0
# How long the supervisor blocks waiting for a message before looking at its
# children again; a signal interrupts the wait at once.
TICK_SECONDS = 0.5
MAX_WORKERS = 64
# A child's drain: uvicorn's graceful shutdown (5 s) plus the ingest queue's
# own bound (10 s), with slack; past it the child is killed.
DRAIN_SECONDS = 30.0


@dataclass
class _Child:
    index: int
    proc: subprocess.Popen[bytes]
    ready: bool = False
    last_ping: float = field(default_factory=time.monotonic)


class Supervisor:
    """Starts and watches the children; `run()` returns the process exit code."""

    def __init__(self, workers: int, child_argv: Sequence[str]) -> None:
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"--workers must be between 1 and {MAX_WORKERS}, got {workers}")
        self.workers = workers
        self.child_argv = list(child_argv)
        self.children: dict[int, _Child] = {}  # by pid
        self.restarts: list[float] = []
        self.stopping = False
        self.announced_ready = False
        upstream = sdnotify.watchdog_interval_seconds()
        self.watchdog_seconds = 2 * upstream if upstream else DEFAULT_CHILD_WATCHDOG_SECONDS
        self.upstream_watchdog = upstream is not None
        self.last_upstream_ping = 0.0

    def run(self) -> int:
        with tempfile.TemporaryDirectory(prefix="jw-receiver-") as tmp:
            self.socket_path = str(Path(tmp) / "notify")
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                sock.bind(self.socket_path)
                sock.settimeout(TICK_SECONDS)
                self.sock = sock
                previous = {
                    signum: signal.signal(signum, self._on_signal)
                    for signum in (signal.SIGTERM, signal.SIGINT)
                }
                try:
                    for index in range(self.workers):
                        self._spawn(index)
                    return self._loop()
                finally:
                    for signum, handler in previous.items():
                        signal.signal(signum, handler)
                    self._stop_all()

    # ------------------------------------------------------------ children

    def _spawn(self, index: int) -> None:
        env = {
            **os.environ,
            "NOTIFY_SOCKET": self.socket_path,
            "WATCHDOG_USEC": str(int(self.watchdog_seconds * 1_000_000)),
            "JW_RECEIVER_WORKER": str(index),
            # a child is one worker, whatever the supervisor was started with
            "JW_RECEIVER_WORKERS": "1",
        }
        env.pop("WATCHDOG_PID", None)  # the child's pid is not known before it starts
        proc = subprocess.Popen(  # noqa: S603 -- our own argv
            self.child_argv, env=env, preexec_fn=die_with_parent
        )
        self.children[proc.pid] = _Child(index, proc)
        logger.info("receiver worker started", extra={"ctx": {"worker": index, "pid": proc.pid}})

    def _loop(self) -> int:
        while True:
            self._receive()
            if self.stopping:
                return self._drain()
            failed = self._reap() or self._wedged()
            for child in failed:
                if not self._may_restart():
                    logger.error(
                        "receiver workers keep failing: stopping",
                        extra={"ctx": {"restarts": len(self.restarts)}},
                    )
                    self.stopping = True
                    self._drain()
                    return 1
                self._spawn(child.index)
            self._notify_upstream()

    def _receive(self) -> None:
        try:
            data, ancillary, _flags, _addr = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        except (TimeoutError, InterruptedError):
            return
        pid = _sender_pid(ancillary)
        child = self.children.get(pid) if pid is not None else None
        if child is None:
            return
        for line in data.decode("utf-8", "replace").splitlines():
            if line == "READY=1":
                child.ready = True
                child.last_ping = time.monotonic()
            elif line == "WATCHDOG=1":
                child.last_ping = time.monotonic()

    def _reap(self) -> list[_Child]:
        gone = [c for c in self.children.values() if c.proc.poll() is not None]
        for child in gone:
            del self.children[child.proc.pid]
            logger.error(
                "receiver worker exited",
                extra={"ctx": {"worker": child.index, "code": child.proc.returncode}},
            )
        return gone

    def _wedged(self) -> list[_Child]:
        limit = time.monotonic() - 2 * self.watchdog_seconds
        stuck = [c for c in self.children.values() if c.ready and c.last_ping < limit]
        for child in stuck:
            logger.error(
                "receiver worker stopped answering: killed", extra={"ctx": {"worker": child.index}}
            )
            child.proc.kill()
            child.proc.wait()
            del self.children[child.proc.pid]
        return stuck

    def _may_restart(self) -> bool:
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if t > now - RESTART_WINDOW_SECONDS]
        self.restarts.append(now)
        return len(self.restarts) <= RESTART_BURST

    # ------------------------------------------------------------ upstream

    def _notify_upstream(self) -> None:
        everyone = len(self.children) == self.workers
        if not self.announced_ready and everyone and all(c.ready for c in self.children.values()):
            self.announced_ready = True
            sdnotify.notify("READY=1")
            logger.info("receiver workers listening", extra={"ctx": {"workers": self.workers}})
        if not self.upstream_watchdog:
            return
        now = time.monotonic()
        fresh = now - self.watchdog_seconds
        healthy = everyone and all(c.last_ping >= fresh for c in self.children.values())
        if healthy and now - self.last_upstream_ping >= self.watchdog_seconds / 4:
            sdnotify.notify("WATCHDOG=1")
            self.last_upstream_ping = now

    # ------------------------------------------------------------ stopping

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def _drain(self) -> int:
        sdnotify.notify("STOPPING=1")
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)
        codes = [_wait_or_kill(child.proc) for child in list(self.children.values())]
        self.children.clear()
        # -SIGTERM: a child still starting (nothing served, nothing queued) when the stop came
        return 0 if all(code in (0, -signal.SIGTERM) for code in codes) else 1

    def _stop_all(self) -> None:
        """Whatever happened, no child outlives the supervisor."""
        for child in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                child.proc.kill()
            child.proc.wait()
        self.children.clear()


def _wait_or_kill(proc: subprocess.Popen[bytes]) -> int:
    """A draining child's exit code; one that outlasts DRAIN_SECONDS is killed."""
    try:
        return proc.wait(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        logger.error(
            "receiver worker did not drain in time: killed", extra={"ctx": {"pid": proc.pid}}
        )
        proc.kill()
        return proc.wait()


def _sender_pid(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= 4:
            return int.from_bytes(data[:4], sys.byteorder, signed=True)
    return None


# Options the supervisor has acted on for its children: the worker count, and
# the database choice (the children get the URL it resolved, so an embedded
# server is started once, by the supervisor).
_WITH_VALUE = ("--workers", "--database")
_FLAGS = ("--embedded",)


def child_argv(argv: Sequence[str]) -> list[str]:
    """This command line for a child: one worker on a shared port, database already chosen."""
    out: list[str] = [sys.executable, "-m", "shared.cli"]
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _WITH_VALUE:
            skip = True
        elif arg in _FLAGS or arg.startswith(tuple(f"{o}=" for o in _WITH_VALUE)):
            continue
        else:
            out.append(arg)
    return [*out, "--reuse-port"]
