"""The evidence log: what it costs the reconciler, and how fast a large log is verified.

    .venv/bin/python -m bench.evidence_log            # cost on 10,000 ops; verify 1,000,000
    .venv/bin/python -m bench.evidence_log --quick    # cost on 2,000 ops; verify 20,000
    .venv/bin/python -m bench.evidence_log --verify-operations 200000
    .venv/bin/python -m bench.evidence_log --only cost   # or --only verify

Cost: the reconciler's status reads/s with the log on (the queue triggers,
and the sequencer child process the daemon starts, reconciler/sequencer.py)
against the same reconciler with it off (the log's triggers disabled, the
sequencer paused with SIGSTOP), in alternating windows on one database, so
drift hits both alike. The sequencer's own CPU is printed beside.
Twice: with the sequencer at the daemon's default interval (JW_LOG_INTERVAL,
5 s; windows of two intervals), the configuration that ships and the one the
target (>= 0.9) is judged on; and at five times that rate (every second).

Scale: N operations written in bulk exactly as the ledger writes them (born,
created, accepted, observing, then one status read and its observation each:
seven evidence rows; see BULK_HISTORY), all sequenced and a checkpoint
signed; then `jobwarden audit verify --checkpoint --key` runs as a child
process, timed, with its peak RSS: the whole log recomputed and every
evidence row checked against its leaf, streaming.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import (
    CpuMeter,
    bench_database,
    benchmark_main,
    child_env,
    create_remote_jobs,
    in_process_reconciler,
    our_postgres_pids,
    print_table,
    providers_for,
    seed_observing,
    simulator,
)
from bench.stack import client_stack, describe, require_same_stack
from bench.throughput import ALWAYS_DUE, run_reconciler_for
from reconciler.daemon import create_reconciler_pool
from reconciler.sequencer import APPLICATION_NAME, LogSettings, SequencerProcess
from shared.db.connect import connect
from shared.ledger import log
from shared.serve import Stack
from shared.settings import Settings
from shared.tlog import Signer, generate_key

MODULE = "bench.evidence_log"
STRESS_WINDOW = 4.0
ROUNDS, QUICK_ROUNDS = 3, 1
WARMUP_SECONDS = 2.0
COST_OPERATIONS, QUICK_COST_OPERATIONS = 10_000, 2_000
VERIFY_OPERATIONS, QUICK_VERIFY_OPERATIONS = 1_000_000, 20_000
STRESS_PERIOD = 1.0
TARGET_RATIO = 0.9

# The log's own triggers (migration 010 names them <table>_log_<op>).
_LOG_TRIGGERS = """
SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE t.tgname ~ '_log_(insert|update|delete)$' AND NOT t.tgisinternal
"""
# One status read and its observation for each seeded operation: the rows a
# real poll adds, so the log holds every kind a live system writes.
_POLL_EVIDENCE = """
WITH calls AS (
    INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, trace_id, method, url,
                                finished_at, duration_ms, status_code, response_sha256,
                                response_size, response_body)
    SELECT o.operation_id, 'status', 1, 'bench', o.trace_id, 'GET',
           'http://127.0.0.1/v1/jobs/' || o.remote_job_id, clock_timestamp(), 3, 200,
           repeat('0', 64), 80, '{"state":"running"}'
    FROM operations o WHERE o.operation_id = ANY($1::text[])
    RETURNING call_id, operation_id
)
INSERT INTO observations (operation_id, source, call_id, remote_state, remote_state_raw,
                          progress_completed, progress_total)
