"""Webhook receiver benchmark: committed events/s against a bare Starlette endpoint.

    .venv/bin/python -m bench.receiver            # full run, a few minutes
    .venv/bin/python -m bench.receiver --quick    # 2 s rounds, for a smoke test

What it does, in one run on this machine:

1. pre-generates distinct Standard Webhooks deliveries (unique `webhook-id`,
   signed with a fresh timestamp right before the run);
2. drives, with wrk, a bare Starlette POST endpoint that reads the body and
   answers 204 and the real receiver (`receiver.main.run_receiver`, JSON logs
   into a file) against a fresh database, both uvicorn with one worker,
   alternately in rounds so that background load hits both alike. The
   receiver's events name jobs nobody knows yet: verified, deduplicated,
   committed (the issue's definition). Every 200 is a committed event, so
   req/s is committed events/s. Both servers run on the same stack as
   production (shared/serve.py: httptools on uvloop when installed); each
   reports the stack uvicorn loaded, the report prints both, and the run
   stops with an error, printing no ratio, if they differ. Then, in
   alternating rounds of their own, the bare endpoint and a receiver that
   has only ever been quiet take one delivery at a time (wrk -c1): each
   event its own group commit, its latency and PostgreSQL's work per event.
   A third server joins the alternating rounds, the floor (`floor.serve`):
   only what no durable receiver may skip (the HMAC, a replay window, a
   unique-key INSERT committed before the answer, group commit), as plain
   ASGI (bench/floor.py), with a request set of its own; what it reaches
   shows how much room this stack and machine leave a receiver. A fourth
   joins them: the floor's handler in front of the receiver's own write
   (`floor.ReceiverWrite`: its group-commit writer, statement and commit), so
   the receiver's distance from the floor splits into its handler's part (the
   receiver against this server) and its write's (this server against the
   floor);
3. then events for the jobs of 1,000 existing operations: each is also an
   observation and a reconciler wake-up, in the same commit;
4. sends a 10,000-delivery mixed load (20 % redeliveries of earlier events,
   5 % forged signatures, shuffled, 32 at a time) and checks that exactly the
   unique valid events are stored, with no forged one among them;
5. for comparison, the same receiver with group commit off: one event per
   transaction, as many transactions in flight as the pool allows;
6. the evidence log's cost: in every round, the receiver also runs with the
   log's triggers disabled (a sequencer appends every second throughout);
7. `receiver --workers 2` (the real supervisor, SO_REUSEPORT) alternating in
   rounds with the bare endpoint served the same way, so that row's ratio
   compares like with like; and each side at its faster configuration.

Every row also shows the CPU each process group spent per answered request
(the server and its workers, PostgreSQL, wrk), read from /proc: on two
shared cores, where a request's cost lands says more than its rate alone.
Also how busy the server was (its CPU over wall time), how long it waited
for a core (its run-queue time from /proc schedstat, over wall time) and, for
the one-process receiver, its group commit (events per batch, milliseconds
from a batch's start to its COMMIT, from its own /metrics): together they say
whether a row was bound by the server's CPU, by the machine's cores or by
waiting for commits. Every figure spans the load itself: measuring starts
when wrk has loaded its requests and ends when it reports.

Load generator: wrk (`apt-get install -y wrk` on Debian/Ubuntu). Its Lua
script loads the pre-signed requests and hands out one per request.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench import floor
from bench.evidence_log import set_logging
from bench.harness import CpuMeter, WaitMeter, bench_database, free_port, our_postgres_pids
from bench.stack import describe, read_stack, record_stack, require_same_stack
from shared.db.connect import connect
from shared.ledger import log
from shared.serve import Stack
from shared.serve import run as run_loop
from shared.signatures import sign_standard_webhooks

if TYPE_CHECKING:
    from shared.providers.description import ProviderDescription, WebhookSpec

SECRET = "whsec_" + base64.b64encode(b"jobwarden-bench-signing-key-0001").decode()
FORGED_SECRET = "whsec_" + base64.b64encode(b"not-the-secret-an-attacker-guess").decode()
PROVIDER = "sim"
PATH = f"/webhooks/{PROVIDER}"

# Load shape: one wrk thread (the machine has two cores, the server gets the
# other) and 32 keep-alive connections, enough concurrency to saturate one
# uvicorn worker without queueing far past it.
WRK_THREADS = 1
WRK_CONNECTIONS = 32
# A quiet receiver: one delivery at a time, each its own batch, so its latency
# and PostgreSQL's work per event are those of a one-event group commit.
QUIET_CONNECTIONS = 1
# The bare endpoint and the receiver run alternately, in rounds, so that a
# change in background load during the run hits both alike.
ROUNDS = 3
# `receiver --workers N` on this machine's cores, compared with one process.
WORKERS = 2
ROUND_SECONDS = 5
WARMUP_SECONDS = 2
# More requests than the fastest receiver can take in one phase, so no event
# id is ever sent twice in the throughput runs (the run fails if one was: a
# request set wraps around when a server outruns it, and a repeated id costs
# a server less than a new one).
REQUESTS_PER_PHASE = 200_000
# The floor answers three times as fast as the receiver: a set of its own.
FLOOR_REQUESTS = 3 * REQUESTS_PER_PHASE
# The floor's handler on the receiver's write: up to twice as fast.
FLOOR_WRITE_REQUESTS = 2 * REQUESTS_PER_PHASE
# Operations the throughput events belong to (each gets many events).
OPERATIONS = 1000
MIXED_TOTAL = 10_000
MIXED_DUPLICATE_SHARE = 0.20
MIXED_FORGED_SHARE = 0.05
MIXED_MAX_SECONDS = 60  # bound on the mixed run, whatever the measured rate
SERVER_START_TIMEOUT = 20.0

# Both scripts load the signed deliveries the same way: one request per line of
# the file named by args[1] ("id<TAB>timestamp<TAB>signature<TAB>body"), POSTed
# to args[2].
LOAD_DELIVERIES = r"""
local requests = {}
local count = 0

