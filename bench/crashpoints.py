"""Crash-point enumeration: every statement of every step kind, dropped and killed.

    .venv/bin/python -m bench.crashpoints                 # every crash point (make chaos)
    .venv/bin/python -m bench.crashpoints --sample 3      # three random points per kind and fault
    .venv/bin/python -m bench.crashpoints --kinds cancel,collect

A claim like "a crash at any line loses nothing" is proved here without luck.
For each step kind (a scenario brings one operation to the state just before
the step), the step runs once fault-free through a PostgreSQL wire proxy
(bench/pgproxy.py) that counts its statements: N. Then, for every k in 1..N,
the same step runs again in a fresh world with

- `drop`: the connection of statement k dropped after the server executed it
  but before the answer reached us (a COMMIT there took effect, unacknowledged);
- `kill`: the reconciler process SIGKILLed as statement k leaves (it never
  reaches the server).

Then the clock moves past the dead lease, a fresh reconciler runs the
operation to its end, and the invariants are checked: one remote job per
idempotency token; never `succeeded` without our own status read and a
validated result; at most one valid result stored; no call inside a
back-pressure window (our record and the provider's count); every call the
provider received is on our record; the
history chain verifies; the end state equals the fault-free run's, or is a
documented escalation of the scenario. Exit status 0 when every run holds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import re
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import httpx

from bench.harness import FAST_LIMITS, TEST_WEBHOOK_SECRET, TestClock, install_test_clock
from bench.pgproxy import Fault, PgProxy
from reconciler.context import Context, build_adapters
from reconciler.daemon import create_reconciler_pool
from reconciler.lanes import Lanes
from reconciler.worker import Reconciler
from shared import ledger
from shared.clock import ShiftedClock
from shared.db.connect import connect, resolve_database, with_database
from shared.db.migrate import apply_migrations
from shared.ledger import audit
from shared.ledger.states import INBOX, TERMINAL, LocalState
from shared.providers import ProviderDescription, parse_providers
from shared.result_store import ResultStore
from shared.serve import serve_app
from shared.settings import Settings
from shared.simulator import SimulatorSettings, build_app

S = LocalState
Mode = Literal["drop", "kill"]
MODES: tuple[Mode, ...] = ("drop", "kill")
WEBHOOK_SECRET = TEST_WEBHOOK_SECRET
# The test rig's fast schedule; with webhooks, polling a slow backstop.
LIMITS = {**FAST_LIMITS, "webhook_backstop_poll_seconds": 30.0}
# Long enough for a 1 s request timeout plus its writes, short enough that the
# clock moves over it in one step after a kill.
LEASE_SECONDS = 10.0
# Moving the clock this far after a fault lets any dead lease lapse and any
# error retry (30 s) come due.
PAST_THE_FAULT = 31.0
# Run-to-the-end rounds: a scenario's remaining steps plus its backoffs.
MAX_ROUNDS = 80
# A victim that neither dies nor finishes within this is a harness failure.
VICTIM_TIMEOUT = 60.0


# ------------------------------------------------------------------ the world of one run


@dataclass
class World:
    """One run's throwaway database, clock, simulated provider and (maybe) receiver."""

    admin_url: str
    db_url: str
    db: Any  # a connection, for checks and the clock
    clock: TestClock
    sim_url: str
    receiver_url: str | None
    workdir: Path
    overrides: Mapping[str, Any] = field(default_factory=dict)
    operation_id: str = ""

    def providers(self) -> dict[str, ProviderDescription]:
        return providers_for(
            self.sim_url, webhooks=self.receiver_url is not None, overrides=self.overrides
        )

    async def sim(self, path: str) -> Any:
        async with httpx.AsyncClient() as client:
            return (await client.get(f"{self.sim_url}{path}")).json()


def providers_for(
    sim_url: str, *, webhooks: bool, overrides: Mapping[str, Any] | None = None
) -> dict[str, ProviderDescription]:
    """The simulator preset, with a scenario's overrides merged table by table."""
    table: dict[str, Any] = {"preset": "simulator", "base_url": sim_url, "limits": dict(LIMITS)}
    for key, value in (overrides or {}).items():
        table[key] = {**table.get(key, {}), **value} if isinstance(value, dict) else value
    env = {"JW_SIM_WEBHOOK_SECRET": WEBHOOK_SECRET} if webhooks else {}
    return parse_providers({"providers": {"sim": table}}, "crashpoints", env)


def webhook_template(receiver_url: str | None) -> str | None:
    return f"{receiver_url}/webhooks/{{provider}}" if receiver_url else None