SELECT operation_id, 'poll', call_id, 'running', 'running', 1, 10 FROM calls
"""


# The verify benchmark's log, written in bulk: one statement per table for a
# range of operations, with triggers off (as bench.harness.fill_operations),
# writing exactly what the ledger's triggers would: each operation in
# `observing` (its working state as its one status read left it) with its
# genesis, accepted and observing history rows (hash
# chain computed with the database's own jw_history_hash), the create call the
# acceptance cites, then one status read and its observation (_POLL_EVIDENCE),
# and a log_queue entry for every row. CHECKs still apply, and `audit verify`
# itself is the proof that the rows are what the ledger writes: it recomputes
# every chain and every leaf, and the benchmark fails unless it says OK. Going
# through the triggers one row at a time seeds 100-800 operations a second
# here (a million: hours); this takes minutes.
BULK_OPERATIONS = """
INSERT INTO operations (operation_id, provider, kind, client_reference, request,
    request_fingerprint, idempotency_token, trace_id, requested_by, create_deadline,
    result_deadline, remote_job_id, status_url, create_mode, create_attempts, state,
    history_seq, remote_state, remote_state_raw, progress_completed, progress_total,
    poll_attempts)
SELECT 'op_' || lpad(g::text, 26, '0'), 'sim', 'export', 'bulk-' || g, '{"n": 1}',
       'sha256:' || encode(sha256(convert_to('bulk' || g, 'UTF8')), 'hex'),
       'idem_' || md5('tok' || g), md5('trace' || g), 'agent:bench',
       clock_timestamp() + interval '1 hour', clock_timestamp() + interval '1 day',
       'job_' || g, '/v1/jobs/job_' || g, 'async', 1, 'observing', 3,
       -- as the status read below leaves the row (record_polls)
       'running', 'running', 1, 10, 1
FROM generate_series($1::bigint, $2::bigint) AS g
"""
BULK_CREATE_CALLS = """
INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, trace_id,
    idempotency_token, method, url, finished_at, duration_ms, status_code, remote_job_id)
SELECT o.operation_id, 'create', 1, 'reconciler:bench-seed', o.trace_id, o.idempotency_token,
       'POST', '/v1/jobs', clock_timestamp(), 1, 202, o.remote_job_id
FROM operations o WHERE o.operation_id BETWEEN $1 AND $2
"""
BULK_HISTORY = """
WITH base AS (
    SELECT o.operation_id AS op, o.remote_job_id AS job, c.call_id, now() AS t,
           'reconciler:bench-seed' AS actor
    FROM operations o
    JOIN provider_calls c ON c.operation_id = o.operation_id AND c.call_kind = 'create'
    WHERE o.operation_id BETWEEN $1 AND $2
),
h1 AS (
    SELECT b.*, jw_genesis_hash(b.op) AS prev1,
           jw_history_hash(jw_genesis_hash(b.op), b.op, 1, b.t, b.actor, NULL, 'create_pending',
                           'submitted (seeded)', NULL, NULL, NULL) AS hash1
    FROM base b
),
h2 AS (
    SELECT h1.*, jw_history_hash(h1.hash1, h1.op, 2, h1.t + interval '1 ms', h1.actor,
                                 'create_pending', 'accepted', 'create accepted (seeded)',
                                 'call', h1.call_id, h1.job) AS hash2
    FROM h1
),
h3 AS (
    SELECT h2.*, jw_history_hash(h2.hash2, h2.op, 3, h2.t + interval '2 ms', h2.actor,
                                 'accepted', 'observing', 'first observation (seeded)',
                                 NULL, NULL, h2.job) AS hash3
    FROM h2
),
written AS (
    INSERT INTO history (operation_id, actor, from_state, to_state, cause, evidence_kind,
                         evidence_id, seq, at, prev_hash, row_hash, remote_job_id)
    SELECT op, actor, NULL::jw_state, 'create_pending'::jw_state, 'submitted (seeded)',
           NULL, NULL::bigint, 1, t, prev1, hash1, NULL FROM h3
    UNION ALL
    SELECT op, actor, 'create_pending'::jw_state, 'accepted'::jw_state,
           'create accepted (seeded)', 'call', call_id, 2, t + interval '1 ms', hash1, hash2, job
    FROM h3
    UNION ALL
    SELECT op, actor, 'accepted'::jw_state, 'observing'::jw_state, 'first observation (seeded)',
           NULL, NULL, 3, t + interval '2 ms', hash2, hash3, job FROM h3
)
UPDATE operations o SET history_head = h3.hash3 FROM h3 WHERE o.operation_id = h3.op
"""
BULK_QUEUE = """
INSERT INTO log_queue (kind, row_id)
SELECT 'operation', operation_id FROM operations WHERE operation_id BETWEEN $1 AND $2
UNION ALL
SELECT 'history', history_id::text FROM history WHERE operation_id BETWEEN $1 AND $2
UNION ALL
SELECT 'call', call_id::text FROM provider_calls WHERE operation_id BETWEEN $1 AND $2
UNION ALL
SELECT 'observation', observation_id::text FROM observations
WHERE operation_id BETWEEN $1 AND $2
"""
BULK_CHUNK = 50_000


async def seed_log_bulk(conn: Any, operations: int) -> None:
    """`operations` ledger-shaped operations with their evidence, queued for the log."""
    for first in range(1, operations + 1, BULK_CHUNK):
        last = min(operations, first + BULK_CHUNK - 1)
        lo, hi = f"op_{first:026d}", f"op_{last:026d}"
        async with conn.transaction():
            await conn.execute("SET LOCAL session_replication_role = replica")
            await conn.execute(BULK_OPERATIONS, first, last)
            await conn.execute(BULK_CREATE_CALLS, lo, hi)
            await conn.execute(BULK_HISTORY, lo, hi)
            ops = [
                r[0]
                for r in await conn.fetch(
                    "SELECT operation_id FROM operations WHERE operation_id BETWEEN $1 AND $2",
                    lo,
                    hi,
                )
            ]
            await conn.execute(_POLL_EVIDENCE, ops)
            await conn.execute(BULK_QUEUE, lo, hi)
    await conn.execute("VACUUM ANALYZE")


async def set_logging(conn: Any, on: bool) -> None:
    """Enable or disable the log's triggers (bench databases only)."""
    for row in await conn.fetch(_LOG_TRIGGERS):
        verb = "ENABLE" if on else "DISABLE"
        await conn.execute(f'ALTER TABLE {row["relname"]} {verb} TRIGGER "{row["tgname"]}"')