local function load_deliveries(args)
  for line in io.lines(args[1]) do
    local id, ts, sig, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    count = count + 1
    requests[count] = wrk.format("POST", args[2], {
      ["Content-Type"] = "application/json",
      ["webhook-id"] = id,
      ["webhook-timestamp"] = ts,
      ["webhook-signature"] = sig,
    }, body)
  end
  -- loading takes seconds and wrk sends nothing meanwhile: the measuring
  -- starts here (run_wrk), not when wrk does
  io.write("WRK_LOADED\n")
  io.flush()
end
"""

LUA = (
    LOAD_DELIVERIES
    + r"""
local index = 0

function init(args)
  load_deliveries(args)
  -- where an earlier round stopped, so every round sends events not seen yet
  index = (tonumber(args[3]) or 0) % count
end

function request()
  index = index % count + 1
  return requests[index]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\"requests\":%d,\"duration_us\":%d,\"p50_us\":%d,\"p99_us\":%d," ..
    "\"non_2xx\":%d,\"connect\":%d,\"read\":%d,\"write\":%d,\"timeout\":%d}\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
"""
)


# Sends each line of the file exactly once, then harmless GET /healthz fillers
# until every POST has been answered; tallies the answers by kind.
MIXED_LUA = (
    LOAD_DELIVERIES
    + r"""
local index = 0
local filler
answered = 0
stored = 0
duplicate = 0
refused = 0
other = 0
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  load_deliveries(args)
  filler = wrk.format("GET", "/healthz")
end

-- wrk calls request() once before the run and does not send that request;
-- a filler in slot 0 absorbs that call (sent and ignored if it ever is).
function request()
  local r = requests[index] or filler
  index = index + 1
  return r
end

function response(status, headers, body)
  if body and body:find('"status":"ok"', 1, true) then
    return
  end
  answered = answered + 1
  if status == 200 and body:find('"stored"', 1, true) then
    stored = stored + 1
  elseif status == 200 and body:find('"duplicate"', 1, true) then
    duplicate = duplicate + 1
  elseif status == 401 then
    refused = refused + 1
  else
    other = other + 1
  end
  if answered >= count then
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local t = threads[1]
  io.write(string.format(
    "WRK_MIXED {\"answered\":%d,\"stored\":%d,\"duplicate\":%d,\"refused\":%d," ..
    "\"other\":%d,\"duration_us\":%d}\n",
    t:get("answered"), t:get("stored"), t:get("duplicate"), t:get("refused"), t:get("other"),
    summary.duration))
end
"""
)


@dataclass(frozen=True)
class CommitTotals:
    """The receiver's group-commit counters (or their growth over a run)."""

    batches: float
    events: float
    seconds: float

    def __sub__(self, earlier: CommitTotals) -> CommitTotals:
        return CommitTotals(
            self.batches - earlier.batches,
            self.events - earlier.events,
            self.seconds - earlier.seconds,
        )

    def __add__(self, other: CommitTotals) -> CommitTotals:
        return CommitTotals(
            self.batches + other.batches,
            self.events + other.events,
            self.seconds + other.seconds,
        )


NO_COMMITS = CommitTotals(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class LoadResult:
    name: str
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    # CPU seconds each group used during the run: "server" (the measured
    # server and its worker processes), "postgres" (our databases' backends
    # and the server's shared processes), "wrk" (the load generator)
    cpu: Mapping[str, float] = field(default_factory=dict)
    # The group commit during the run, from a one-process receiver's /metrics
    # (zero for the bare endpoint and for several workers, whose scrape
    # would reach one worker only).
    commit: CommitTotals = NO_COMMITS
    # Seconds the server's processes waited for a core during the run.
    server_wait: float = 0.0

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds


@dataclass(frozen=True)
class Series:
    """Interleaved runs of one target: throughput over all of them, median latencies."""

    name: str
    runs: tuple[LoadResult, ...]

    @property
    def requests(self) -> int:
        return sum(r.requests for r in self.runs)

    @property
    def per_second(self) -> float:
        return self.requests / sum(r.seconds for r in self.runs)

    @property
    def p50_ms(self) -> float:
        return statistics.median(r.p50_ms for r in self.runs)

    @property
    def p99_ms(self) -> float:
        return statistics.median(r.p99_ms for r in self.runs)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.runs)

    def cpu_us_per_request(self, group: str) -> float:
        """CPU microseconds `group` spent per completed request, over all runs."""
        used = sum(r.cpu.get(group, 0.0) for r in self.runs)
        return used / max(self.requests, 1) * 1e6

    @property
    def server_busy(self) -> float:
        """The server's CPU over the runs' wall time: 1.0 is one core kept busy."""
        return sum(r.cpu.get("server", 0.0) for r in self.runs) / sum(r.seconds for r in self.runs)

    @property
    def server_waiting(self) -> float:
        """The server's time waiting for a core over the runs' wall time (0 to 1 per
        process): what busy lacks of 1.0 beyond this was idle, waiting for work."""
        return sum(r.server_wait for r in self.runs) / sum(r.seconds for r in self.runs)

    @property
    def commit(self) -> CommitTotals:
        return sum((r.commit for r in self.runs), NO_COMMITS)

    @property
    def batch_events(self) -> float | None:
        """Events per group-commit batch, when the server reported its commits."""
        commit = self.commit
        return commit.events / commit.batches if commit.batches else None

    @property
    def batch_ms(self) -> float | None:
        """Wall milliseconds from a batch's start to its COMMIT, on average."""
        commit = self.commit
        return commit.seconds / commit.batches * 1e3 if commit.batches else None


