"""The simulated provider, exercised over real loopback HTTP, one test per failure mode."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.serve import serve_app
from shared.signatures import verify
from shared.simulator import SimulatorSettings, build_app

SECRET = "whsec_" + base64.b64encode(b"simulator-test-signing-key-32byt").decode()
# Fast redelivery so retry tests take milliseconds, not the default second.
FAST_BACKOFF = (0.01, 0.02, 0.04)
TERMINAL = {"succeeded", "partially_succeeded", "failed", "cancelled"}


# -- a webhook receiver, itself a real server --------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class Receiver:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    attempts: int = 0
    fail_next: int = 0  # answer 500 to this many deliveries first
    gate: asyncio.Event | None = None  # when set, hold each response until it opens
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def reset(self) -> None:
        self.received.clear()
        self.attempts = 0
        self.fail_next = 0
        self.gate = None

    async def endpoint(self, request: Request) -> Response:
        body = await request.body()
        self.attempts += 1
        if self.fail_next:
            self.fail_next -= 1
            return Response(status_code=500)
        self.received.append(Received(dict(request.headers), body))
        async with self.changed:
            self.changed.notify_all()
        if self.gate is not None:
            await self.gate.wait()
        return Response(status_code=204)

    async def wait_for(self, count: int, timeout: float = 3.0) -> list[Received]:
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(lambda: len(self.received) >= count)
        return self.received


@pytest_asyncio.fixture(scope="module")
async def receiver_server() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/hook", receiver.endpoint, methods=["POST"])])
    async with serve_app(app) as url:
        receiver.url = f"{url}/hook"
        yield receiver


@pytest_asyncio.fixture
async def receiver(receiver_server: Receiver) -> Receiver:
    receiver_server.reset()
    return receiver_server


@pytest_asyncio.fixture(scope="module")
async def sim_url() -> AsyncIterator[str]:
    settings = SimulatorSettings(webhook_secret=SECRET, webhook_backoff=FAST_BACKOFF)
    async with serve_app(build_app(settings)) as url:
        yield url


@pytest_asyncio.fixture
async def client(sim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url, timeout=5.0) as http:
        (await http.post("/_sim/reset")).raise_for_status()
        yield http


# -- helpers ------------------------------------------------------------------


async def create(
    client: httpx.AsyncClient, script: str = "success", key: str | None = None, **fields: Any
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return await client.post("/v1/jobs", json={"script": script, **fields}, headers=headers)


async def create_job(client: httpx.AsyncClient, script: str = "success", **fields: Any) -> str:
    response = await create(client, script, **fields)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["job_id"]
    return job_id


async def poll_until(
    client: httpx.AsyncClient, job_id: str, states: set[str], timeout: float = 3.0
) -> dict[str, Any]:
    """Poll like a client would, until the job is in one of `states`."""
    async with asyncio.timeout(timeout):
        while True:
            response = await client.get(f"/v1/jobs/{job_id}")
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            if body["state"] in states:
                return body
            await asyncio.sleep(0.02)


async def stats(client: httpx.AsyncClient) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get("/_sim/stats")).json()
    return body


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# -- create and idempotency ---------------------------------------------------


async def test_create_answers_202_with_location_and_request_id(client: httpx.AsyncClient) -> None:
    response = await create(client, client_reference="ref-1", input={"n": 1})
    assert response.status_code == 202
    body = response.json()
    assert body["job_id"].startswith("job_")
    assert body["state"] == "queued"
    assert body["client_reference"] == "ref-1"
    assert body["status_url"] == f"/v1/jobs/{body['job_id']}"
    assert response.headers["location"] == body["status_url"]
    assert response.headers["x-request-id"].startswith("req_")


async def test_same_key_same_body_replays_the_original_job(client: httpx.AsyncClient) -> None:
    first = await create(client, key="k-replay", input={"a": 1})
    second = await create(client, key="k-replay", input={"a": 1})
    assert second.status_code == 202
    assert second.json()["job_id"] == first.json()["job_id"]
    assert second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    counters = await stats(client)
    assert counters["creates_per_token"] == {"k-replay": 1}
    assert counters["creates_total"] == 2
    assert counters["jobs_total"] == 1


async def test_same_key_different_body_is_refused(client: httpx.AsyncClient) -> None:
    await create(client, key="k-reuse", input={"range": "february"})
    response = await create(client, key="k-reuse", input={"range": "march"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_key_reused"
    assert (await stats(client))["jobs_total"] == 1


async def test_key_in_flight_is_refused_until_the_first_request_answers(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    receiver.gate = asyncio.Event()
    body = {"webhook_url": receiver.url}
    first = asyncio.create_task(create(client, "webhook_before_create_response", "k-busy", **body))
    await receiver.wait_for(1)  # the first create is now waiting on its webhook
    second = await create(client, "webhook_before_create_response", "k-busy", **body)
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "idempotency_key_in_progress"
    receiver.gate.set()
    assert (await first).status_code == 202


async def test_reject_is_422_and_creates_nothing(client: httpx.AsyncClient) -> None:
    response = await create(client, "reject", key="k-reject")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    counters = await stats(client)
    assert counters["jobs_total"] == 0
    assert counters["creates_per_token"] == {}


async def test_unknown_script_or_param_is_422(client: httpx.AsyncClient) -> None:
    assert (await create(client, "teleport")).status_code == 422
    typo = await create(client, params={"duraton": 1})
    assert typo.status_code == 422
    assert "duraton" in typo.json()["error"]["message"]
    assert (await create(client, params={"duration": "soon"})).status_code == 422
    assert (await stats(client))["jobs_total"] == 0


async def test_sync_answers_200_with_the_result_inline(client: httpx.AsyncClient) -> None:
    response = await create(client, "sync", params={"total": 3})
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "succeeded"
    assert [item["index"] for item in body["result"]["items"]] == [0, 1, 2]
    assert body["result"]["counts"] == {"total": 3, "succeeded": 3, "failed": 0}
    status = (await client.get(f"/v1/jobs/{body['job_id']}")).json()
    assert status["state"] == "succeeded"


async def test_create_5xx_fails_once_without_creating(client: httpx.AsyncClient) -> None:
    first = await create(client, "create_5xx", "k-5xx", client_reference="ref-5xx")
    assert first.status_code == 503
    lookup = await client.get("/v1/jobs", params={"client_reference": "ref-5xx"})
    assert lookup.json() == {"jobs": []}
    second = await create(client, "create_5xx", "k-5xx", client_reference="ref-5xx")
    assert second.status_code == 202
    counters = await stats(client)
    assert counters["jobs_total"] == 1
    assert counters["creates_per_token"] == {"k-5xx": 1}


async def test_lost_create_response_retry_returns_the_same_job(client: httpx.AsyncClient) -> None:
    body = {"script": "lost_create_response", "client_reference": "ref-lost"}
    headers = {"Idempotency-Key": "k-lost"}
    started = time.monotonic()
    try:
        await client.post("/v1/jobs", json=body, headers=headers, timeout=0.3)
        raise AssertionError("the first create response should have been lost")
    except httpx.ReadTimeout:
        pass
    assert time.monotonic() - started < 2
    # The provider did accept the job: a lookup finds it...
    found = (await client.get("/v1/jobs", params={"client_reference": "ref-lost"})).json()
    assert len(found["jobs"]) == 1
    # ...and the same-token retry hands back that very job.
    retry = await client.post("/v1/jobs", json=body, headers=headers)
    assert retry.status_code == 202
    assert retry.json()["job_id"] == found["jobs"][0]["job_id"]
    assert retry.headers["idempotent-replayed"] == "true"
    assert (await stats(client))["creates_per_token"] == {"k-lost": 1}


async def test_token_conflict_retry_returns_a_different_job(client: httpx.AsyncClient) -> None:
    body = {"script": "token_conflict", "client_reference": "ref-conflict"}
    headers = {"Idempotency-Key": "k-conflict"}
    try:
        await client.post("/v1/jobs", json=body, headers=headers, timeout=0.3)
        raise AssertionError("the first create response should have been lost")
    except httpx.ReadTimeout:
        pass
    found = (await client.get("/v1/jobs", params={"client_reference": "ref-conflict"})).json()
    original = found["jobs"][0]["job_id"]
    retry = await client.post("/v1/jobs", json=body, headers=headers)
    assert retry.status_code == 202
    assert retry.json()["job_id"] != original
    again = await client.post("/v1/jobs", json=body, headers=headers)
    assert again.json()["job_id"] == retry.json()["job_id"]
    assert (await stats(client))["creates_per_token"] == {"k-conflict": 2}


async def test_no_idempotency_script_creates_a_job_per_request(client: httpx.AsyncClient) -> None:
    first = await create(client, "no_idempotency", "k-none")
    second = await create(client, "no_idempotency", "k-none")
    assert first.json()["job_id"] != second.json()["job_id"]
    assert (await stats(client))["creates_per_token"] == {"k-none": 2}


async def test_server_without_idempotency_creates_a_job_per_request() -> None:
    app = build_app(SimulatorSettings(honour_idempotency=False))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as http:
        first = await create(http, key="k-same")
        second = await create(http, key="k-same")
        assert first.json()["job_id"] != second.json()["job_id"]
        assert "idempotent-replayed" not in second.headers
        assert (await stats(http))["jobs_total"] == 2


async def test_lookup_by_client_reference(client: httpx.AsyncClient) -> None:
    before = await client.get("/v1/jobs", params={"client_reference": "ref-lookup"})
    assert before.json() == {"jobs": []}
    job_id = await create_job(client, client_reference="ref-lookup")
    await create_job(client, client_reference="someone-else")
    after = (await client.get("/v1/jobs", params={"client_reference": "ref-lookup"})).json()
    assert [job["job_id"] for job in after["jobs"]] == [job_id]


# -- observation -------------------------------------------------------------


async def test_job_goes_queued_running_succeeded(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, params={"duration": 0.5, "total": 4})
    first = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert first["state"] == "queued"
    assert first["progress"] == {"completed": 0, "total": 4}
    assert first["result_url"] is None
    assert first["counts"] is None
    running = await poll_until(client, job_id, {"running"})
    assert running["result_url"] is None
    done = await poll_until(client, job_id, TERMINAL)
    assert done["state"] == "succeeded"
    assert done["progress"] == {"completed": 4, "total": 4}
    assert done["counts"] == {"total": 4, "succeeded": 4, "failed": 0}
    assert done["result_url"] == f"/v1/jobs/{job_id}/result"
    assert datetime.fromisoformat(done["updated_at"]).tzinfo is not None
    result = await client.get(done["result_url"])
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json"
    digest = base64.b64encode(hashlib.sha256(result.content).digest()).decode()
    assert result.headers["content-digest"] == f"sha-256=:{digest}:"
    assert len(result.json()["items"]) == 4


async def test_min_polls_holds_completion_until_enough_reads(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, params={"duration": 0, "min_polls": 3})
    states = [(await client.get(f"/v1/jobs/{job_id}")).json()["state"] for _ in range(3)]
    assert states == ["running", "running", "succeeded"]
    internal = (await client.get(f"/_sim/jobs/{job_id}")).json()
    assert (internal["script"], internal["status_reads"]) == ("success", 3)


async def test_slow_job_reports_poll_after_seconds(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "slow")
    body = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert body["state"] in {"queued", "running"}
    assert body["poll_after_seconds"] == 5


async def test_unknown_job_is_404(client: httpx.AsyncClient) -> None:
    for path in ("", "/result", "/errors"):
        assert (await client.get(f"/v1/jobs/job_missing{path}")).status_code == 404
    assert (await client.post("/v1/jobs/job_missing/cancel")).status_code == 404


async def test_late_failure_ends_failed_with_an_error(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "late_failure", params={"duration": 0.1})
    done = await poll_until(client, job_id, TERMINAL)
    assert done["state"] == "failed"
    assert done["error"]["code"] == "worker_crashed"
    assert done["result_url"] is None
    assert (await client.get(f"/v1/jobs/{job_id}/result")).status_code == 404


async def test_never_finishes_stays_running_at_full_progress(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "never_finishes", params={"duration": 0, "total": 5})
    for _ in range(3):
        body = (await client.get(f"/v1/jobs/{job_id}")).json()
        assert body["state"] == "running"
        assert body["progress"] == {"completed": 5, "total": 5}


async def test_partial_reports_counts_and_paginated_errors(client: httpx.AsyncClient) -> None:
    params = {"duration": 0, "total": 500, "failed": 5}
    job_id = await create_job(client, "partial", params=params)
    done = await poll_until(client, job_id, TERMINAL)
    assert done["state"] == "partially_succeeded"
    assert done["counts"] == {"total": 500, "succeeded": 495, "failed": 5}
    errors_url = done["errors_url"]
    assert errors_url == f"/v1/jobs/{job_id}/errors"
    pages: list[list[dict[str, Any]]] = []
    token: str | None = None
    while True:
        query: dict[str, Any] = {"page_size": 2, **({"page_token": token} if token else {})}
        page = (await client.get(errors_url, params=query)).json()
        pages.append(page["items"])
        token = page["next_page_token"]
        if token is None:
            break
    assert [len(items) for items in pages] == [2, 2, 1]
    indices = [item["index"] for items in pages for item in items]
    assert len(set(indices)) == 5
    result = (await client.get(done["result_url"])).json()
    assert len(result["items"]) == 495
    assert not set(indices) & {item["index"] for item in result["items"]}
    bad = await client.get(errors_url, params={"page_token": "not-a-token"})
    assert bad.status_code == 400


async def test_rate_limited_answers_429_with_retry_after_seconds(
    client: httpx.AsyncClient,
) -> None:
    job_id = await create_job(client, "rate_limited", params={"retry_after": 2})
    for _ in range(2):
        response = await client.get(f"/v1/jobs/{job_id}")
        assert response.status_code == 429
        assert response.headers["retry-after"] == "2"
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
    assert (await stats(client))["status_calls_per_job"] == {job_id: 3}


async def test_rate_limited_answers_503_with_retry_after_date(client: httpx.AsyncClient) -> None:
    params = {"limited_reads": 1, "status_code": 503, "retry_after": 3, "retry_after_date": True}
    job_id = await create_job(client, "rate_limited", params=params)
    response = await client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 503
    retry_at = parsedate_to_datetime(response.headers["retry-after"])
    wait = (retry_at - datetime.now(UTC)).total_seconds()
    assert 2 <= wait <= 4
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200


async def test_overlapping_status_calls_are_counted() -> None:
    app = build_app(SimulatorSettings(status_latency=0.1))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as http:
        lone = await create_job(http)
        crowded = await create_job(http)
        await http.get(f"/v1/jobs/{lone}")
        await http.get(f"/v1/jobs/{lone}")
        await asyncio.gather(*(http.get(f"/v1/jobs/{crowded}") for _ in range(3)))
        counters = await stats(http)
    assert counters["status_calls_per_job"] == {lone: 2, crowded: 3}
    assert counters["max_overlapping_status_calls"] == {lone: 1, crowded: 3}


# -- cancellation -------------------------------------------------------------


async def test_cancel_moves_the_job_to_cancelled(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "cancellable", params={"duration": 10, "cancel_delay": 0.1})
    first = await client.post(f"/v1/jobs/{job_id}/cancel")
    assert first.status_code == 202
    assert first.json() == {"job_id": job_id, "state": "cancelling"}
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code == 202
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["state"] == "cancelling"
    done = await poll_until(client, job_id, TERMINAL)
    assert done["state"] == "cancelled"
    late = await client.post(f"/v1/jobs/{job_id}/cancel")
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "not_cancellable"
    assert (await stats(client))["cancels_per_job"] == {job_id: 3}


async def test_cancel_race_finishes_succeeded(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "cancel_race", params={"duration": 10})
    cancel = await client.post(f"/v1/jobs/{job_id}/cancel")
    assert cancel.status_code == 202
    status = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert status["state"] == "succeeded"
    assert (await client.get(status["result_url"])).status_code == 200


# -- results ------------------------------------------------------------------


async def test_result_is_404_before_completion(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, params={"duration": 10})
    response = await client.get(f"/v1/jobs/{job_id}/result")
    assert response.status_code == 404
    assert (await stats(client))["result_fetches_per_job"] == {job_id: 1}


async def test_checksum_mismatch_digest_does_not_match_body(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "checksum_mismatch", params={"duration": 0})
    result = await client.get(f"/v1/jobs/{job_id}/result")
    assert result.status_code == 200
    digest = base64.b64encode(hashlib.sha256(result.content).digest()).decode()
    assert result.headers["content-digest"].startswith("sha-256=:")
    assert result.headers["content-digest"] != f"sha-256=:{digest}:"


async def test_invalid_result_lacks_items(client: httpx.AsyncClient) -> None:
    job_id = await create_job(client, "invalid_result", params={"duration": 0})
    body = (await client.get(f"/v1/jobs/{job_id}/result")).json()
    assert "items" not in body
    assert body["job_id"] == job_id


# -- webhooks -----------------------------------------------------------------


def expected_signature(headers: dict[str, str], body: bytes) -> str:
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


async def test_terminal_webhook_is_signed_and_sent_without_polling(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    job_id = await create_job(
        client, params={"duration": 0.05}, client_reference="ref-hook", webhook_url=receiver.url
    )
    [delivery] = await receiver.wait_for(1)
    assert delivery.event == {
        "event_id": delivery.headers["webhook-id"],
        "type": "job.succeeded",
        "job_id": job_id,
        "state": "succeeded",
        "client_reference": "ref-hook",
        "occurred_at": delivery.event["occurred_at"],
    }
    assert delivery.headers["webhook-id"].startswith("evt_")
    assert abs(int(delivery.headers["webhook-timestamp"]) - time.time()) < 5
    assert delivery.headers["webhook-signature"] == expected_signature(
        delivery.headers, delivery.body
    )
    verified = verify(
        "standard_webhooks", {}, delivery.headers, delivery.body, [SECRET], time.time()
    )
    assert verified.event_id == delivery.headers["webhook-id"]
    assert (await stats(client))["status_calls_per_job"] == {}


async def test_duplicate_webhook_repeats_the_same_id(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    await create_job(client, "duplicate_webhook", params={"duration": 0}, webhook_url=receiver.url)
    first, again, renamed = await receiver.wait_for(3)
    assert again.headers["webhook-id"] == first.headers["webhook-id"]
    assert again.body == first.body
    assert renamed.headers["webhook-id"] != first.headers["webhook-id"]
    assert renamed.event["event_id"] == renamed.headers["webhook-id"]
    assert {**renamed.event, "event_id": None} == {**first.event, "event_id": None}
    assert (await stats(client))["webhooks_sent"] == 3


async def test_out_of_order_webhooks_send_a_stale_running_last(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    await create_job(
        client, "out_of_order_webhooks", params={"duration": 0.05}, webhook_url=receiver.url
    )
    terminal, stale = await receiver.wait_for(2)
    assert terminal.event["type"] == "job.succeeded"
    assert stale.event["type"] == "job.running"
    assert stale.event["occurred_at"] < terminal.event["occurred_at"]


async def test_webhooks_arrive_before_the_create_response(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    response = await create(client, "webhook_before_create_response", webhook_url=receiver.url)
    assert response.status_code == 202
    assert [hook.event["state"] for hook in receiver.received] == ["running", "succeeded"]
    assert {hook.event["job_id"] for hook in receiver.received} == {response.json()["job_id"]}


async def test_failed_webhook_is_redelivered_with_the_same_id(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    receiver.fail_next = 2
    await create_job(client, params={"duration": 0}, webhook_url=receiver.url)
    [delivery] = await receiver.wait_for(1)
    assert receiver.attempts == 3
    counters = await stats(client)
    assert (counters["webhooks_sent"], counters["webhooks_failed"]) == (1, 0)
    assert counters["webhook_attempts"] == 3
    assert delivery.headers["webhook-id"].startswith("evt_")


async def test_undeliverable_webhook_is_abandoned_after_retries(
    client: httpx.AsyncClient,
) -> None:
    await create_job(client, params={"duration": 0}, webhook_url=closed_port_url())
    async with asyncio.timeout(3):
        while (await stats(client))["webhooks_failed"] == 0:
            await asyncio.sleep(0.02)
    counters = await stats(client)
    assert counters["webhook_attempts"] == 1 + len(FAST_BACKOFF)
    assert counters["webhooks_sent"] == 0


def test_settings_from_env_keep_the_secret_out_of_repr() -> None:
    settings = SimulatorSettings.from_env(
        {"JW_SIM_WEBHOOK_SECRET": SECRET, "JW_SIM_TIME_SCALE": "2", "JW_SIM_STATUS_LATENCY": "0.5"}
    )
    assert (settings.webhook_secret, settings.time_scale, settings.status_latency) == (
        SECRET,
        2.0,
        0.5,
    )
    assert SECRET not in repr(settings)


async def test_request_id_on_every_response(client: httpx.AsyncClient) -> None:
    for response in (
        await client.get("/v1/jobs/job_missing"),
        await client.get("/_sim/stats"),
        await create(client, "reject"),
    ):
        assert response.headers["x-request-id"].startswith("req_")
