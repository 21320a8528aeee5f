"""Status-read throughput of `Reconciler.run_once` against a bare httpx GET loop.

    .venv/bin/python -m bench.throughput            # 10,000 operations
    .venv/bin/python -m bench.throughput --quick    # 2,000 operations, one round

10,000 observing operations, all due. It measures the status reads/s of the
reconciler's own loop and of a bare GET loop at the same concurrency,
alternating, so that drift hits both alike. The bare loop is the fastest one
on the reconciler's own stack: each task sends on a `Lane` of its own (httpx's
transport without its client layer, reconciler/lanes.py), exactly as the
reconciler sends. The loop users write, an `httpx.AsyncClient` per task, is
slower (a context row): comparing with it would flatter the ratio.
The ratio is the figure with a target (>= 0.6, issue 13): it holds on any
machine because both sides run in the same minute on the same box. Context
rows locate the gap (the batching alone, an AsyncClient per task, one shared
client, the reconciler with every read answered in process, asyncpg's default
pool reset), and a
counted pass gives the database round trips per poll (an asyncpg query
logger on every pooled connection). The simulator runs in its own process,
and each party's CPU is printed to show which one is the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench import floor
from bench.harness import (
    PROVIDER,
    CpuMeter,
    RoundTripCounter,
    bench_database,
    benchmark_main,
    create_remote_jobs,
    in_process_reconciler,
    our_postgres_pids,
    print_table,
    providers_for,
    seed_observing,
    simulator,
)
from bench.stack import client_stack, describe, require_same_stack
from reconciler.daemon import POOL_SIZE, create_reconciler_pool
from reconciler.lanes import LANE_CONNECTIONS, Lane, Lanes
from reconciler.worker import Reconciler
from shared import heap
from shared.db.connect import connect, create_pool
from shared.providers import ProviderDescription
from shared.serve import Stack
from shared.settings import Settings

MODULE = "bench.throughput"
# The reconciler against the bare loop (issue 13: ">= 0.6").
TARGET_RATIO = 0.6
# Backoff that makes every observed row due again at once, so the loop
# measures sustained reads rather than the schedule ("next_poll_at forced due").
ALWAYS_DUE = {"backoff_base": 0.001, "backoff_factor": 1.0, "backoff_cap": 0.001}
# Measured windows: bare and reconciler alternate ROUNDS times (drift from
# CPU frequency, other load or table growth then hits both alike); each
# context row gets one window.
WINDOW_SECONDS = 4.0
ROUNDS, QUICK_ROUNDS = 3, 1
# An untimed run of each loop first: connections opened, statements prepared.
# The context row's fresh pool only needs its connections opened in --quick.
WARMUP_SECONDS, QUICK_CONTEXT_WARMUP_SECONDS = 2.0, 1.0
# The size the throughput target is stated for; --quick still fills ten claim batches.
OPERATIONS, QUICK_OPERATIONS = 10_000, 2_000
# The counted pass: hundreds of polls, kept short as the query logger slows it.
COUNT_SECONDS, QUICK_COUNT_SECONDS = 2.0, 1.0


@dataclass
class Phase:
    reads: int = 0
    seconds: float = 0.0
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    # seconds the bench process was ready to run but waited for a core
    waited: float = 0.0
    stack: Stack | None = None  # the client's parser and the loop it ran on

    @property
    def rate(self) -> float:
        return self.reads / self.seconds if self.seconds else math.nan

    def cpu(self, group: str) -> float:
        """Share of one core the group used while this phase ran."""
        return self.cpu_seconds.get(group, 0.0) / self.seconds if self.seconds else math.nan


# Row labels of the throughput table; the first two make the ratio.
BARE = "bare GET loop on httpx's transport, a lane per task (baseline)"
RECONCILER = "reconciler run_once loop"
FLOOR = "floor: the bare loop, each read committed"
BATCHED = "context: bare, in run_once's batches"
SHARED_CLIENT = "context: bare, one shared client"
CLIENT_PER_TASK = "context: bare, an httpx.AsyncClient per task"
NO_RESET = "context: reconciler, asyncpg default pool reset"
NO_SOCKET = "context: reconciler, the provider answered in process"
CLIENT_LAYER = "context: reconciler, through httpx's client layer"


@dataclass
class ThroughputResult:
    operations: int
    concurrency: int
    seed_seconds: float
    phases: dict[str, Phase]
    wrk_rate: float | None
    round_trips: Counter[str]
    polls_counted: int


@dataclass
class Rig:
    """What every measured phase runs against: one database, one simulator, one meter."""

    quick: bool
    workdir: Path
    db_url: str
    sim_url: str
    jobs: Sequence[str]
    providers: Mapping[str, ProviderDescription]
    meter: CpuMeter
    phases: dict[str, Phase]

    @property
    def concurrency(self) -> int:
        return self.providers[PROVIDER].limits.max_concurrency

    async def measure(self, name: str, run: Callable[[float], Awaitable[int]]) -> None:
        """One window of `run` added to phase `name`, with each group's CPU."""
        phase = self.phases[name]
        phase.stack = client_stack()
        self.meter.start()
        waited = runqueue_seconds()
        began = time.monotonic()
        phase.reads += await run(WINDOW_SECONDS)
        elapsed = time.monotonic() - began
        phase.seconds += elapsed
        phase.waited += runqueue_seconds() - waited
        for group, share in self.meter.stop().items():
            phase.cpu_seconds[group] = phase.cpu_seconds.get(group, 0.0) + share * elapsed