# --------------------------------------------------------------------- servers


def serve_bare(port: int, stack_file: Path, *, reuse_port: bool = False) -> None:
    """The baseline: a Starlette POST endpoint that reads the body and answers 204.

    Served by the same `serve_forever` and loop runner as the receiver, so both
    sides share parser and loop.
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from shared import heap
    from shared.serve import serve_forever

    async def accept(request: Request) -> Response:
        await request.body()
        return Response(status_code=204)

    async def healthz(request: Request) -> Response:
        return Response(status_code=204)

    @contextlib.asynccontextmanager
    async def settled(app: Starlette) -> AsyncIterator[None]:
        heap.settle()  # as the receiver does once started: the baseline is never the slower
        yield

    app = Starlette(
        routes=[
            Route("/webhooks/{provider}", accept, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ],
        lifespan=settled,
    )
    record_stack(stack_file)
    run_loop(serve_forever(app, "127.0.0.1", port, log_level="warning", reuse_port=reuse_port))


def bench_provider() -> ProviderDescription:
    """The provider the receiver serves the bench's deliveries as: the simulator's preset."""
    from shared.providers import load_preset

    return load_preset("simulator", {"JW_SIM_WEBHOOK_SECRET": SECRET})


def bench_webhooks() -> WebhookSpec:
    """`bench_provider`'s webhooks (its state map is the one `floor.ReceiverWrite` maps by)."""
    spec = bench_provider().webhooks
    assert spec is not None
    return spec


def serve_receiver(
    port: int, database_url: str, stack_file: Path, *, naive: bool = False, reuse_port: bool = False
) -> None:
    """The real receiver, exactly as `jobwarden receiver` runs it.

    `naive` turns group commit off: one event per transaction, with as many
    transactions in flight as the pool allows (like a handler doing its own
    INSERT and COMMIT on a pooled connection), everything else identical.
    """
    from unittest import mock

    from receiver.main import POOL_MAX_SIZE, run_receiver
    from receiver.webhooks import ingest
    from shared import logs
    from shared.settings import Settings

    if naive:
        # every connection but the shared pool's smallest (probes and the API)
        mock.patch.object(ingest, "WRITERS", POOL_MAX_SIZE - 2).start()
        mock.patch.object(ingest, "MAX_BATCH", 1).start()
    logs.configure()
    settings = Settings(receiver_port=port, providers={PROVIDER: bench_provider()})
    record_stack(stack_file)
    # as `jobwarden receiver` runs it (one of `--workers N` when reuse_port)
    run_loop(run_receiver(settings, database_url, reuse_port=reuse_port, settle_heap=True))


def serve_workers(port: int, database_url: str | None, stack_file: Path, role: str) -> int:
    """`WORKERS` processes of `role` sharing the port (SO_REUSEPORT) under the real
    supervisor of `jobwarden receiver --workers`: the receiver as it is deployed on
    several cores, and the bare endpoint served the same way."""
    from receiver.workers import Supervisor

    child = [sys.executable, "-m", "bench.receiver", "--serve", role, "--port", str(port)]
    child += ["--stack-file", str(stack_file), "--reuse-port"]
    if database_url is not None:
        child += ["--database-url", database_url]
    return Supervisor(WORKERS, child).run()


