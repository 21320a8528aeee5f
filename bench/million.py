"""A million active operations: claim time, status reads/s and each daemon's peak RSS.

    .venv/bin/python -m bench.million            # 10,000 then 1,000,000 operations
    .venv/bin/python -m bench.million --quick    # 10,000 then 100,000 operations
    .venv/bin/python -m bench.million --large 300000

Seeding through the ledger is the slow part: on the 2-core machine it was
measured on, submit_operation ran at 200-320 rows/s on a loaded day and
1,054 rows/s on a quiet one (2026-12-03), so the full run seeds for 16 to 80
minutes (it took 20 minutes in all that day).

Issue 13, item 5. One throw-away database grows through two sizes in one run;
at each size it measures the same three things, then prints the ratios of
the large size to the small one against the targets (claim time within
1.5x, reads/s within 0.8x).

Seeding goes through the ledger only: every operation is a
`shared.ledger.operations.submit_operation` call (the named `insert_operation`
query, whose birth trigger writes the genesis history), run concurrently on
a pool of connections; no raw INSERT beside it. The seeding rate is printed.

The rows: the first 2,000 are a working set the real reconciler daemon
creates at the simulator (`jobwarden simulator`, its own process) and then
keeps reading, every row due again at once (backoff of a millisecond). The
rows added to reach the large size are submitted with the database clock
(the test clock of sql/testing/test_clock.sql, installed for the whole run)
shifted a day ahead: they are active (`create_pending`, deadlines ahead) but
scheduled a day out, as most of a million active operations are at any
moment. So the reads window at both sizes does the same work (status reads
of the working set) and only the table differs. What seeding queued for the
evidence log is appended (`shared.ledger.log.sequence_all`, the daemon's own
5-second job) before measuring, as a daemon running meanwhile would have:
left queued, the first window would spend itself on that backlog.

- claim time: p50/p95 of `shared.ledger.leases.claim` (the daemon's batch),
  each inside a transaction that is rolled back, with the database clock
  moved past every row's appointment so that *every* seeded row is due;
- reads/s: the real daemon (`jobwarden reconciler`, a fresh process per
  window) for a fixed window; status reads and creates are counted at the
  simulator (/_sim/stats deltas);
- peak RSS: VmHWM of the reconciler and of a receiver process (`jobwarden
  receiver`, fresh per window) that receives signed webhooks (job.running)
  for the working set's jobs throughout the window.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    BENCH_WEBHOOK_SECRET,
    PROVIDER,
    REQUESTED_BY,
    CpuMeter,
    Simulator,
    bench_database,
    command_line,
    daemon_process,
    install_test_clock,
    our_postgres_pids,
    percentile,
    print_table,
    receiver_process,
    run_benchmarks,
    simulator,
    wait_until,
    write_config,
)
from shared.db.connect import connect, create_pool
from shared.ledger import RequestSpec, leases
from shared.ledger import log as evidence_log
from shared.ledger.operations import submit_operation
from shared.serve import loop_name
from shared.settings import Settings
from shared.signatures import sign_standard_webhooks

MODULE = "bench.million"
# Operations the daemon creates and then reads; the rest of each size is
# scheduled later. Creating goes through the daemon's whole create path (tens
# per second on this machine), so the working set is two thousand rows: ten
# claim batches, as bench/throughput.py --quick reads.
WORKING_SET = 2_000
SMALL = 10_000
LARGE, QUICK_LARGE = 1_000_000, 100_000
CLAIM_TARGET = 1.5  # claim p50 at the large size within 1.5x of 10k
READS_TARGET = 0.8  # reads/s at the large size at least 0.8x of 10k
# Backoff that makes every observed row due again at once (as bench/throughput.py).
ALWAYS_DUE = {"backoff_base": 0.001, "backoff_factor": 1.0, "backoff_cap": 0.001}
BODY = {"script": "never_finishes"}
# Seeding: submit_operation calls in flight, one connection each.
SEED_CONNECTIONS = 12
# Rows beyond the working set are scheduled this far ahead (the database clock
# is shifted while they are submitted) ...
PARK_SECONDS = 86_400.0
# ... and the clock is moved this far during the claim samples, so every row is due.
CLAIM_SHIFT_SECONDS = PARK_SECONDS + 3_600.0
# Deadlines far enough that nothing expires during the run, shifted or not.
CREATE_DEADLINE_S = 7 * 86_400.0
RESULT_DEADLINE_S = 30 * 86_400.0
CLAIM_SAMPLES, QUICK_CLAIM_SAMPLES = 40, 20
LEASE_SECONDS = 60.0
# Reads windows: a fresh daemon and receiver each; warm-up, then measured.
WINDOWS, QUICK_WINDOWS = 3, 2
WINDOW_SECONDS, QUICK_WINDOW_SECONDS = 10.0, 8.0
WARMUP_SECONDS = 3.0
# Webhooks sent to the receiver during each window (paced, a few in flight).
WEBHOOKS_PER_SECOND = 100
WEBHOOK_SENDERS = 4
CREATE_TIMEOUT_SECONDS = 600.0


@dataclass
class Window:
    seconds: float
    status_reads: int
    creates: int
    webhooks: Counter[int]
    cpu: dict[str, float]

    @property
    def reads_rate(self) -> float:
        return self.status_reads / self.seconds if self.seconds else math.nan


@dataclass
class SizeResult:
    rows: int
    seeded: int
    seed_seconds: float
    claim_times: list[float] = field(default_factory=list)
    claimed: int = 0
    due_rows: int = 0
    windows: list[Window] = field(default_factory=list)
    logged: int = 0  # evidence-log leaves appended for the seeded rows before measuring
    log_seconds: float = 0.0
    rss: dict[str, int] = field(default_factory=dict)  # peak kB per daemon, over windows

    @property
    def seed_rate(self) -> float:
        return self.seeded / self.seed_seconds if self.seed_seconds else math.nan

    @property
    def reads_rate(self) -> float:
        seconds = sum(w.seconds for w in self.windows)
        return sum(w.status_reads for w in self.windows) / seconds if seconds else math.nan


@dataclass
class MillionResult:
    sizes: list[SizeResult]
    create_seconds: float
    create_rss: dict[str, int]
    seconds: float


def vm_hwm_kb(pid: int) -> int:
    """Peak resident set size of a live process (VmHWM, kB); 0 if it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