def runqueue_seconds() -> float:
    """Seconds this process has spent runnable but waiting for a core (its schedstat)."""
    return int(Path("/proc/self/schedstat").read_text().split()[1]) / 1e9


async def run_reconciler_for(rec: Reconciler, seconds: float) -> int:
    """run_once back to back (what Daemon.sweep does while rows are due); returns reads."""
    reads = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        counts = await rec.run_once()
        reads += counts["observing"]
    return reads


Get = Callable[[str], Awaitable[httpx.Response]]


# Every read the floor stores is a new row, as every read the reconciler records is.
_READ_KEYS = itertools.count()


async def run_gets_for(
    gets: Sequence[Get],
    sim_url: str,
    jobs: Sequence[str],
    seconds: float,
    store: floor.Store | None = None,
) -> int:
    """A bare loop: one task per entry of `gets` doing GET /v1/jobs/{id}, the status
    checked and the body parsed, as the reconciler does with each answer.

    With `store`, the floor: each answer is also stored under a key of its own
    and committed (bench.floor's group commit) before its task reads again,
    the least a durable poller does with a read: no claim, no lease, no state
    machine, no evidence log, no schedule. What it reaches against the bare
    loop shows how much room this stack and machine leave a reconciler.
    """
    reads = 0
    end = time.monotonic() + seconds
    step = len(gets)

    async def worker(offset: int, get: Get) -> None:
        nonlocal reads
        i = offset
        while time.monotonic() < end:
            job = jobs[i % len(jobs)]
            resp = await get(f"{sim_url}/v1/jobs/{job}")
            resp.raise_for_status()
            resp.json()
            if store is not None:
                await store(f"{job}:{next(_READ_KEYS)}", resp.content)
            reads += 1
            i += step

    await asyncio.gather(*(worker(k, get) for k, get in enumerate(gets)))
    return reads


def on_lanes(lanes: Sequence[Lane]) -> list[Get]:
    """The baseline's senders: the reconciler's own HTTP path, nothing else.

    A Lane is httpx's transport without the client layer; an AsyncClient per
    task is slower (its context row), so it would flatter the ratio.
    """
    return [functools.partial(lane.call, "GET") for lane in lanes]


def on_clients(clients: Sequence[httpx.AsyncClient]) -> list[Get]:
    return [client.get for client in clients]


class AnsweredLane(Lane):
    """A lane that answers every call with one recorded answer, without a socket.

    The reconciler on these lanes shows its own work per read (and
    PostgreSQL's) with no HTTP at all: the "answered in process" row.
    """

    def __init__(self, answer: httpx.Response) -> None:
        super().__init__()
        self._answer = answer

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0)  # a call always yields, as a real one does
        return httpx.Response(
            self._answer.status_code,
            headers=self._answer.headers.raw,
            content=self._answer.content,
            request=request,
        )


class ClientLane(Lane):
    """A lane that sends through an httpx.AsyncClient (its client layer: auth,
    redirects, cookies, event hooks), configured as the reconciler's client was
    before reconciler/lanes.py: the "through httpx's client layer" row."""

    def __init__(self) -> None:
        super().__init__()
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            limits=httpx.Limits(max_connections=LANE_CONNECTIONS),
            trust_env=False,
        )

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        return await self._client.send(request)

    async def aclose(self) -> None:
        await self._client.aclose()
        await super().aclose()


