"""PostgreSQL's work per webhook event in the receiver's write, by batch size.

    .venv/bin/python -m bench.receiver_write            # 5 batch sizes, 3 rounds
    .venv/bin/python -m bench.receiver_write --quick    # 3 sizes, 1 round

`bench.receiver` gives PostgreSQL's CPU per event under load, one figure for
whatever batch sizes the load made. This runs the statement alone, on one
connection configured as the receiver's writers' (`create_writer_pool`'s
settings), against a fresh bench database, so the cost can be split into
what a batch costs whatever its size (fixed) and what each event adds
(marginal):

- the floor's write (`bench.floor.GroupCommit`'s INSERT of id and body under
  a unique key): the baseline, measured in the same rounds;
- the receiver's `receiver_store_events` with new events that name no known
  job (the ratio `bench.receiver` calls "new events");
- the same with events for the jobs of 1,000 operations recorded through the
  ledger (`bench.receiver.prepare_operations`): each is also an observation
  and a wake-up ("+ observation + wake-up");
- new events with the evidence log's triggers disabled (`set_logging`).

Every batch commits, as the receiver's do (with the server's
`synchronous_commit`, on unless its configuration says otherwise). The CPU
is the backend's own (/proc schedstat, in nanoseconds), so the commit's
flush wait is in the wall time only; the evidence log's sequencer does not
run (its appending is not here).
Rows take turns in a fixed order within each round; each figure is the least
of its rounds.
The fit is least squares over the sizes: cpu per batch = fixed + marginal * n.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import floor
from bench.evidence_log import set_logging
from bench.harness import bench_database
from bench.receiver import OPERATIONS, PROVIDER, event_body, job_of, prepare_operations
from receiver.webhooks.ingest import STATEMENT_TIMEOUT_SECONDS, create_writer_pool
from shared.db.connect import connect
from shared.ledger.webhooks import store_events
from shared.serve import run as run_loop

SIZES, QUICK_SIZES = (1, 4, 16, 64, 256), (1, 16, 256)
ROUNDS, QUICK_ROUNDS = 3, 1
# Events a cell writes, in at least MIN and at most MAX batches: a few thousand
# events a cell, so that one slow batch is a small part of it.
EVENTS, QUICK_EVENTS = 16_000, 4_000
MIN_BATCHES, MAX_BATCHES = 20, 2_500
ROWS = (
    "floor INSERT (baseline)",
    "receiver: new events",
    "receiver: + observation + wake-up",
    "receiver: new events, log off",
)
BASELINE, NEW, MATCHED, NOLOG = ROWS

Columns = dict[str, list[Any]]


@dataclass
class Cell:
    cpu_us: float  # backend CPU per batch
    wall_us: float  # statement round trip per batch, commit included


def columns(size: int, matched: bool, start: int) -> Columns:
    """One batch as the receiver's writer hands it over (`ingest._columns`)."""
    ids = [f"bench_{uuid.uuid4().hex}" for _ in range(size)]
    jobs = [
        job_of((start + i) % OPERATIONS) if matched else f"job_unknown_{e}"
        for i, e in enumerate(ids)
    ]
    return {
        "provider": [PROVIDER] * size,
        "event_id": ids,
        "scheme": ["standard_webhooks"] * size,
        "id_signed": [True] * size,
        "remote_job_id": jobs,
        "operation_ref": [None] * size,
        "client_reference": [None] * size,
        "remote_state": ["running"] * size,
        "remote_state_raw": ["running"] * size,
        "payload": [event_body(job, "running").decode() for job in jobs],
        "extra": [0] * size,
    }


