"""What benchmarks, the chaos run and the test suite share: throwaway databases,
a clock tests can move, and the helpers around them.

The test clock shifts Python's clock (`shared.clock.ShiftedClock`) and the
database's `jw_now()` together, so a lease, a backoff or a deadline lapses
because a test said so, not because it slept.

The rest is benchmark infrastructure, here once so that every benchmark module
(bench/throughput.py, lag.py, claim.py, detection.py, receiver.py, chaos.py)
runs its parties the same way: each database is fresh and dropped afterwards,
every process we start is on a free loopback port and is stopped again, CPU is
read from /proc per process group, and tables are printed with the command that
reproduces them. Seeding writes synthetic rows with raw SQL, and that SQL is
all here. shared/ledger is the only writer of real operations. The seeding
functions give the rows exactly what the ledger would record, in bulk, so
that a million rows take seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from reconciler.context import Context, build_adapters
from reconciler.lanes import Lane, Lanes
from reconciler.worker import Reconciler
from shared.clock import ShiftedClock
from shared.db import pgjson
from shared.db.connect import connect, redact_url, resolve_database, with_database
from shared.db.migrate import apply_migrations
from shared.db.queries import all_queries, sql_root
from shared.ids import new_idempotency_token, new_operation_id, new_trace_id
from shared.ledger import RequestSpec
from shared.providers import ProviderDescription, adapter_for, parse_providers
from shared.result_store import ResultStore
from shared.serve import loop_name
from shared.serve import run as run_loop
from shared.settings import Settings

TEST_CLOCK_SQL = Path("testing") / "test_clock.sql"
# The simulator preset on a fast schedule, for tests and the crash-point
# enumeration: backoff in tenths of a second so a job's whole life takes
# seconds, a 1 s request timeout so a lost response costs one second.
FAST_LIMITS = {
    "backoff_base": 0.05,
    "backoff_factor": 2.0,
    "backoff_cap": 0.3,
    "request_timeout": 1.0,
    "webhook_backstop_poll_seconds": 0.5,
    # a collection gives up after its six tries, not after an hour of them
    "result_retry_seconds": 0.1,
}
# A signing secret for the simulator's webhooks in tests and the crash-point
# runs; generated for them, never a deployment's.
TEST_WEBHOOK_SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

PROVIDER = "sim"
REQUESTED_BY = "agent:bench"
# Every database of this run starts with this, so that CPU accounting can
# tell our PostgreSQL backends from those of anything else on the server.
DATABASE_PREFIX = f"jw_bench_{os.getpid()}_"
# Bounded waits for processes we start: startup is well under a second here,
# these only absorb a loaded machine.
START_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 30.0
# Seeding: creates in flight at once; more only queues behind the client's CPU.
SEED_CONCURRENCY = 8
SEED_CHUNK = 5_000  # rows per seeding statement, keeps one statement's memory modest


# --------------------------------------------------------------------------
# the test clock


async def install_test_clock(conn: Any) -> None:
    """Make `jw_now()` of this (migrated) database shiftable; see sql/testing/test_clock.sql."""
    await conn.execute((sql_root() / TEST_CLOCK_SQL).read_text("utf-8"))


class TestClock(ShiftedClock):
    """A clock a test moves forward, for Python and for one database at once."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, db: Any, offset: float = 0.0) -> None:
        super().__init__(offset)
        self._db = db  # a connection or pool of the database whose jw_now() it shifts

    async def advance(self, seconds: float) -> None:
        """Let `seconds` pass, everywhere at once."""
        self.shift(seconds)
        await self._db.execute(
            "UPDATE jw_test_clock SET shift = make_interval(secs => $1)", self.offset
        )

    async def to_appointment(self, db: Any, operation_id: str) -> bool:
        """Move to the operation's next appointment (just past it); False if it has none."""
        due = await db.fetchval(
            "SELECT extract(epoch FROM next_poll_at - jw_now()) FROM operations"
            " WHERE operation_id = $1",
            operation_id,
        )
        if due is None:
            return False
        await self.advance(max(0.0, float(due)) + 0.01)
        return True


