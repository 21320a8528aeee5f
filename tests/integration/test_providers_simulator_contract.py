"""The built-in simulator preset matches the real simulated provider, over loopback HTTP.

The adapters are pure; this drives them against the actual simulator so the
preset cannot drift from the server it describes. Requests are sent the way
the reconciler sends them (httpx, the HttpRequest as built), nothing mocked.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio

from shared.ledger.states import RemoteState
from shared.providers import (
    HttpRequest,
    HttpResponse,
    ProviderAdapter,
    StatusFact,
    adapter_for,
    parse_providers,
)
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app

WAIT_SECONDS = 5.0  # upper bound for a scripted job to finish; they take ~0.1 s


@pytest_asyncio.fixture(scope="module")
async def sim_url() -> AsyncIterator[str]:
    async with serve_app(build_app(SimulatorSettings())) as url:
        yield url


@pytest_asyncio.fixture
async def adapter(sim_url: str) -> AsyncIterator[ProviderAdapter]:
    async with httpx.AsyncClient(base_url=sim_url) as http:
        (await http.post("/_sim/reset")).raise_for_status()
    table = {"preset": "simulator", "base_url": sim_url}
    yield adapter_for(parse_providers({"providers": {"sim": table}}, "test.toml", {})["sim"])


async def send(request: HttpRequest) -> HttpResponse:
    async with httpx.AsyncClient() as http:
        answer = await http.request(
            request.method,
            request.url,
            headers=request.headers,
            json=request.json,
            timeout=request.timeout,
        )
    return HttpResponse(
        answer.status_code,
        answer.headers,
        answer.content,
        answer.elapsed.total_seconds(),
        str(answer.url),
    )


async def create(adapter: ProviderAdapter, script: str, ref: str, **params: Any) -> Any:
    request = adapter.build_create(
        body={"script": script, "params": params},
        idempotency_token=f"idem-{ref}",
        client_reference=ref,
    )
    return adapter.parse_create(await send(request))


async def until_terminal(
    adapter: ProviderAdapter, job_id: str, status_url: str | None
) -> StatusFact:
    deadline = time.monotonic() + WAIT_SECONDS
    rng = random.Random(0)
    attempt = 0
    while True:
        fact = adapter.parse_status(await send(adapter.build_status(job_id, status_url)))
        if fact.is_terminal or time.monotonic() > deadline:
            return fact
        delay = adapter.next_poll_delay(
            attempt, fact.retry_after_seconds, fact.poll_after_seconds, rng
        )
        await asyncio.sleep(min(delay, 0.05))  # scaled down: the jobs last ~0.1 s
        attempt += 1


async def test_partial_batch_end_to_end(adapter: ProviderAdapter) -> None:
    created = await create(adapter, "partial", "op_partial", duration=0.1, total=20, failed=2)
    assert created.kind == "accepted" and created.remote_state is RemoteState.PENDING
    assert created.provider_request_id is not None
    replay = await create(adapter, "partial", "op_partial", duration=0.1, total=20, failed=2)
    assert replay.remote_job_id == created.remote_job_id  # same token, same job

    status = await until_terminal(adapter, created.remote_job_id, created.status_url)
    assert status.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    assert status.counts is not None and (status.counts.succeeded, status.counts.failed) == (18, 2)

    parts = [await send(r) for r in adapter.build_result_requests(created.remote_job_id, status)]
    check = adapter.validate_result(parts, status)
    assert check.ok, check.reason
    assert check.items_succeeded == 18

    assert status.errors_url is not None
    page = adapter.parse_errors_page(await send(adapter.build_errors_page(status.errors_url)))
    assert len(page.items) == 2 and page.next_page_token is None
    assert all(item.code == "item_rejected" for item in page.items)

    found = adapter.parse_lookup(await send(adapter.build_lookup("op_partial")), "op_partial")
    assert found.found_job_ids == (created.remote_job_id,)


async def test_sync_result_and_rejection(adapter: ProviderAdapter) -> None:
    sync = await create(adapter, "sync", "op_sync")
    assert sync.kind == "sync_result"
    assert adapter.validate_inline_result(sync.sync_result, None).ok
    rejected = await create(adapter, "reject", "op_reject")
    assert rejected.kind == "rejected" and rejected.error.code == "invalid_request"


async def test_checksum_mismatch_is_caught(adapter: ProviderAdapter) -> None:
    created = await create(adapter, "checksum_mismatch", "op_digest", duration=0.05)
    status = await until_terminal(adapter, created.remote_job_id, created.status_url)
    parts = [await send(r) for r in adapter.build_result_requests(created.remote_job_id, status)]
    assert adapter.validate_result(parts, status).reason == "Content-Digest sha-256 mismatch"


async def test_same_token_different_body_is_a_conflict(adapter: ProviderAdapter) -> None:
    await create(adapter, "success", "op_conflict", total=3)
    conflict = await create(adapter, "success", "op_conflict", total=4)
    assert conflict.kind == "rejected" and conflict.idempotency_conflict


async def test_lookup_proves_absence_and_cancel_of_unknown_job(adapter: ProviderAdapter) -> None:
    absent = adapter.parse_lookup(await send(adapter.build_lookup("op_never")), "op_never")
    assert absent.proven_absent and absent.found_job_ids == ()
    assert adapter.parse_cancel(await send(adapter.build_cancel("job_nope"))).kind == "not_found"


async def test_back_pressure_carries_retry_after(adapter: ProviderAdapter) -> None:
    created = await create(adapter, "rate_limited", "op_429", retry_after=2)
    fact = adapter.parse_status(await send(adapter.build_status(created.remote_job_id)))
    assert fact.back_pressure and fact.retry_after_seconds == 2.0
