"""`make chaos`: three reconciler daemons, 500 operations, webhooks on, random SIGKILLs.

    .venv/bin/python -m bench.chaos            # 500 operations, about a minute
    .venv/bin/python -m bench.chaos --operations 100 --seed 3

The full-size version of tests/integration/test_reconciler_crashes.py::
test_three_reconcilers_with_random_sigkills. Three `jobwarden reconciler`
processes share one database, one simulated provider and one `jobwarden
receiver` the provider sends signed webhooks to; while work remains, one
reconciler is killed with SIGKILL at random moments and replaced by a fresh
process. Afterwards it asserts what must hold whatever the timing:

- one create per idempotency token, and one remote job per operation;
- no two status reads of the same job ever overlapped (the simulator counts);
- no call inside a provider's Retry-After window, webhooks notwithstanding
  (the simulator counts every request that arrived too early);
- every operation ended in the state its script implies;
- every history hash chain verifies.

Exit status 0 when all hold, 1 otherwise (each failure is named).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    BENCH_WEBHOOK_SECRET,
    Simulator,
    bench_database,
    command_line,
    print_table,
    receiver_process,
    simulator,
    start_daemon,
    stop,
    write_config,
)
from shared import ledger
from shared.db.connect import create_pool
from shared.ledger import RequestSpec, audit
from shared.ledger.states import LocalState

S = LocalState
# The scripted failure modes and the state each must end in.
EXPECTED = {
    "success": S.SUCCEEDED,
    "late_failure": S.FAILED,
    "partial": S.SUCCEEDED,
    "lost_create_response": S.SUCCEEDED,
    "create_5xx": S.SUCCEEDED,
    "rate_limited": S.SUCCEEDED,
}
PROCESSES = 3
# Fast schedule so the run takes about a minute: these mirror the test rig's.
# With webhooks on, polling is the backstop: a webhook lost to a kill is made
# up for within a couple of seconds.
LIMITS = {
    "backoff_base": 0.05,
    "backoff_factor": 2.0,
    "backoff_cap": 0.3,
    "request_timeout": 1.0,
    "webhook_backstop_poll_seconds": 2.0,
}
# rate_limited jobs answer their first reads 429 with this Retry-After, and
# finish inside it: their webhook arrives while the provider still says "wait".
RETRY_AFTER_SECONDS = 2
# A lease shorter than a killed worker's rows should wait, longer than one
# request timeout plus its database writes, so a live worker keeps its lease.
LEASE_SECONDS = "2"
SWEEP_SECONDS = "0.05"
# Status reads take this long at the simulator, so overlapping reads of one
# job would actually overlap there and be counted.
STATUS_LATENCY = 0.01
KILL_INTERVAL = (0.5, 1.5)  # seconds between SIGKILLs while work remains
MAX_KILLS = 40  # then let the survivors finish
RUN_TIMEOUT = 240.0


@dataclass
class ChaosRun:
    operations: int
    kills: int = 0
    seconds: float = 0.0
    states: Counter[str] = field(default_factory=Counter)
    stats: dict[str, Any] = field(default_factory=dict)
    workers_per_op: Counter[int] = field(default_factory=Counter)
    chains_checked: int = 0
    early: int = 0
    early_after_lost: int = 0
    failures: list[str] = field(default_factory=list)


class Fleet:
    """The reconciler processes, addressed by slot; a killed slot gets a new worker id."""

    def __init__(self, db_url: str, config: Path, workdir: Path, env: dict[str, str]) -> None:
        self.db_url, self.config, self.workdir, self.env = db_url, config, workdir, env
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.generation = 0

    def start(self, slot: int) -> None:
        self.generation += 1
        worker = f"w{slot}-{self.generation}"
        self.procs[slot] = start_daemon(
            self.db_url,
            self.config,
            self.workdir,
            worker,
            JW_LEASE_SECONDS=LEASE_SECONDS,
            JW_SWEEP_INTERVAL=SWEEP_SECONDS,
            **self.env,
        )

    def kill9(self, slot: int) -> None:
        proc = self.procs[slot]
        proc.kill()
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            stop(proc)


async def submit_all(pool: Any, rng: random.Random, count: int) -> list[tuple[str, str]]:
    plan = []
    for n in range(count):
        script = rng.choice(sorted(EXPECTED))
        params: dict[str, Any] = {"duration": round(rng.uniform(0.1, 1.5), 3)}
        if script == "lost_create_response":
            params["hang_seconds"] = 3
        if script == "rate_limited":
            params.update(retry_after=RETRY_AFTER_SECONDS, duration=0.2)
        sub = await ledger.submit_operation(
            pool,
            provider="sim",
            kind="export",
            request=RequestSpec("POST", "/v1/jobs", {"script": script, "params": params}),
            requested_by="agent:chaos",
            client_reference=f"chaos-{n}",
            result_deadline_s=600,
        )
        plan.append((sub.operation_id, script))
    return plan


async def unfinished(pool: Any) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM operations WHERE finished_at IS NULL"))


async def rampage(pool: Any, fleet: Fleet, rng: random.Random, run: ChaosRun) -> None:
    """Kill and replace a random reconciler now and then until the work is done."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while time.monotonic() < deadline and await unfinished(pool):
        await asyncio.sleep(rng.uniform(*KILL_INTERVAL))
        if run.kills < MAX_KILLS and await unfinished(pool):
            slot = rng.randrange(PROCESSES)
            fleet.kill9(slot)
            run.kills += 1
            fleet.start(slot)


