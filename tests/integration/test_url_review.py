"""Provider-given URLs the sender must never see (a review's reproductions), with the
real reconciler.

Each failed before its fix: a result or status URL urllib accepts but httpx
refuses (`1.2.3.999`, port `99999` or `abc`, 70,000 characters) failed the
step at the sender on every claim, for ever, never counted and never
escalated; a result URL on an internal address (a cloud metadata service's
169.254.169.254, played here by a second loopback address, 127.0.0.2) was
fetched and what it answered stored as the result, for the agent to read.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from reconciler.connect_guard import Resolver, system_resolver
from shared.db.queries import q
from shared.ledger.states import LocalState
from shared.providers.config import deep_merge
from shared.serve import serve_app
from tests.fixtures_providers.rig import PresetRig, simulator_rig, simulator_shaped

S = LocalState
# Where the metadata stand-in listens: loopback, yet not the provider's host.
INTERNAL_HOST = "127.0.0.2"
CREDENTIALS_PATH = "/latest/meta-data/iam/security-credentials/app-role"
SECRET = {"items": [], "AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI"}
# The simulator preset, its result checksum off: the stand-ins send none.
NO_CHECKSUM: dict[str, Any] = {"result": {"expect": {"checksum": "none"}}}
# A few claims on the test clock: past any backoff, far below "for ever".
ROUNDS, ROUND_SECONDS = 6, 31.0
ESCALATED = {S.NEEDS_ATTENTION, S.RESULT_UNAVAILABLE}
BAD_URLS = {
    "ipv4": "http://1.2.3.999/r",
    "port-range": "http://files.example:99999/r",
    "port-text": "http://files.example:abc/r",
    "long": "http://" + "a" * 70000 + ".example/r",
}


@dataclass
class Internal:
    """An internal service (the metadata stand-in): what asked it, what it answers."""

    seen: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def anything(request: Request) -> JSONResponse:
            self.seen.append(request.url.path)
            return JSONResponse(SECRET)

        return Starlette(routes=[Route("/{path:path}", anything)])


@dataclass
class Provider:
    """The simulator preset's shape: a job that succeeds at once, pointing where told."""

    result_url: str = ""
    status_url: str | None = None
    redirect_to: str | None = None  # the result on our host answers 302 to here
    result_reads: int = 0
    result_queries: list[str] = field(default_factory=list)  # as each fetch sent them

    def app(self) -> Starlette:
        async def create(_request: Request) -> JSONResponse:
            answer: dict[str, Any] = {"job_id": "job-1", "state": "queued"}
            if self.status_url is not None:
                answer["status_url"] = self.status_url
            return JSONResponse(answer, status_code=202)

        async def status(_request: Request) -> JSONResponse:
            return JSONResponse(
                {"job_id": "job-1", "state": "succeeded", "result_url": self.result_url}
            )

        async def result(request: Request) -> Response:
            self.result_reads += 1
            self.result_queries.append(request.url.query)
            if self.redirect_to is not None:
                return Response(status_code=302, headers={"Location": self.redirect_to})
            return JSONResponse({"items": []})

        return simulator_shaped(create, status, result)


@contextlib.asynccontextmanager
async def internal_service() -> AsyncIterator[tuple[str, Internal]]:
    service = Internal()
    async with serve_app(service.app(), host=INTERNAL_HOST) as url:
        yield url, service


