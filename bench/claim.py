"""The claim query (`claim_due`) against table size: EXPLAIN and timings, rolled back.

    .venv/bin/python -m bench.claim            # 10k, 100k and 1M rows
    .venv/bin/python -m bench.claim --quick    # 10k and 100k rows

Every sweep of the reconciler starts with a claim, so its cost must not grow
with the finished history piling up in `operations`. At each size this
prints the claim's plan (EXPLAIN ANALYZE, BUFFERS) and its timings, once with
a full batch due and once with fewer rows due than the batch (the last claim
of every sweep, the one that would walk every scheduled row if the cut-off
were not an index bound). Claims go through `shared.ledger.leases.claim`
inside transactions that are rolled back, so every sample sees the same table.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    bench_database,
    benchmark_main,
    due_rows_parked,
    fill_operations,
    percentile,
    print_table,
)
from shared.db.connect import connect
from shared.ledger import leases
from shared.settings import Settings

MODULE = "bench.claim"
# Table sizes, filled one after the other (each adds to the last).
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)
# Shape of the table at every size: most rows have nothing scheduled (their
# operation is over or waits for a human), some are scheduled later, and a
# small share is due now — enough for a full claim batch at every size.
DUE_SHARE = 0.02
LATER_SHARE = 0.08
CLAIM_SAMPLES = 30  # timed claims per size, each rolled back
QUIET_SAMPLES = 10  # timed claims per size when fewer rows are due than the batch
PARKED = "2 hours"  # how far due rows are moved to make the table quiet
WORKER = "bench-claim"
LEASE_SECONDS = 60.0  # what the claim writes; every claim is rolled back anyway
# The claim's index on the schedule (migration 029; operations_due on the row before).
DUE_INDEX = "operation_schedule_due"
# The shipped cut-off: an uncorrelated subquery, evaluated once, so an index bound.
SHIPPED_CUTOFF = "s.next_poll_at <= (SELECT jw_now())"
# The same comparison with the volatile jw_now() called per row: only a filter.
VOLATILE_CUTOFF = "s.next_poll_at <= jw_now()"


@dataclass
class ClaimSample:
    rows: int
    due_rows: int
    indexed_rows: int
    claimed: int
    claim_times: list[float]
    find_times: list[float]
    scan_ms: float
    buffers: int
    uses_index: bool
    plan_text: list[str]
    quiet_times: list[float] = field(default_factory=list)
    quiet_claimed: int = 0
    quiet_filtered: int = 0
    quiet_volatile_times: list[float] = field(default_factory=list)


def cte_body(sql: str, name: str) -> str:
    """The text inside `WITH name AS ( ... )` or `, name AS ( ... )`, parentheses matched."""
    opening = f"{name} AS ("
    start = sql.index(opening) + len(opening)
    depth = 1
    for end in range(start, len(sql)):
        depth += {"(": 1, ")": -1}.get(sql[end], 0)
        if depth == 0:
            return sql[start:end]
    raise ValueError(f"unbalanced parentheses in the {name} CTE")


def replaced_once(sql: str, old: str, new: str) -> str:
    """`sql` with `old` replaced; refuses if `old` is not in it exactly once.

    A variant that silently equals the shipped query would time the wrong thing.
    """
    if sql.count(old) != 1:
        raise ValueError(f"expected {old!r} once in the claim query, found {sql.count(old)}")
    return sql.replace(old, new)


def claim_find_sql() -> str:
    """The claim's `scheduled` CTE on its own: the index lookup without the row updates
    ($1: limit). The other source, woken rows, reads only the small wake table."""
    return replaced_once(cte_body(leases.claim_sql(), "scheduled"), "$2", "$1")


def claim_volatile_cutoff_sql() -> str:
    """claim_due with the volatile cut-off a plain `jw_now()` would be (comparison, not shipped).

    jw_now() is VOLATILE (its body is clock_timestamp()), so called per row it
    can only *filter* the index scan; the shipped `(SELECT jw_now())` is
    evaluated once and becomes an Index Cond.
    """
    return replaced_once(leases.claim_sql(), SHIPPED_CUTOFF, VOLATILE_CUTOFF)


def plan_nodes(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("Plans") or []:
        yield from plan_nodes(child)


async def timed_rolled_back(conn: Any, work: Callable[[], Awaitable[Sized]]) -> tuple[float, int]:
    """Seconds `work()` took and how many rows it returned, in a rolled-back transaction."""
    tx = conn.transaction()
    await tx.start()
    try:
        began = time.perf_counter()
        rows = await work()
        return time.perf_counter() - began, len(rows)
    finally:
        await tx.rollback()


async def explain_rolled_back(conn: Any, sql: str, args: Sequence[Any], fmt: str) -> Any:
    tx = conn.transaction()
    await tx.start()
    try:
        return await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT {fmt}) {sql}", *args)
    finally:
        await tx.rollback()


async def explain_json(conn: Any, sql: str, args: Sequence[Any]) -> dict[str, Any]:
    doc = (await explain_rolled_back(conn, sql, args, "JSON"))[0][0]
    plan: dict[str, Any] = (json.loads(doc) if isinstance(doc, str) else doc)[0]
    return plan


def due_scan(plan: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for node in plan_nodes(plan["Plan"]):
        if node.get("Index Name") == DUE_INDEX:
            return node
    return None


def claim_args() -> tuple[str, int, float]:
    """The claim's parameters ($1 worker, $2 batch, $3 lease), as the daemon passes them."""
    return WORKER, Settings().claim_batch, LEASE_SECONDS