# --------------------------------------------------------------------------
# throwaway databases


@dataclass
class BenchDatabase:
    """A fresh, migrated database of this run (see `bench_database`)."""

    admin_url: str
    name: str

    @property
    def url(self) -> str:
        return with_database(self.admin_url, self.name)


@contextlib.asynccontextmanager
async def bench_database(tag: str) -> AsyncIterator[BenchDatabase]:
    """Create and migrate `jw_bench_<pid>_<tag>`; drop it when the block ends."""
    server = resolve_database()
    db = BenchDatabase(server.admin_url, DATABASE_PREFIX + tag)
    await _drop(db)
    admin = await connect(db.admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{db.name}"')
    finally:
        await admin.close()
    conn = await connect(db.url)
    try:
        await apply_migrations(conn)
    finally:
        await conn.close()
    try:
        yield db
    finally:
        await _drop(db)
        server.stop()


async def _drop(db: BenchDatabase) -> None:
    admin = await connect(db.admin_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
    finally:
        await admin.close()


def redacted_server() -> str:
    """The PostgreSQL server the benchmarks use, without its password."""
    server = resolve_database()
    try:
        return redact_url(server.admin_url)
    finally:
        server.stop()


# --------------------------------------------------------------------------
# processes: ports, environments, start, readiness, stop


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(**extra: str) -> dict[str, str]:
    """Our environment without any JW_ setting of the caller's, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JW_")}
    env["JW_LOG_LEVEL"] = "WARNING"
    env.update(extra)
    return env


def spawn(args: Sequence[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """`jobwarden <args>` in a child process, its output appended to `log`."""
    with open(log, "ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "shared.cli", *args], env=dict(env), stdout=out, stderr=out
        )


def stop(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=STOP_TIMEOUT_SECONDS)


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float, what: str, poll: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(poll)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


async def wait_http_ok(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    async with httpx.AsyncClient(trust_env=False, timeout=1.0) as client:

        async def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with code {proc.returncode}")
            try:
                return (await client.get(url)).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(answers, START_TIMEOUT_SECONDS, what)


@dataclass
class Simulator:
    url: str
    proc: subprocess.Popen[bytes]

    async def stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
            body: dict[str, Any] = (await client.get(f"{self.url}/_sim/stats")).json()
            return body


@contextlib.asynccontextmanager
async def simulator(
    workdir: Path, *, webhook_secret: str | None = None, status_latency: float = 0.0
) -> AsyncIterator[Simulator]:
    """`jobwarden simulator` in its own process on a free loopback port."""
    port = free_port()
    env = child_env(JW_SIM_STATUS_LATENCY=str(status_latency))
    if webhook_secret:
        env["JW_SIM_WEBHOOK_SECRET"] = webhook_secret
    proc = spawn(["simulator", "--port", str(port)], workdir / "simulator.log", env)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_http_ok(f"{url}/_sim/stats", proc, "the simulator")
        yield Simulator(url, proc)
    finally:
        stop(proc)


def write_config(path: Path, sim_url: str, limits: Mapping[str, float]) -> Path:
    """A provider config on the shipped `simulator` preset, as an operator writes it.

    The preset verifies webhooks with JW_SIM_WEBHOOK_SECRET when that is set,
    and polls only when it is not: the environment chooses the mode.
    """
    lines = ["[providers.sim]", 'preset = "simulator"', f'base_url = "{sim_url}"', ""]
    lines += ["[providers.sim.limits]", *(f"{k} = {v}" for k, v in limits.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def providers_for(sim_url: str, limits: Mapping[str, float]) -> dict[str, ProviderDescription]:
    """What `write_config` says, parsed in process (for an in-process reconciler)."""
    table = {"preset": "simulator", "base_url": sim_url, "limits": dict(limits)}
    return parse_providers({"providers": {PROVIDER: table}}, "bench", {})


def start_daemon(
    db_url: str, config: Path, workdir: Path, worker: str, **env: str
) -> subprocess.Popen[bytes]:
    """The real reconciler daemon (`jobwarden reconciler`) on `db_url`."""
    return spawn(
        ["reconciler"],
        workdir / f"{worker}.log",
        child_env(
            DATABASE_URL=db_url,
            JW_CONFIG=str(config),
            JW_WORKER_ID=worker,
            JW_RESULTS_DIR=str(workdir / "results"),
            **env,
        ),
    )


class ReadySocket:
    """A NOTIFY_SOCKET of our own: the daemons say READY=1 on it (as to systemd).

    Waiting for that datagram is exact, where polling a log file or sleeping
    would be a guess.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)

    async def wait_ready(self, proc: subprocess.Popen[bytes], what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with code {proc.returncode} before READY")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    if b"READY=1" in await loop.sock_recv(self.sock, 4096):
                        return
        raise TimeoutError(f"{what} did not report READY=1 within {START_TIMEOUT_SECONDS:.0f} s")

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


@contextlib.asynccontextmanager
async def ready_process(
    start: Callable[[Path], subprocess.Popen[bytes]],
    notify: Path,
    what: str,
    clean_exits: frozenset[int] = frozenset({0}),
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """`start(notify_socket)`'s process, ready (READY=1) on entry, SIGTERMed on exit.

    An exit code outside `clean_exits` is reported: its log is worth a look.
    """
    ready = ReadySocket(notify)
    try:
        proc = start(ready.path)
        try:
            await ready.wait_ready(proc, what)
            yield proc
        finally:
            code = stop(proc)
            if code not in clean_exits:
                print(f"warning: {what} exited with {code} (see {notify.parent})")
    finally:
        ready.close()


@contextlib.asynccontextmanager
async def daemon_process(
    db_url: str, config: Path, workdir: Path, worker: str, **env: str
) -> AsyncIterator[subprocess.Popen[bytes]]:
    """`jobwarden reconciler`, ready (READY=1) on entry, SIGTERMed on exit."""

    def start(notify: Path) -> subprocess.Popen[bytes]:
        return start_daemon(db_url, config, workdir, worker, NOTIFY_SOCKET=str(notify), **env)

    async with ready_process(start, workdir / f"{worker}.notify", f"reconciler {worker}") as proc:
        yield proc


# --------------------------------------------------------------------------
# CPU accounting


class CpuMeter:
    """CPU seconds used by named process groups between `start()` and `stop()`.

    Read from /proc (no dependency). Counted per process: one that appears
    meanwhile counts from zero, one that exits loses what it used since start
    (a small undercount, never a negative share).
    """

    TICKS = os.sysconf("SC_CLK_TCK")

    def __init__(self, groups: Mapping[str, Callable[[], list[int]]]) -> None:
        self.groups = groups
        self.began: dict[str, dict[int, float]] = {}
        self.wall = 0.0

    @staticmethod
    def cpu_seconds(pid: int) -> float | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(stat[11]) + int(stat[12])) / CpuMeter.TICKS

    def _now(self) -> dict[str, dict[int, float]]:
        snapshot: dict[str, dict[int, float]] = {}
        for group, pids in self.groups.items():
            used = {pid: self.cpu_seconds(pid) for pid in pids()}
            snapshot[group] = {pid: cpu for pid, cpu in used.items() if cpu is not None}
        return snapshot

    def start(self) -> None:
        self.began = self._now()
        self.wall = time.monotonic()

    def stop(self) -> dict[str, float]:
        """Share of one core used by each group since start() (1.0 = one core busy)."""
        wall = max(time.monotonic() - self.wall, 1e-9)
        shares = {}
        for group, now in self._now().items():
            before = self.began.get(group, {})
            used = sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items())
            shares[group] = max(used, 0.0) / wall
        return shares


class WaitMeter:
    """Seconds a process group spent runnable but waiting for a core.

    From each thread's /proc schedstat (its second field: time on a run
    queue). Beside the CPU it used, it tells a server that is idle because it
    has nothing to do (waiting for a commit, for a request) from one that is
    ready but has no core.
    """

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self._pids = pids
        self._began: dict[str, int] = {}

    def _now(self) -> dict[str, int]:
        waited: dict[str, int] = {}
        for pid in self._pids():
            with contextlib.suppress(OSError):
                for task in Path(f"/proc/{pid}/task").iterdir():
                    with contextlib.suppress(OSError, IndexError, ValueError):
                        fields = (task / "schedstat").read_text().split()
                        waited[f"{pid}/{task.name}"] = int(fields[1])
        return waited

    def start(self) -> None:
        self._began = self._now()

    def stop(self) -> float:
        """Seconds waited for a core since start()."""
        now = self._now()
        return sum(max(ns - self._began.get(key, 0), 0) for key, ns in now.items()) / 1e9


# PostgreSQL processes that work for every database (WAL, checkpoints, ...).
PG_SHARED_PROCESSES = (
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "logical replication launcher",
)


def postgres_pids(database_prefix: str) -> list[int]:
    """PostgreSQL's shared processes and the backends of our databases.

    Backends of other databases are left out: other work on a shared server
    must not be charged to the benchmark.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        shared = any(title.rstrip().endswith(name) for name in PG_SHARED_PROCESSES)
        if shared or database_prefix in title:
            pids.append(int(entry.name))
    return pids


def our_postgres_pids() -> list[int]:
    return postgres_pids(DATABASE_PREFIX)


# --------------------------------------------------------------------------
# figures and tables


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: a reported p99 is a real sample)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.0f} ms"


def command_line(module: str, argv: Sequence[str]) -> str:
    """The command that reproduces a table, printed above it."""
    return shlex.join([".venv/bin/python", "-m", module, *argv])


def print_table(
    title: str,
    command: str,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    numeric: bool = True,
) -> None:
    """A plain-text table; columns after the first are right-aligned when `numeric`."""
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n## {title}")
    print(f"$ {command}")
    for n, row in enumerate(cells):
        line = (
            c.rjust(w) if numeric and i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        print("  ".join(line).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


# --------------------------------------------------------------------------
# running reconciler benchmarks from the command line

# One benchmark: measures at the chosen size (quick or full) using a work
# directory for logs and configs, and prints its tables under `command`.
Benchmark = Callable[[bool, Path, str], Awaitable[None]]


def benchmark_main(module: str, doc: str, benchmark: Benchmark, argv: Sequence[str] | None) -> int:
    """`python -m <module> [--quick]`: one benchmark module run on its own."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter windows")
    args = parser.parse_args(argv)
    return run_benchmarks([(module, benchmark)], args.quick)