class Server:
    """A server in a child process (so it has a core to itself), stopped with SIGTERM."""

    def __init__(self, role: str, log: Path, database_url: str | None = None) -> None:
        # One process serving /metrics: a scrape sees all of its commits.
        self.reports_commits = role in ("receiver", "naive")
        self.port = free_port()
        self._stack_file = log.with_suffix(".stack.json")
        args = [sys.executable, "-m", "bench.receiver", "--serve", role, "--port", str(self.port)]
        args += ["--stack-file", str(self._stack_file)]
        if database_url is not None:
            args += ["--database-url", database_url]
        self._log = log.open("wb")
        self._proc = subprocess.Popen(args, stdout=self._log, stderr=self._log)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise SystemExit(f"server exited during startup; see {self._log.name}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code < 300:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"server did not start within {SERVER_START_TIMEOUT} s")

    def pids(self) -> list[int]:
        """The server's process and its descendants (a supervisor's workers)."""
        found, todo = [], [self._proc.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            with contextlib.suppress(OSError, ValueError):
                todo += map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
        return found

    @property
    def stack(self) -> Stack:
        """The parser and loop this server runs on (it wrote them when it started)."""
        return read_stack(self._stack_file)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._log.close()

    def __enter__(self) -> Server:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------- load


def signed_headers(
    event_id: str, timestamp: int, body: bytes, secret: str = SECRET
) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign_standard_webhooks(secret, event_id, timestamp, body),
    }


# States whose news wakes an operation holding its job id (a running job's does not).
ENDS = ("succeeded", "failed")


def event_body(job: str, state: str = "succeeded") -> bytes:
    return json.dumps({"type": f"job.{state}", "job_id": job, "state": state}).encode()


def write_requests(path: Path, prefix: str, count: int, *, matched: bool) -> None:
    """One pre-signed delivery per line: id, timestamp, signature, body (tab-separated).

    `matched` events name the jobs of the operations `prepare_operations`
    created, in turn: the full production path (an observation and a
    reconciler wake-up in the same commit). Unmatched ones name jobs nobody
    knows yet: verified, deduplicated, committed, nothing more.
    """
    timestamp = int(time.time())
    with path.open("w") as out:
        for i in range(count):
            event_id = f"{prefix}_{i}"
            job = job_of(i % OPERATIONS) if matched else f"job_unknown_{i}"
            # every matched event wakes its operation, as the target states
            # ("+ observation + wake-up"): news of a running job would not
            body = event_body(job, ENDS[i % 2] if matched else ("running", "succeeded")[i % 2])
            signature = sign_standard_webhooks(SECRET, event_id, timestamp, body)
            out.write(f"{event_id}\t{timestamp}\t{signature}\t{body.decode()}\n")


LOADED = "WRK_LOADED"


def wrk_report(
    url: str,
    script: Path,
    requests: Path,
    seconds: int,
    *extra: str,
    threads: int,
    marker: str,
    on_loaded: Callable[[int], None] | None = None,
    on_report: Callable[[], None] | None = None,
    connections: int = WRK_CONNECTIONS,
) -> dict[str, Any]:
    """Run wrk with one of our Lua scripts over `requests`; returns what it printed.

    The script prints one JSON line after `marker` when wrk is done; `extra`
    are further script arguments after the requests file and the path.
    `on_loaded(wrk's pid)` runs when the script has loaded its requests (wrk
    starts sending then), `on_report()` when the report line arrives (wrk has
    stopped sending and not yet exited): the window a measurement should span.
    """
    cmd = [
        *("wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s"),
        *("-s", str(script), url + PATH, "--", str(requests), PATH, *extra),
    ]
    report: dict[str, Any] | None = None
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as wrk:
        assert wrk.stdout is not None
        for line in wrk.stdout:
            if line.strip() == LOADED and on_loaded is not None:
                on_loaded(wrk.pid)
            elif line.startswith(f"{marker} ") and report is None:
                if on_report is not None:
                    on_report()
                report = json.loads(line.removeprefix(f"{marker} "))
    if wrk.returncode != 0 or report is None:
        raise SystemExit(f"wrk failed (exit {wrk.returncode}) or printed no {marker} line")
    return report


def run_wrk(
    name: str,
    server: Server,
    script: Path,
    requests: Path,
    seconds: int,
    start: int = 0,
    *,
    connections: int = WRK_CONNECTIONS,
) -> LoadResult:
    """One wrk run over the pre-signed requests, beginning at line `start`, on
    `connections` keep-alive connections.

    Also counts the CPU the server, PostgreSQL and wrk used meanwhile: the
    two cores are shared, so where a request's cost lands says more than
    its rate alone.
    """
    groups: dict[str, Callable[[], list[int]]] = {
        "server": server.pids,
        "postgres": our_postgres_pids,
    }
    meter = CpuMeter(groups)
    waits = WaitMeter(server.pids)
    cpu: dict[str, float] = {}
    waited: list[float] = []
    commits_before = commit_totals(server)

    def loaded(wrk_pid: int) -> None:
        groups["wrk"] = lambda: [wrk_pid]  # counted from here: not its loading
        meter.start()
        waits.start()

    def reported() -> None:
        if "wrk" not in groups:  # no WRK_LOADED line: nothing was measured
            raise SystemExit("wrk reported before its script said it had loaded its requests")
        wall = time.monotonic() - meter.wall
        cpu.update({group: share * wall for group, share in meter.stop().items()})
        waited.append(waits.stop())

    data = wrk_report(
        server.url,
        script,
        requests,
        seconds,
        str(start),
        threads=WRK_THREADS,
        marker="WRK_JSON",
        on_loaded=loaded,
        on_report=reported,
        connections=connections,
    )
    commits = commit_totals(server) - commits_before
    errors = sum(data[k] for k in ("non_2xx", "connect", "read", "write", "timeout"))
    return LoadResult(
        name=name,
        requests=data["requests"],
        seconds=data["duration_us"] / 1e6,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        errors=errors,
        cpu=cpu,
        commit=commits,
        server_wait=sum(waited),
    )


_COMMIT_METRICS = {
    "jobwarden_webhook_commit_batch_size_count": "batches",
    "jobwarden_webhook_commit_batch_size_sum": "events",
    "jobwarden_webhook_commit_duration_seconds_sum": "seconds",
}


def commit_totals(server: Server) -> CommitTotals:
    """The server's group-commit counters from its /metrics; zeros if it has none."""
    if not server.reports_commits:
        return NO_COMMITS
    return parse_commit_totals(httpx.get(server.url + "/metrics", timeout=10.0).text)


def parse_commit_totals(exposition: str) -> CommitTotals:
    """The group-commit counters in a receiver's Prometheus text exposition."""
    found = dict.fromkeys(_COMMIT_METRICS.values(), 0.0)
    for line in exposition.splitlines():
        name, _, value = line.partition(" ")
        if name in _COMMIT_METRICS:
            found[_COMMIT_METRICS[name]] = float(value)
    return CommitTotals(**found)


@dataclass(frozen=True)
class MixedResult:
    sent: int
    unique_valid: int
    duplicates: int
    forged: int
    answers: dict[str, int]
    stored_rows: int
    forged_rows: int
    duplicate_count: int
    seconds: float
    answered: int

    @property
    def ok(self) -> bool:
        return (
            self.answered == self.sent
            and self.stored_rows == self.unique_valid
            and self.forged_rows == 0
            and self.duplicate_count == self.duplicates
            and self.answers["stored"] == self.unique_valid
            and self.answers["duplicate"] == self.duplicates
            and self.answers["refused"] == self.forged
            and self.answers["other"] == 0
        )


def write_mixed(path: Path, rng: random.Random) -> tuple[int, int, int]:
    """10,000 deliveries, shuffled: unique valid events, redeliveries of them, forgeries."""
    forged_n = int(MIXED_TOTAL * MIXED_FORGED_SHARE)
    duplicate_n = int(MIXED_TOTAL * MIXED_DUPLICATE_SHARE)
    unique_n = MIXED_TOTAL - forged_n - duplicate_n
    timestamp = int(time.time())
    valid = []
    for i in range(unique_n):
        event_id = f"mix_{i}"
        body = event_body(f"job_mix_{i}", rng.choice(["running", "succeeded", "failed"]))
        signature = sign_standard_webhooks(SECRET, event_id, timestamp, body)
        valid.append(f"{event_id}\t{timestamp}\t{signature}\t{body.decode()}\n")
    lines = valid + [rng.choice(valid) for _ in range(duplicate_n)]
    for i in range(forged_n):
        event_id = f"forged_{i}"
        body = event_body(f"job_mix_{i}", "succeeded")
        signature = sign_standard_webhooks(FORGED_SECRET, event_id, timestamp, body)
        lines.append(f"{event_id}\t{timestamp}\t{signature}\t{body.decode()}\n")
    rng.shuffle(lines)
    path.write_text("".join(lines))
    return unique_n, duplicate_n, forged_n


async def run_mixed(
    url: str, script: Path, requests: Path, database_url: str, rate: float
) -> MixedResult:
    """Send the mixed set once; `rate` (req/s measured earlier) sizes wrk's duration.

    wrk runs for its whole -d whatever the script does, so the duration is
    twice the expected sending time (the script sends fillers once done).
    """
    unique_n, duplicate_n, forged_n = write_mixed(requests, random.Random(7))
    seconds = min(MIXED_MAX_SECONDS, math.ceil(2 * MIXED_TOTAL / max(rate, 1.0)) + 2)
    # One thread: the mixed script sends each line once and tallies in that thread.
    data = wrk_report(url, script, requests, seconds, threads=1, marker="WRK_MIXED")
    conn = await connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE event_id LIKE 'mix\\_%') AS stored,"
            " count(*) FILTER (WHERE event_id LIKE 'forged\\_%') AS forged,"
            " coalesce(sum(duplicate_deliveries) FILTER (WHERE event_id LIKE 'mix\\_%'), 0)"
            " AS dups FROM webhook_events"
        )
    finally:
        await conn.close()
    return MixedResult(
        sent=MIXED_TOTAL,
        unique_valid=unique_n,
        duplicates=duplicate_n,
        forged=forged_n,
        answers={k: data[k] for k in ("stored", "duplicate", "refused", "other")},
        stored_rows=row["stored"],
        forged_rows=row["forged"],
        duplicate_count=row["dups"],
        seconds=data["duration_us"] / 1e6,
        answered=data["answered"],
    )