async def early_calls(pool: Any, stats: dict[str, Any]) -> tuple[int, int]:
    """The provider's count of calls inside its Retry-After windows, split in two.

    A worker SIGKILLed with a 429 in flight dies with the answer: the next
    owner cannot know the window (README, "Limits of these guarantees"). Such
    an early call is told apart by the read the dead worker left on record as
    lost; (early after a lost answer, early with the window on record).
    """
    per_job: dict[str, int] = stats.get("retry_after_violations", {})
    if not per_job:
        return 0, 0
    lost_jobs = {
        r["remote_job_id"]
        for r in await pool.fetch(
            "SELECT DISTINCT o.remote_job_id FROM operations o JOIN provider_calls c"
            " USING (operation_id) WHERE c.error_category = 'lost' AND o.remote_job_id = ANY($1)",
            list(per_job),
        )
    }
    after_lost = sum(n for job, n in per_job.items() if job in lost_jobs)
    return after_lost, sum(per_job.values()) - after_lost


async def check(pool: Any, sim: Simulator, plan: list[tuple[str, str]], run: ChaosRun) -> None:
    for op_id, script in plan:
        state = (await ledger.load_operation(pool, op_id)).state
        run.states[state.value] += 1
        if state is not EXPECTED[script]:
            run.failures.append(
                f"{op_id} ({script}) ended {state.value}, expected {EXPECTED[script].value}"
            )
    run.stats = await sim.stats()
    if run.stats["jobs_total"] != len(plan):
        run.failures.append(f"{run.stats['jobs_total']} remote jobs for {len(plan)} operations")
    repeated = {t: n for t, n in run.stats["creates_per_token"].items() if n != 1}
    if repeated:
        run.failures.append(f"{len(repeated)} idempotency tokens created more than one job")
    overlap = max(run.stats["max_overlapping_status_calls"].values(), default=0)
    if overlap > 1:
        run.failures.append(f"status reads of one job overlapped ({overlap} at once)")
    run.early_after_lost, run.early = await early_calls(pool, run.stats)
    if run.early:
        run.failures.append(f"{run.early} calls arrived inside a Retry-After window on record")
    rows = await pool.fetch(
        "SELECT count(DISTINCT worker) AS n FROM provider_calls GROUP BY operation_id"
    )
    run.workers_per_op = Counter(int(r["n"]) for r in rows)
    async with pool.acquire() as conn:
        run.chains_checked, breaks = await audit.verify(conn)
    if breaks:
        run.failures.append(f"{len(breaks)} broken history chains, first: {breaks[0]}")


