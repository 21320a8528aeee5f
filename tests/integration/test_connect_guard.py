"""A host name resolving to an internal address is never connected to (reconciler.connect_guard).

`check_sendable` refuses internal addresses written out, and resolves no
name: a result URL on a name the submitter controls, resolving to the cloud
metadata service or a private network, was fetched and stored for the agent.
The reconciler's connections now resolve the name, check every address and
connect to the one they checked. The names here resolve through a test's
DNS (the resolver is injected, as time is), on real loopback servers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from bench.harness import TestClock
from reconciler.connect_guard import ConnectRefused, GuardedBackend, trusted_hosts
from reconciler.lanes import Lane
from shared.ledger.states import LocalState
from shared.providers import load_preset
from shared.serve import serve_app
from tests.fixtures_providers.rig import simulator_shaped
from tests.integration.test_url_review import (
    CREDENTIALS_PATH,
    INTERNAL_HOST,
    Internal,
    Provider,
    internal_service,
    rig,
    run,
)

S = LocalState
NAME = "files.example"


def dns(table: dict[str, Sequence[str]]) -> Any:
    """A resolver answering from `table`; a name not in it does not exist."""

    async def resolve(host: str, _port: int) -> Sequence[str]:
        if host not in table:
            raise OSError(-2, "Name or service not known")
        return table[host]

    return resolve


def refusal(exc: BaseException) -> ConnectRefused:
    assert isinstance(exc, httpx.ConnectError), exc
    assert isinstance(exc.__cause__, ConnectRefused), exc.__cause__
    return exc.__cause__


async def test_a_result_url_whose_name_resolves_to_an_internal_address_is_never_fetched(
    pool: Any, tmp_path: Path, clock: TestClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jobwarden.reconciler")
    async with internal_service() as (internal_url, internal):
        port = httpx.URL(internal_url).port
        provider = Provider(result_url=f"http://{NAME}:{port}{CREDENTIALS_PATH}")
        async with rig(pool, tmp_path, provider, clock, resolve=dns({NAME: [INTERNAL_HOST]})) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
            fetches = await r.calls(op_id, "result")
            escalation = await r.escalation(op_id)
            stored = await pool.fetchval(
                "SELECT count(*) FROM results WHERE operation_id=$1", op_id
            )
    assert internal.seen == [] and stored == 0
    # one try, not six "kept failing": the same DNS answers the same next time
    assert [(c["error_category"], c["status_code"]) for c in fetches] == [("connect", None)]
    assert state is S.RESULT_UNAVAILABLE
    assert escalation["reason"].startswith(
        f"cannot fetch the result: {NAME} resolves to {INTERNAL_HOST}, a loopback address"
    )
    said = [
        getattr(record, "ctx", {}).get("problem", "")
        for record in caplog.records
        if record.getMessage() == "provider call failed"
    ]
    assert said and all(
        f"{NAME} resolves to {INTERNAL_HOST}, a loopback address" in p for p in said
    )
    assert all("result.allowed_hosts" in problem for problem in said)


async def test_a_status_url_whose_name_resolves_to_an_internal_address_stops_at_once(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Before, such a read was retried like any connect failure until the deadline:
    the same DNS answered the same on every claim, and the human waited for it."""
    async with internal_service() as (internal_url, internal):
        port = httpx.URL(internal_url).port
        provider = Provider(status_url=f"http://{NAME}:{port}/v1/jobs/job-1")
        overrides = {"status": {"use_status_url": True}}
        resolve = dns({NAME: [INTERNAL_HOST]})
        async with rig(pool, tmp_path, provider, clock, overrides, resolve=resolve) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
            reads = await r.calls(op_id, "status")
            escalation = await r.escalation(op_id)
    assert internal.seen == []
    assert state is S.NEEDS_ATTENTION
    # one read, recorded as the connect failure it was (it never left)
    assert [(c["error_category"], c["status_code"]) for c in reads] == [("connect", None)]
    assert escalation["reason"].startswith(
        f"the status read cannot be sent: {NAME} resolves to {INTERNAL_HOST}, a loopback address"
    )


def own_status_url_app() -> Any:
    """A provider whose create answer names a status URL on its own host, job running."""

    async def create(request: Request) -> JSONResponse:
        url = str(request.base_url).rstrip("/") + "/v1/jobs/job-1"
        return JSONResponse({"job_id": "job-1", "state": "queued", "status_url": url}, 202)

    async def status(_request: Request) -> JSONResponse:
        return JSONResponse({"job_id": "job-1", "state": "running"})

    return simulator_shaped(create, status)


async def observing_on_a_guarded_name(r: Any, pool: Any, clock: TestClock) -> str:
    """An operation being observed whose recorded status URL now names NAME."""
    op_id = await r.submit({}, result_deadline_s=36_000)
    state = await run(r, op_id, clock)
    assert state is S.OBSERVING
    # A recorded status URL is never changed (migration 041's trigger): a
    # superuser's hand stands here for a name the create's answer gave whose
    # address changed since.
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute(
            "UPDATE operations SET status_url = $2 WHERE operation_id = $1",
            op_id,
            f"http://{NAME}:9/v1/jobs/job-1",
        )
    await clock.advance(4_000)  # its next read is due
    return op_id


