"""The console's operations list against table size: 10k against 1M operations.

    .venv/bin/python -m bench.console_paging            # 10,000 and 1,000,000 operations
    .venv/bin/python -m bench.console_paging --quick    # 10,000 and 100,000

Every query the operations page and the inbox send (the console's own named
queries, with the parameters its handlers pass) is timed at both sizes on
one table, the larger filled after the smaller is measured: the first page,
a deep page (keyset), each filter alone, a rare state, a rare provider, an
outcome that is a few states, an age bound, the provider list, the inbox.
Beside the median time, the buffers each query touched (EXPLAIN ANALYZE,
BUFFERS): a count that does not depend on how loaded the machine is. A page
"stays fast" when its cost at the large size is within FLAT_RATIO of the small.

The table is filled in bulk (bench.harness.fill_operations, then one UPDATE
giving each row a state, provider, kind and age by a fixed hash of its
number), with the state machine's triggers off as for every filler row: a
page reads operations, not their history.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import bench_database, benchmark_main, fill_operations, print_table
from receiver.console.operations import PAGE_SIZE, states_to_walk
from shared.db.connect import connect
from shared.db.queries import q

MODULE = "bench.console_paging"
SIZES, QUICK_SIZES = (10_000, 1_000_000), (10_000, 100_000)
SAMPLES, QUICK_SAMPLES = 15, 5
FLAT_RATIO = 2.0
DAYS = 30  # the filled rows were created over this many days, newest last

# Each row's bucket (0-9999) from its number: a fixed hash, so every run and
# both sizes have the same mix. 70 % succeeded, 3 % failed, 20 % observing,
# 2 % cancelled and 0.5 % abandoned, 4.48 % create_pending, 1 in 10,000
# needs_attention and 1 in 10,000 result_timed_out; 0.1 % of rows from a rare
# provider, 10 % from a second one; 5 % of another kind.
# A valid stored result for each row about to be `succeeded` (a CHECK asks one).
RESULTS_SQL = """
INSERT INTO results (operation_id, valid, sha256, inline, items_total, items_succeeded,
                     items_failed)
SELECT operation_id, true, repeat('a', 64), '{"ok": true}', 1, 1, 0
FROM operations
WHERE substr(operation_id, 4)::bigint BETWEEN $1 AND $2
  AND (substr(operation_id, 4)::bigint * 7919) % 10000 < 7000
"""
SHAPE_SQL = f"""
UPDATE operations o SET
    state = (CASE
        WHEN b < 7000 THEN 'succeeded' WHEN b < 7300 THEN 'failed'
        WHEN b < 9300 THEN 'observing' WHEN b < 9500 THEN 'cancelled'
        WHEN b < 9550 THEN 'abandoned' WHEN b = 9998 THEN 'needs_attention'
        WHEN b = 9999 THEN 'result_timed_out' ELSE 'create_pending' END)::jw_state,
    provider = CASE WHEN b % 1000 = 7 THEN 'rare' WHEN b % 10 = 3 THEN 'openai' ELSE 'sim' END,
    kind = CASE WHEN b % 20 = 1 THEN 'transcode' ELSE 'export' END,
    created_at = now() - ($3::bigint - g) * (interval '{DAYS} days' / $3::bigint),
    remote_job_id = CASE WHEN b < 9550 OR b >= 9998 THEN 'job_' || g END,
    finished_at = CASE WHEN b < 7300 OR b BETWEEN 9300 AND 9549 THEN now() END,
    next_poll_at = NULL,
    result_id = CASE WHEN b < 7000 THEN
        (SELECT r.result_id FROM results r WHERE r.operation_id = o.operation_id) END
FROM (SELECT operation_id AS id, substr(operation_id, 4)::bigint AS g,
             (substr(operation_id, 4)::bigint * 7919) % 10000 AS b
      FROM operations) x