async def measure_busy(conn: Any, rows: int) -> ClaimSample:
    sql, args = leases.claim_sql(), claim_args()
    find_sql, batch = claim_find_sql(), args[1]
    plan = await explain_json(conn, sql, args)
    scan = due_scan(plan)
    claim_times, find_times, claimed = [], [], 0
    for _ in range(CLAIM_SAMPLES):
        elapsed, claimed = await timed_rolled_back(conn, lambda: leases.claim(conn, *args))
        claim_times.append(elapsed)
        find_times.append((await timed_rolled_back(conn, lambda: conn.fetch(find_sql, batch)))[0])
    top = plan["Plan"]
    return ClaimSample(
        rows=rows,
        due_rows=await conn.fetchval(
            "SELECT count(*) FROM operation_schedule WHERE next_poll_at <= jw_now()"
        ),
        indexed_rows=await conn.fetchval("SELECT count(*) FROM operation_schedule"),
        claimed=claimed,
        claim_times=claim_times,
        find_times=find_times,
        scan_ms=scan["Actual Total Time"] if scan else math.nan,
        buffers=top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        uses_index=scan is not None,
        plan_text=[r[0] for r in await explain_rolled_back(conn, sql, args, "TEXT")],
    )


async def measure_quiet(conn: Any, sample: ClaimSample) -> None:
    """The claim that finds fewer rows due than the batch: the last claim of every sweep.

    The due rows are moved two hours on (and back afterwards); what is due
    then is only what the "later" rows' schedule brings due meanwhile.
    """
    args, volatile = claim_args(), claim_volatile_cutoff_sql()
    async with due_rows_parked(conn, PARKED):
        scan = due_scan(await explain_json(conn, leases.claim_sql(), args))
        sample.quiet_filtered = int(scan.get("Rows Removed by Filter", 0)) if scan else 0
        for _ in range(QUIET_SAMPLES):
            elapsed, sample.quiet_claimed = await timed_rolled_back(
                conn, lambda: leases.claim(conn, *args)
            )
            sample.quiet_times.append(elapsed)
            unbound = await timed_rolled_back(conn, lambda: conn.fetch(volatile, *args))
            sample.quiet_volatile_times.append(unbound[0])


async def bench_claim(quick: bool, workdir: Path) -> tuple[list[ClaimSample], float]:
    """Fill, measure, fill more: one table grown through every size."""
    samples = []
    began = time.monotonic()
    async with bench_database("claim") as db:
        conn = await connect(db.url)
        try:
            filled = 0
            for size in QUICK_SIZES if quick else SIZES:
                await fill_operations(conn, filled + 1, size, DUE_SHARE, LATER_SHARE)
                filled = size
                sample = await measure_busy(conn, size)
                await measure_quiet(conn, sample)
                samples.append(sample)
        finally:
            await conn.close()
    return samples, time.monotonic() - began