@contextlib.asynccontextmanager
async def sequencer(db_url: str, period: float, workdir: Path) -> AsyncIterator[SequencerProcess]:
    """The daemon's sequencer child, passing every `period` seconds while the block
    runs: the process the reconciler daemon starts, started the way it starts it."""
    child = SequencerProcess(LogSettings(period, workdir / "checkpoints"), db_url)
    running = asyncio.create_task(child.supervise())
    try:
        yield child
    finally:
        child.stop()
        await running


async def drained(conn: Any) -> None:
    """Wait until the sequencer has appended everything queued."""
    while await conn.fetchval("SELECT EXISTS (SELECT 1 FROM log_queue)"):
        await asyncio.sleep(0.05)


# The sequencer's session, busy: running a statement or inside a transaction.
_SEQUENCER_BUSY = """
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle')
"""


async def pause(admin: Any, child: SequencerProcess, paused: bool) -> None:
    """SIGSTOP the child between batches, never inside one (a transaction held open
    through a log-off window would keep vacuum from those windows' dead rows)."""
    assert child.pid is not None
    if not paused:
        os.kill(child.pid, signal.SIGCONT)
        return
    while True:
        os.kill(child.pid, signal.SIGSTOP)
        if not await admin.fetchval(_SEQUENCER_BUSY, APPLICATION_NAME):
            return
        os.kill(child.pid, signal.SIGCONT)  # mid-batch: let it finish
        await asyncio.sleep(0.005)


@dataclass
class CostWindows:
    """Status reads, seconds and PostgreSQL CPU-seconds, log off (False) and on (True)."""

    reads: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    seconds: dict[bool, float] = field(default_factory=lambda: {True: 0.0, False: 0.0})
    postgres: dict[bool, float] = field(default_factory=lambda: {True: 0.0, False: 0.0})
    sequencer: dict[bool, float] = field(default_factory=lambda: {True: 0.0, False: 0.0})

    def rate(self, on: bool) -> float:
        return self.reads[on] / self.seconds[on]

    def pg_share(self, on: bool) -> float:
        return self.postgres[on] / self.seconds[on]

    def sequencer_share(self) -> float:
        return self.sequencer[True] / self.seconds[True]