def bare_client(max_connections: int) -> httpx.AsyncClient:
    """The baseline's client: httpx's own, as a user writes it (no proxy lookups)."""
    return httpx.AsyncClient(
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        trust_env=False,
    )


async def run_batched_for(
    lanes: Lanes,
    sim_url: str,
    jobs: Sequence[str],
    concurrency: int,
    batch: int,
    seconds: float,
) -> int:
    """Bare GETs in the reconciler's access pattern, without any database work.

    Batches of `batch` reads gathered at once behind a Semaphore(concurrency),
    each on a lane of its own, one batch after the other — what run_once does
    with a claim — so the gap
    between this and the plain loop is the pattern's, not the ledger's.
    """
    reads = 0
    end = time.monotonic() + seconds
    gate = asyncio.Semaphore(concurrency)

    async def one(job: str) -> None:
        nonlocal reads
        async with gate, lanes.lane(PROVIDER) as lane:
            resp = await lane.call("GET", f"{sim_url}/v1/jobs/{job}")
        resp.raise_for_status()
        resp.json()
        reads += 1

    start = 0
    while time.monotonic() < end:
        await asyncio.gather(*(one(jobs[(start + k) % len(jobs)]) for k in range(batch)))
        start += batch
    return reads


def wrk_rate(url: str, connections: int, seconds: int) -> float | None:
    """Requests/s wrk gets from the simulator: its capacity, for context (None: no wrk)."""
    exe = shutil.which("wrk")
    if exe is None:
        return None
    out = subprocess.run(
        [exe, "-t1", f"-c{connections}", f"-d{seconds}s", url],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 30,
    ).stdout
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    return None


async def seed_due_observing(db_url: str, sim_url: str, count: int) -> list[str]:
    """`count` observing operations on never-finishing jobs, all due now; returns the jobs."""
    body = {"script": "never_finishes"}
    jobs = await create_remote_jobs(sim_url, count, body)
    conn = await connect(db_url)
    try:
        await seed_observing(conn, sim_url, jobs, [datetime.now(UTC)] * count, body)
        await conn.execute("VACUUM ANALYZE operations")
    finally:
        await conn.close()
    return jobs


async def bench_throughput(quick: bool, workdir: Path) -> ThroughputResult:
    operations = QUICK_OPERATIONS if quick else OPERATIONS
    async with bench_database("throughput") as db, simulator(workdir) as sim:
        providers = providers_for(sim.url, ALWAYS_DUE)
        began = time.monotonic()
        jobs = await seed_due_observing(db.url, sim.url, operations)
        seed_seconds = time.monotonic() - began
        # as the daemon does once started (shared/heap.py); both loops run in this process
        heap.settle()
        meter = CpuMeter(
            {
                "bench": lambda: [os.getpid()],
                "simulator": lambda: [sim.proc.pid],
                "postgres": our_postgres_pids,
            }
        )
        phases = {
            name: Phase()
            for name in (
                BARE,
                RECONCILER,
                FLOOR,
                BATCHED,
                CLIENT_PER_TASK,
                SHARED_CLIENT,
                NO_RESET,
                NO_SOCKET,
                CLIENT_LAYER,
            )
        }
        rig = Rig(quick, workdir, db.url, sim.url, jobs, providers, meter, phases)
        await compare_with_bare(rig)
        counter = RoundTripCounter()
        polls = await count_round_trips(rig, counter)
        await measure_context(rig)
        wrk = wrk_rate(f"{sim.url}/v1/jobs/{jobs[0]}", rig.concurrency, int(WINDOW_SECONDS))
    return ThroughputResult(
        operations, rig.concurrency, seed_seconds, phases, wrk, counter.counts, polls
    )