def p50_ms(values: Sequence[float], digits: int = 1) -> str:
    return f"{percentile(values, 50) * 1000:.{digits}f} ms"


CLAIM_COLUMNS = (
    *("rows", "scheduled", "due", "got", "claim p50", "claim p95"),
    *("find p50", "index scan", "buffers", "plan uses"),
)


def report_claim(samples: Sequence[ClaimSample], seconds: float, command: str) -> None:
    batch = Settings().claim_batch
    busy_rows = [
        [
            f"{s.rows:,}",
            f"{s.indexed_rows:,}",
            f"{s.due_rows:,}",
            str(s.claimed),
            p50_ms(s.claim_times),
            f"{percentile(s.claim_times, 95) * 1000:.1f} ms",
            p50_ms(s.find_times, 2),
            f"{s.scan_ms:.2f} ms",
            f"{s.buffers:,}",
            DUE_INDEX if s.uses_index else "seq scan",
        ]
        for s in samples
    ]
    print_table(
        f"3a. Claim query (claim_due, batch {batch}) against table size, a full batch due; "
        "every claim rolled back",
        command,
        CLAIM_COLUMNS,
        busy_rows,
    )
    first, last = samples[0], samples[-1]
    busy = percentile(last.claim_times, 50) / percentile(first.claim_times, 50)
    indexed = all(s.uses_index for s in samples if s.rows >= 100_000)
    print(
        f"claim p50 at {last.rows:,} / at {first.rows:,} rows = {busy:.2f}x "
        f"({'flat' if busy < 2 and indexed else 'NOT flat'}; {DUE_INDEX} used from 100k "
        f"rows: {'yes' if indexed else 'NO'})"
    )
    print(
        f"scheduled = rows in {DUE_INDEX}; got = rows claimed; claim = the whole statement "
        "through shared.ledger.leases.claim, client-timed; find = its `scheduled` CTE alone; "
        f"index scan = server time of the {DUE_INDEX} node; buffers = pages the claim touched"
    )
    quiet_rows = [
        [
            f"{s.rows:,}",
            f"{s.indexed_rows:,}",
            str(s.quiet_claimed),
            p50_ms(s.quiet_times),
            f"{s.quiet_filtered:,}",
            p50_ms(s.quiet_volatile_times, 2),
        ]
        for s in samples
    ]
    print_table(
        "3b. Claim query when fewer rows are due than the batch (the last claim of every sweep)",
        command,
        ["rows", "scheduled", "got", "claim p50", "entries filtered", "bare jw_now() p50"],
        quiet_rows,
    )
    quiet = percentile(last.quiet_times, 50) / percentile(first.quiet_times, 50)
    verdict = (
        "index-bounded: it reads only due rows"
        if last.quiet_filtered == 0
        else "NOT flat: it reads every scheduled row"
    )
    print(f"claim p50 at {last.rows:,} / at {first.rows:,} rows = {quiet:.2f}x ({verdict})")
    print(
        "entries filtered = index entries read and rejected (0 = the cutoff is an index bound: "
        "the shipped claim compares with (SELECT jw_now()), evaluated once, so a claim that "
        "cannot fill its batch stops at the first row not yet due); bare jw_now() p50 = the "
        "same claim with the volatile jw_now() called per row, which could only filter the "
        "scan - for comparison, not shipped"
    )
    print(f"plan at {last.rows:,} rows, full batch due (EXPLAIN ANALYZE, BUFFERS):")
    for line in last.plan_text:
        print("    " + line)
    print(
        f"(rows are filler in create_pending written with triggers off, see "
        f"bench/harness.py FILL_SQL; filling and measuring took {seconds:.0f} s)"
    )


async def run(quick: bool, workdir: Path, command: str) -> None:
    samples, seconds = await bench_claim(quick, workdir)
    report_claim(samples, seconds, command)


def main(argv: Sequence[str] | None = None) -> int:
    return benchmark_main(MODULE, __doc__ or MODULE, run, argv)


if __name__ == "__main__":
    sys.exit(main())