async def seed(db_url: str, count: int) -> float:
    """`count` operations through `submit_operation`, concurrently; returns seconds."""
    request = RequestSpec("POST", "/v1/jobs", BODY)
    remaining = iter(range(count))
    pool = await create_pool(db_url, min_size=SEED_CONNECTIONS, max_size=SEED_CONNECTIONS)
    try:

        async def worker() -> None:
            async with pool.acquire() as conn:
                for _ in remaining:
                    await submit_operation(
                        conn,
                        provider=PROVIDER,
                        kind="export",
                        request=request,
                        requested_by=REQUESTED_BY,
                        create_deadline_s=CREATE_DEADLINE_S,
                        result_deadline_s=RESULT_DEADLINE_S,
                    )

        began = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(SEED_CONNECTIONS)))
        return time.monotonic() - began
    finally:
        await pool.close()


async def set_db_clock(conn: Any, seconds: float) -> None:
    """Shift the database clock (jw_now(), sql/testing/test_clock.sql) to `seconds` ahead.

    Set, not advanced: TestClock only moves forward, and this shift is undone.
    Nothing that reads the clock runs while it is shifted (no daemon is up).
    """
    await conn.execute("UPDATE jw_test_clock SET shift = make_interval(secs => $1)", seconds)


async def sim_counts(sim: Simulator) -> tuple[int, int]:
    """(status reads, creates) the simulator has answered so far."""
    stats = await sim.stats()
    return sum(stats["status_calls_per_job"].values()), int(stats["creates_total"])


async def working_jobs(conn: Any) -> list[str]:
    rows = await conn.fetch(
        "SELECT remote_job_id FROM operations WHERE remote_job_id IS NOT NULL ORDER BY 1"
    )
    return [r[0] for r in rows]


