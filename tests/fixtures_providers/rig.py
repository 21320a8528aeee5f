"""A preset, a fixture provider and the real reconciler (and receiver) over a real database.

`preset_rig` serves a fixture app, loads the named preset with `base_url`
pointing at it (plus test overrides, merged key by key as a user's config
would be) and drives the reconciler with `run_once()`, the function the
daemon's scheduler calls. `running_receiver` serves the real webhook receiver
for the same providers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from receiver.app import build_app as build_receiver
from reconciler.connect_guard import Resolver, system_resolver
from reconciler.lanes import Lane
from reconciler.worker import Reconciler
from shared import ledger
from shared.clock import SYSTEM_CLOCK, Clock
from shared.ledger import Operation, RequestSpec
from shared.ledger.states import LocalState
from shared.providers import ProviderDescription, parse_providers
from shared.providers.config import deep_merge
from shared.serve import serve_app
from shared.settings import Settings
from tests.harness import reconciler_context

# Fast enough for tests, slow enough that a lost response is a real timeout:
# the fixtures hang LOST_RESPONSE_HANG_SECONDS, well past request_timeout.
TEST_LIMITS: dict[str, Any] = {
    "backoff_base": 0.05,
    "backoff_factor": 2.0,
    "backoff_cap": 0.2,
    "request_timeout": 0.5,
    # With webhooks configured polling is a backstop this slow, so a test that
    # settles quickly proves the webhook woke the reconciler.
    "webhook_backstop_poll_seconds": 30.0,
    # a collection gives up after its six tries, not after an hour of them
    "result_retry_seconds": 0.1,
}
# How long a test waits for an operation to reach a state before failing.
SETTLE_TIMEOUT_SECONDS = 10.0


def load(
    name: str,
    preset: str | None,
    base_url: str,
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, ProviderDescription]:
    """The provider as a user configures it: a preset (or none: `overrides` is the
    whole description) pointed at the fixture, with the tests' limits."""
    base = {"base_url": base_url, "limits": dict(TEST_LIMITS)}
    table = deep_merge({"preset": preset, **base} if preset else base, overrides or {})
    return parse_providers({"providers": {name: table}}, "test-config", env)


