"""The console's operations list against table size: 10k against 1M operations.

    .venv/bin/python -m bench.console_paging            # 10,000 and 1,000,000 operations
    .venv/bin/python -m bench.console_paging --quick    # 10,000 and 100,000

Every page of the operations list is read by the console's own code
(`receiver.console.operations.operations_page`, in a read-only transaction planned per
page, as the handler does) and timed at both sizes on one table, the larger
filled after the smaller is measured: the first page, a deep page (keyset),
each filter alone, a rare state, a rare provider, an outcome that is a few
states, an age bound; beside them the provider list and the inbox.
Beside the median time, the buffers the page's queries touched (EXPLAIN
ANALYZE, BUFFERS): a count that does not depend on how loaded the machine is.
A page is "bounded" when its buffers at the large size are within FLAT_RATIO
of the small size's, in all or per row shown.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import bench_database, benchmark_main, fill_operations, print_table
from receiver.console.operations import Filters, operations_page, states_to_walk
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
# Every row's age, spread over DAYS with the newest now, for the size about to
# be measured ($1 rows): the age filters select the same share at each size.
SPREAD_SQL = f"""
UPDATE operations SET
    created_at = now() - ($1::bigint - substr(operation_id, 4)::bigint)
                         * (interval '{DAYS} days' / $1::bigint)
"""
# A valid stored result for each row about to be `succeeded` (a CHECK asks one).
RESULTS_SQL = """
INSERT INTO results (operation_id, valid, sha256, inline, items_total, items_succeeded,
                     items_failed)
SELECT operation_id, true, repeat('a', 64), '{"ok": true}', 1, 1, 0
FROM operations
WHERE substr(operation_id, 4)::bigint BETWEEN $1 AND $2
  AND (substr(operation_id, 4)::bigint * 7919) % 10000 < 7000
"""
SHAPE_SQL = """
UPDATE operations o SET
    state = (CASE
        WHEN b < 7000 THEN 'succeeded' WHEN b < 7300 THEN 'failed'
        WHEN b < 9300 THEN 'observing' WHEN b < 9500 THEN 'cancelled'
        WHEN b < 9550 THEN 'abandoned' WHEN b = 9998 THEN 'needs_attention'
        WHEN b = 9999 THEN 'result_timed_out' ELSE 'create_pending' END)::jw_state,
    provider = CASE WHEN b % 1000 = 7 THEN 'rare' WHEN b % 10 = 3 THEN 'openai' ELSE 'sim' END,
    kind = CASE WHEN b % 20 = 1 THEN 'transcode' ELSE 'export' END,
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
    filters: Filters = field(default_factory=Filters)
    deep: bool = False  # start from the operation half-way down (keyset cursor)
    query: str = ""  # a named query run alone instead of the list page


CASES = (
    Case("first page"),
    Case("deep page (keyset, half-way down)", deep=True),
    Case("state = needs_attention (1 in 10,000)", Filters(state="needs_attention")),
    Case("state = succeeded, deep page", Filters(state="succeeded"), deep=True),
    Case("provider = rare (0.1 %)", Filters(provider="rare")),
    Case("provider = nobody (no row)", Filters(provider="nobody")),
    Case("kind = transcode (5 %)", Filters(kind="transcode")),
    Case("outcome = failed (3 %)", Filters(outcome="failed")),
    Case("outcome = cancelled (2 states, 2.5 %)", Filters(outcome="cancelled")),
    Case("outcome = timed_out (1 in 10,000)", Filters(outcome="timed_out")),
    Case("outcome = completed_with_errors (none)", Filters(outcome="completed_with_errors")),
    Case("older than 7 days", Filters(older_than="7d")),
    Case("newer than 1 hour, provider = openai", Filters(provider="openai", newer_than="1h")),
    Case("providers seen (filter choices)", query="console_providers_seen"),
    Case("inbox", query="operator_inbox"),
)