# (sequencer period, window): the daemon's default (JW_LOG_INTERVAL), each
# window long enough to hold two sequencing passes; and five times as often.
def cost_configs() -> list[tuple[float, float]]:
    default = Settings().log_interval
    return [(default, 2 * default), (STRESS_PERIOD, STRESS_WINDOW)]


async def measure_cost(quick: bool, workdir: Path, command: str) -> None:
    operations = QUICK_COST_OPERATIONS if quick else COST_OPERATIONS
    measured: list[tuple[float, CostWindows]] = []
    stacks: dict[str, Stack] = {}
    async with bench_database("log_cost") as db, simulator(workdir) as sim:
        body = {"script": "never_finishes"}
        jobs = await create_remote_jobs(sim.url, operations, body)
        admin = await connect(db.url)
        await seed_observing(admin, sim.url, jobs, [datetime.now(UTC)] * len(jobs), body)
        await log.sequence_all(admin)
        pool = await create_reconciler_pool(db.url)
        try:
            providers = providers_for(sim.url, ALWAYS_DUE)
            async with in_process_reconciler(pool, workdir, providers) as rec:
                await run_reconciler_for(rec, WARMUP_SECONDS)
                for period, window in cost_configs():
                    windows = CostWindows()
                    # started once, as the daemon starts it, and paused (SIGSTOP)
                    # through the log-off windows: what an on window queues and
                    # leaves unsequenced is sequenced in the next on window
                    async with sequencer(db.url, period, workdir) as child:
                        # a paused window past the watchdog would have the child
                        # replaced, unpaused, in the middle of the measurement
                        assert window < child.watchdog_seconds, "window past the watchdog"
                        meter = CpuMeter(
                            {
                                "postgres": our_postgres_pids,
                                "sequencer": lambda: [] if child.pid is None else [child.pid],
                            }
                        )
                        await set_logging(admin, True)
                        await run_reconciler_for(rec, WARMUP_SECONDS)
                        await drained(admin)  # the child is up and passing
                        for _ in range(QUICK_ROUNDS if quick else ROUNDS):
                            for logging_on in (False, True):
                                await set_logging(admin, logging_on)
                                await pause(admin, child, not logging_on)
                                stacks["log on" if logging_on else "log off"] = client_stack()
                                meter.start()
                                began = time.monotonic()
                                windows.reads[logging_on] += await run_reconciler_for(rec, window)
                                elapsed = time.monotonic() - began
                                windows.seconds[logging_on] += elapsed
                                shares = meter.stop()
                                windows.postgres[logging_on] += shares["postgres"] * elapsed
                                windows.sequencer[logging_on] += shares["sequencer"] * elapsed
                        await pause(admin, child, False)  # to hear its SIGTERM
                    measured.append((period, windows))
        finally:
            await pool.close()
            await admin.close()
    require_same_stack(stacks)  # no ratio between unlike stacks
    rows = []
    for period, w in measured:
        ratio = w.rate(True) / w.rate(False)
        shipped = period == Settings().log_interval
        verdict = ("met" if ratio >= TARGET_RATIO else "NOT met") if shipped else "(stress)"
        rows.append(
            [
                f"sequencer every {period:g} s{' (the default)' if shipped else ''}",
                f"{w.rate(False):,.0f}",
                f"{w.rate(True):,.0f}",
                f"{ratio:.2f}",
                f"{w.pg_share(False):.0%} / {w.pg_share(True):.0%}",
                f"{w.sequencer_share():.0%}",
                verdict,
            ]
        )
    print_table(
        f"evidence log: cost on the reconciler ({operations:,} observing operations; "
        f"log off = triggers disabled, sequencer paused)",
        command,
        [
            "log on",
            "reads/s off",
            "reads/s on",
            "ratio",
            "PostgreSQL off / on",
            "sequencer (on)",
            f">= {TARGET_RATIO}",
        ],
        rows,
    )
    print(describe(stacks))