def run_benchmarks(benchmarks: Sequence[tuple[str, Benchmark]], quick: bool) -> int:
    """Run `(module, benchmark)` pairs in order, with one work directory and a header.

    Each table is headed by the command of its own module, which reproduces
    it alone. On failure the work directory (every process log) is kept.
    """
    workdir = Path(tempfile.mkdtemp(prefix="jw-bench-reconciler-"))
    began = time.monotonic()
    try:
        run_loop(_run_all(benchmarks, quick, workdir))  # uvloop, as the daemons run
    except BaseException:
        print(f"\nbenchmark failed; process logs kept in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"\n(reconciler benchmarks took {time.monotonic() - began:.0f} s; "
        f"load average {os.getloadavg()[0]:.2f} at the end)"
    )
    return 0


async def _run_all(benchmarks: Sequence[tuple[str, Benchmark]], quick: bool, workdir: Path) -> None:
    print(
        f"# jobwarden reconciler benchmarks ({'quick' if quick else 'full'} run, "
        f"{os.cpu_count()} CPUs, PostgreSQL at {redacted_server()}, "
        f"load average {os.getloadavg()[0]:.2f} at start, {loop_name()} event loop)"
    )
    for module, benchmark in benchmarks:
        await benchmark(quick, workdir, command_line(module, ["--quick"] if quick else []))


# --------------------------------------------------------------------------
# the reconciler in process, and what it sends to the database


def reconciler_settings(workdir: Path, providers: Mapping[str, ProviderDescription]) -> Settings:
    return replace(
        Settings(), worker_id="bench", results_dir=workdir / "results", providers=providers
    )


@contextlib.asynccontextmanager
async def in_process_reconciler(
    pool: Any,
    workdir: Path,
    providers: Mapping[str, ProviderDescription],
    make_lane: Callable[[], Lane] = Lane,
) -> AsyncIterator[Reconciler]:
    """The reconciler exactly as reconciler/daemon.py wires it, minus the clock.

    `make_lane`: what provider calls go out on (a bench may answer them in process).
    """
    settings = reconciler_settings(workdir, providers)
    async with Lanes(settings.max_in_flight, make_lane) as lanes:
        ctx = Context(
            pool=pool,
            settings=settings,
            lanes=lanes,
            adapters=build_adapters(providers),
            store=ResultStore(settings.results_dir),
        )
        yield Reconciler(ctx)


class RoundTripCounter:
    """Counts every statement asyncpg sends (a query logger on each pooled connection).

    Simple-protocol statements (BEGIN, COMMIT, the pool's reset on release)
    and prepared ones all pass the logger, and each is one round trip.
    Statement preparation is cached per connection and not counted (it
    amortises to nothing).
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.enabled = False
        self._names = {sql: name for name, sql in all_queries().items()}
        self._seen: set[int] = set()

    def label(self, query: str) -> str:
        text = query.strip().rstrip(";")
        if text in self._names:
            return self._names[text]
        if text.startswith("SELECT pg_advisory_unlock_all()"):
            return "pool reset on release"
        first = text.split()[0].upper()
        if first in ("BEGIN", "COMMIT", "ROLLBACK"):
            return first
        if any(mark in text for mark in ("pg_type", "typeinfo", "'jit'")):
            return "type introspection (once per connection)"
        return "other"

    def log(self, record: Any) -> None:
        if self.enabled:
            self.counts[self.label(record.query)] += 1

    async def setup(self, conn: Any) -> None:
        # asyncpg calls `setup` on every acquire; each connection gets the logger once.
        raw = getattr(conn, "_con", conn)
        if id(raw) not in self._seen:
            raw.add_query_logger(self.log)
            self._seen.add(id(raw))


# --------------------------------------------------------------------------
# seeding: synthetic rows in bulk, shaped as the ledger would have written them


async def create_remote_jobs(
    sim_url: str, count: int, body: Mapping[str, Any], concurrency: int = SEED_CONCURRENCY
) -> list[str]:
    """Create `count` jobs at the simulator; returns their ids.

    One client per task: httpx's shared connection pool stalls under
    concurrency (encode/httpx#3215), which would make seeding the slow part.
    """
    ids: list[str] = []
    remaining = iter(range(count))

    async def worker() -> None:
        async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
            for _ in remaining:
                resp = await client.post(f"{sim_url}/v1/jobs", json=dict(body))
                resp.raise_for_status()
                ids.append(resp.json()["job_id"])

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ids


async def seed_observing(
    conn: Any,
    sim_url: str,
    job_ids: Sequence[str],
    due_at: Sequence[datetime],
    body: Mapping[str, Any],
) -> list[str]:
    """Operations in `observing` on existing simulator jobs, due at `due_at`.

    Goes through the ledger's own rules: rows are born `create_pending` (the
    birth trigger writes their genesis history), the create call is recorded
    with its job id and the status read to send (as reconciler/steps/create.py
    records them, so the claim records each read as a real claim does), and
    both transitions are history inserts whose trigger checks the edge and
    the evidence. The only difference is bulk: one statement per step.
    """
    ops = [new_operation_id() for _ in job_ids]
    request = RequestSpec("POST", "/v1/jobs", dict(body))
    adapter = adapter_for(providers_for(sim_url, {})[PROVIDER])
    for start in range(0, len(ops), SEED_CHUNK):
        chunk = slice(start, start + SEED_CHUNK)
        async with conn.transaction():
            await _seed_chunk(
                conn, adapter, ops[chunk], list(job_ids[chunk]), list(due_at[chunk]), request
            )
    return ops


def _status_request(adapter: Any, job: str, status_url: str) -> str:
    """The status read a worker will send for `job`, as create.py stores it (JSON)."""
    status = adapter.build_status(job, status_url)
    return pgjson.dumps(
        {
            "method": status.method,
            "url": status.sanitized_url(),
            "headers": status.sanitized_headers(),
        }
    )


async def _seed_chunk(
    conn: Any,
    adapter: Any,
    ops: list[str],
    jobs: list[str],
    due: list[datetime],
    request: RequestSpec,
) -> None:
    tokens = [new_idempotency_token() for _ in ops]
    traces = [new_trace_id() for _ in ops]
    await conn.execute(
        """
        INSERT INTO operations (operation_id, provider, kind, client_reference, request,
            request_fingerprint, idempotency_token, trace_id, requested_by,
            create_deadline, result_deadline)
        SELECT id, $4, 'export', id, $5::jsonb, $6, tok, tr, $7,
               clock_timestamp() + interval '1 hour', clock_timestamp() + interval '1 day'
        FROM unnest($1::text[], $2::text[], $3::text[]) AS t(id, tok, tr)
        """,
        ops,
        tokens,
        traces,
        PROVIDER,
        request.as_json(),
        request.fingerprint,
        REQUESTED_BY,
    )
    await conn.execute(
        """
        INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, trace_id,
            idempotency_token, method, url, finished_at, duration_ms, status_code, remote_job_id)
        SELECT o.operation_id, 'create', 1, 'reconciler:bench-seed', o.trace_id,
               o.idempotency_token, 'POST', '/v1/jobs', clock_timestamp(), 1, 202, t.job
        FROM unnest($1::text[], $2::text[]) AS t(id, job)
        JOIN operations o ON o.operation_id = t.id
        """,
        ops,
        jobs,
    )
    status_urls = [f"/v1/jobs/{job}" for job in jobs]  # what the simulator's 202 names
    await conn.execute(
        """
        UPDATE operations o SET remote_job_id = t.job, status_url = t.url,
               status_request = t.req::jsonb, create_mode = 'async', create_attempts = 1
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS t(id, job, url, req)
        WHERE o.operation_id = t.id
        """,
        ops,
        jobs,
        status_urls,
        [_status_request(adapter, j, u) for j, u in zip(jobs, status_urls, strict=True)],
    )
    for src, dst, cause, evidence in (
        ("create_pending", "accepted", "create accepted (seeded)", "call"),
        ("accepted", "observing", "first observation (seeded)", None),
    ):
        await conn.execute(
            """
            INSERT INTO history (operation_id, actor, from_state, to_state, cause,
                                 evidence_kind, evidence_id, seq, at, prev_hash, row_hash)
            SELECT t.id, 'reconciler:bench-seed', $2::jw_state, $3::jw_state, $4, $5,
                   CASE WHEN $5::text IS NOT NULL THEN c.call_id END, 0, now(), '', ''
            FROM unnest($1::text[]) AS t(id)
            JOIN provider_calls c ON c.operation_id = t.id AND c.call_kind = 'create'
            """,
            ops,
            src,
            dst,
            cause,
            evidence,
        )
    await conn.execute(
        """
        UPDATE operations o SET next_poll_at = t.due
        FROM unnest($1::text[], $2::timestamptz[]) AS t(id, due) WHERE o.operation_id = t.id
        """,
        ops,
        due,
    )


async def schedule_in(
    conn: Any, ops: Sequence[str], offsets: Sequence[float]
) -> dict[str, datetime]:
    """Make each row due `offsets[i]` seconds from now; returns each row's next_poll_at."""
    rows = await conn.fetch(
        """
        UPDATE operations o
        SET next_poll_at = clock_timestamp() + make_interval(secs => t.offset_s)
        FROM unnest($1::text[], $2::float8[]) AS t(id, offset_s)
        WHERE o.operation_id = t.id
        RETURNING o.operation_id, o.next_poll_at
        """,
        list(ops),
        list(offsets),
    )
    return {r["operation_id"]: r["next_poll_at"] for r in rows}