async def test_a_claimed_read_refused_by_the_guard_is_recorded_and_stops(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The read the claim marked (no call row before it left) is completed, not lost."""
    overrides = {"status": {"use_status_url": True}}
    resolve = dns({NAME: [INTERNAL_HOST]})
    async with rig(pool, tmp_path, own_status_url_app(), clock, overrides, resolve) as r:
        op_id = await observing_on_a_guarded_name(r, pool, clock)
        before = await r.calls(op_id, "status")
        await r.reconciler.run_once()
        reads = await r.calls(op_id, "status")
        row = await pool.fetchrow(
            "SELECT state::text, lease_owner, read_fence FROM operations WHERE operation_id = $1",
            op_id,
        )
    assert len(reads) == len(before) + 1
    assert (reads[-1]["error_category"], reads[-1]["status_code"]) == ("connect", None)
    assert reads[-1]["finished_at"] is not None
    assert dict(row) == {"state": "needs_attention", "lease_owner": None, "read_fence": None}


async def test_a_cancel_that_arrives_while_the_read_is_refused_is_sent(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """An agent's cancel during the refused read goes out before anyone escalates."""
    table = dns({NAME: [INTERNAL_HOST]})
    pending: list[Any] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        while pending:  # the agent's cancel, committed while the read is in flight
            await pending.pop()()
        return await table(host, port)

    overrides = {"status": {"use_status_url": True}}
    async with rig(pool, tmp_path, own_status_url_app(), clock, overrides, resolve) as r:
        op_id = await observing_on_a_guarded_name(r, pool, clock)
        pending.append(lambda: r.cancel(op_id))
        await r.reconciler.run_once()
        cancels = await r.calls(op_id, "cancel")
        history = await r.history(op_id)
        escalation = await r.escalation(op_id)
    # sent and answered (this provider has no such job: 404), then the read that
    # would tell what happened is refused again, and a human takes over
    assert [c["status_code"] for c in cancels] == [404]
    assert history[-2:] == ["cancel_requested", "needs_attention"]
    assert escalation["reason"].startswith("the status read cannot be sent")


async def test_the_machines_own_name_is_refused_through_the_system_resolver(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The same with real DNS: this machine's host name, which its resolver maps to a
    loopback address (before the guard: fetched, and the operation `succeeded` with it)."""
    name = socket.gethostname()
    infos = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
    if "127.0.0.1" not in {info[4][0] for info in infos}:
        pytest.skip(f"{name} does not resolve to 127.0.0.1 here")
    service = Internal()
    async with serve_app(service.app()) as service_url:
        port = httpx.URL(service_url).port
        provider = Provider(result_url=f"http://{name}:{port}{CREDENTIALS_PATH}")
        async with rig(pool, tmp_path, provider, clock) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
            fetches = await r.calls(op_id, "result")
    assert service.seen == [] and state is S.RESULT_UNAVAILABLE
    assert [c["error_category"] for c in fetches] == ["connect"]


async def test_a_name_the_operator_allowed_is_fetched_by_name(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """`result.allowed_hosts` names the host: connected by name through the system
    resolver, as before; the guard's resolver (which knows no name) is never asked."""
    service = Internal()
    async with serve_app(service.app()) as service_url:
        port = httpx.URL(service_url).port
        provider = Provider(result_url=f"http://localhost:{port}/results/job-1")
        allowed = {"result": {"allowed_hosts": ["localhost"]}}
        async with rig(pool, tmp_path, provider, clock, allowed, resolve=dns({})) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
    assert (state, service.seen) == (S.SUCCEEDED, ["/results/job-1"])


async def test_a_name_with_one_internal_address_among_public_ones_is_refused() -> None:
    resolve = dns({NAME: ["93.184.216.34", "10.0.0.5"]})
    async with Lane(trusted_hosts=frozenset(), resolve=resolve) as lane:
        with pytest.raises(httpx.ConnectError) as raised:
            await lane.call("GET", f"http://{NAME}/r", phase_timeout=2.0)
    assert "resolves to 10.0.0.5, a private address" in str(refusal(raised.value))


async def test_an_internal_address_written_out_is_refused_at_connect_too() -> None:
    """`check_sendable` refuses it first; the guard does not rely on it (127.1 is 127.0.0.1)."""
    async with serve_app(Internal().app()) as url, Lane(trusted_hosts=frozenset()) as lane:
        port = httpx.URL(url).port
        with pytest.raises(httpx.ConnectError) as raised:
            await lane.call("GET", f"http://127.1:{port}/r", phase_timeout=2.0)
    assert "127.0.0.1, a loopback address" in str(refusal(raised.value))


async def test_a_trusted_host_connects_by_name_without_asking_the_guards_resolver() -> None:
    service = Internal()
    async with serve_app(service.app()) as url:
        port = httpx.URL(url).port
        async with Lane(trusted_hosts=frozenset({"localhost"}), resolve=dns({})) as lane:
            answer = await lane.call("GET", f"http://LocalHost:{port}/seen", phase_timeout=2.0)
    assert answer.status_code == 200 and service.seen == ["/seen"]


async def test_a_lane_without_trusted_hosts_is_unguarded() -> None:
    """Benchmarks' lanes and a bare `Lane()`: as before, by name."""
    service = Internal()
    async with serve_app(service.app()) as url, Lane() as lane:
        answer = await lane.call("GET", f"{url}/x", phase_timeout=2.0)
    assert answer.status_code == 200 and service.seen == ["/x"]


class Stream(httpcore.AsyncNetworkStream):
    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class Recorder(httpcore.AsyncNetworkBackend):
    """An inner backend that records where it was asked to connect: an address in
    `fails` is refused at once, one in `hangs` never answers (a dead host, a
    dropped IPv6 path), one in `slow` connects once `released` is set (a unit
    test of the guard's choice of address)."""

    def __init__(
        self, fails: frozenset[str] = frozenset(), hangs: frozenset[str] = frozenset()
    ) -> None:
        self.asked: list[tuple[str, int]] = []
        self.cancelled: list[str] = []
        self.streams: list[Stream] = []
        self._fails, self._hangs = fails, hangs

    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        self.asked.append((host, port))
        if host in self._fails:
            raise httpcore.ConnectError("refused")
        if host in self._hangs:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.append(host)
                raise
        stream = Stream(host)
        self.streams.append(stream)
        return stream


async def test_the_connection_goes_to_the_address_checked_not_to_the_name_again() -> None:
    """A second lookup could answer otherwise (DNS rebinding): none is made."""
    answers = [["93.184.216.34"], ["169.254.169.254"]]

    async def rebinding(_host: str, _port: int) -> Sequence[str]:
        return answers.pop(0)

    inner = Recorder()
    backend = GuardedBackend(inner, frozenset(), rebinding)
    stream = await backend.connect_tcp("cdn.example", 443, timeout=1.0)
    assert inner.asked == [("93.184.216.34", 443)] and len(answers) == 1
    assert isinstance(stream, Stream) and stream.address == "93.184.216.34"


async def test_a_refused_address_passes_to_the_next_at_once() -> None:
    inner = Recorder(fails=frozenset({"1.1.1.1"}))
    backend = GuardedBackend(inner, frozenset(), dns({"cdn.example": ["1.1.1.1", "8.8.8.8"]}))
    stream = await backend.connect_tcp("cdn.example", 443, timeout=1.0)
    assert inner.asked == [("1.1.1.1", 443), ("8.8.8.8", 443)]
    assert isinstance(stream, Stream) and stream.address == "8.8.8.8"


async def test_a_dead_first_address_does_not_hold_the_call() -> None:
    """Before: each address had the whole connect timeout, one after another, so a
    dead IPv6 path failed every call (the live IPv4 address never tried in time).
    Now the next address starts a quarter of a second later, families alternating,
    and the dead attempt is cancelled once one connects."""
    dead = "2606:2800:220:1::1"
    inner = Recorder(hangs=frozenset({dead}))
    resolve = dns({"cdn.example": [dead, "2606:2800:220:1::2", "93.184.216.34"]})
    backend = GuardedBackend(inner, frozenset(), resolve)
    async with asyncio.timeout(5):  # far below the 30 s connect timeout
        stream = await backend.connect_tcp("cdn.example", 443, timeout=30.0)
    assert isinstance(stream, Stream) and stream.address == "93.184.216.34"
    assert inner.asked[:2] == [(dead, 443), ("93.184.216.34", 443)]  # IPv4 second
    assert inner.cancelled == [dead]


async def test_every_address_failing_is_the_last_failure() -> None:
    inner = Recorder(fails=frozenset({"1.1.1.1", "8.8.8.8"}))
    backend = GuardedBackend(inner, frozenset(), dns({"cdn.example": ["1.1.1.1", "8.8.8.8"]}))
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("cdn.example", 443, timeout=1.0)
    assert len(inner.asked) == 2


async def test_a_name_that_does_not_resolve_is_a_connect_error() -> None:
    backend = GuardedBackend(Recorder(), frozenset(), dns({}))
    with pytest.raises(httpcore.ConnectError, match=r"cannot resolve nowhere\.example"):
        await backend.connect_tcp("nowhere.example", 443, timeout=1.0)


async def test_a_resolver_that_hangs_is_bounded_by_the_connect_timeout() -> None:
    async def hangs(_host: str, _port: int) -> Sequence[str]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    backend = GuardedBackend(Recorder(), frozenset(), hangs)
    with pytest.raises(httpcore.ConnectTimeout):
        await backend.connect_tcp("slow.example", 443, timeout=0.05)


def test_each_provider_trusts_the_hosts_its_operator_named() -> None:
    desc = dataclasses.replace(load_preset("simulator", {}), base_url="http://Sim.Internal.:8080")
    assert trusted_hosts({"sim": desc}) == {"sim": frozenset({"sim.internal"})}