def backend_cpu(pid: int) -> float:
    """Seconds on a CPU of our PostgreSQL backend, to the nanosecond (/proc schedstat's
    first field; /proc/<pid>/stat counts 10 ms ticks, too coarse for a cell).

    The backend must be a process of this machine: a server elsewhere (another
    host, a container) has no /proc entry here, or one of another process.
    """
    proc = Path(f"/proc/{pid}")
    try:
        name = (proc / "comm").read_text().strip()
    except OSError:
        raise SystemExit(
            f"bench.receiver_write needs PostgreSQL on this machine: no process {pid} here"
        ) from None
    if name not in ("postgres", "postmaster"):
        raise SystemExit(f"backend pid {pid} is {name!r} here, not PostgreSQL's: a remote server?")
    try:
        return int((proc / "schedstat").read_text().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        raise SystemExit("bench.receiver_write needs /proc/<pid>/schedstat (schedstats)") from None


async def measure(
    backend: int, batches: Sequence[Columns], write: Callable[[Columns], Awaitable[None]]
) -> Cell:
    """The backend's CPU (not its waits: the commit's flush is in the wall time only)
    and the wall time, per batch."""
    cpu_before = backend_cpu(backend)
    started = time.perf_counter()
    for batch in batches:
        await write(batch)
    wall = time.perf_counter() - started
    cpu = backend_cpu(backend) - cpu_before
    return Cell(cpu / len(batches) * 1e6, wall / len(batches) * 1e6)


def fit(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(fixed, marginal) of cpu per batch = fixed + marginal * n, least squares."""
    count = len(points)
    mean_n = sum(n for n, _ in points) / count
    mean_c = sum(c for _, c in points) / count
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    marginal = sum((n - mean_n) * (c - mean_c) for n, c in points) / spread
    return mean_c - marginal * mean_n, marginal


async def run(sizes: Sequence[int], rounds: int, events: int) -> None:
    """A fresh bench database with the operations matched events name; then the rows."""
    async with bench_database("receiver_write") as db:
        await prepare_operations(db.url)
        writers = await create_writer_pool(db.url)  # the receiver's writer, configured as it is
        admin = await connect(db.url)
        try:
            async with writers.acquire() as conn:
                best = await measure_rows(conn, admin, sizes, rounds, events)
        finally:
            await admin.close()
            await writers.close()
    report(best, sizes, rounds)


async def measure_rows(
    conn: Any, admin: Any, sizes: Sequence[int], rounds: int, events: int
) -> dict[tuple[str, int], Cell]:
    """The least CPU per batch of each (row, size) over `rounds` alternating rounds."""
    insert = await floor.prepare_write(conn)
    backend = await conn.fetchval("SELECT pg_backend_pid()")

    async def floor_write(batch: Columns) -> None:
        await insert.fetch(batch["event_id"], [p.encode() for p in batch["payload"]])

    async def receiver_write(batch: Columns) -> None:
        await store_events(conn, batch, statement_timeout=STATEMENT_TIMEOUT_SECONDS)

    for size in sizes:  # warm: plans made, caches filled
        for write in (floor_write, receiver_write):
            await measure(backend, [columns(size, True, i) for i in range(5)], write)
    best: dict[tuple[str, int], Cell] = {}
    logging_on = True
    for _ in range(rounds):
        for size in sizes:
            count = min(MAX_BATCHES, max(MIN_BATCHES, events // size))
            for row in ROWS:
                batches = [columns(size, row == MATCHED, i * size) for i in range(count)]
                write = floor_write if row == BASELINE else receiver_write
                if (row != NOLOG) != logging_on:
                    logging_on = row != NOLOG
                    await set_logging(admin, logging_on)
                    # ALTER TABLE on the logged tables drops the receiver statement's
                    # cached plan (never the floor's): made again, unmeasured
                    await receiver_write(columns(size, False, 0))
                cell = await measure(backend, batches, write)
                if (row, size) not in best or cell.cpu_us < best[(row, size)].cpu_us:
                    best[(row, size)] = cell
    await set_logging(admin, True)
    return best


def report(best: dict[tuple[str, int], Cell], sizes: Sequence[int], rounds: int) -> None:
    """Each row by size, its fit, and its cost beyond the floor's (the baseline)."""
    print(
        f"receiver_store_events alone, one writer connection, {rounds} round(s); "
        "µs of the backend's CPU (wall time, commit included, in brackets)"
    )
    head = "".join(f"{f'n={n}: /batch /event':>26}" for n in sizes)
    print(f"{'write':<38}{head}{'fixed µs':>10}{'µs/event':>10}")
    fits = {}
    for row in ROWS:
        cells = [best[(row, n)] for n in sizes]
        figures = "".join(
            f"{f'{c.cpu_us:,.0f} ({c.wall_us:,.0f}) {c.cpu_us / n:.1f}':>26}"
            for n, c in zip(sizes, cells, strict=True)
        )
        fixed, marginal = fits[row] = fit(
            [(n, c.cpu_us) for n, c in zip(sizes, cells, strict=True)]
        )
        print(f"{row:<38}{figures}{fixed:>10.0f}{marginal:>10.1f}")
    ratios = "  ".join(
        f"n={n}: {best[(BASELINE, n)].cpu_us / best[(NEW, n)].cpu_us:.2f}" for n in sizes
    )
    print(f"ratio (floor / receiver new events, CPU per batch): {ratios}")
    for row in (NEW, MATCHED):
        fixed, marginal = fits[row]
        base_fixed, base_marginal = fits[BASELINE]
        print(
            f"{row}: {fixed - base_fixed:+.0f} µs a batch and "
            f"{marginal - base_marginal:+.1f} µs an event beyond the floor's"
        )
    fixed, marginal = fits[NEW]
    off_fixed, off_marginal = fits[NOLOG]
    print(
        f"the evidence log's queueing: {fixed - off_fixed:+.0f} µs a batch, "
        f"{marginal - off_marginal:+.1f} µs an event"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.receiver_write", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds")
    args = parser.parse_args(argv)
    if args.quick:
        run_loop(run(QUICK_SIZES, QUICK_ROUNDS, QUICK_EVENTS))
    else:
        run_loop(run(SIZES, ROUNDS, EVENTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