async def compare_with_bare(rig: Rig) -> None:
    """The ratio's two rows, and the reconciler through httpx's client layer (what
    reconciler/lanes.py saves), measured in alternation."""
    pool = await create_reconciler_pool(rig.db_url)  # the daemon's own pool configuration
    try:
        async with (
            in_process_reconciler(pool, rig.workdir, rig.providers) as rec,
            in_process_reconciler(pool, rig.workdir, rig.providers, ClientLane) as layered,
            contextlib.AsyncExitStack() as stack,
        ):
            # A lane per task, as the reconciler has a lane per provider slot,
            # at the reconciler's concurrency: the same HTTP path, nothing else.
            lanes = [await stack.enter_async_context(Lane()) for _ in range(rig.concurrency)]

            async def bare(s: float) -> int:
                return await run_gets_for(on_lanes(lanes), rig.sim_url, rig.jobs, s)

            async def reconciler(s: float) -> int:
                return await run_reconciler_for(rec, s)

            async def through_the_client(s: float) -> int:
                return await run_reconciler_for(layered, s)

            committer = floor.GroupCommit("bench_floor_reads")
            await committer.start(rig.db_url)
            stack.push_async_callback(committer.stop)

            async def committed(s: float) -> int:
                return await run_gets_for(
                    on_lanes(lanes), rig.sim_url, rig.jobs, s, committer.store
                )

            for warm_up in (bare, reconciler, through_the_client, committed):
                await warm_up(WARMUP_SECONDS)
            for _ in range(QUICK_ROUNDS if rig.quick else ROUNDS):
                await rig.measure(BARE, bare)
                await rig.measure(RECONCILER, reconciler)
                await rig.measure(CLIENT_LAYER, through_the_client)
                await rig.measure(FLOOR, committed)
    finally:
        await pool.close()


async def count_round_trips(rig: Rig, counter: RoundTripCounter) -> int:
    """Polls made by a reconciler whose every statement is counted.

    A pool of its own: the query logger costs a little per statement, and the
    timed rows must not pay for it.
    """
    pool = await create_reconciler_pool(rig.db_url, setup=counter.setup)
    try:
        async with in_process_reconciler(pool, rig.workdir, rig.providers) as rec:
            await run_reconciler_for(rec, 0.5)  # connections opened, statements prepared
            counter.enabled = True
            polls = await run_reconciler_for(
                rec, QUICK_COUNT_SECONDS if rig.quick else COUNT_SECONDS
            )
            counter.enabled = False
            return polls
    finally:
        await pool.close()


async def measure_context(rig: Rig) -> None:
    """Rows that locate the gap: run_once's batching alone, httpx's client layer and its
    shared pool, the reconciler with no socket at all, asyncpg's reset."""
    settings = Settings()
    async with Lanes(settings.max_in_flight) as lanes:
        await rig.measure(
            BATCHED,
            lambda s: run_batched_for(
                lanes, rig.sim_url, rig.jobs, rig.concurrency, settings.claim_batch, s
            ),
        )
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(bare_client(1)) for _ in range(rig.concurrency)]
        await rig.measure(
            CLIENT_PER_TASK, lambda s: run_gets_for(on_clients(clients), rig.sim_url, rig.jobs, s)
        )
    async with bare_client(settings.max_in_flight) as shared:
        # what the reconciler used before reconciler/lanes.py, and a plain loop would
        clients = [shared] * rig.concurrency
        await rig.measure(
            SHARED_CLIENT, lambda s: run_gets_for(on_clients(clients), rig.sim_url, rig.jobs, s)
        )
    await measure_without_sockets(rig)
    # asyncpg's default reset on every release, where the daemon's pool only rolls back
    pool = await create_pool(rig.db_url, min_size=1, max_size=POOL_SIZE)
    try:
        async with in_process_reconciler(pool, rig.workdir, rig.providers) as rec:
            await run_reconciler_for(
                rec, QUICK_CONTEXT_WARMUP_SECONDS if rig.quick else WARMUP_SECONDS
            )
            await rig.measure(NO_RESET, lambda s: run_reconciler_for(rec, s))
    finally:
        await pool.close()


async def measure_without_sockets(rig: Rig) -> None:
    """The reconciler with every status read answered in process (one recorded answer)."""
    async with Lane() as lane:
        answer = await lane.call("GET", f"{rig.sim_url}/v1/jobs/{rig.jobs[0]}")
    pool = await create_reconciler_pool(rig.db_url)
    try:
        async with in_process_reconciler(
            pool, rig.workdir, rig.providers, lambda: AnsweredLane(answer)
        ) as rec:
            await run_reconciler_for(
                rec, QUICK_CONTEXT_WARMUP_SECONDS if rig.quick else WARMUP_SECONDS
            )
            await rig.measure(NO_SOCKET, lambda s: run_reconciler_for(rec, s))
    finally:
        await pool.close()


