"""A real simulated provider + a real reconciler over a real database, for tests.

`Rig` starts the simulator on a loopback port, describes it with the shipped
`simulator` preset (fast backoff so tests run in seconds), and drives the
reconciler with `run_once()` — the same function the daemon's scheduler calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import tomllib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from bench.harness import FAST_LIMITS, TEST_WEBHOOK_SECRET
from reconciler.connect_guard import trusted_hosts
from reconciler.context import Context, build_adapters
from reconciler.lanes import Lane, Lanes
from reconciler.worker import Reconciler
from shared import ledger
from shared.clock import SYSTEM_CLOCK, Clock
from shared.ledger import RequestSpec
from shared.ledger.states import LocalState
from shared.providers import ProviderDescription, parse_providers
from shared.result_store import ResultStore
from shared.serve import serve_app
from shared.settings import Settings
from shared.simulator import SimulatorSettings, build_app

WEBHOOK_SECRET = TEST_WEBHOOK_SECRET


def sim_providers(
    base_url: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    webhooks: bool = False,
    name: str = "sim",
    replace_tables: Mapping[str, Any] | None = None,
    described: Mapping[str, Any] | None = None,
    webhook_secret: str = WEBHOOK_SECRET,
) -> dict[str, ProviderDescription]:
    """The simulator described by its preset, or by `described`: a whole provider table.

    `described` is how a user describes a provider the presets do not know
    (the simulator then runs in a matching `ApiShape`); its secrets are read
    from the env names it gives, set here to the test secret.
    """
    table: dict[str, Any] = {
        "preset": "simulator",
        "base_url": base_url,
        "limits": dict(FAST_LIMITS),
    }
    if described is not None:
        limits = {**described.get("limits", {}), **FAST_LIMITS}
        table = {**described, "base_url": base_url, "limits": limits}
    elif replace_tables:
        # the preset spelled out, with these tables replaced whole (a merge
        # cannot take a key away, e.g. JSON item paths from a CSV result)
        preset = resources.files("shared.providers").joinpath("presets", "simulator.toml")
        spelled = tomllib.loads(preset.read_text("utf-8"))
        spelled.pop("description", None)
        table = {**spelled, **{k: v for k, v in table.items() if k != "preset"}}
        table.update(replace_tables)
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(table.get(key), dict):
            table[key] = {**table[key], **value}
        else:
            table[key] = value
    env = {"JW_SIM_WEBHOOK_SECRET": webhook_secret} if webhooks else {}
    if webhooks and described is not None:
        env.update(dict.fromkeys(described["webhooks"].get("secrets_env", ()), webhook_secret))
    return parse_providers({"providers": {name: table}}, "test-config", env)


@dataclass
class Rig:
    pool: Any
    sim_url: str
    reconciler: Reconciler
    ctx: Context
    provider: str = "sim"

    async def submit(
        self,
        script: str = "success",
        *,
        provider: str | None = None,
        ref: str | None = None,
        result_deadline_s: float = 60.0,
        create_deadline_s: float = 30.0,
        **params: Any,
    ) -> str:
        body = {"script": script, "params": params, "input": {"rows": 3}}
        sub = await ledger.submit_operation(
            self.pool,
            provider=provider or self.provider,
            kind="export",
            request=RequestSpec("POST", "/v1/jobs", body),
            requested_by="agent:test",
            client_reference=ref,
            create_deadline_s=create_deadline_s,
            result_deadline_s=result_deadline_s,
        )
        return sub.operation_id

    async def state(self, op_id: str) -> LocalState:
        return (await ledger.load_operation(self.pool, op_id)).state

    async def run_until(self, done: Callable[[], Any], timeout: float = 15.0) -> None:
        """Call run_once (as the daemon would) until `done()` is truthy."""
        await run_until(self.reconciler, done, timeout)

    async def settle(
        self, op_id: str, states: set[LocalState], timeout: float = 15.0
    ) -> LocalState:
        async def reached() -> bool:
            return await self.state(op_id) in states

        await self.run_until(reached, timeout)
        return await self.state(op_id)

    async def stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient() as client:
            return (await client.get(f"{self.sim_url}/_sim/stats")).json()


@contextlib.asynccontextmanager
async def webhook_rig(
    pool: Any,
    tmp_path: Path,
    *,
    clock: Clock = SYSTEM_CLOCK,
    webhooks: Mapping[str, Any] | None = None,
    described: Mapping[str, Any] | None = None,
    name: str = "sim",
    verify_with: str = WEBHOOK_SECRET,
    **sim_options: Any,
) -> AsyncIterator[Rig]:
    """A rig whose simulator sends signed webhooks to a real receiver on loopback.

    `webhooks`: the provider's [webhooks] table overrides (another signature
    scheme and its options); the simulator then signs the same way.
    `verify_with`: the receiver's secret, when it is not the one the simulator
    signs with (a public key, where the simulator holds the private one).
    """
    from receiver.app import build_app as build_receiver

    async with contextlib.AsyncExitStack() as stack:
        # The receiver needs the provider table, which needs the simulator's URL:
        # bind the receiver first on a placeholder, then point it at the simulator.
        holder: dict[str, Any] = {}

        async def receiver_asgi(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "lifespan":  # the real app's lifespan is entered below
                while True:
                    message = await receive()
                    done = message["type"] + ".complete"
                    await send({"type": done})
                    if message["type"] == "lifespan.shutdown":
                        return
            await holder["app"](scope, receive, send)

        receiver_url = await stack.enter_async_context(serve_app(receiver_asgi))
        sim = SimulatorSettings(
            **{"webhook_secret": WEBHOOK_SECRET, "webhook_backoff": (0.05, 0.1, 0.2), **sim_options}
        )
        r = await stack.enter_async_context(
            rig(
                pool,
                tmp_path,
                sim=sim,
                webhook_url=f"{receiver_url}/webhooks/{{provider}}",
                overrides={
                    "limits": {"webhook_backstop_poll_seconds": 30.0},
                    **({"webhooks": dict(webhooks)} if webhooks else {}),
                },
                clock=clock,
                described=described,
                name=name,
                webhook_secret=verify_with,
            )
        )
        public = f"{receiver_url}/webhooks/{{provider}}"
        holder["app"] = build_receiver(replace(r.ctx.settings, public_webhook_url=public), pool)
        async with holder["app"].router.lifespan_context(holder["app"]):
            yield r


@contextlib.asynccontextmanager
async def rig(
    pool: Any,
    tmp_path: Path,
    *,
    sim: SimulatorSettings | None = None,
    overrides: Mapping[str, Any] | None = None,
    webhook_url: str | None = None,
    worker_id: str = "w1",
    lease_seconds: float = 10.0,
    clock: Clock = SYSTEM_CLOCK,
    replace_tables: Mapping[str, Any] | None = None,
    described: Mapping[str, Any] | None = None,
    name: str = "sim",
    webhook_secret: str = WEBHOOK_SECRET,
) -> AsyncIterator[Rig]:
    async with serve_app(build_app(sim or SimulatorSettings(), clock=clock)) as sim_url:
        providers = sim_providers(
            sim_url,
            overrides=overrides,
            webhooks=webhook_url is not None,
            replace_tables=replace_tables,
            described=described,
            name=name,
            webhook_secret=webhook_secret,
        )
        async with reconciler_context(
            pool,
            tmp_path,
            providers,
            webhook_url=webhook_url,
            clock=clock,
            worker_id=worker_id,
            lease_seconds=lease_seconds,
        ) as ctx:
            yield Rig(pool, sim_url, Reconciler(ctx), ctx, provider=name)


# A sweep that has not returned by then never will (a test's sweep is milliseconds).
SWEEP_BOUND_SECONDS = 6.0
# Between sweeps that found the condition unmet: what the daemon's sweep tick
# does for a step in flight (a download, a slow answer), without spinning a core.
SWEEP_PAUSE_SECONDS = 0.02


async def run_until(reconciler: Reconciler, done: Callable[[], Any], timeout: float = 15.0) -> None:
    """run_once as the daemon calls it until `done()` (a bool, or a coroutine of one) is
    truthy, each sweep bounded: one that never returns fails the test instead of hanging it.

    The condition is the database's or the providers' own, checked after every
    sweep; the pause between sweeps only paces the loop while a real-time fault
    (a trickling server, a stalled download) plays out, and the bound makes a
    condition never reached a failure, never a pass.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            await asyncio.wait_for(reconciler.run_once(), timeout=SWEEP_BOUND_SECONDS)
        except TimeoutError:
            raise AssertionError("run_once (the daemon's sweep) did not return") from None
        result = done()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(SWEEP_PAUSE_SECONDS)
    raise AssertionError("condition not reached in time")


@contextlib.asynccontextmanager
async def reconciler_context(
    pool: Any,
    tmp_path: Path,
    providers: Mapping[str, ProviderDescription],
    *,
    lanes: int = 64,
    make_lane: Callable[..., Lane] = Lane,
    webhook_url: str | None = None,
    clock: Clock = SYSTEM_CLOCK,
    **settings: Any,
) -> AsyncIterator[Context]:
    """A reconciler's context as the daemon builds it: lanes guarded as its are
    (each provider's named hosts trusted), results under `tmp_path`. `settings`
    set Settings' fields (worker w1 and a 10 s lease unless given)."""
    config = replace(
        Settings(),
        **{"worker_id": "w1", "lease_seconds": 10.0, **settings},
        results_dir=tmp_path / "results",
        providers=providers,
    )
    async with Lanes(lanes, make_lane, trusted_hosts=trusted_hosts(providers)) as made:
        yield Context(
            pool=pool,
            settings=config,
            lanes=made,
            adapters=build_adapters(providers),
            store=ResultStore(tmp_path / "results"),
            webhook_url=webhook_url,
            clock=clock,
        )