def context_for(
    pool: Any,
    lanes: Lanes,
    providers: Mapping[str, ProviderDescription],
    *,
    workdir: Path,
    worker_id: str,
    clock: ShiftedClock,
    webhook_url: str | None,
) -> Context:
    settings = replace(
        Settings(),
        worker_id=worker_id,
        lease_seconds=LEASE_SECONDS,
        results_dir=workdir / "results",
        providers=providers,
    )
    return Context(
        pool=pool,
        settings=settings,
        lanes=lanes,
        adapters=build_adapters(providers),
        store=ResultStore(workdir / "results"),
        webhook_url=webhook_url,
        clock=clock,
    )


@contextlib.asynccontextmanager
async def reconciler_on(world: World, url: str, worker_id: str) -> AsyncIterator[Reconciler]:
    """An in-process reconciler whose database is `url` (direct, or through the proxy)."""
    pool = await create_reconciler_pool(url)
    try:
        async with Lanes(16) as lanes:
            ctx = context_for(
                pool,
                lanes,
                world.providers(),
                workdir=world.workdir,
                worker_id=worker_id,
                clock=world.clock,
                webhook_url=webhook_template(world.receiver_url),
            )
            yield Reconciler(ctx)
    finally:
        await pool.close()


class Databases:
    """A migrated template (test clock installed) cloned once per run.

    The test suite passes its own server and template; run alone, this finds
    a server like `make run` does and builds a template of its own.
    """

    def __init__(self, server: Any = None, template: str | None = None) -> None:
        self._own = server is None
        self.server = server or resolve_database()
        self._own_template = template is None
        self.template = template or f"jw_cp_tpl_{os.getpid()}"
        self._count = 0

    async def __aenter__(self) -> Databases:
        if not self._own_template:
            return self
        await self._drop(self.template)
        admin = await connect(self.server.admin_url)
        await admin.execute(f'CREATE DATABASE "{self.template}"')
        await admin.close()
        conn = await connect(with_database(self.server.admin_url, self.template))
        try:
            await apply_migrations(conn)
            await install_test_clock(conn)
        finally:
            await conn.close()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._own_template:
            await self._drop(self.template)
        if self._own:
            self.server.stop()

    async def _drop(self, name: str) -> None:
        admin = await connect(self.server.admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    @contextlib.asynccontextmanager
    async def clone(self) -> AsyncIterator[str]:
        self._count += 1
        name = f"jw_cp_{os.getpid()}_{self._count}"
        admin = await connect(self.server.admin_url)
        try:
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        finally:
            await admin.close()
        try:
            yield with_database(self.server.admin_url, name)
        finally:
            await self._drop(name)


@contextlib.asynccontextmanager
async def world_for(
    dbs: Databases, webhooks: bool, workdir: Path, overrides: Mapping[str, Any]
) -> AsyncIterator[World]:
    async with contextlib.AsyncExitStack() as stack:
        db_url = await stack.enter_async_context(dbs.clone())
        db = await connect(db_url)
        stack.push_async_callback(db.close)
        clock = TestClock(db)
        receiver_url = None
        holder: dict[str, Any] = {}
        if webhooks:
            receiver_url = await stack.enter_async_context(serve_app(_late_app(holder)))
        sim = SimulatorSettings(
            webhook_secret=WEBHOOK_SECRET if webhooks else None,
            webhook_backoff=(0.05, 0.1, 0.2),
        )
        sim_url = await stack.enter_async_context(serve_app(build_app(sim, clock=clock)))
        world = World(
            dbs.server.admin_url, db_url, db, clock, sim_url, receiver_url, workdir, overrides
        )
        if webhooks:
            await _start_receiver(stack, world, holder)
        yield world


def _late_app(holder: dict[str, Any]) -> Any:
    """An ASGI app that forwards to holder["app"], set once the simulator's URL is known."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # the real app's lifespan is entered separately
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        await holder["app"](scope, receive, send)

    return app


async def _start_receiver(
    stack: contextlib.AsyncExitStack, world: World, holder: dict[str, Any]
) -> None:
    from receiver.app import build_app as build_receiver
    from shared.db.connect import create_pool

    pool = await create_pool(world.db_url, min_size=1, max_size=4)
    stack.push_async_callback(pool.close)
    settings = replace(Settings(), providers=world.providers())
    holder["app"] = build_receiver(settings, pool)
    await stack.enter_async_context(holder["app"].router.lifespan_context(holder["app"]))


# ------------------------------------------------------------------ scenarios


@dataclass(frozen=True)
class Scenario:
    """One step kind: how to bring an operation to the state just before the step."""

    kind: str
    script: str
    params: Mapping[str, Any]
    prime: Callable[[World, Reconciler], Awaitable[None]]
    webhooks: bool = False
    # provider description overrides (e.g. no idempotency), merged into the preset
    overrides: Mapping[str, Any] = field(default_factory=dict)
    result_deadline_s: float = 7200.0
    # the end must carry a valid partial result (a cancelled job's output kept)
    keeps_partial: bool = False
    # End states a fault may lead to besides the fault-free one, each a
    # documented escalation (README, "Crash points").
    escalations: frozenset[LocalState] = frozenset()
    # The job ended before the cancel was asked for: no cancel may reach it
    # (a provider whose cancel deletes a finished job, `cancel.read_first`).
    no_cancel_sent: bool = False


async def submit(world: World, scenario: Scenario) -> str:
    body = {"script": scenario.script, "params": dict(scenario.params), "input": {"rows": 3}}
    sub = await ledger.submit_operation(
        world.db,
        provider="sim",
        kind="export",
        request=ledger.RequestSpec("POST", "/v1/jobs", body),
        requested_by="agent:crashpoints",
        create_deadline_s=3600,
        result_deadline_s=scenario.result_deadline_s,
    )
    return sub.operation_id


async def state_of(world: World) -> LocalState:
    return (await ledger.load_operation(world.db, world.operation_id)).state


async def run_until(world: World, rec: Reconciler, states: set[LocalState]) -> None:
    """Run (moving the clock over each wait) until the operation is in `states`."""

    async def reached() -> bool:
        return await state_of(world) in states

    await run_until_true(world, rec, reached, f"reached {states}")


async def run_until_true(
    world: World, rec: Reconciler, done: Callable[[], Awaitable[bool]], what: str
) -> None:
    """Run (moving the clock over each wait) until `done()`; `what` names it if never."""
    for _ in range(MAX_ROUNDS):
        if await done():
            return
        await rec.run_once()
        if await done():
            return
        await advance_to_due(world)
    raise RuntimeError(f"priming never {what}: {await state_of(world)}")


async def advance_to_due(world: World) -> bool:
    """Move the clock to the operation's next appointment; False if nothing is scheduled."""
    return await world.clock.to_appointment(world.db, world.operation_id)


async def nothing(world: World, rec: Reconciler) -> None:
    """The step is the operation's first: nothing to prime."""


async def first_create_lost(world: World, rec: Reconciler) -> None:
    await rec.run_once()  # the first create leaves; its answer is lost
    if await state_of(world) is not S.CREATE_UNKNOWN:
        raise RuntimeError("the first create was expected to end create_unknown")
    await advance_to_due(world)


async def observing(world: World, rec: Reconciler) -> None:
    await run_until(world, rec, {S.OBSERVING})
    await advance_to_due(world)


async def read_throttled(world: World, rec: Reconciler) -> None:
    """The first status read answered 429, its window imposed; the operation still
    `accepted` (a read that saw nothing of the job does not move it to observing)."""

    async def throttled() -> bool:
        return bool(
            await world.db.fetchval(
                "SELECT count(*) FROM provider_calls WHERE operation_id = $1"
                " AND call_kind = 'status' AND status_code = 429",
                world.operation_id,
            )
        )

    await run_until_true(world, rec, throttled, "read a 429")
    if await state_of(world) is not S.ACCEPTED:
        raise RuntimeError(f"expected accepted after a 429, got {await state_of(world)}")
    await advance_to_due(world)


# The simulator's ticker sends a finished job's webhook within a few of its
# 50 ms ticks; this bounds the wait for the wake-up it causes.
WEBHOOK_WAIT_SECONDS = 15.0


async def finished_and_announced(world: World, rec: Reconciler) -> None:
    """Accepted (with webhooks there is no read at acceptance); then the job
    finishes and its terminal webhook is on record.

    Waits on the signal the stored webhook sends (its wake-up NOTIFY), not on time.
    """
    await run_until(world, rec, {S.ACCEPTED})
    woken = asyncio.Event()

    def on_wake(_conn: Any, _pid: int, _channel: str, operation_id: str) -> None:
        if operation_id == world.operation_id:
            woken.set()

    await world.db.add_listener("jobwarden_wakeup", on_wake)
    try:
        await world.clock.advance(3.0)
        await asyncio.wait_for(woken.wait(), WEBHOOK_WAIT_SECONDS)
    finally:
        await world.db.remove_listener("jobwarden_wakeup", on_wake)
    terminal = await world.db.fetchval(
        "SELECT count(*) FROM webhook_events WHERE operation_id = $1"
        " AND remote_state::text IN ('succeeded', 'failed')",
        world.operation_id,
    )
    if not terminal:
        raise RuntimeError("woken, but no terminal webhook is on record")


async def cancel_requested(world: World, rec: Reconciler) -> None:
    await run_until(world, rec, {S.OBSERVING})
    await ledger.request_cancel(
        world.db, world.operation_id, requested_by="agent:crashpoints", reason="stop"
    )


def cancel_asked_after(seconds: float) -> Callable[[World, Reconciler], Awaitable[None]]:
    """Observing; `seconds` later, with no read since, an agent asks to cancel."""

    async def prime(world: World, rec: Reconciler) -> None:
        await run_until(world, rec, {S.OBSERVING})
        await world.clock.advance(seconds)
        await ledger.request_cancel(
            world.db, world.operation_id, requested_by="agent:crashpoints", reason="stop"
        )

    return prime


async def cancelled_with_output(world: World, rec: Reconciler) -> None:
    """Cancelling; then the provider cancels, keeping the output made so far."""
    await cancel_requested(world, rec)
    await run_until(world, rec, {S.CANCELLING})
    await world.clock.advance(2.0)
    await advance_to_due(world)


async def result_collecting(world: World, rec: Reconciler) -> None:
    """Result collecting, with no fetch made yet (the chained collect is cut off)."""
    await run_until(world, rec, {S.OBSERVING})
    await world.clock.advance(3.0)
    async with (
        PgProxy.from_url(world.db_url) as proxy,
        reconciler_on(world, proxy.url_for(world.db_url), "primer") as primer,
    ):
        proxy.arm(Fault(action="drop_before", match=_RESULT_ATTEMPT))
        await primer.run_once()
    if await state_of(world) is not S.RESULT_COLLECTING:
        raise RuntimeError(f"expected result_collecting, got {await state_of(world)}")
    await world.clock.advance(PAST_THE_FAULT)


_RESULT_ATTEMPT = re.compile(r"result_attempts \+ 1")


async def past_the_deadline(world: World, rec: Reconciler) -> None:
    """Observing, a job still running, and the result deadline just passed."""
    await run_until(world, rec, {S.OBSERVING})
    deadline = await world.db.fetchval(
        "SELECT extract(epoch FROM result_deadline - jw_now()) FROM operations"
        " WHERE operation_id = $1",
        world.operation_id,
    )
    await world.clock.advance(float(deadline) + 1.0)


_READ_FIRST: Mapping[str, Any] = {"cancel": {"read_first": True}}
# Past a 2 s job's end, short of its next scheduled read.
JOB_OVER_SECONDS = 5.0

SCENARIOS: dict[str, Scenario] = {
    s.kind: s
    for s in (
        Scenario("create_lost_response", "lost_create_response", {"duration": 5.0}, nothing),
        Scenario("same_token_retry", "lost_create_response", {"duration": 5.0}, first_create_lost),
        # the provider misbehaves: the retry gets the first job, a second one runs too
        Scenario(
            "same_token_duplicate", "retry_spawns_duplicate", {"duration": 5.0}, first_create_lost
        ),
        # a provider that cannot deduplicate creates: only its lookup may resolve a lost answer
        Scenario(
            "no_idempotency_create",
            "lost_create_response",
            {"duration": 5.0},
            nothing,
            overrides={"create": {"idempotency": "none"}},
        ),
        Scenario("status_read", "success", {"duration": 8.0}, observing),
        # a 429 with a window longer than the harness's jump past the fault
        Scenario(
            "back_pressure_read",
            "rate_limited",
            {"duration": 3.0, "limited_reads": 1, "retry_after": 60},
            read_throttled,
        ),
        # a 429 with a window shorter than the lease: no fault excuses an early
        # call (a lost answer's window is held by the next claim for one lease)
        Scenario(
            "back_pressure_lost",
            "rate_limited",
            {"duration": 3.0, "limited_reads": 1, "retry_after": 8},
            read_throttled,
        ),
        Scenario("deadline_read", "never_finishes", {}, past_the_deadline, result_deadline_s=30.0),
        Scenario(
            "webhook_read", "success", {"duration": 2.0}, finished_and_announced, webhooks=True
        ),
        Scenario(
            "cancel", "cancellable", {"duration": 600.0, "cancel_delay": 1.0}, cancel_requested
        ),
        # a cancel that harms a finished job: a status read under the lease comes first
        Scenario(
            "cancel_read_first",
            "cancellable",
            {"duration": 600.0, "cancel_delay": 1.0},
            cancel_asked_after(1.0),
            overrides=_READ_FIRST,
        ),
        Scenario(
            "cancel_after_the_end",
            "success",
            {"duration": 2.0},
            cancel_asked_after(JOB_OVER_SECONDS),
            overrides=_READ_FIRST,
            no_cancel_sent=True,
        ),
        Scenario("collect", "success", {"duration": 2.0}, result_collecting),
        Scenario("sync_result", "sync", {}, nothing),
        Scenario(
            "partial_output",
            "cancellable",
            {"duration": 600.0, "cancel_delay": 1.0, "partial_on_cancel": True, "total": 20},
            cancelled_with_output,
            keeps_partial=True,
        ),
    )
}


# ------------------------------------------------------------------ one run


@dataclass
class Outcome:
    kind: str
    mode: Mode | None
    at: int | None
    statements: int
    end: LocalState
    violations: list[str] = field(default_factory=list)
    sql: list[str] = field(default_factory=list)  # the step's statements, in order


async def run_once(
    dbs: Databases, scenario: Scenario, mode: Mode | None, at: int | None, workdir: Path
) -> Outcome:
    """Prime, run the step (with a fault at statement `at`, or none), run to the end, check."""
    async with world_for(dbs, scenario.webhooks, workdir, scenario.overrides) as world:
        world.operation_id = await submit(world, scenario)
        async with reconciler_on(world, world.db_url, "primer") as primer:
            await scenario.prime(world, primer)
        async with PgProxy.from_url(world.db_url) as proxy:
            if mode == "kill":
                await _step_in_victim(world, proxy, at)
            else:
                await _step_in_process(world, proxy, at)
            statements = proxy.count
            sql = [st.sql for st in proxy.statements]
            if at is not None and not proxy.fired.is_set():
                raise RuntimeError(f"{scenario.kind}: statement {at} never came")
        await world.clock.advance(PAST_THE_FAULT)
        async with reconciler_on(world, world.db_url, "after") as after:
            end = await run_to_end(world, after)
        violations = await check(world, end, scenario)
        return Outcome(scenario.kind, mode, at, statements, end, violations, sql)


async def _step_in_process(world: World, proxy: PgProxy, at: int | None) -> None:
    async with reconciler_on(world, proxy.url_for(world.db_url), "step") as rec:
        proxy.reset()
        if at is not None:
            proxy.arm(Fault(action="drop_after", at=at))
        with contextlib.suppress(Exception):  # a dropped claim or release fails run_once itself
            await rec.run_once()


async def _step_in_victim(world: World, proxy: PgProxy, at: int | None) -> None:
    """The step in a real process, SIGKILLed as statement `at` leaves."""
    args = [
        sys.executable,
        "-m",
        "bench.crashpoints",
        "victim",
        "--db",
        proxy.url_for(world.db_url),
        "--sim",
        world.sim_url,
        "--workdir",
        str(world.workdir),
        "--clock-offset",
        repr(world.clock.offset),
    ]
    if world.receiver_url:
        args += ["--receiver", world.receiver_url]
    if world.overrides:
        args += ["--overrides", json.dumps(world.overrides)]
    proc = await asyncio.create_subprocess_exec(
        *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), VICTIM_TIMEOUT)
        if line.strip() != b"ready":
            raise RuntimeError(f"victim did not start: {line!r}")
        proxy.reset()
        if at is not None:
            pid = proc.pid
            proxy.arm(Fault(action="kill", at=at, kill=lambda: os.kill(pid, signal.SIGKILL)))
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        await asyncio.wait_for(proc.wait(), VICTIM_TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def run_to_end(world: World, rec: Reconciler) -> LocalState:
    """A fresh reconciler takes the operation to its end (terminal, or a human's inbox)."""
    for _ in range(MAX_ROUNDS):
        await rec.run_once()
        state = await state_of(world)
        if state in TERMINAL or state in INBOX:
            return state
        if not await advance_to_due(world):
            return state
    return await state_of(world)


# ------------------------------------------------------------------ invariants


async def check(world: World, end: LocalState, scenario: Scenario) -> list[str]:
    """What must hold after any run, faulted or not; each broken rule named."""
    failures: list[str] = []
    op = await ledger.load_operation(world.db, world.operation_id)
    stats = await world.sim("/_sim/stats")
    requests = (await world.sim("/_sim/requests"))["requests"]
    jobs = stats["creates_per_token"].get(op.idempotency_token, 0)
    if jobs > 1:
        failures += await _duplicates_are_on_record(world, end, jobs)
    if end is S.SUCCEEDED:
        failures += await _success_is_proven(world, op)
    if scenario.keeps_partial and not await _partial_is_kept(world, op):
        failures.append("the cancelled job's partial output was not kept")
    failures += await _stored_once(world)
    if op.follow_up is not None:
        failures.append(f"a recovery point ({op.follow_up}) never concluded")
    failures += await _outcomes_cite_our_reads(world)
    failures += await _no_call_inside_a_window(world)
    failures += await _early_calls_by_the_providers_count(world, requests, scenario)
    if op.read_fence is not None:
        failures.append(f"a marked read (fence {op.read_fence}) was left unrecorded")
    failures += await _every_call_on_record(world, requests)
    failures += await _cancels_after_a_read(world, requests, scenario)
    _, breaks = await audit.verify(world.db)
    if breaks:
        failures.append(f"history chain broken: {breaks[0]}")
    if max(stats["max_overlapping_status_calls"].values(), default=0) > 1:
        failures.append("two status reads of one job overlapped")
    return failures


async def _cancels_after_a_read(
    world: World, requests: Sequence[Mapping[str, Any]], scenario: Scenario
) -> list[str]:
    """`cancel.read_first`: each cancel the provider got came right after a read
    it answered, made since the cancel was asked for.

    The provider's own log, not ours: a cancel whose preceding request was
    not such a read (or, for a job that had ended, any cancel at all)
    reached a job nobody had just seen running.
    """
    cancels = [i for i, r in enumerate(requests) if r["kind"] == "cancel"]
    if scenario.no_cancel_sent and cancels:
        return [f"{len(cancels)} cancel request(s) reached a job that had ended"]
    if not cancels or not scenario.overrides.get("cancel", {}).get("read_first"):
        return []
    asked = await world.db.fetchval(
        "SELECT extract(epoch FROM min(at)) FROM history"
        " WHERE operation_id = $1 AND to_state = 'cancel_requested'",
        world.operation_id,
    )
    unread = [
        i
        for i in cancels
        if i == 0
        or requests[i - 1]["kind"] != "status"
        or requests[i - 1]["job_id"] != requests[i]["job_id"]
        or requests[i - 1]["status_code"] != 200
        or requests[i - 1]["at"] < float(asked)
    ]
    return [f"cancel request {requests[i]['seq']} not right after a status read" for i in unread]


async def _duplicates_are_on_record(world: World, end: LocalState, jobs: int) -> list[str]:
    """Two jobs for one token only if the provider misbehaved: then a human, both on record."""
    if end is not S.NEEDS_ATTENTION:
        return [f"{jobs} remote jobs for one idempotency token, ended {end.value}"]
    details = await world.db.fetchval(
        "SELECT details FROM escalations WHERE operation_id = $1"
        " ORDER BY escalation_id DESC LIMIT 1",  # the newest: an operation may have several
        world.operation_id,
    )
    named = set((details or {}).get("remote_job_ids") or ())
    return [] if len(named) >= jobs else [f"{jobs} remote jobs, {len(named)} on record"]


async def _stored_once(world: World) -> list[str]:
    """A result (or a cancelled job's partial output) is stored once: one valid row."""
    valid = await world.db.fetchval(
        "SELECT count(*) FROM results WHERE operation_id = $1 AND valid", world.operation_id
    )
    return [] if valid <= 1 else [f"{valid} valid results stored for one operation"]


async def _partial_is_kept(world: World, op: ledger.Operation) -> bool:
    valid = await world.db.fetchval("SELECT valid FROM results WHERE result_id = $1", op.result_id)
    return bool(valid) and (op.result_summary or {}).get("partial") is True


async def _outcomes_cite_our_reads(world: World) -> list[str]:
    """A remote outcome (failed, cancelled, success) is proven by our own status read."""
    cited = await world.db.fetch(
        "SELECT h.to_state::text AS to_state, o.source FROM history h"
        " JOIN observations o ON o.observation_id = h.evidence_id"
        " WHERE h.operation_id = $1 AND h.evidence_kind = 'observation'",
        world.operation_id,
    )
    return [
        f"{c['to_state']} rests on a {c['source']} observation"
        for c in cited
        if c["source"] != "poll"
    ]


async def _early_calls_by_the_providers_count(
    world: World, requests: Sequence[Mapping[str, Any]], scenario: Scenario
) -> list[str]:
    """The provider's own record of calls inside its Retry-After windows.

    A window the provider imposed in an answer we never received — the
    process died with it, before recording it — is honoured only as far as
    the claim that finds the lost read holds the row back: one lease. So an
    early call is excused only when the window is longer than the lease and
    the status read just before it, on our record, is one whose outcome was
    lost (or never finished); any other is a broken window.
    """
    early = [r for r in requests if "retry_after" in (r.get("violations") or ())]
    if not early:
        return []
    if float(scenario.params.get("retry_after", 0)) <= LEASE_SECONDS:
        return [f"a {r['kind']} call inside a Retry-After window" for r in early]
    reads = await world.db.fetch(
        "SELECT extract(epoch FROM started_at) AS at, error_category, finished_at"
        " FROM provider_calls WHERE operation_id = $1 AND call_kind = 'status'"
        " ORDER BY started_at",
        world.operation_id,
    )
    failures = []
    for request in early:
        before = [r for r in reads if float(r["at"]) < float(request["at"])]
        lost = bool(before) and (
            before[-1]["error_category"] == "lost" or before[-1]["finished_at"] is None
        )
        if not lost:
            failures.append(f"a {request['kind']} call inside a Retry-After window on record")
    return failures


async def _success_is_proven(world: World, op: ledger.Operation) -> list[str]:
    row = await world.db.fetchrow(
        """
        SELECT (SELECT valid FROM results WHERE result_id = $2) AS valid,
               EXISTS (SELECT 1 FROM observations WHERE operation_id = $1 AND source = 'poll'
                       AND remote_state IN ('succeeded', 'partially_succeeded')) AS read,
               EXISTS (SELECT 1 FROM provider_calls WHERE operation_id = $1
                       AND call_kind = 'create' AND status_code BETWEEN 200 AND 299) AS created
        """,
        op.operation_id,
        op.result_id,
    )
    failures = []
    if not row["valid"]:
        failures.append("succeeded without a validated result")
    if not (row["read"] or (op.create_mode == "sync" and row["created"])):
        failures.append("succeeded without our own status read")
    return failures


async def _no_call_inside_a_window(world: World) -> list[str]:
    calls = await world.db.fetch(
        "SELECT call_id, started_at, finished_at, not_before, error_category"
        " FROM provider_calls WHERE operation_id = $1 ORDER BY started_at, call_id",
        world.operation_id,
    )
    return calls_inside_windows([dict(c) for c in calls])


# Error categories of a call that provably never left this host.
NEVER_LEFT = ("not_sent", "connect")


def calls_inside_windows(calls: Sequence[Mapping[str, Any]]) -> list[str]:
    """By our own record: no call started inside a window an earlier answer imposed.

    `calls` each with call_id, started_at, finished_at, not_before (the window
    its answer imposed, or None) and error_category. A window holds from the
    moment it was imposed (the imposing call's finished_at: for a read whose
    outcome was lost, when the next claim recorded it) to its not_before.
    """
    windows = [
        (c["finished_at"] or c["started_at"], c["not_before"], c["call_id"])
        for c in calls
        if c["not_before"] is not None
    ]
    failures = []
    for call in calls:
        if call["error_category"] in NEVER_LEFT:
            continue
        if any(
            opened <= call["started_at"] < until and imposer != call["call_id"]
            for opened, until, imposer in windows
        ):
            failures.append(f"call #{call['call_id']} inside a back-pressure window")
    return failures


_KINDS = ("create", "status", "cancel", "result", "errors", "lookup")


async def _every_call_on_record(world: World, requests: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every request the provider received has a call row that says it may have been sent."""
    rows = await world.db.fetch(
        "SELECT call_kind, count(*) AS n FROM provider_calls WHERE operation_id = $1"
        " AND coalesce(error_category, '') <> ALL ($2::text[]) GROUP BY call_kind",
        world.operation_id,
        list(NEVER_LEFT),
    )
    return calls_missing({r["call_kind"]: r["n"] for r in rows}, requests)


def calls_missing(ours: Mapping[str, int], requests: Sequence[Mapping[str, Any]]) -> list[str]:
    """Kinds of call the provider received more often than our record says we may have sent."""
    theirs: dict[str, int] = {}
    for request in requests:
        theirs[request["kind"]] = theirs.get(request["kind"], 0) + 1
    return [
        f"{theirs[kind]} {kind} requests reached the provider, {ours.get(kind, 0)} on record"
        for kind in _KINDS
        if theirs.get(kind, 0) > ours.get(kind, 0)
    ]


# ------------------------------------------------------------------ the enumeration


@dataclass
class KindReport:
    kind: str
    statements: dict[Mode, int]
    expected: LocalState
    covered: dict[Mode, int] = field(default_factory=lambda: {"drop": 0, "kill": 0})
    ends: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


async def enumerate_kind(
    dbs: Databases,
    scenario: Scenario,
    workdir: Path,
    *,
    sample: int | None,
    rng: random.Random,
    show: bool = False,
    count_each_mode: bool = True,
) -> KindReport:
    """Count the step's statements (per fault mode), then fault it at each (or a sample).

    Without `count_each_mode` the in-process count stands for the victim's too
    (they run the same code on the same pool settings; the full run proves it).
    """
    statements: dict[Mode, int] = {}
    expected: LocalState | None = None
    counted: tuple[Mode, ...] = MODES if count_each_mode else ("drop",)
    for mode in counted:
        clean = await run_once(dbs, scenario, mode, None, workdir)
        statements[mode] = clean.statements
        if show:
            print(f"-- {scenario.kind}, {mode}: {clean.statements} statements")
            for n, text in enumerate(clean.sql, 1):
                print(f"   {n:>3} {' '.join(text.split())[:110]}")
        if clean.violations:
            raise RuntimeError(f"{scenario.kind} fault-free: {clean.violations}")
        expected = expected or clean.end
    assert expected is not None
    statements.setdefault("kill", statements["drop"])
    report = KindReport(scenario.kind, statements, expected)
    allowed = {expected, *scenario.escalations}
    for mode in MODES:
        points = list(range(1, statements[mode] + 1))
        if sample is not None:
            points = sorted(rng.sample(points, min(sample, len(points))))
        for k in points:
            outcome = await run_once(dbs, scenario, mode, k, workdir)
            report.covered[mode] += 1
            report.ends[outcome.end.value] = report.ends.get(outcome.end.value, 0) + 1
            problems = list(outcome.violations)
            if outcome.end not in allowed:
                problems.append(f"ended {outcome.end.value}, expected {expected.value}")
            report.failures += [f"{scenario.kind} {mode}@{k}: {p}" for p in problems]
    return report


async def enumerate_all(
    kinds: Sequence[str], *, sample: int | None, seed: int, show: bool = False
) -> list[KindReport]:
    rng = random.Random(seed)
    reports = []
    with tempfile.TemporaryDirectory(prefix="jw-crashpoints-") as tmp:
        async with Databases() as dbs:
            for kind in kinds:
                reports.append(
                    await enumerate_kind(
                        dbs, SCENARIOS[kind], Path(tmp), sample=sample, rng=rng, show=show
                    )
                )
    return reports


def print_reports(reports: Sequence[KindReport], seconds: float) -> None:
    print(
        f"{'step kind':<22}{'N drop':>8}{'N kill':>8}{'drops':>8}{'kills':>8}  "
        f"{'fault-free end':<18}ends under faults"
    )
    for r in reports:
        ends = ", ".join(f"{k} {v}" for k, v in sorted(r.ends.items()))
        print(
            f"{r.kind:<22}{r.statements['drop']:>8}{r.statements['kill']:>8}"
            f"{r.covered['drop']:>8}{r.covered['kill']:>8}  {r.expected.value:<18}{ends}"
        )
    total = sum(r.covered["drop"] + r.covered["kill"] for r in reports)
    failures = [f for r in reports for f in r.failures]
    print(f"\n{total} crash points in {seconds:.0f} s, {len(failures)} violation(s)")
    for failure in failures:
        print(f"  FAIL {failure}")


# ------------------------------------------------------------------ the victim process


async def victim(args: argparse.Namespace) -> int:
    """One reconciler step in its own process, to be SIGKILLed at a statement."""
    clock = ShiftedClock(args.clock_offset)
    webhooks = args.receiver is not None
    pool = await create_reconciler_pool(args.db)
    try:
        async with Lanes(16) as lanes:
            ctx = context_for(
                pool,
                lanes,
                providers_for(args.sim, webhooks=webhooks, overrides=json.loads(args.overrides)),
                workdir=Path(args.workdir),
                worker_id="victim",
                clock=clock,
                webhook_url=webhook_template(args.receiver),
            )
            rec = Reconciler(ctx)
            print("ready", flush=True)
            if (await asyncio.to_thread(sys.stdin.readline)).strip() != "go":
                return 2
            await rec.run_once()
    finally:
        await pool.close()
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.crashpoints", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="enumerate crash points (the default)")
    for p in (parser, run):
        p.add_argument("--kinds", default=",".join(SCENARIOS), help="comma-separated step kinds")
        p.add_argument("--sample", type=int, help="this many random points per kind and fault")
        p.add_argument("--seed", type=int, default=1, help="seed of the sample")
        p.add_argument("--json", action="store_true", help="print the reports as JSON too")
        p.add_argument("--show-statements", action="store_true", help="list each step's statements")
        p.add_argument("--verbose", action="store_true", help="keep the reconciler's logs")
    v = sub.add_parser("victim", help=argparse.SUPPRESS)
    v.add_argument("--db", required=True)
    v.add_argument("--sim", required=True)
    v.add_argument("--receiver")
    v.add_argument("--overrides", default="{}")
    v.add_argument("--workdir", required=True)
    v.add_argument("--clock-offset", type=float, default=0.0)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "victim":
        return asyncio.run(victim(args))
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in SCENARIOS]
    if unknown:
        print(f"unknown step kind(s): {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
        return 2
    if not args.verbose:
        # Faults make steps fail on purpose; their tracebacks would bury the report.
        logging.getLogger("jobwarden").setLevel(logging.CRITICAL)
    started = time.monotonic()
    reports = asyncio.run(
        enumerate_all(kinds, sample=args.sample, seed=args.seed, show=args.show_statements)
    )
    print_reports(reports, time.monotonic() - started)
    if args.json:
        print(json.dumps([{**r.__dict__, "expected": r.expected.value} for r in reports]))
    return 1 if any(r.failures for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