def rig(
    pool: Any,
    tmp_path: Path,
    provider: Provider | Starlette,
    clock: TestClock,
    overrides: Mapping[str, Any] | None = None,
    resolve: Resolver = system_resolver,
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    """The simulator preset on `provider` (a fixture app), its result checksum off."""
    app = provider.app() if isinstance(provider, Provider) else provider
    merged = deep_merge(NO_CHECKSUM, overrides or {})
    return simulator_rig(pool, tmp_path, app, clock=clock, overrides=merged, resolve=resolve)


async def run(r: PresetRig, op_id: str, clock: TestClock) -> LocalState:
    """The daemon's sweeps over a few claims' worth of the test clock."""
    await r.reconciler.run_once()
    for _ in range(ROUNDS):
        await clock.advance(ROUND_SECONDS)
        await r.reconciler.run_once()
    return await r.state(op_id)


async def cause(r: PresetRig, op_id: str) -> str:
    """The escalation's reason ("" when the operation never escalated)."""
    row = await r.escalation(op_id)
    return "" if row is None else str(row["reason"])


async def test_a_result_url_on_an_internal_host_is_never_fetched(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with internal_service() as (internal_url, internal):
        provider = Provider(result_url=internal_url + CREDENTIALS_PATH)
        async with rig(pool, tmp_path, provider, clock) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
            reason = await cause(r, op_id)
            stored = await pool.fetchval(
                "SELECT count(*) FROM results WHERE operation_id=$1", op_id
            )
    assert internal.seen == []
    assert (state, stored) == (S.RESULT_UNAVAILABLE, 0)
    assert INTERNAL_HOST in reason and "loopback" in reason and "result.allowed_hosts" in reason


async def test_a_redirect_to_an_internal_host_is_never_followed(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with internal_service() as (internal_url, internal):
        provider = Provider(redirect_to=internal_url + CREDENTIALS_PATH)
        overrides = {"result": {"follow_redirects": True}}
        async with rig(pool, tmp_path, provider, clock, overrides) as r:
            provider.result_url = r.url + "/results/job-1"
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
            reason = await cause(r, op_id)
    assert internal.seen == [] and provider.result_reads >= 1
    assert state in ESCALATED
    assert INTERNAL_HOST in reason and "loopback" in reason


async def test_a_status_url_on_an_internal_host_is_never_read(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with internal_service() as (internal_url, internal):
        provider = Provider(status_url=internal_url + "/v1/jobs/job-1")
        overrides = {"status": {"use_status_url": True}}
        async with rig(pool, tmp_path, provider, clock, overrides) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
            reason = await cause(r, op_id)
    assert internal.seen == []
    assert state is S.NEEDS_ATTENTION
    assert INTERNAL_HOST in reason and "loopback" in reason


async def test_a_result_on_a_host_the_operator_allowed_is_fetched(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with internal_service() as (internal_url, internal):
        provider = Provider(result_url=internal_url + "/results/job-1")
        overrides = {"result": {"allowed_hosts": [INTERNAL_HOST]}}
        async with rig(pool, tmp_path, provider, clock, overrides) as r:
            op_id = await r.submit({})
            state = await run(r, op_id, clock)
    assert (state, internal.seen) == (S.SUCCEEDED, ["/results/job-1"])


@pytest.mark.parametrize("bad", BAD_URLS.values(), ids=BAD_URLS.keys())
async def test_a_result_url_the_sender_would_refuse_escalates(
    pool: Any, tmp_path: Path, clock: TestClock, bad: str
) -> None:
    provider = Provider(result_url=bad)
    async with rig(pool, tmp_path, provider, clock) as r:
        op_id = await r.submit({})
        state = await run(r, op_id, clock)
        reason = await cause(r, op_id)
        results = await r.calls(op_id, "result")
    assert (state, results) == (S.RESULT_UNAVAILABLE, [])
    assert "the provider's URL" in reason and len(reason) < 500  # never the whole URL


@pytest.mark.parametrize("bad", BAD_URLS.values(), ids=BAD_URLS.keys())
async def test_a_status_url_the_sender_would_refuse_escalates(
    pool: Any, tmp_path: Path, clock: TestClock, bad: str
) -> None:
    provider = Provider(status_url=bad)
    overrides = {"status": {"use_status_url": True}}
    async with rig(pool, tmp_path, provider, clock, overrides) as r:
        op_id = await r.submit({})
        state = await run(r, op_id, clock)
        reason = await cause(r, op_id)
    assert state is S.NEEDS_ATTENTION
    assert "status read cannot be built" in reason and len(reason) < 500


def _jws(header: dict[str, Any], signature: str) -> str:
    parts = (header, {"key": "out/task_1.mp4", "exp": 1767225600})
    encoded = [
        base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=").decode() for p in parts
    ]
    return ".".join([*encoded, signature])


async def test_a_signed_download_link_is_fetched_whole_and_kept_redacted(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Runway's `?_jwt=...`, and a JWT under a name no rule knows: the fetch sends
    both as given; the call log, the observations and `jobwarden show` keep neither."""
    named = _jws({"alg": "HS256", "typ": "JWT"}, "c2lnbmVkLWJ5LXJ1bndheQ")
    unnamed = _jws({"alg": "ES256"}, "Z3JhbnQtc2lnbmF0dXJl")
    query = f"_jwt={named}&grant={unnamed}&v=2"
    provider = Provider()
    async with rig(pool, tmp_path, provider, clock) as r:
        provider.result_url = f"{r.url}/results/job-1?{query}"
        op_id = await r.submit({})
        state = await run(r, op_id, clock)
        rows = await pool.fetch(
            "SELECT c::text FROM provider_calls c WHERE c.operation_id = $1"
            " UNION ALL SELECT o::text FROM observations o WHERE o.operation_id = $1",
            op_id,
        )
        shown = await pool.fetch(q("operator_timeline"), op_id, None)
    assert state is S.SUCCEEDED
    assert provider.result_queries and set(provider.result_queries) == {query}
    stored = "\n".join([*(row[0] for row in rows), *(str(dict(row)) for row in shown)])
    assert "_jwt=[redacted]" in stored and "grant=[redacted]" in stored and "v=2" in stored
    for secret in ("c2lnbmVkLWJ5LXJ1bndheQ", "Z3JhbnQtc2lnbmF0dXJl"):
        assert secret not in stored