@dataclass
class PresetRig:
    pool: Any
    url: str
    provider: str
    desc: ProviderDescription
    reconciler: Reconciler
    # Our receiver's URL template (.../webhooks/{provider}) when the rig runs one.
    webhook_url: str | None = None

    @property
    def hook_url(self) -> str:
        """Where this provider's webhooks go."""
        assert self.webhook_url is not None, "start the rig with_receiver=True"
        return self.webhook_url.replace("{provider}", self.provider)

    async def submit(
        self,
        body: Any,
        *,
        result_deadline_s: float = 60.0,
        create_deadline_s: float = 30.0,
    ) -> str:
        create = self.desc.create
        sub = await ledger.submit_operation(
            self.pool,
            provider=self.provider,
            kind="batch",
            request=RequestSpec(create.method, create.path.text, body),
            requested_by="agent:test",
            idempotency_mode=create.idempotency.value,
            create_deadline_s=create_deadline_s,
            result_deadline_s=result_deadline_s,
        )
        return sub.operation_id

    async def op(self, op_id: str) -> Operation:
        return await ledger.load_operation(self.pool, op_id)

    async def state(self, op_id: str) -> LocalState:
        return (await self.op(op_id)).state

    async def settle(
        self, op_id: str, states: AbstractSet[LocalState], timeout: float = SETTLE_TIMEOUT_SECONDS
    ) -> LocalState:
        """Run the reconciler (as the daemon would) until the operation reaches `states`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await self.reconciler.run_once()
            state = await self.state(op_id)
            if state in states:
                return state
            await asyncio.sleep(0.02)
        raise AssertionError(f"{op_id} stuck in {await self.state(op_id)}, wanted {states}")

    async def cancel(self, op_id: str, cancel_deadline_s: float = 30.0) -> LocalState:
        async with self.pool.acquire() as conn:
            return await ledger.request_cancel(
                conn,
                op_id,
                requested_by="human:test",
                reason="test",
                cancel_deadline_s=cancel_deadline_s,
            )

    async def result_bytes(self, op_id: str) -> bytes:
        """The operation's stored result file, as kept."""
        op = await self.op(op_id)
        ref = await self.pool.fetchval(
            "SELECT storage_ref FROM results WHERE result_id = $1", op.result_id
        )
        return Path(ref.removeprefix("file:")).read_bytes()

    async def raw_states(self, op_id: str) -> set[str]:
        """Every state the provider's own words named for the operation, as read."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT remote_state_raw FROM observations WHERE operation_id = $1", op_id
        )
        return {row[0] for row in rows}

    async def history(self, op_id: str) -> list[str]:
        rows = await self.pool.fetch(
            "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
        )
        return [r[0] for r in rows]

    async def escalation(self, op_id: str) -> Any:
        return await self.pool.fetchrow(
            "SELECT state::text, reason, details FROM escalations WHERE operation_id = $1", op_id
        )

    async def calls(self, op_id: str, kind: str) -> list[Any]:
        return list(
            await self.pool.fetch(
                "SELECT * FROM provider_calls WHERE operation_id = $1 AND call_kind = $2"
                " ORDER BY call_id",
                op_id,
                kind,
            )
        )


@contextlib.asynccontextmanager
async def preset_rig(
    pool: Any,
    tmp_path: Path,
    app: ASGIApp,
    *,
    preset: str | None,
    env: Mapping[str, str],
    name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    with_receiver: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    resolve: Resolver = system_resolver,
    authorities: str = "",
) -> AsyncIterator[PresetRig]:
    """Fixture provider + preset + reconciler; with the real receiver when asked.

    `clock`: a test's clock (it also moves the database's jw_now()), for
    schedules longer than a test should wait. `resolve`: how the reconciler's
    connections resolve host names (a test's DNS). `authorities`: a PEM file
    whose certificates the reconciler's connections trust too (`provider_ca_file`),
    for a test's own TLS server.
    """
    provider = name or preset
    assert provider, "a provider described without a preset needs a name"
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(serve_app(app))
        providers = load(provider, preset, url, env, overrides)
        webhook_url = None
        if with_receiver:
            webhook_url = await stack.enter_async_context(running_receiver(pool, providers))
        ctx = await stack.enter_async_context(
            reconciler_context(
                pool,
                tmp_path,
                providers,
                lanes=16,
                make_lane=functools.partial(Lane, resolve=resolve, authorities=authorities),
                webhook_url=webhook_url,
                clock=clock,
            )
        )
        yield PresetRig(pool, url, provider, providers[provider], Reconciler(ctx), webhook_url)


@contextlib.asynccontextmanager
async def running_receiver(
    pool: Any, providers: Mapping[str, ProviderDescription]
) -> AsyncIterator[str]:
    """The real webhook receiver; yields the URL template for `Context.webhook_url`.

    It is told that URL (`public_webhook_url`), as a deployment's is: a scheme
    that reads the URL (a token in its query string) needs it.
    """
    port = _free_port()
    public = f"http://127.0.0.1:{port}/webhooks/{{provider}}"
    settings = replace(Settings(), providers=providers, public_webhook_url=public)
    async with serve_app(build_receiver(settings, pool), port=port):
        yield public


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# A route's handler.
Endpoint = Callable[[Request], Awaitable[Response]]


async def _no_jobs(_request: Request) -> JSONResponse:
    return JSONResponse({"jobs": []})


def simulator_shaped(
    create: Endpoint, status: Endpoint, result: Endpoint | None = None
) -> Starlette:
    """A fixture provider at the simulator preset's paths: create, status, a lookup
    that finds nothing, and (when given) results at /results/{job_id}."""
    routes = [
        Route("/v1/jobs", create, methods=["POST"]),
        Route("/v1/jobs", _no_jobs, methods=["GET"]),
        Route("/v1/jobs/{job_id}", status, methods=["GET"]),
    ]
    if result is not None:
        routes.append(Route("/results/{job_id}", result, methods=["GET"]))
    return Starlette(routes=routes)


def simulator_rig(
    pool: Any,
    tmp_path: Path,
    app: ASGIApp,
    *,
    clock: Clock = SYSTEM_CLOCK,
    overrides: Mapping[str, Any] | None = None,
    resolve: Resolver = system_resolver,
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    """`preset_rig` for a fixture app in the simulator preset's shape (no environment)."""
    return preset_rig(
        pool,
        tmp_path,
        app,
        preset="simulator",
        env={},
        overrides=overrides,
        clock=clock,
        resolve=resolve,
    )