class Recording:
    """A connection that notes each query it runs, so each can be EXPLAINed after."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.queries: list[tuple[str, tuple[Any, ...]]] = []

    async def fetch(self, sql: str, *args: Any) -> Any:
        self.queries.append((sql, args))
        return await self.conn.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self.queries.append((sql, args))
        return await self.conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        self.queries.append((sql, args))
        return await self.conn.fetchval(sql, *args)


@dataclass(frozen=True)
class Measure:
    median_ms: float
    buffers: int
    rows: int


async def run_case(conn: Any, case: Case, deep_id: str) -> tuple[int, list[Any]]:
    """The page as the console's handler reads it (operations_page); (rows, queries run)."""
    recording = Recording(conn)
    async with conn.transaction(readonly=True):
        await conn.execute(q("console_custom_plans"))
        if case.query:
            rows = len(await recording.fetch(q(case.query)))
        else:
            f = case.filters
            states = states_to_walk(f.state, f.outcome)
            found = await operations_page(recording, f, states, deep_id if case.deep else None)
            rows = len(found.rows)
    return rows, recording.queries


async def buffers_of(conn: Any, queries: list[Any]) -> int:
    """Shared buffers the page's queries touched, from EXPLAIN (ANALYZE, BUFFERS)."""
    total = 0
    async with conn.transaction(readonly=True):
        await conn.execute(q("console_custom_plans"))
        for sql, args in queries:
            plan = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
            top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
            total += int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    return total


async def measure(conn: Any, case: Case, deep_id: str, samples: int) -> Measure:
    rows, queries = await run_case(conn, case, deep_id)
    buffers = await buffers_of(conn, queries)
    times = []
    for _ in range(samples):
        began = time.perf_counter()
        await run_case(conn, case, deep_id)
        times.append(time.perf_counter() - began)
    return Measure(statistics.median(times) * 1000, buffers, rows)


async def measure_size(conn: Any, size: int, samples: int) -> dict[str, Measure]:
    deep_id = await conn.fetchval(
        "SELECT operation_id FROM operations ORDER BY operation_id DESC OFFSET $1 LIMIT 1",
        size // 2,
    )
    return {case.name: await measure(conn, case, deep_id, samples) for case in CASES}


async def fill(conn: Any, first: int, last: int) -> None:
    await fill_operations(conn, first, last, 0.0, 0.0)
    async with conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(RESULTS_SQL, first, last)
        await conn.execute(SHAPE_SQL, first, last)
        await conn.execute(SPREAD_SQL, last)
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
                await fill(conn, filled + 1, size)
                filled = size
                print(f"filled {size:,} operations ({time.monotonic() - began:.0f} s)")
                results.append(await measure_size(conn, size, samples))
        finally:
            await conn.close()
    report(sizes, results, command)


def bounded(small: Measure, large: Measure) -> bool:
    """A page's reads did not grow with the table: per row shown, or in all.

    Buffers, not time: a count the machine's load does not change. Per row
    shown, because a rare state shows 1 row at 10k and a full page at 1M.
    """
    if large.buffers <= FLAT_RATIO * max(small.buffers, 1):
        return True
    per_small = small.buffers / max(small.rows, 1)
    per_large = large.buffers / max(large.rows, 1)
    return per_large <= FLAT_RATIO * per_small


def report(sizes: Sequence[int], results: Sequence[dict[str, Measure]], command: str) -> None:
    small, large = results[0], results[-1]
    rows = []
    flat = 0
    for case in CASES:
        a, b = small[case.name], large[case.name]
        ok = bounded(a, b)
        flat += ok
        rows.append(
            [
                case.name,
                f"{a.median_ms:.2f} ms / {a.buffers:,}",
                f"{b.median_ms:.2f} ms / {b.buffers:,}",
                f"{a.rows} / {b.rows}",
                "bounded" if ok else "GROWS",
            ]
        )
    print_table(
        f"console pages: {sizes[0]:,} vs {sizes[-1]:,} operations (median time / buffers read)",
        command,
        ["page", f"{sizes[0]:,}", f"{sizes[-1]:,}", "rows shown", "reads"],
        rows,
    )
    print(
        f"{flat} of {len(CASES)} pages bounded: buffers within {FLAT_RATIO:g}x of the small "
        "table's, in all or per row shown (times are the machine's; buffers are not)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    return benchmark_main(MODULE, __doc__ or "", run, argv)


if __name__ == "__main__":
    sys.exit(main())