async def seed_log(db_url: str, operations: int) -> tuple[float, float]:
    """`operations` with their evidence, then all of it sequenced; (seed s, sequence s)."""
    conn = await connect(db_url)
    try:
        began = time.monotonic()
        await seed_log_bulk(conn, operations)
        seeded = time.monotonic() - began
        began = time.monotonic()
        await log.sequence_all(conn, batch=20_000)
        return seeded, time.monotonic() - began
    finally:
        await conn.close()


def verify_child(db_url: str, checkpoint: Path, public_key: str) -> tuple[float, int, str]:
    """`jobwarden audit verify --checkpoint --key` as a process: (seconds, peak RSS KiB, verdict).

    os.wait4 gives that child's own resource usage (RUSAGE_CHILDREN would mix
    in every process this benchmark ever started).
    """
    argv = [sys.executable, "-m", "shared.cli", "audit", "verify"]
    argv += ["--checkpoint", str(checkpoint), "--key", public_key]
    began = time.monotonic()
    with subprocess.Popen(
        argv,
        env=child_env(DATABASE_URL=db_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        output = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.monotonic() - began
    if proc.returncode != 0:
        raise RuntimeError(f"audit verify failed: {output[-3000:]}")
    return elapsed, usage.ru_maxrss, output.strip().splitlines()[-1]


async def measure_verify(quick: bool, workdir: Path, command: str) -> None:
    operations = QUICK_VERIFY_OPERATIONS if quick else VERIFY_OPERATIONS
    async with bench_database("log_verify") as db:
        seeded, sequenced = await seed_log(db.url, operations)
        private, public = generate_key("bench.jobwarden/log")
        conn = await connect(db.url)
        try:
            note = await log.checkpoint(conn, Signer.from_key(private))
            leaves = int(await conn.fetchval("SELECT count(*) FROM log_leaves"))
        finally:
            await conn.close()
        checkpoint = workdir / "checkpoint"
        checkpoint.write_text(note)
        seconds, rss_kib, verdict = await asyncio.to_thread(
            verify_child, db.url, checkpoint, public
        )
    print_table(
        f"evidence log: a log of {operations:,} operations ({leaves:,} leaves)",
        command,
        ["", "seconds", "per leaf", "peak RSS"],
        [
            ["seed (ledger-shaped rows, bulk)", f"{seeded:,.1f}", "", ""],
            ["sequence (leaves + stored hashes)", f"{sequenced:,.1f}", _per(sequenced, leaves), ""],
            [
                "audit verify --checkpoint (child process)",
                f"{seconds:,.1f}",
                _per(seconds, leaves),
                f"{rss_kib / 1024:,.0f} MiB",
            ],
        ],
    )
    print(f"verify said: {verdict}")


def _per(seconds: float, leaves: int) -> str:
    return f"{seconds / leaves * 1e6:.1f} us"


PARTS = {"cost": measure_cost, "verify": measure_verify}
CHOSEN = list(PARTS)


async def run(quick: bool, workdir: Path, command: str) -> None:
    for part in CHOSEN:
        shown = command if len(CHOSEN) == len(PARTS) else f"{command} --only {part}"
        await PARTS[part](quick, workdir, shown)


def main(argv: Sequence[str] | None = None) -> int:
    """`--verify-operations N` sizes the verify part (seeding is the slow step);
    `--only cost` or `--only verify` runs one part."""
    global VERIFY_OPERATIONS, CHOSEN
    args = list(sys.argv[1:] if argv is None else argv)
    if "--verify-operations" in args:
        at = args.index("--verify-operations")
        VERIFY_OPERATIONS = int(args[at + 1])
        del args[at : at + 2]
    if "--only" in args:
        at = args.index("--only")
        if at + 1 >= len(args) or args[at + 1] not in PARTS:
            print(f"--only takes one of: {', '.join(PARTS)}", file=sys.stderr)
            return 2
        CHOSEN = [args[at + 1]]
        del args[at : at + 2]
    return benchmark_main(MODULE, __doc__ or "", run, args)


if __name__ == "__main__":
    sys.exit(main())