async def count_events(database_url: str, prefix: str, table: str = "webhook_events") -> int:
    conn = await connect(database_url)
    try:
        count: int = await conn.fetchval(
            f"SELECT count(*) FROM {table} WHERE event_id LIKE $1", prefix + "\\_%"
        )
        return count
    finally:
        await conn.close()


# --------------------------------------------------------------------- database


def job_of(index: int) -> str:
    return f"job_bench_{index}"


async def prepare_operations(database_url: str) -> None:
    """Operations with known job ids, recorded through the ledger like real ones."""
    from shared import ledger

    conn = await connect(database_url)
    try:
        for index in range(OPERATIONS):
            submitted = await ledger.submit_operation(
                conn,
                provider=PROVIDER,
                kind="bench",
                request=ledger.RequestSpec("POST", "/v1/jobs", {"n": index}),
                requested_by="bench",
            )
            await ledger.record_remote_job(
                conn, submitted.operation_id, job_of(index), create_mode="async"
            )
    finally:
        await conn.close()


# --------------------------------------------------------------------- report


def print_report(
    bare: Series,
    bare_multi: Series,
    quiet_bare: Series,
    runs: list[tuple[Series, int]],
    mixed: MixedResult,
    round_seconds: int,
    stacks: dict[str, Stack],
) -> None:
    require_same_stack(stacks)  # no ratio between unlike stacks, whatever the caller checked
    print()
    print(
        f"wrk -t{WRK_THREADS} -c{WRK_CONNECTIONS}, distinct signed Standard Webhooks deliveries, "
        f"uvicorn 1 worker (the --workers rows: {WORKERS}), {os.cpu_count()} CPUs; bare, "
        f"receiver, floor and the floor's handler on the receiver's write alternate in "
        f"{ROUNDS} rounds of {round_seconds} s, and so do their "
        f"{WORKERS}-worker servers (req/s over all rounds, median p50/p99); the one-at-a-time "
        f"rows: wrk -c{QUIET_CONNECTIONS}, alternating in rounds of their own"
    )
    print(describe(stacks))
    print(
        f"{'endpoint':<40}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'ratio':>7}"
        f"{'µs server':>11}{'µs pg':>7}{'µs wrk':>8}{'busy':>6}{'wait':>6}{'batch':>7}{'ms':>6}"
    )
    rows: list[tuple[Series, float | None]] = [(bare, None)]
    for series, _ in runs:
        if "--workers" in series.name:  # against the bare endpoint served the same way
            rows += [(bare_multi, None), (series, series.per_second / bare_multi.per_second)]
        elif series.name == QUIET:  # against the bare endpoint under the same load
            rows += [(quiet_bare, None), (series, series.per_second / quiet_bare.per_second)]
        else:
            rows.append((series, series.per_second / bare.per_second))
    for series, ratio in rows:
        print(
            f"{series.name:<40}{series.per_second:>9.0f}{series.p50_ms:>9.2f}"
            f"{series.p99_ms:>9.2f}{series.errors:>8}{'' if ratio is None else f'{ratio:.2f}':>7}"
            f"{series.cpu_us_per_request('server'):>11.0f}"
            f"{series.cpu_us_per_request('postgres'):>7.0f}"
            f"{series.cpu_us_per_request('wrk'):>8.0f}"
            f"{series.server_busy:>6.2f}{series.server_waiting:>6.2f}"
            f"{_optional(series.batch_events):>7}"
            f"{_optional(series.batch_ms):>6}"
        )
    print(
        "µs = CPU microseconds per answered request, during the row's runs: the server "
        "(its workers included), PostgreSQL (our databases' backends and its shared "
        "processes), wrk (from when it had loaded its request file); busy = the server's "
        "CPU over wall time (1.00: one core); wait = its time waiting for a core over wall "
        "time (/proc schedstat); batch = events per group commit and ms = from a batch's "
        "start to its COMMIT, from a one-process receiver's /metrics"
    )
    first = runs[0][0]
    per_round = "  ".join(
        f"{r.per_second / b.per_second:.2f}" for r, b in zip(first.runs, bare.runs, strict=True)
    )
    print(f"target: ratio >= 0.50 with receiver p99 < 20 ms; ratio per round: {per_round}")
    ceiling = next((series for series, _ in runs if series.name == FLOOR), None)
    if ceiling is not None:
        print_floor(first, bare, ceiling)
    write_only = next((series for series, _ in runs if series.name == FLOOR_WRITE), None)
    if ceiling is not None and write_only is not None:
        print_split(first, bare, ceiling, write_only)
    multi = next((series for series, _ in runs if "--workers" in series.name), None)
    if multi is not None:
        print_workers_target(first, multi, bare, bare_multi)
    logged, unlogged = runs[0][0], runs[1][0]
    print(
        f"evidence log cost: receiver new events with the log on / off = "
        f"{logged.per_second / unlogged.per_second:.2f} (target >= 0.9; the sequencer "
        "appends every second in this process while both run)"
    )
    for series, _ in runs:
        if "--workers" in series.name:
            print(
                f"workers: {series.name} / one process = "
                f"{series.per_second / first.per_second:.2f} "
                f"(wrk, PostgreSQL and the workers share {os.cpu_count()} CPUs)"
            )
    for series, committed in runs:
        print(f"  {series.name}: {committed} events committed, wrk completed {series.requests}")
    print()
    print(
        f"mixed load: {mixed.sent} deliveries ({mixed.unique_valid} unique valid, "
        f"{mixed.duplicates} redeliveries, {mixed.forged} forged), {mixed.answered} answered"
    )
    print(
        f"  answers: {mixed.answers['stored']} stored, {mixed.answers['duplicate']} duplicate, "
        f"{mixed.answers['refused']} refused (401), {mixed.answers['other']} other"
    )
    print(
        f"  stored rows: {mixed.stored_rows} (expected {mixed.unique_valid}), forged rows: "
        f"{mixed.forged_rows} (expected 0), duplicate_deliveries: {mixed.duplicate_count} "
        f"(expected {mixed.duplicates})  -> {'OK' if mixed.ok else 'MISMATCH'}"
    )


