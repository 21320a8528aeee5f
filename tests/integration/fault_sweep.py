"""A crash-point sweep for paths the simulator cannot play (bench/crashpoints.py can).

One scenario brings one operation, at a fixture provider on loopback, to the
state just before a step. The step runs once fault-free through
bench/pgproxy.py, which counts its statements: N. Then, for each k in 1..N and
each fault, in a fresh database and a fresh fixture:

- `drop_after`: the connection of statement k is cut after the server ran it,
  before the answer came back (a COMMIT there took effect, unacknowledged);
- `drop_before`: cut before it reached the server (as a SIGKILL at that
  statement looks to the database);
- `kill`, for a step of several rounds (`Scenario.rounds`, attempts that one
  process makes and between which it keeps pages in memory): the process gone
  there, its later rounds and its memory with it, no statement after it sent.

A scenario with a receiver (`Scenario.deliver`) has the step begin with a
delivery to the real receiver, its statements faulted as the reconciler's are;
one not acknowledged is delivered again after the fault, as a provider retries.
The clock moves past the dead lease, a fresh reconciler runs the operation to
its end, and every run must hold: the fault-free end; at most one valid
result stored; no recovery point or marked read left over; every request the
fixture received on our record as (maybe) sent; every history chain and the
evidence log verify; and the scenario's own checks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from bench.harness import TestClock
from bench.pgproxy import Fault, PgProxy
from reconciler.daemon import create_reconciler_pool
from reconciler.worker import Reconciler
from shared import ledger
from shared.db.connect import connect, with_database
from shared.ledger import audit, log
from shared.ledger.log_audit import verify_log
from shared.ledger.states import INBOX, TERMINAL, LocalState
from shared.providers import ProviderDescription
from shared.serve import serve_app
from tests.fixtures_providers.rig import PresetRig, load, running_receiver
from tests.harness import reconciler_context

# Past any dead lease (10 s) and the error retries of the fast limits.
PAST_THE_FAULT = 31.0
MAX_ROUNDS = 80
ACTIONS = ("drop_after", "drop_before")
# a step of more than one round: also "kill", the process gone at statement k
# (its later rounds, and what it kept in memory between them, with it)
KILL = "kill"


def _killed(proxy: PgProxy, killed: asyncio.Event) -> None:
    """The step's process dies as statement k leaves: that statement never reaches
    the server, nor any after it (its connections and the proxy's door close: the
    rest of the round fails at its next statement, and every provider call begins
    with one), and what the process held in memory (kept pages) is gone with it."""
    killed.set()
    if proxy._server is not None:
        proxy._server.close()
    for link in list(proxy._links):
        link.close()


class Counted:
    """An ASGI app that lists every request it received: (method, path)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: list[tuple[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.requests.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


@dataclass
class World:
    """One run: its database, clock, fixture and the rig (a direct reconciler)."""

    db: Any
    clock: TestClock
    rig: PresetRig
    fixture: Any
    served: Counted
    operation_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    async def state(self, op_id: str | None = None) -> LocalState:
        return await self.rig.state(op_id or self.operation_id)

    async def due(self) -> bool:
        """Move the clock to the operation's next appointment; False if none."""
        return await self.clock.to_appointment(self.db, self.operation_id)

    async def run_until(self, done: Callable[[], Awaitable[bool]]) -> None:
        for _ in range(MAX_ROUNDS):
            if await done():
                return
            await self.rig.reconciler.run_once()
            if await done():
                return
            await self.due()
        raise AssertionError(f"priming never got there: {await self.state()}")


@dataclass(frozen=True)
class Scenario:
    name: str
    provider: str
    described: Mapping[str, Any]
    fixture: Callable[[], Any]  # an object with .app()
    prime: Callable[[World], Awaitable[None]]  # sets world.operation_id
    end: LocalState
    # more rules: each broken one named (given the end)
    check: Callable[[World, LocalState], Awaitable[list[str]]] | None = None
    # ends a fault may lead to besides `end`, each a documented escalation that
    # `check` must find justified
    escalations: frozenset[LocalState] = frozenset()
    # rounds of the step, in one process (what it keeps in memory between attempts,
    # reconciler/page_memory.py, carried over), the clock moved to the operation's
    # next appointment between them; every statement of each is faulted
    rounds: int = 1
    # the environment the description's secrets are read from
    env: Mapping[str, str] = field(default_factory=dict)
    # with a receiver: the delivery that begins the step, to the receiver whose
    # URL it is given; True if acknowledged (2xx). One not acknowledged is
    # delivered again (to the receiver outside the fault) before the run to the end.
    deliver: Callable[[World, str], Awaitable[bool]] | None = None


@dataclass
class Outcome:
    action: str | None
    at: int | None
    statements: int
    end: LocalState
    violations: list[str]
    sql: list[str]


class Sweep:
    def __init__(self, admin_url: str, databases: Any, tmp_path: Path) -> None:
        self.admin_url = admin_url
        self.databases = databases  # tests.conftest.Databases
        self.tmp_path = tmp_path
        self._n = 0

    @contextlib.asynccontextmanager
    async def world(self, scenario: Scenario) -> AsyncIterator[tuple[World, str]]:
        name = await self.databases.take()
        url = with_database(self.admin_url, name)
        self._n += 1
        workdir = self.tmp_path / f"run{self._n}"
        try:
            async with contextlib.AsyncExitStack() as stack:
                db = await connect(url)
                stack.push_async_callback(db.close)
                pool = await create_reconciler_pool(url)
                stack.push_async_callback(pool.close)
                clock = TestClock(db)
                fixture = scenario.fixture()
                served = Counted(fixture.app())
                base = await stack.enter_async_context(serve_app(served))
                providers = load(scenario.provider, None, base, scenario.env, scenario.described)
                hooks = None
                if scenario.deliver is not None:
                    hooks = await stack.enter_async_context(running_receiver(pool, providers))
                ctx = await stack.enter_async_context(
                    reconciler_context(
                        pool, workdir, providers, lanes=8, clock=clock, webhook_url=hooks
                    )
                )
                desc = providers[scenario.provider]
                rig = PresetRig(pool, base, scenario.provider, desc, Reconciler(ctx), hooks)
                world = World(db, clock, rig, fixture, served)
                world.extra["providers"] = providers
                world.extra["workdir"] = workdir
                yield world, url
        finally:
            await self.databases.done_with(name)

    async def run(self, scenario: Scenario, action: str | None, at: int | None) -> Outcome:
        async with self.world(scenario) as (world, url):
            await scenario.prime(world)
            world.extra["fault"] = (action, at) if at is not None else None
            async with PgProxy.from_url(url) as proxy:
                await self._step(world, proxy, url, action, at, scenario)
                if at is not None and not proxy.fired.is_set():
                    raise AssertionError(f"{scenario.name}: statement {at} never came")
                count = proxy.count
                sql = [" ".join(s.sql.split()) for s in proxy.statements]
            await world.clock.advance(PAST_THE_FAULT)
            if scenario.deliver is not None and not world.extra["acknowledged"]:
                await scenario.deliver(world, world.rig.hook_url)  # the provider's retry
            end = await self._to_the_end(world)
            violations = await self._check(world, scenario, end)
            return Outcome(action, at, count, end, violations, sql)

    async def _step(
        self,
        world: World,
        proxy: PgProxy,
        url: str,
        action: str | None,
        at: int | None,
        scenario: Scenario,
    ) -> None:
        pool = await create_reconciler_pool(proxy.url_for(url))
        try:
            providers: Mapping[str, ProviderDescription] = world.extra["providers"]
            async with contextlib.AsyncExitStack() as stack:
                hooks = None
                if scenario.deliver is not None:
                    # the step's receiver: its statements through the proxy too
                    hooks = await stack.enter_async_context(running_receiver(pool, providers))
                ctx = await stack.enter_async_context(
                    reconciler_context(
                        pool,
                        world.extra["workdir"],
                        providers,
                        lanes=8,
                        clock=world.clock,
                        worker_id="step",
                        webhook_url=world.rig.webhook_url,
                    )
                )
                reconciler = Reconciler(ctx)
                killed = asyncio.Event()
                proxy.reset()
                if action == KILL:
                    proxy.arm(Fault(action="kill", at=at, kill=lambda: _killed(proxy, killed)))
                elif at is not None:
                    proxy.arm(Fault(action=action, at=at))  # type: ignore[arg-type]
                if scenario.deliver is not None and hooks is not None:
                    url = hooks.replace("{provider}", scenario.provider)
                    world.extra["acknowledged"] = await scenario.deliver(world, url)
                for n in range(scenario.rounds):
                    if killed.is_set():
                        break  # the process is gone: no later round, nothing it kept
                    if n:
                        await world.due()  # outside the proxy: the clock is the harness's
                    with contextlib.suppress(Exception):  # a dropped statement fails the step
                        await reconciler.run_once()
        finally:
            pool.terminate()

    async def _to_the_end(self, world: World) -> LocalState:
        for _ in range(MAX_ROUNDS):
            await world.rig.reconciler.run_once()
            state = await world.state()
            if state in TERMINAL or state in INBOX:
                return state
            if not await world.due():
                return state
        return await world.state()

    async def _check(self, world: World, scenario: Scenario, end: LocalState) -> list[str]:
        failures: list[str] = []
        if end is not scenario.end and end not in scenario.escalations:
            failures.append(f"ended {end.value}, expected {scenario.end.value}")
        op = await ledger.load_operation(world.db, world.operation_id)
        if op.follow_up is not None:
            failures.append(f"a recovery point ({op.follow_up}) never concluded")
        if op.read_fence is not None:
            failures.append("a marked read was left unrecorded")
        valid = await world.db.fetchval(
            "SELECT count(*) FROM results WHERE operation_id = $1 AND valid", world.operation_id
        )
        if valid > 1:
            failures.append(f"{valid} valid results stored for one operation")
        failures += await self._requests_on_record(world)
        _, breaks = await audit.verify(world.db)
        if breaks:
            failures.append(f"history chain broken: {breaks[0]}")
        await log.sequence_all(world.db)
        report = await verify_log(world.db, None, settle_seconds=0.0)
        if not report.ok:
            failures.append(f"the evidence log does not verify: {report.problems[:2]}")
        if scenario.check is not None:
            failures += await scenario.check(world, end)
        return failures

    async def _requests_on_record(self, world: World) -> list[str]:
        """As many calls on record (any operation) as requests the fixture received."""
        ours = await world.db.fetchval(
            "SELECT count(*) FROM provider_calls"
            " WHERE coalesce(error_category, '') NOT IN ('not_sent', 'connect')"
        )
        theirs = len(world.served.requests)
        if theirs > ours:
            return [f"{theirs} requests reached the provider, {ours} on record"]
        return []

    async def sweep(
        self, scenario: Scenario, pick: Callable[[list[str]], Sequence[int]] | None = None
    ) -> tuple[int, list[str]]:
        """Count the step's statements, then fault each (or those `pick` chooses from
        the fault-free run's statements, 1-based); failures named."""
        clean = await self.run(scenario, None, None)
        failures = [f"{scenario.name} fault-free: {v}" for v in clean.violations]
        points = pick(clean.sql) if pick is not None else range(1, clean.statements + 1)
        actions = (*ACTIONS, KILL) if scenario.rounds > 1 else ACTIONS
        for k in points:
            for action in actions:
                outcome = await self.run(scenario, action, k)
                sql = clean.sql[k - 1] if k <= len(clean.sql) else "?"
                failures += [
                    f"{scenario.name} {action}@{k} ({sql[:60]}): {v}" for v in outcome.violations
                ]
        return clean.statements, failures