async def send_webhooks(port: int, jobs: Sequence[str], seconds: float) -> Counter[int]:
    """Signed job.running deliveries for `jobs`, paced over `seconds`; answers by status."""
    answers: Counter[int] = Counter()
    url = f"http://127.0.0.1:{port}/webhooks/{PROVIDER}"
    total = int(WEBHOOKS_PER_SECOND * seconds)
    began = time.monotonic()
    tag = f"{os.getpid()}_{time.time_ns()}"

    async def sender(offset: int) -> None:
        async with httpx.AsyncClient(trust_env=False, timeout=10.0) as client:
            for i in range(offset, total, WEBHOOK_SENDERS):
                delay = began + i / WEBHOOKS_PER_SECOND - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                event_id, stamp = f"evt_million_{tag}_{i}", int(time.time())
                job = jobs[i % len(jobs)]
                body = json.dumps({"type": "job.running", "job_id": job, "state": "running"})
                raw = body.encode()
                headers = {
                    "content-type": "application/json",
                    "webhook-id": event_id,
                    "webhook-timestamp": str(stamp),
                    "webhook-signature": sign_standard_webhooks(
                        BENCH_WEBHOOK_SECRET, event_id, stamp, raw
                    ),
                }
                try:
                    answers[(await client.post(url, content=raw, headers=headers)).status_code] += 1
                except httpx.HTTPError:
                    answers[0] += 1

    await asyncio.gather(*(sender(k) for k in range(WEBHOOK_SENDERS)))
    return answers


async def create_working_set(db_url: str, config: Path, workdir: Path) -> tuple[float, int]:
    """The daemon creates every working-set job at the simulator; (seconds, its VmHWM kB)."""
    conn = await connect(db_url)
    try:
        async with daemon_process(db_url, config, workdir, "million-create") as proc:
            began = time.monotonic()

            async def all_observing() -> bool:
                left = await conn.fetchval(
                    "SELECT count(*) FROM operation_schedule s JOIN operations o "
                    "USING (operation_id) WHERE o.remote_job_id IS NULL "
                    "AND s.next_poll_at < jw_now() + make_interval(secs => $1)",
                    PARK_SECONDS / 2,
                )
                return bool(left == 0)

            await wait_until(all_observing, CREATE_TIMEOUT_SECONDS, "the working set", 0.5)
            return time.monotonic() - began, vm_hwm_kb(proc.pid)
    finally:
        await conn.close()


async def measure_claims(db_url: str, result: SizeResult, samples: int) -> None:
    """Claim p50/p95 with every seeded row due (clock moved on), each claim rolled back."""
    conn = await connect(db_url)
    batch = Settings().claim_batch
    try:
        await conn.execute("VACUUM ANALYZE operations")
        await set_db_clock(conn, CLAIM_SHIFT_SECONDS)
        try:
            result.due_rows = await conn.fetchval(
                "SELECT count(*) FROM operation_schedule WHERE next_poll_at <= jw_now()"
            )
            for _ in range(samples + 3):  # three untimed: statement prepared, pages warm
                tx = conn.transaction()
                await tx.start()
                try:
                    began = time.perf_counter()
                    rows = await leases.claim(conn, "bench-million", batch, LEASE_SECONDS)
                    result.claim_times.append(time.perf_counter() - began)
                    result.claimed = len(rows)
                finally:
                    await tx.rollback()
            del result.claim_times[:3]
        finally:
            await set_db_clock(conn, 0.0)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def daemons(
    db_url: str, config: Path, workdir: Path, tag: str
) -> AsyncIterator[tuple[Any, Any, int]]:
    """A fresh reconciler and receiver; yields (reconciler proc, receiver pid, receiver port)."""
    async with (
        receiver_process(db_url, config, workdir) as port,
        daemon_process(db_url, config, workdir, f"million-{tag}") as proc,
    ):
        yield proc, receiver_pid(port), port


