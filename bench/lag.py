"""Scheduling lag under the real daemon: first status read minus next_poll_at.

    .venv/bin/python -m bench.lag            # 1,000 and 2,000 rows, each due over 30 s
    .venv/bin/python -m bench.lag --quick    # 500 rows due over 10 s

Rows are made due at spread-out moments, and `jobwarden reconciler` runs in
its own process on its shipped sweep interval and the preset's backoff. How
late each row's first read is, p50 and p99, is what a user of the reconciler
sees. The target is p99 < 1 s while the daemon is not saturated. Each load
level gets a fresh database and a fresh daemon.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import (
    CpuMeter,
    Simulator,
    bench_database,
    benchmark_main,
    create_remote_jobs,
    daemon_process,
    ms,
    percentile,
    print_table,
    schedule_in,
    seed_observing,
    simulator,
    wait_until,
    write_config,
)
from shared.db.connect import connect
from shared.settings import Settings

MODULE = "bench.lag"


@dataclass
class LagResult:
    operations: int
    spread_seconds: float
    sweep_interval: float
    lags: list[float]
    polls_per_second: float
    cpu: dict[str, float]
    ticks_skipped: int


# (rows, seconds they fall due over) per load level: the rate of first reads
# doubles from one level to the next; the backoff re-reads that follow add more.
LAG_LEVELS = ((1_000, 30.0), (2_000, 30.0))
QUICK_LAG_LEVELS = ((500, 10.0),)
LAG_LEAD_SECONDS = 1.0  # the first row falls due this long after the schedule is written
# Status reads, as the ledger records them: the claim writes the call row as the
# read is about to leave (started_at); one it then never sent is closed as
# not_sent and is no read.
READS = "call_kind = 'status' AND error_category IS DISTINCT FROM 'not_sent'"
# After the last row falls due, how long its first read may take before the run gives up.
FIRST_POLL_GRACE_SECONDS = 60.0


async def bench_lag(quick: bool, workdir: Path) -> list[LagResult]:
    """First-poll time minus next_poll_at, one fresh database and daemon per load level."""
    results = []
    async with simulator(workdir) as sim:
        for operations, spread in QUICK_LAG_LEVELS if quick else LAG_LEVELS:
            results.append(await lag_level(sim, workdir, operations, spread))
    return results


async def lag_level(sim: Simulator, workdir: Path, operations: int, spread: float) -> LagResult:
    body = {"script": "never_finishes"}
    jobs = await create_remote_jobs(sim.url, operations, body)
    async with bench_database(f"lag{operations}") as db:
        conn = await connect(db.url)
        try:
            # Seeded a day away; the real schedule is written once the daemon runs.
            parked = datetime.now(UTC) + timedelta(days=1)
            ops = await seed_observing(conn, sim.url, jobs, [parked] * operations, body)
            await conn.execute("VACUUM ANALYZE operations")
            # The preset's own limits: the daemon polls on its shipped schedule.
            config = write_config(workdir / "lag.toml", sim.url, {})
            async with daemon_process(db.url, config, workdir, f"lag{operations}") as proc:
                rng = random.Random(3)
                offsets = [LAG_LEAD_SECONDS + rng.uniform(0, spread) for _ in ops]
                scheduled = await schedule_in(conn, ops, offsets)
                meter = CpuMeter({"reconciler": lambda: [proc.pid]})
                meter.start()
                began = time.monotonic()

                async def all_polled() -> bool:
                    n = await conn.fetchval(
                        f"SELECT count(DISTINCT operation_id) FROM provider_calls WHERE {READS}"
                    )
                    return int(n) >= operations

                timeout = LAG_LEAD_SECONDS + spread + FIRST_POLL_GRACE_SECONDS
                await wait_until(all_polled, timeout, "first polls", 0.25)
                elapsed = time.monotonic() - began
                cpu = meter.stop()
                polls = await conn.fetchval(f"SELECT count(*) FROM provider_calls WHERE {READS}")
            first = await conn.fetch(
                "SELECT operation_id, min(started_at) AS at FROM provider_calls "
                f"WHERE {READS} GROUP BY operation_id"
            )
        finally:
            await conn.close()
    lags = [(r["at"] - scheduled[r["operation_id"]]).total_seconds() for r in first]
    skipped = count_skipped_ticks(workdir / f"lag{operations}.log")
    return LagResult(
        operations, spread, Settings().sweep_interval, lags, polls / elapsed, cpu, skipped
    )


def count_skipped_ticks(log: Path) -> int:
    """Sweep ticks APScheduler skipped because the previous sweep was still running.

    The daemon's interval job has max_instances=1: a sweep longer than
    sweep_interval makes the next tick skip, and the sweep after it starts at
    the following interval boundary. APScheduler logs each skip as a warning.
    """
    text = log.read_text(errors="replace") if log.exists() else ""
    return text.count("maximum number of running instances reached")


def report_lag(results: Sequence[LagResult], command: str) -> None:
    rows = [
        [
            f"{r.operations:,} rows due over {r.spread_seconds:.0f} s",
            f"{r.operations / r.spread_seconds:,.0f}",
            f"{r.polls_per_second:,.0f}",
            ms(percentile(r.lags, 50)),
            ms(percentile(r.lags, 99)),
            ms(max(r.lags)),
            f"{r.cpu['reconciler']:.0%}",
            str(r.ticks_skipped),
        ]
        for r in results
    ]
    print_table(
        "2. Scheduling lag: first status read minus next_poll_at, real daemon "
        f"(sweep_interval {results[0].sweep_interval} s default, preset backoff)",
        command,
        ["load", "first reads/s", "all reads/s", "p50", "p99", "max", "cpu", "ticks skipped"],
        rows,
    )
    for r in results:
        p99 = percentile(r.lags, 99)
        print(
            f"{r.operations:,} rows: p99 {ms(p99)} (target < 1 s while not saturated: "
            f"{'meets' if p99 < 1.0 else 'MISSES'})"
        )
    print(
        "all reads/s = every status read in the window: the scheduled first reads and the "
        "backoff re-reads that follow them (the preset polls again after 1-2 s, then 1-4 s, ...); "
        "cpu = the daemon's share of one core; ticks skipped = sweep ticks APScheduler "
        "skipped because the previous sweep was still running (its log)"
    )


async def run(quick: bool, workdir: Path, command: str) -> None:
    report_lag(await bench_lag(quick, workdir), command)


def main(argv: Sequence[str] | None = None) -> int:
    return benchmark_main(MODULE, __doc__ or MODULE, run, argv)


if __name__ == "__main__":
    sys.exit(main())