WHERE o.operation_id = x.id AND x.g BETWEEN $1 AND $2
"""


@dataclass(frozen=True)
class Case:
    name: str
    query: str  # console_operations: resolved to _in_states when states are walked
    # state and outcome (together: the states walked), provider, kind,
    # after (None, or "deep": the id half-way down), older than s, newer than s
    state: str | None = None
    provider: str | None = None
    kind: str | None = None
    outcome: str | None = None
    deep: bool = False
    older: float | None = None
    newer: float | None = None


CASES = (
    Case("first page", "console_operations"),
    Case("deep page (keyset, half-way down)", "console_operations", deep=True),
    Case("state = needs_attention (1 in 10,000)", "console_operations", state="needs_attention"),
    Case("state = succeeded, deep page", "console_operations", state="succeeded", deep=True),
    Case("provider = rare (0.1 %)", "console_operations", provider="rare"),
    Case("provider = nobody (no row)", "console_operations", provider="nobody"),
    Case("kind = transcode (5 %)", "console_operations", kind="transcode"),
    Case("outcome = failed (3 %)", "console_operations", outcome="failed"),
    Case("outcome = cancelled (2 states, 2.5 %)", "console_operations", outcome="cancelled"),
    Case("outcome = timed_out (1 in 10,000)", "console_operations", outcome="timed_out"),
    Case(
        "outcome = completed_with_errors (none)",
        "console_operations",
        outcome="completed_with_errors",
    ),
    Case("older than 7 days", "console_operations", older=7 * 86400.0),
    Case(
        "newer than 1 hour, provider = openai",
        "console_operations",
        provider="openai",
        newer=3600.0,
    ),
    Case("providers seen (filter choices)", "console_providers_seen"),
    Case("inbox", "operator_inbox"),
)


def arguments(case: Case, deep_id: str) -> list[Any]:
    """The parameters the console's handlers pass for this case."""
    if case.query in ("console_providers_seen", "operator_inbox"):
        return []
    bounds = [deep_id if case.deep else None, case.older, case.newer, PAGE_SIZE + 1]
    states = states_to_walk(case.state or "", case.outcome or "")
    if states is None:
        return [case.provider, case.kind, *bounds]
    return [states, case.provider, case.kind, case.outcome, *bounds]


@dataclass(frozen=True)
class Measure:
    median_ms: float
    buffers: int
    rows: int


async def measure(conn: Any, case: Case, deep_id: str, samples: int) -> Measure:
    args = arguments(case, deep_id)
    walks_states = case.query == "console_operations" and (case.state or case.outcome)
    sql = q("console_operations_in_states" if walks_states else case.query)
    plan = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    times = []
    rows = 0
    for _ in range(samples):
        began = time.perf_counter()
        async with conn.transaction(readonly=True):  # as the console's handler runs it
            await conn.execute(q("console_custom_plans"))
            rows = len(await conn.fetch(sql, *args))
        times.append(time.perf_counter() - began)
    return Measure(statistics.median(times) * 1000, buffers, rows)


async def measure_size(conn: Any, size: int, samples: int) -> dict[str, Measure]:
    deep_id = await conn.fetchval(
        "SELECT operation_id FROM operations ORDER BY operation_id DESC OFFSET $1 LIMIT 1",
        size // 2,
    )
    return {case.name: await measure(conn, case, deep_id, samples) for case in CASES}


async def fill(conn: Any, first: int, last: int, total: int) -> None:
    await fill_operations(conn, first, last, 0.0, 0.0)
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(RESULTS_SQL, first, last)
        await conn.execute(SHAPE_SQL, first, last, total)
    await conn.execute("VACUUM ANALYZE operations")
    await conn.execute("VACUUM ANALYZE results")


async def run(quick: bool, workdir: Path, command: str) -> None:
    sizes = QUICK_SIZES if quick else SIZES
    samples = QUICK_SAMPLES if quick else SAMPLES
    results: list[dict[str, Measure]] = []
    async with bench_database("console_paging") as db:
        conn = await connect(db.url)
        try:
            filled = 0
            for size in sizes:
                began = time.monotonic()
                await fill(conn, filled + 1, size, sizes[-1])
                filled = size
                print(f"filled {size:,} operations ({time.monotonic() - began:.0f} s)")
                results.append(await measure_size(conn, size, samples))
        finally:
            await conn.close()
    report(sizes, results, command)


def report(sizes: Sequence[int], results: Sequence[dict[str, Measure]], command: str) -> None:
    small, large = results[0], results[-1]
    rows = []
    flat = 0
    for case in CASES:
        a, b = small[case.name], large[case.name]
        ratio = b.median_ms / a.median_ms if a.median_ms else float("inf")
        ok = ratio <= FLAT_RATIO or b.median_ms < 1.0
        flat += ok
        rows.append(
            [
                case.name,
                f"{a.median_ms:.2f} ms / {a.buffers:,}",
                f"{b.median_ms:.2f} ms / {b.buffers:,}",
                f"{ratio:.2f}",
                b.rows,
                "flat" if ok else "GROWS",
            ]
        )
    print_table(
        f"console pages: {sizes[0]:,} vs {sizes[-1]:,} operations (median time / buffers)",
        command,
        ["query", f"{sizes[0]:,}", f"{sizes[-1]:,}", "ratio", "rows", f"<= {FLAT_RATIO}x"],
        rows,
    )
    print(f"{flat} of {len(CASES)} queries flat (within {FLAT_RATIO}x, or under 1 ms)")


def main(argv: Sequence[str] | None = None) -> int:
    return benchmark_main(MODULE, __doc__ or "", run, argv)


if __name__ == "__main__":
    sys.exit(main())