def receiver_pid(port: int) -> int:
    """The pid of the `jobwarden receiver` child listening on `port` (our child)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if (
                b"receiver" in cmd
                and str(port).encode() in cmd
                and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid()
            ):
                return int(entry.name)
    return 0


async def measure_window(
    sim: Simulator, db_url: str, config: Path, workdir: Path, tag: str, seconds: float
) -> tuple[Window, dict[str, int]]:
    conn = await connect(db_url)
    try:
        jobs = await working_jobs(conn)
    finally:
        await conn.close()
    async with daemons(db_url, config, workdir, tag) as (proc, rpid, port):
        await asyncio.sleep(WARMUP_SECONDS)
        meter = CpuMeter(
            {
                "reconciler": lambda: [proc.pid],
                "receiver": lambda: [rpid] if rpid else [],
                "simulator": lambda: [sim.proc.pid],
                "postgres": our_postgres_pids,
                "bench": lambda: [os.getpid()],
            }
        )
        reads0, creates0 = await sim_counts(sim)
        meter.start()
        began = time.monotonic()
        answers = await send_webhooks(port, jobs, seconds)
        await asyncio.sleep(max(0.0, began + seconds - time.monotonic()))
        elapsed = time.monotonic() - began
        reads1, creates1 = await sim_counts(sim)
        cpu = meter.stop()
        rss = {"reconciler": vm_hwm_kb(proc.pid), "receiver": vm_hwm_kb(rpid) if rpid else 0}
    window = Window(elapsed, reads1 - reads0, creates1 - creates0, answers, cpu)
    return window, rss


async def seed_parked(db_url: str, count: int) -> float:
    """`count` operations scheduled PARK_SECONDS ahead (clock shifted while submitted)."""
    conn = await connect(db_url)
    try:
        await set_db_clock(conn, PARK_SECONDS)
        try:
            return await seed(db_url, count)
        finally:
            await set_db_clock(conn, 0.0)
    finally:
        await conn.close()


async def sequence_backlog(db_url: str) -> tuple[int, float]:
    """Append what seeding queued to the evidence log (the daemon's 5 s job, at once).

    A daemon running while the rows arrived would have done it as they came;
    left queued, the first daemon of a window would spend the window catching
    up on the backlog instead of measuring steady state.
    """
    conn = await connect(db_url)
    try:
        began = time.monotonic()
        appended = await evidence_log.sequence_all(conn, batch=20_000)
        return appended, time.monotonic() - began
    finally:
        await conn.close()


async def bench_million(quick: bool, large: int, workdir: Path) -> MillionResult:
    began = time.monotonic()
    results: list[SizeResult] = []
    create_seconds, create_rss = math.nan, 0
    async with bench_database("million") as db, simulator(workdir) as sim:
        conn = await connect(db.url)
        try:
            await install_test_clock(conn)
        finally:
            await conn.close()
        config = write_config(workdir / "million.toml", sim.url, ALWAYS_DUE)
        seeded = 0
        for n, size in enumerate((SMALL, large)):
            result = SizeResult(rows=size, seeded=size - seeded, seed_seconds=0.0)
            if n == 0:
                result.seed_seconds = await seed(db.url, WORKING_SET)
                result.seed_seconds += await seed_parked(db.url, size - WORKING_SET)
                create_seconds, create_rss = await create_working_set(db.url, config, workdir)
            else:
                result.seed_seconds = await seed_parked(db.url, size - seeded)
            seeded = size
            result.logged, result.log_seconds = await sequence_backlog(db.url)
            print(
                f"(seeded {result.seeded:,} operations in {result.seed_seconds:.0f} s, "
                f"{result.seed_rate:,.0f}/s; evidence log +{result.logged:,} leaves in "
                f"{result.log_seconds:.0f} s; measuring at {size:,})",
                file=sys.stderr,
                flush=True,
            )
            await measure_claims(db.url, result, QUICK_CLAIM_SAMPLES if quick else CLAIM_SAMPLES)
            for k in range(QUICK_WINDOWS if quick else WINDOWS):
                window, rss = await measure_window(
                    sim,
                    db.url,
                    config,
                    workdir,
                    f"{size}-{k}",
                    QUICK_WINDOW_SECONDS if quick else WINDOW_SECONDS,
                )
                result.windows.append(window)
                for daemon, kb in rss.items():
                    result.rss[daemon] = max(result.rss.get(daemon, 0), kb)
            results.append(result)
    return MillionResult(
        results, create_seconds, {"reconciler": create_rss}, time.monotonic() - began
    )


def mib(kb: int) -> str:
    return f"{kb / 1024:.0f} MiB" if kb else "n/a"


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def report_million(r: MillionResult, command: str) -> None:
    batch = Settings().claim_batch
    groups = ("reconciler", "receiver", "simulator", "postgres")
    rows = []
    for s in r.sizes:
        hooks: Counter[int] = Counter()
        for w in s.windows:
            hooks.update(w.webhooks)
        seconds = sum(w.seconds for w in s.windows)
        cpu = {g: sum(w.cpu.get(g, 0.0) * w.seconds for w in s.windows) / seconds for g in groups}
        rows.append(
            [
                f"{s.rows:,}",
                f"{s.seeded:,} in {s.seed_seconds:.0f} s ({s.seed_rate:,.0f}/s)",
                f"{s.due_rows:,}",
                f"{percentile(s.claim_times, 50) * 1000:.1f} ms",
                f"{percentile(s.claim_times, 95) * 1000:.1f} ms",
                f"{s.reads_rate:,.0f}",
                " / ".join(f"{w.reads_rate:,.0f}" for w in s.windows),
                str(sum(w.creates for w in s.windows)),
                mib(s.rss.get("reconciler", 0)),
                mib(s.rss.get("receiver", 0)),
                f"{hooks[200]}/{sum(hooks.values())}",
                " ".join(f"{cpu[g]:.0%}" for g in groups),
            ]
        )
    print_table(
        f"Million active operations: claim (batch {batch}, rolled back, every row due), "
        "status reads/s of the real daemon, peak RSS of each daemon",
        command,
        [
            *("active rows", "seeded through submit_operation", "due at claim"),
            *("claim p50", "claim p95", "reads/s", "per window", "creates"),
            *("reconciler RSS", "receiver RSS", "webhooks 200", "cpu rec/recv/sim/pg"),
        ],
        rows,
    )
    small, large = r.sizes[0], r.sizes[-1]
    claim = percentile(large.claim_times, 50) / percentile(small.claim_times, 50)
    claim95 = percentile(large.claim_times, 95) / percentile(small.claim_times, 95)
    reads = large.reads_rate / small.reads_rate
    print(
        f"claim p50 at {large.rows:,} / at {small.rows:,} = {claim:.2f}x "
        f"(p95 {claim95:.2f}x; target <= {CLAIM_TARGET}x: {verdict(claim <= CLAIM_TARGET)})"
    )
    print(
        f"reads/s at {large.rows:,} / at {small.rows:,} = {reads:.2f} "
        f"(target >= {READS_TARGET}: {verdict(reads >= READS_TARGET)})"
    )
    print(
        f"stack: reconciler, receiver and simulator in their own processes "
        f"(shared/serve.py); this process on the {loop_name()} event loop"
    )
    print(
        f"working set: {WORKING_SET:,} operations the daemon created at the simulator "
        f"({r.create_seconds:.0f} s, daemon peak RSS {mib(r.create_rss['reconciler'])}), "
        "then read back to back (every row due again after a read); rows beyond it are "
        f"active create_pending operations scheduled {PARK_SECONDS / 3600:.0f} h ahead "
        "(submitted with the database clock shifted); claims run with the clock moved "
        "past every appointment. reads/s = status reads the simulator answered per second "
        "over the windows (a fresh reconciler + receiver per window, "
        f"{WARMUP_SECONDS:.0f} s warm-up unmeasured); creates = create calls in the windows; "
        "RSS = VmHWM; webhooks = signed job.running deliveries for working-set jobs, "
        f"{WEBHOOKS_PER_SECOND}/s; cpu = share of one core during the windows "
        f"({os.cpu_count()} cores). Run took {r.seconds:.0f} s."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_LARGE:,} rows, not 1M")
    parser.add_argument(
        "--large", type=int, default=None, help="the large size (default 1,000,000; quick 100,000)"
    )
    args = parser.parse_args(argv)
    large = args.large or (QUICK_LARGE if args.quick else LARGE)
    if large <= SMALL:
        parser.error(f"--large must exceed {SMALL:,}")
    own = (["--quick"] if args.quick else []) + ([f"--large={large}"] if args.large else [])

    async def run(quick: bool, workdir: Path, command: str) -> None:
        result = await bench_million(quick, large, workdir)
        report_million(result, command_line(MODULE, own))

    return run_benchmarks([(MODULE, run)], args.quick)


if __name__ == "__main__":
    sys.exit(main())