# Filler rows are written in the state the birth trigger leaves a new
# operation in (create_pending, one history row counted, a chain head), with
# triggers off for the statement: the per-row genesis history insert would
# make a million rows take minutes and does not touch what a claim benchmark
# measures (the operations table and its indexes). CHECK, UNIQUE and NOT NULL
# still apply. $3 of the rows are due (up to a minute ago), $4 scheduled
# within the hour, the rest have nothing scheduled.
FILL_SQL = """
INSERT INTO operations (operation_id, provider, kind, client_reference, request,
    request_fingerprint, idempotency_token, trace_id, requested_by,
    create_deadline, result_deadline, next_poll_at, history_seq, history_head)
SELECT 'op_' || lpad(g::text, 26, '0'), 'sim', 'export', 'fill-' || g, '{"n": 1}',
       'sha256:' || encode(sha256(convert_to('fill' || g, 'UTF8')), 'hex'),
       'idem_' || md5('tok' || g), md5('trace' || g), 'agent:fill',
       clock_timestamp() + interval '1 hour', clock_timestamp() + interval '1 day',
       CASE WHEN x.r < $3 THEN clock_timestamp() - random() * interval '60 seconds'
            WHEN x.r < $3 + $4 THEN clock_timestamp() + random() * interval '1 hour'
       END,
       1, md5('head' || g) || md5('chain' || g)
FROM generate_series($1::bigint, $2::bigint) AS g
CROSS JOIN LATERAL (SELECT random() + 0 * g AS r) AS x
"""
FILL_CHUNK = 250_000  # rows per INSERT … SELECT: a few seconds each, memory bounded


