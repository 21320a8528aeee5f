"""The simulator's provider-side truth, on a fake clock: time moves when a test says so.

Covers the injectable clock, back-pressure bookkeeping (Retry-After and
poll_after violations), the request log, and the fault scripts and params
retry_spawns_duplicate, partial_on_cancel and odd_facts. Real HTTP on
loopback throughout; nothing here sleeps to let time pass.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

import httpx
import pytest
import pytest_asyncio

from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from shared.simulator.requestlog import RequestKind, RequestLog

# Arbitrary fixed origins: the fake clock never reads the real one. The wall
# base ends in .25 so HTTP-date rounding is visible; every step a test takes is
# a multiple of 0.25 s, so all clock sums stay exact in binary floating point.
WALL_BASE = 1_750_000_000.25
MONOTONIC_BASE = 5_000.0
# How long a test's client waits for a deliberately lost create response.
LOST_RESPONSE_TIMEOUT = 0.3


@dataclass
class FakeClock:
    """Frozen until advanced; satisfies shared.simulator.clock.Clock."""

    offset: float = 0.0

    def monotonic(self) -> float:
        return MONOTONIC_BASE + self.offset

    def time(self) -> float:
        return WALL_BASE + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock()


@pytest_asyncio.fixture(scope="module")
async def sim_url(clock: FakeClock) -> AsyncIterator[str]:
    async with serve_app(build_app(SimulatorSettings(), clock=clock)) as url:
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


async def status(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def stats(client: httpx.AsyncClient) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get("/_sim/stats")).json()
    return body


async def logged(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    body = (await client.get("/_sim/requests")).json()
    assert body["dropped"] == 0
    entries: list[dict[str, Any]] = body["requests"]
    return entries


async def lose_first_create(
    client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
) -> None:
    try:
        await client.post("/v1/jobs", json=body, headers=headers, timeout=LOST_RESPONSE_TIMEOUT)
    except httpx.ReadTimeout:
        return
    raise AssertionError("the first create response should have been lost")


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()


def next_quarter_past(clock: FakeClock) -> None:
    """Advance to the next x.25 wall second, so HTTP-date rounding adds exactly 0.75 s."""
    clock.advance((0.25 - clock.time()) % 1.0)


# -- the injected clock ---------------------------------------------------------


async def test_fake_clock_moves_a_job_from_running_to_succeeded(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    job_id = await create_job(client, params={"duration": 10, "total": 9})
    created = clock.time()
    assert (await status(client, job_id))["state"] == "queued"
    clock.advance(5.5)  # 1 s queued, then 4.5 of 9 running seconds: half the items
    running = await status(client, job_id)
    assert running["state"] == "running"
    assert running["progress"] == {"completed": 4, "total": 9}
    assert epoch(running["updated_at"]) == created + 5.5
    clock.advance(4.5)
    done = await status(client, job_id)
    assert done["state"] == "succeeded"
    assert done["counts"] == {"total": 9, "succeeded": 9, "failed": 0}
    assert epoch(done["updated_at"]) == created + 10
    internal = (await client.get(f"/_sim/jobs/{job_id}")).json()
    assert epoch(internal["created_at"]) == created
    assert epoch(internal["finished_at"]) == created + 10


async def test_fake_clock_drives_cancel_delay_and_result_ttl(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    cancelled = await create_job(client, "cancellable", params={"duration": 100, "cancel_delay": 2})
    assert (await client.post(f"/v1/jobs/{cancelled}/cancel")).status_code == 202
    clock.advance(1.75)
    assert (await status(client, cancelled))["state"] == "cancelling"
    clock.advance(0.25)
    assert (await status(client, cancelled))["state"] == "cancelled"

    expiring = await create_job(client, "expiring_result", params={"duration": 0, "result_ttl": 5})
    assert (await client.get(f"/v1/jobs/{expiring}/result")).status_code == 200
    clock.advance(4.75)
    assert (await client.get(f"/v1/jobs/{expiring}/result")).status_code == 200
    clock.advance(0.25)
    expired = await client.get(f"/v1/jobs/{expiring}/result")
    assert expired.status_code == 410
    assert expired.json()["error"]["code"] == "result_expired"


async def test_an_unconfirmed_cancel_stays_cancelling_past_its_end_and_delay(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    params = {"duration": 5, "cancel_delay": 0}
    job_id = await create_job(client, "cancel_unconfirmed", params=params)
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code == 202
    clock.advance(3600)  # far past both the job's end and the cancel delay
    assert (await status(client, job_id))["state"] == "cancelling"


async def test_retry_after_date_is_read_off_the_injected_clock(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    params = {"limited_reads": 1, "retry_after": 3, "retry_after_date": True}
    job_id = await create_job(client, "rate_limited", params=params)
    response = await client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 429
    assert response.headers["retry-after"] == formatdate(math.ceil(clock.time()) + 3, usegmt=True)


# -- back-pressure bookkeeping ----------------------------------------------------


async def test_status_before_retry_after_is_a_violation(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    job_id = await create_job(client, "rate_limited", params={"retry_after": 2})
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 429
    # Straight back: early, and answered with a fresh Retry-After of 2 s.
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 429
    clock.advance(1.75)
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200  # still early
    clock.advance(0.25)
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
    counters = await stats(client)
    assert counters["retry_after_violations"] == {job_id: 2}
    assert counters["retry_after_violations_total"] == 2
    assert counters["poll_after_violations"] == {}
    reads = [entry for entry in await logged(client) if entry["kind"] == "status"]
    assert [entry["violations"] for entry in reads] == [[], ["retry_after"], ["retry_after"], []]


async def test_retry_after_binds_cancel_result_and_errors_too(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    params = {"limited_reads": 1, "retry_after": 5, "duration": 0}
    job_id = await create_job(client, "rate_limited", params=params)
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 429
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code == 409
    assert (await client.get(f"/v1/jobs/{job_id}/result")).status_code == 200
    assert (await client.get(f"/v1/jobs/{job_id}/errors")).status_code == 200
    clock.advance(5)
    assert (await client.get(f"/v1/jobs/{job_id}/result")).status_code == 200
    counters = await stats(client)
    assert counters["retry_after_violations"] == {job_id: 3}
    assert counters["retry_after_violations_total"] == 3


async def test_http_date_retry_after_lasts_until_the_date(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    next_quarter_past(clock)
    params = {"limited_reads": 1, "retry_after": 3, "retry_after_date": True}
    job_id = await create_job(client, "rate_limited", params=params)
    response = await client.get(f"/v1/jobs/{job_id}")
    retry_at = parsedate_to_datetime(response.headers["retry-after"]).timestamp()
    assert retry_at == clock.time() + 3.75  # rounded up to the whole second, then 3 s
    clock.advance(3.5)  # 3 s would satisfy "Retry-After: 3"; the date is later
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
    clock.advance(0.25)
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
    assert (await stats(client))["retry_after_violations"] == {job_id: 1}


async def test_create_retried_before_its_retry_after_is_a_violation(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    fields: dict[str, Any] = {"params": {"create_retry_after": 2}}
    first = await create(client, "create_5xx", "k-early", **fields)
    assert first.status_code == 503
    assert first.headers["retry-after"] == "2"
    assert (await create(client, "create_5xx", "k-early", **fields)).status_code == 202

    # Without a key, the client_reference names the create.
    by_ref = {**fields, "client_reference": "ref-patient"}
    assert (await create(client, "create_5xx", **by_ref)).status_code == 503
    clock.advance(2)
    assert (await create(client, "create_5xx", **by_ref)).status_code == 202

    # Without the param the 503 says nothing about when to come back.
    plain = await create(client, "create_5xx", "k-plain")
    assert plain.status_code == 503
    assert "retry-after" not in plain.headers
    assert (await create(client, "create_5xx", "k-plain")).status_code == 202

    counters = await stats(client)
    assert counters["retry_after_violations"] == {"k-early": 1}
    creates = [entry for entry in await logged(client) if entry["kind"] == "create"]
    assert [entry["violations"] for entry in creates] == [[], ["retry_after"], [], [], [], []]


async def test_create_retry_after_can_be_a_date_and_is_create_5xx_only(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    params = {"create_retry_after": 4, "retry_after_date": True}
    response = await create(client, "create_5xx", "k-dated", params=params)
    assert response.status_code == 503
    retry_at = parsedate_to_datetime(response.headers["retry-after"]).timestamp()
    assert retry_at == math.ceil(clock.time()) + 4
    refused = await create(client, "success", params={"create_retry_after": 4})
    assert refused.status_code == 422
    assert "create_5xx" in refused.json()["error"]["message"]


async def test_status_before_poll_after_is_counted_apart(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    job_id = await create_job(client, "slow")  # poll_after_seconds = 5
    assert (await status(client, job_id))["poll_after_seconds"] == 5
    await status(client, job_id)  # early
    clock.advance(5)
    await status(client, job_id)
    clock.advance(4.75)
    await status(client, job_id)  # early again
    counters = await stats(client)
    assert counters["poll_after_violations"] == {job_id: 2}
    assert counters["retry_after_violations"] == {}
    assert counters["retry_after_violations_total"] == 0
    reads = [entry["violations"] for entry in await logged(client) if entry["kind"] == "status"]
    assert reads == [[], ["poll_after"], [], ["poll_after"]]


async def test_requests_already_in_flight_are_not_held_to_a_later_answer(
    clock: FakeClock,
) -> None:
    # Server-side latency makes the two reads overlap: neither could have seen
    # the other's 429, so neither broke it; a read sent after them did.
    app = build_app(SimulatorSettings(status_latency=0.1), clock=clock)
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as http:
        job_id = await create_job(http, "rate_limited", params={"retry_after": 2})
        pair = await asyncio.gather(*(http.get(f"/v1/jobs/{job_id}") for _ in range(2)))
        assert [response.status_code for response in pair] == [429, 429]
        assert (await stats(http))["retry_after_violations"] == {}
        assert (await http.get(f"/v1/jobs/{job_id}")).status_code == 200
        assert (await stats(http))["retry_after_violations"] == {job_id: 1}


# -- the request log --------------------------------------------------------------


async def test_request_log_lists_every_public_call_in_arrival_order(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    start = clock.time()
    job_id = await create_job(
        client, key="k-log", client_reference="ref-log", params={"duration": 10}
    )
    calls = [
        ("GET", f"/v1/jobs/{job_id}"),
        ("POST", f"/v1/jobs/{job_id}/cancel"),
        ("GET", f"/v1/jobs/{job_id}/result"),
        ("GET", f"/v1/jobs/{job_id}/errors"),
        ("GET", "/v1/jobs?client_reference=ref-log"),
        ("GET", "/v1/jobs/job_missing"),
    ]
    for method, url in calls:
        clock.advance(0.25)
        await client.request(method, url)
    await client.get("/_sim/stats")  # admin calls are not provider traffic
    entries = await logged(client)
    assert [entry["seq"] for entry in entries] == list(range(1, 8))
    assert [entry["at"] for entry in entries] == [start + 0.25 * n for n in range(7)]
    assert [
        (
            entry["method"],
            entry["path"],
            entry["kind"],
            entry["job_id"],
            entry["idempotency_key"],
            entry["client_reference"],
            entry["status_code"],
            entry["answered"],
        )
        for entry in entries
    ] == [
        ("POST", "/v1/jobs", "create", job_id, "k-log", "ref-log", 202, True),
        ("GET", f"/v1/jobs/{job_id}", "status", job_id, None, None, 200, True),
        ("POST", f"/v1/jobs/{job_id}/cancel", "cancel", job_id, None, None, 202, True),
        ("GET", f"/v1/jobs/{job_id}/result", "result", job_id, None, None, 404, True),
        ("GET", f"/v1/jobs/{job_id}/errors", "errors", job_id, None, None, 404, True),
        ("GET", "/v1/jobs", "lookup", None, None, "ref-log", 200, True),
        ("GET", "/v1/jobs/job_missing", "status", "job_missing", None, None, 404, True),
    ]
    (await client.post("/_sim/reset")).raise_for_status()
    assert (await client.get("/_sim/requests")).json() == {"requests": [], "dropped": 0}
    await create_job(client)
    assert [entry["seq"] for entry in await logged(client)] == [1]


async def test_lost_create_is_logged_with_the_answer_it_never_gave(
    client: httpx.AsyncClient,
) -> None:
    body = {"script": "lost_create_response", "client_reference": "ref-unseen"}
    headers = {"Idempotency-Key": "k-unseen"}
    await lose_first_create(client, body, headers)
    [lost] = await logged(client)
    found = (await client.get("/v1/jobs", params={"client_reference": "ref-unseen"})).json()
    job_id = found["jobs"][0]["job_id"]
    assert (lost["kind"], lost["job_id"], lost["idempotency_key"]) == ("create", job_id, "k-unseen")
    assert (lost["status_code"], lost["answered"]) == (504, False)
    retry = await client.post("/v1/jobs", json=body, headers=headers)
    assert retry.json()["job_id"] == job_id
    answered = (await logged(client))[-1]
    assert (answered["job_id"], answered["status_code"], answered["answered"]) == (
        job_id,
        202,
        True,
    )


async def test_refused_and_malformed_creates_are_logged(client: httpx.AsyncClient) -> None:
    await client.post("/v1/jobs", content=b"{not json", headers={"Idempotency-Key": "k-bad"})
    await create(client, "reject", client_reference="ref-rejected")
    too_big = b'{"input": "' + b"x" * (1024 * 1024) + b'"}'
    oversized = await client.post("/v1/jobs", content=too_big)
    assert oversized.status_code == 413
    entries = await logged(client)
    assert [
        (entry["kind"], entry["idempotency_key"], entry["client_reference"], entry["status_code"])
        for entry in entries
    ] == [
        ("create", "k-bad", None, 422),
        ("create", None, "ref-rejected", 422),
        ("create", None, None, 413),
    ]
    assert all(entry["job_id"] is None for entry in entries)


def test_request_log_is_bounded_and_says_how_much_it_dropped() -> None:
    log = RequestLog(limit=3)
    for n in range(5):
        log.arrive(
            float(n),
            "GET",
            "/v1/jobs/job_x",
            RequestKind.STATUS,
            job_id="job_x",
            idempotency_key=None,
            client_reference=None,
        )
    snapshot = log.snapshot()
    assert [entry["seq"] for entry in snapshot["requests"]] == [3, 4, 5]
    assert snapshot["dropped"] == 2


# -- retry_spawns_duplicate ---------------------------------------------------------


async def test_retry_spawns_duplicate_answers_the_original_and_starts_a_twin(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    body = {
        "script": "retry_spawns_duplicate",
        "client_reference": "ref-twin",
        "params": {"duration": 2, "total": 3},
    }
    headers = {"Idempotency-Key": "k-twin"}
    await lose_first_create(client, body, headers)
    lookup = {"client_reference": "ref-twin"}
    [original] = (await client.get("/v1/jobs", params=lookup)).json()["jobs"]
    retry = await client.post("/v1/jobs", json=body, headers=headers)
    assert retry.status_code == 202
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["job_id"] == original["job_id"]
    again = await client.post("/v1/jobs", json=body, headers=headers)
    assert again.json()["job_id"] == original["job_id"]  # only the first retry spawns

    jobs = (await client.get("/v1/jobs", params=lookup)).json()["jobs"]
    twin = next(job["job_id"] for job in jobs if job["job_id"] != original["job_id"])
    assert len(jobs) == 2
    assert {job["client_reference"] for job in jobs} == {"ref-twin"}
    counters = await stats(client)
    assert counters["creates_per_token"] == {"k-twin": 2}
    assert counters["jobs_total"] == 2
    assert (await client.get(f"/_sim/jobs/{twin}")).json()["idempotency_key"] == "k-twin"

    clock.advance(2)
    for job_id in (original["job_id"], twin):
        assert (await status(client, job_id))["state"] == "succeeded"
        result = (await client.get(f"/v1/jobs/{job_id}/result")).json()
        assert [item["index"] for item in result["items"]] == [0, 1, 2]
    creates = [entry for entry in await logged(client) if entry["kind"] == "create"]
    assert [(e["job_id"], e["status_code"], e["answered"]) for e in creates] == [
        (original["job_id"], 504, False),
        (original["job_id"], 202, True),
        (original["job_id"], 202, True),
    ]


# -- partial_on_cancel ------------------------------------------------------------


async def test_partial_on_cancel_keeps_the_items_done_before_the_cancel(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    params = {"duration": 10, "total": 9, "cancel_delay": 1, "partial_on_cancel": True}
    job_id = await create_job(client, "cancellable", params=params)
    clock.advance(4)  # 1 s queued, then 3 of 9 running seconds: 3 items done
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code == 202
    clock.advance(1)
    done = await status(client, job_id)
    assert done["state"] == "cancelled"
    assert done["progress"] == {"completed": 3, "total": 9}
    assert done["counts"] == {"total": 9, "succeeded": 3, "failed": 0}
    assert done["result_url"] == f"/v1/jobs/{job_id}/result"
    assert done["errors_url"] is None
    result = await client.get(done["result_url"])
    assert result.status_code == 200
    assert [item["index"] for item in result.json()["items"]] == [0, 1, 2]
    assert result.json()["counts"] == done["counts"]
    digest = base64.b64encode(hashlib.sha256(result.content).digest()).decode()
    assert result.headers["content-digest"] == f"sha-256=:{digest}:"


async def test_partial_on_cancel_counts_failures_among_the_done_items(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    # total 10, failed 2: items 3 and 6 fail; cancelled after items 0..5.
    params = {
        "duration": 10,
        "total": 10,
        "failed": 2,
        "cancel_delay": 1,
        "partial_on_cancel": True,
    }
    job_id = await create_job(client, "partial", params=params)
    clock.advance(6.5)  # 5.5 of 9 running seconds: 6 items done
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code == 202
    clock.advance(1)
    done = await status(client, job_id)
    assert done["state"] == "cancelled"
    assert done["counts"] == {"total": 10, "succeeded": 5, "failed": 1}
    result = (await client.get(done["result_url"])).json()
    assert [item["index"] for item in result["items"]] == [0, 1, 2, 4, 5]
    errors = (await client.get(done["errors_url"])).json()
    assert [item["index"] for item in errors["items"]] == [3]


async def test_cancel_without_partial_on_cancel_keeps_nothing(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    job_id = await create_job(client, "cancellable", params={"duration": 10, "cancel_delay": 1})
    clock.advance(4)
    await client.post(f"/v1/jobs/{job_id}/cancel")
    clock.advance(1)
    done = await status(client, job_id)
    assert done["state"] == "cancelled"
    assert (done["result_url"], done["counts"]) == (None, None)
    assert (await client.get(f"/v1/jobs/{job_id}/result")).status_code == 404


# -- odd_facts ----------------------------------------------------------------------

HUGE = 2**70
# Per oddity: fields of the status body while running (4 of 4 items, 1 done
# by then), and at the end (succeeded). The rest of the body is as usual.
ODD_EXPECTATIONS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "completed_exceeds_total": (
        {"progress": {"completed": 11, "total": 4}, "counts": None},
        {
            "progress": {"completed": 11, "total": 4},
            "counts": {"total": 4, "succeeded": 11, "failed": 0},
        },
    ),
    "negative_counts": (
        {"progress": {"completed": -3, "total": -1}, "counts": None},
        {
            "progress": {"completed": -3, "total": -1},
            "counts": {"total": 4, "succeeded": 4, "failed": -2},
        },
    ),
    "huge_counts": (
        {"progress": {"completed": HUGE, "total": HUGE}},
        {
            "progress": {"completed": HUGE, "total": HUGE},
            "counts": {"total": HUGE, "succeeded": HUGE, "failed": 0},
        },
    ),
    "huge_poll_after": (
        {"poll_after_seconds": 10**12, "progress": {"completed": 1, "total": 4}},
        {"poll_after_seconds": None, "counts": {"total": 4, "succeeded": 4, "failed": 0}},
    ),
    "null_progress": (
        {"progress": None, "counts": None, "error": None},
        {"progress": None, "counts": None, "error": None},
    ),
    "nul_state": (
        {"state": "running\u0000\ud800"},
        {"state": "succeeded", "counts": {"total": 4, "succeeded": 4, "failed": 0}},
    ),
}


def strict_json(response: httpx.Response) -> dict[str, Any]:
    """Parse as a strict consumer would: ASCII bytes, no NaN or Infinity."""
    assert response.status_code == 200, response.text
    text = response.content.decode("ascii")

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-JSON constant {constant}")

    body: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return body


@pytest.mark.parametrize("odd", sorted(ODD_EXPECTATIONS))
async def test_odd_facts_report_odd_values_yet_succeed(
    client: httpx.AsyncClient, clock: FakeClock, odd: str
) -> None:
    running_fields, final_fields = ODD_EXPECTATIONS[odd]
    params = {"odd": odd, "duration": 10, "total": 4}
    job_id = await create_job(client, "odd_facts", params=params, client_reference=f"ref-{odd}")
    clock.advance(4.5)
    running = strict_json(await client.get(f"/v1/jobs/{job_id}"))
    assert {name: running[name] for name in running_fields} == running_fields
    assert running["result_url"] is None
    listed = strict_json(await client.get("/v1/jobs", params={"client_reference": f"ref-{odd}"}))
    assert listed["jobs"] == [running]
    clock.advance(5.5)
    final = strict_json(await client.get(f"/v1/jobs/{job_id}"))
    assert {name: final[name] for name in final_fields} == final_fields
    assert final["state"] == "succeeded"
    assert final["result_url"] == f"/v1/jobs/{job_id}/result"
    result = strict_json(await client.get(final["result_url"]))
    assert [item["index"] for item in result["items"]] == [0, 1, 2, 3]
    assert result["counts"] == {"total": 4, "succeeded": 4, "failed": 0}


async def test_nul_state_travels_as_json_escapes(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    job_id = await create_job(client, "odd_facts", params={"odd": "nul_state", "duration": 10})
    clock.advance(5)
    raw = (await client.get(f"/v1/jobs/{job_id}")).content
    assert b'"state":"running\\u0000\\ud800"' in raw
    assert b"\x00" not in raw


async def test_odd_param_is_validated(client: httpx.AsyncClient) -> None:
    unknown = await create(client, "odd_facts", params={"odd": "sideways"})
    assert unknown.status_code == 422
    assert "completed_exceeds_total" in unknown.json()["error"]["message"]
    assert (await create(client, "odd_facts", params={"odd": 7})).status_code == 422
    missing = await create(client, "odd_facts")
    assert missing.status_code == 422
    assert "'odd'" in missing.json()["error"]["message"]
    elsewhere = await create(client, "success", params={"odd": "huge_counts"})
    assert elsewhere.status_code == 422
    assert (await create(client, params={"partial_on_cancel": "yes"})).status_code == 422
    assert (await stats(client))["jobs_total"] == 0


async def test_a_read_before_the_accepting_202s_retry_after_is_a_violation(
    client: httpx.AsyncClient, clock: FakeClock
) -> None:
    """An Azure-style 202 says when to read the job: that binds its status reads
    (as a poll hint), and no other call."""
    fields: dict[str, Any] = {"params": {"accept_retry_after": 4, "duration": 1}}
    accepted = await create(client, "success", "k-azure", **fields)
    assert accepted.status_code == 202 and accepted.headers["retry-after"] == "4"
    job_id = accepted.json()["job_id"]
    await client.get(f"/v1/jobs/{job_id}/result")  # not a status read: not held back
    clock.advance(2)
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200  # two seconds early
    clock.advance(2)
    assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
    counters = await stats(client)
    assert counters["poll_after_violations"] == {job_id: 1}
    assert counters["retry_after_violations_total"] == 0
    plain = await create(client, "success", "k-plain")
    assert plain.status_code == 202 and "retry-after" not in plain.headers