def report_throughput(r: ThroughputResult, command: str) -> None:
    groups = ("bench", "simulator", "postgres")
    sides = {name: r.phases[name].stack for name in (BARE, RECONCILER)}
    stacks = {name: stack for name, stack in sides.items() if stack is not None}
    require_same_stack(stacks)  # no ratio between unlike stacks

    def row(name: str, p: Phase) -> list[str]:
        shares = [f"{p.cpu(g):.0%}" for g in groups]
        # CPU time all three parties spent per read: what bounds a CPU-bound box.
        per_read = sum(p.cpu_seconds.get(g, 0.0) for g in groups) / max(p.reads, 1) * 1000
        own = p.cpu_seconds.get("bench", 0.0) / max(p.reads, 1) * 1000
        waits = p.waited / p.seconds if p.seconds else math.nan
        return [
            name,
            f"{p.rate:,.0f}",
            f"{p.reads:,}",
            f"{p.seconds:.1f} s",
            *shares,
            f"{per_read:.2f} ms",
            f"{own:.2f} ms",
            f"{waits:.0%}",
        ]

    rows = [row(name, p) for name, p in r.phases.items()]
    if r.wrk_rate is not None:
        rows.append(["context: wrk, simulator capacity", f"{r.wrk_rate:,.0f}", *[""] * 8])
    print_table(
        f"1. Status-read throughput: {r.operations:,} observing operations, "
        f"{r.concurrency} reads in flight (the preset's max_concurrency)",
        command,
        [
            "loop",
            "reads/s",
            "reads",
            "window",
            "cpu bench",
            "cpu sim",
            "cpu pg",
            "cpu/read",
            "bench/read",
            "bench waits",
        ],
        rows,
    )
    print(describe(stacks) + " (both against `jobwarden simulator`, served by shared/serve.py)")
    ratio = r.phases[RECONCILER].rate / r.phases[BARE].rate
    verdict = "meets" if ratio >= TARGET_RATIO else "MISSES"
    print(f"ratio reconciler / bare loop = {ratio:.2f}  (target >= {TARGET_RATIO}: {verdict})")
    ceiling = r.phases[FLOOR].rate
    print(
        f"the floor / bare loop = {ceiling / r.phases[BARE].rate:.2f}; "
        f"reconciler / the floor = {r.phases[RECONCILER].rate / ceiling:.2f}"
    )
    layered = r.phases[RECONCILER].rate / r.phases[CLIENT_LAYER].rate
    print(f"reconciler on its lanes / through httpx's client layer = {layered:.2f}")
    polls = max(r.polls_counted, 1)
    per_poll = sum(r.round_trips.values()) / polls
    detail = ", ".join(f"{name} {n / polls:.2f}" for name, n in r.round_trips.most_common())
    print(f"database round trips per poll: {per_poll:.2f}  ({detail}; over {polls:,} polls)")
    print(
        f"cpu = share of one core during the row's windows ({os.cpu_count()} cores in all; "
        "other processes on the machine are not counted); cpu/read = CPU time of bench + "
        "simulator + PostgreSQL per read; bench/read = the bench process's own CPU per read; "
        "bench waits = share of the window the bench process was ready to run but waited "
        "for a core (/proc/self/schedstat); 'batches' = the bare GETs gathered "
        f"{Settings().claim_batch} at a time behind the provider semaphore, each on a lane, "
        "as run_once does; 'an httpx.AsyncClient per task' = the loop as a user writes it with "
        "httpx's client layer (cookies, redirects, request building), which the lanes skip; "
        "'through httpx's client layer' = the same reconciler with each lane sending by "
        "AsyncClient.send, as before reconciler/lanes.py (alternating with the ratio's rows); "
        "'the provider answered in process' = the reconciler with every read answered by one "
        "recorded answer, no socket: its own work and PostgreSQL's per read; "
        "'the floor' = the bare loop with each answer committed under a key of its own "
        "(bench/floor.py's group commit) before its task reads again (alternating with the "
        "ratio's rows); "
        "'default pool reset' = the same reconciler on a pool with asyncpg's reset query on "
        "every release (not the shipped configuration); "
        f"seeding {r.operations:,} operations took {r.seed_seconds:.1f} s"
    )


async def run(quick: bool, workdir: Path, command: str) -> None:
    report_throughput(await bench_throughput(quick, workdir), command)


def main(argv: Sequence[str] | None = None) -> int:
    return benchmark_main(MODULE, __doc__ or MODULE, run, argv)


if __name__ == "__main__":
    sys.exit(main())