async def chaos(operations: int, seed: int, workdir: Path) -> ChaosRun:
    rng = random.Random(seed)
    run = ChaosRun(operations)
    async with (
        bench_database("chaos") as db,
        simulator(
            workdir, webhook_secret=BENCH_WEBHOOK_SECRET, status_latency=STATUS_LATENCY
        ) as sim,
    ):
        config = write_config(workdir / "chaos.toml", sim.url, LIMITS)
        async with receiver_process(db.url, config, workdir) as port:
            webhooks = {
                "JW_SIM_WEBHOOK_SECRET": BENCH_WEBHOOK_SECRET,
                "JW_PUBLIC_WEBHOOK_URL": f"http://127.0.0.1:{port}/webhooks/{{provider}}",
            }
            await _run_fleet(db.url, sim, config, workdir, webhooks, rng, run, operations)
    return run


async def _run_fleet(
    db_url: str,
    sim: Simulator,
    config: Path,
    workdir: Path,
    env: dict[str, str],
    rng: random.Random,
    run: ChaosRun,
    operations: int,
) -> None:
    pool = await create_pool(db_url, min_size=1, max_size=4)
    try:
        plan = await submit_all(pool, rng, operations)
        fleet = Fleet(db_url, config, workdir, env)
        began = time.monotonic()
        for slot in range(PROCESSES):
            fleet.start(slot)
        try:
            await rampage(pool, fleet, rng, run)
        finally:
            fleet.stop_all()
        run.seconds = time.monotonic() - began
        await check(pool, sim, plan, run)
    finally:
        await pool.close()


def report(run: ChaosRun, command: str, seed: int) -> None:
    stats = run.stats
    overlap = max(stats.get("max_overlapping_status_calls", {}).values(), default=0)
    per_token = Counter(stats.get("creates_per_token", {}).values())
    rows = [
        ["operations", f"{run.operations}"],
        ["reconciler processes", f"{PROCESSES} at a time ({run.kills} SIGKILLed and replaced)"],
        ["wall time", f"{run.seconds:.1f} s"],
        ["final states", ", ".join(f"{k} {v}" for k, v in sorted(run.states.items()))],
        ["create requests sent", f"{stats.get('creates_total', 0)}"],
        ["remote jobs created", f"{stats.get('jobs_total', 0)}"],
        [
            "jobs per idempotency token",
            ", ".join(f"{k}: {v} tokens" for k, v in sorted(per_token.items())),
        ],
        ["status reads", f"{sum(stats.get('status_calls_per_job', {}).values())}"],
        ["max overlapping reads of one job", f"{overlap}"],
        ["calls inside a Retry-After window on record", f"{run.early}"],
        [
            "calls inside a window whose 429 died with its worker",
            f"{run.early_after_lost}",
        ],
        ["webhooks delivered", f"{stats.get('webhooks_sent', 0)}"],
        [
            "workers that called for one operation",
            ", ".join(f"{k}: {v} ops" for k, v in sorted(run.workers_per_op.items())),
        ],
        ["history chains verified", f"{run.chains_checked}"],
    ]
    print_table(f"chaos (seed {seed})", command, ["figure", "value"], rows, numeric=False)
    if run.failures:
        print(f"FAILED ({len(run.failures)}):")
        for failure in run.failures[:20]:
            print(f"  - {failure}")
    else:
        print(
            "PASSED: one create per token, no overlapping status reads, no call inside a "
            "Retry-After window, every operation in the state its script implies, every "
            "history chain intact"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--operations", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    command = command_line("bench.chaos", argv if argv is not None else sys.argv[1:])
    workdir = Path(tempfile.mkdtemp(prefix="jw-chaos-"))
    run = asyncio.run(chaos(args.operations, args.seed, workdir))
    report(run, command, args.seed)
    if run.failures:
        print(f"(process logs kept in {workdir})")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