async def fill_operations(
    conn: Any, first: int, last: int, due_share: float, later_share: float
) -> None:
    """Filler operations numbered `first`..`last` (see FILL_SQL), then VACUUM ANALYZE."""
    for start in range(first, last + 1, FILL_CHUNK):
        async with conn.transaction():
            await conn.execute("SET LOCAL session_replication_role = replica")
            upto = min(last, start + FILL_CHUNK - 1)
            await conn.execute(FILL_SQL, start, upto, due_share, later_share)
    await conn.execute("VACUUM ANALYZE operations")


@contextlib.asynccontextmanager
async def due_rows_parked(conn: Any, interval: str) -> AsyncIterator[int]:
    """Every row due now moved `interval` (SQL) on, and back when the block ends.

    Yields how many were moved. What is due inside the block is only what the
    later rows' schedule brings due meanwhile.
    """
    parked = await conn.fetch(
        f"UPDATE operations SET next_poll_at = next_poll_at + interval '{interval}' "
        "WHERE operation_id IN (SELECT operation_id FROM operation_schedule"
        " WHERE next_poll_at <= jw_now()) RETURNING operation_id"
    )
    await conn.execute("VACUUM ANALYZE operations")
    try:
        yield len(parked)
    finally:
        await conn.execute(
            f"UPDATE operations SET next_poll_at = next_poll_at - interval '{interval}' "
            "WHERE operation_id = ANY($1::text[])",
            [r["operation_id"] for r in parked],
        )
        await conn.execute("VACUUM ANALYZE operations")


# The simulator signs webhooks with this; the receiver verifies with it. A
# throw-away value generated for the benchmark, never a deployment secret.
BENCH_WEBHOOK_SECRET = "whsec_" + "YmVuY2gtcmVjb25jaWxlci1zaWduaW5nLWtleQ=="


@contextlib.asynccontextmanager
async def receiver_process(db_url: str, config: Path, workdir: Path) -> AsyncIterator[int]:
    """`jobwarden receiver` on a free port, ready (READY=1) on entry."""
    port = free_port()

    def start(notify: Path) -> subprocess.Popen[bytes]:
        env = child_env(
            DATABASE_URL=db_url,
            JW_CONFIG=str(config),
            JW_SIM_WEBHOOK_SECRET=BENCH_WEBHOOK_SECRET,
            NOTIFY_SOCKET=str(notify),
        )
        return spawn(["receiver", "--port", str(port)], workdir / "receiver.log", env)

    # Once drained, uvicorn re-raises the SIGTERM it handled: a clean stop ends by that signal.
    clean = frozenset({0, -signal.SIGTERM})
    async with ready_process(start, workdir / "receiver.notify", "the receiver", clean):
        yield port