QUIET = "receiver: one delivery at a time"
FLOOR = "floor: HMAC + group-commit INSERT only"
FLOOR_WRITE = "floor's handler + the receiver's write"


def _optional(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def print_floor(first: Series, bare: Series, ceiling: Series) -> None:
    """What the least a durable receiver does reaches, and how much of it the receiver has."""
    per_round = "  ".join(
        f"{f.per_second / b.per_second:.2f}" for f, b in zip(ceiling.runs, bare.runs, strict=True)
    )
    print(
        f"  the floor against the bare endpoint: {ceiling.per_second / bare.per_second:.2f} "
        f"(per round: {per_round}); the receiver against the floor: "
        f"{first.per_second / ceiling.per_second:.2f}"
    )


def print_split(first: Series, bare: Series, ceiling: Series, write_only: Series) -> None:
    """The receiver's distance from the floor, split: the floor's handler on the receiver's
    write against the floor is the write's part; the receiver against that, its handler's."""
    per_round = "  ".join(
        f"{w.per_second / b.per_second:.2f}"
        for w, b in zip(write_only.runs, bare.runs, strict=True)
    )
    print(
        f"  the floor's handler on the receiver's write against the bare endpoint: "
        f"{write_only.per_second / bare.per_second:.2f} (per round: {per_round}); "
        f"the write's part (it / the floor): {write_only.per_second / ceiling.per_second:.2f}; "
        f"the handler's part (the receiver / it): {first.per_second / write_only.per_second:.2f}"
    )


def print_workers_target(first: Series, multi: Series, bare: Series, bare_multi: Series) -> None:
    """The target on several workers, against the bare endpoint served the same way."""
    multi_rounds = "  ".join(
        f"{r.per_second / b.per_second:.2f}"
        for r, b in zip(multi.runs, bare_multi.runs, strict=True)
    )
    best_receiver = max((first, multi), key=lambda x: x.per_second)
    best_bare = max((bare, bare_multi), key=lambda x: x.per_second)
    print(
        f"  with {WORKERS} workers on both sides: {multi.per_second / bare_multi.per_second:.2f}"
        f" (per round: {multi_rounds}), receiver p99 {multi.p99_ms:.1f} ms; each side at its"
        f" faster configuration ({best_receiver.name.strip()} / {best_bare.name}): "
        f"{best_receiver.per_second / best_bare.per_second:.2f}"
    )


# --------------------------------------------------------------------- main


def quiet_rounds(
    bare_server: Server,
    database_url: str,
    folder: Path,
    script: Path,
    sets: Mapping[str, Path],
    round_seconds: int,
    stacks: dict[str, Stack],
) -> tuple[list[LoadResult], list[LoadResult]]:
    """One delivery at a time, alternating between the bare endpoint and a receiver
    of its own that has only ever been quiet (what a receiver plans and keeps
    depends on the load it has seen), in rounds apart from the others, so
    those keep their rhythm (the log's on/off ratio compares neighbours)."""
    bare_runs: list[LoadResult] = []
    quiet_runs: list[LoadResult] = []
    with Server("receiver", folder / "quiet.log", database_url) as quiet:
        stacks["quiet receiver"] = quiet.stack
        require_same_stack(stacks)
        run_wrk(
            "warmup",
            quiet,
            script,
            sets["quietwarm"],
            round_seconds,
            connections=QUIET_CONNECTIONS,
        )
        for _ in range(ROUNDS):
            bare_runs.append(
                run_wrk(
                    "quiet bare",
                    bare_server,
                    script,
                    sets["new"],
                    round_seconds,
                    connections=QUIET_CONNECTIONS,
                )
            )
            quiet_runs.append(
                run_wrk(
                    "quiet",
                    quiet,
                    script,
                    sets["quiet"],
                    round_seconds,
                    _past(quiet_runs),
                    connections=QUIET_CONNECTIONS,
                )
            )
    return bare_runs, quiet_runs


def _past(earlier: list[LoadResult]) -> int:
    """Where a round starts in its request set: past what earlier rounds sent (and had
    in flight), so every round's events are new."""
    return sum(r.requests for r in earlier) + 2 * WRK_CONNECTIONS * len(earlier)


@contextlib.contextmanager
def sequencer_thread(database_url: str) -> Iterator[None]:
    """The evidence log's sequencer, appending every second in a thread of its own (wrk
    runs blocking in this one), as a reconciler beside the receiver would."""
    stop = threading.Event()

    async def sequence_until_stopped() -> None:
        conn = await connect(database_url)
        try:
            while not stop.is_set():
                await log.sequence_all(conn)
                await asyncio.sleep(1.0)
        finally:
            await conn.close()

    thread = threading.Thread(target=lambda: run_loop(sequence_until_stopped()), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


async def run(round_seconds: int, warmup: int) -> int:
    phase = ROUNDS * round_seconds
    async with bench_database("receiver") as db:
        database_url = db.url
        await prepare_operations(database_url)
        with tempfile.TemporaryDirectory(prefix="jw-bench-") as tmp:
            folder = Path(tmp)
            script, mixed_script = folder / "requests.lua", folder / "mixed.lua"
            script.write_text(LUA)
            mixed_script.write_text(MIXED_LUA)
            names = ("warm", "quietwarm", "new", "nolog", "quiet", "matched", "naive", "workers")
            sets = {name: folder / f"{name}.tsv" for name in (*names, "floor", "floorw")}
            write_requests(sets["warm"], "warm", 50_000, matched=False)
            write_requests(sets["quietwarm"], "quietwarm", 50_000, matched=False)
            write_requests(sets["floor"], "floor", FLOOR_REQUESTS, matched=False)
            write_requests(sets["floorw"], "floorw", FLOOR_WRITE_REQUESTS, matched=False)
            for name in ("new", "nolog", "quiet", "matched", "naive", "workers"):
                write_requests(sets[name], name, REQUESTS_PER_PHASE, matched=name == "matched")
            print(f"bench: logs in {tmp} while running", file=sys.stderr)

            admin = await connect(database_url)
            with (
                Server("bare", folder / "bare.log") as bare_server,
                Server("receiver", folder / "receiver.log", database_url) as receiver,
                Server("floor", folder / "floor.log", database_url) as floor_server,
                Server("floor-write", folder / "floor-write.log", database_url) as floor_write,
                sequencer_thread(database_url),
            ):
                stacks = {
                    "bare": bare_server.stack,
                    "receiver": receiver.stack,
                    "floor": floor_server.stack,
                    "floor's handler, receiver's write": floor_write.stack,
                }
                print(describe(stacks), file=sys.stderr)
                require_same_stack(stacks)  # before a minute of load, not after
                for server in (bare_server, receiver, floor_server, floor_write):
                    run_wrk("warmup", server, script, sets["warm"], warmup)
                bare_runs: list[LoadResult] = []
                new_runs: list[LoadResult] = []
                nolog_runs: list[LoadResult] = []
                floor_runs: list[LoadResult] = []
                floor_write_runs: list[LoadResult] = []
                for _ in range(ROUNDS):
                    bare_runs.append(
                        run_wrk("bare", bare_server, script, sets["new"], round_seconds)
                    )
                    new_runs.append(
                        run_wrk(
                            "new", receiver, script, sets["new"], round_seconds, _past(new_runs)
                        )
                    )
                    # the evidence log's cost: the same receiver, its triggers disabled
                    await set_logging(admin, False)
                    nolog_runs.append(
                        run_wrk(
                            "nolog",
                            receiver,
                            script,
                            sets["nolog"],
                            round_seconds,
                            _past(nolog_runs),
                        )
                    )
                    await set_logging(admin, True)
                    floor_runs.append(
                        run_wrk(
                            "floor",
                            floor_server,
                            script,
                            sets["floor"],
                            round_seconds,
                            _past(floor_runs),
                        )
                    )
                    floor_write_runs.append(
                        run_wrk(
                            "floorw",
                            floor_write,
                            script,
                            sets["floorw"],
                            round_seconds,
                            _past(floor_write_runs),
                        )
                    )
                quiet_bare_runs, quiet_runs = quiet_rounds(
                    bare_server, database_url, folder, script, sets, round_seconds, stacks
                )
                await admin.close()
                bare = Series("bare Starlette 204", tuple(bare_runs))
                runs = [
                    (
                        Series("receiver: new events, committed", tuple(new_runs)),
                        await count_events(database_url, "new"),
                    ),
                    (
                        Series("  the same, evidence log off", tuple(nolog_runs)),
                        await count_events(database_url, "nolog"),
                    ),
                    (Series(QUIET, tuple(quiet_runs)), await count_events(database_url, "quiet")),
                    (
                        Series(FLOOR, tuple(floor_runs)),
                        await count_events(database_url, "floor", floor.TABLE),
                    ),
                    (
                        Series(FLOOR_WRITE, tuple(floor_write_runs)),
                        await count_events(database_url, "floorw"),
                    ),
                ]
                quiet_bare = Series("bare Starlette 204, one at a time", tuple(quiet_bare_runs))
                matched = run_wrk("matched", receiver, script, sets["matched"], phase)
                runs.append(
                    (
                        Series("receiver: + observation + wake-up", (matched,)),
                        await count_events(database_url, "matched"),
                    )
                )
                mixed = await run_mixed(
                    receiver.url,
                    mixed_script,
                    folder / "mixed.tsv",
                    database_url,
                    runs[0][0].per_second,
                )
            with (
                Server("bare-workers", folder / "bare-workers.log") as bare_workers,
                Server("workers", folder / "workers.log", database_url) as workers,
                sequencer_thread(database_url),  # as in the one-worker rounds
            ):
                stacks["bare workers"] = bare_workers.stack
                stacks["workers"] = workers.stack
                require_same_stack(stacks)
                for server in (bare_workers, workers):
                    run_wrk("warmup", server, script, sets["warm"], warmup)
                bare_worker_runs: list[LoadResult] = []
                worker_runs: list[LoadResult] = []
                for _ in range(ROUNDS):
                    bare_worker_runs.append(
                        run_wrk("bare workers", bare_workers, script, sets["new"], round_seconds)
                    )
                    worker_runs.append(
                        run_wrk(
                            "workers",
                            workers,
                            script,
                            sets["workers"],
                            round_seconds,
                            _past(worker_runs),
                        )
                    )
                bare_multi = Series(
                    f"bare Starlette 204, {WORKERS} workers", tuple(bare_worker_runs)
                )
                runs.append(
                    (
                        Series(f"receiver --workers {WORKERS}: new events", tuple(worker_runs)),
                        await count_events(database_url, "workers"),
                    )
                )
            with Server("naive", folder / "naive.log", database_url) as naive:
                stacks["naive"] = naive.stack
                require_same_stack(stacks)
                run_wrk("warmup", naive, script, sets["warm"], warmup)
                result = run_wrk("naive", naive, script, sets["naive"], phase)
                runs.append(
                    (
                        Series("naive: one commit per event", (result,)),
                        await count_events(database_url, "naive"),
                    )
                )
        print_report(bare, bare_multi, quiet_bare, runs, mixed, round_seconds, stacks)
        clean = all(series.errors == 0 for series, _ in runs)
        return 0 if mixed.ok and clean and all_new(runs) else 1


def all_new(runs: list[tuple[Series, int]]) -> bool:
    """Every answered request of each row committed an event of its own (a row whose
    request set wrapped around sent ids it had stored already: fewer rows than
    answers)."""
    repeated = [series.name for series, committed in runs if committed < series.requests]
    for name in repeated:
        print(f"FAILED: {name}: some event ids were sent twice (its request set is too small)")
    return not repeated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.receiver", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="2 s rounds (smoke test)")
    parser.add_argument(
        "--serve",
        choices=["bare", "floor", "floor-write", "receiver", "naive", "workers", "bare-workers"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--stack-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve == "bare":
        serve_bare(args.port, args.stack_file, reuse_port=args.reuse_port)
        return 0
    if args.serve == "floor":
        floor.serve(args.port, args.database_url, args.stack_file, SECRET)
        return 0
    if args.serve == "floor-write":
        write = floor.ReceiverWrite(PROVIDER, bench_webhooks().state_map)
        floor.serve(args.port, args.database_url, args.stack_file, SECRET, write)
        return 0
    if args.serve in ("receiver", "naive"):
        serve_receiver(
            args.port,
            args.database_url,
            args.stack_file,
            naive=args.serve == "naive",
            reuse_port=args.reuse_port,
        )
        return 0
    if args.serve == "workers":
        return serve_workers(args.port, args.database_url, args.stack_file, "receiver")
    if args.serve == "bare-workers":
        return serve_workers(args.port, None, args.stack_file, "bare")
    if shutil.which("wrk") is None:
        print(
            "bench.receiver needs wrk, the HTTP load generator.\n"
            "Install it with:  sudo apt-get install -y wrk   (Debian/Ubuntu)\n"
            "             or:  brew install wrk               (macOS)",
            file=sys.stderr,
        )
        return 2
    round_seconds = 2 if args.quick else ROUND_SECONDS
    warmup = 1 if args.quick else WARMUP_SECONDS
    return run_loop(run(round_seconds, warmup))


if __name__ == "__main__":
    sys.exit(main())
