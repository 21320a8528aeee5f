"""The agent API through its routes (httpx.ASGITransport), as jobwarden_receiver.

The API's pool runs as the receiver role, so these tests also prove the
grants of migration 006 are enough, and the setup (driving operations like the
reconciler would) uses the superuser connection `db`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest_asyncio
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.db.connect import create_pool
from shared.ledger import tokens
from shared.ledger.states import LocalState
from tests.integration.agent_support import (
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)
from tests.support import drive, submit

S = LocalState
PROBLEM = "application/problem+json"
JOB = {"provider": "sim", "kind": "export", "request": {"body": {"month": "2025-02"}}}


@dataclass
class Api:
    http: httpx.AsyncClient
    ops: OperationsApi
    alice: dict[str, str]
    bob: dict[str, str]
    operator: dict[str, str]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest_asyncio.fixture
async def api(db: Any, db_url: str) -> AsyncIterator[Api]:
    async with receiver_pool(db_url) as pool:
        ops = OperationsApi(sim_settings(), pool)
        transport = httpx.ASGITransport(app=Starlette(routes=ops.routes()))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            yield Api(
                http,
                ops,
                bearer(await make_token(db, "alice")),
                bearer(await make_token(db, "bob")),
                bearer(await make_token(db, "ops", "operator")),
            )


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for an explicit condition, bounded (no blind sleeps)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


async def waiting_for(api: Api, request: Awaitable[httpx.Response]) -> asyncio.Task[Any]:
    """Start a long-poll/stream and return once it is subscribed to transitions."""
    task = asyncio.ensure_future(request)
    await until(lambda: api.ops.hub.waiters == 1 and api.ops.hub.listening)
    return task


async def submitted(api: Api, **extra: Any) -> dict[str, Any]:
    response = await api.http.post("/v1/operations", json={**JOB, **extra}, headers=api.alice)
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


def assert_problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["type"] == f"urn:jobwarden:problem:{kind}"
    assert body["status"] == status and body["title"] and body["detail"]
    return body


# ------------------------------------------------------------------ auth


async def test_no_token_is_401_problem(api: Api) -> None:
    response = await api.http.get("/v1/operations")
    assert_problem(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_wrong_token_is_401(api: Api) -> None:
    response = await api.http.get("/v1/operations", headers=bearer("jw_not-a-real-token"))
    body = assert_problem(response, 401, "unauthenticated")
    assert "jw_not-a-real-token" not in response.text and "unknown or revoked" in body["detail"]


async def test_non_bearer_scheme_is_401(api: Api) -> None:
    response = await api.http.get("/v1/operations", headers={"Authorization": "Basic YTpi"})
    assert_problem(response, 401, "unauthenticated")


async def test_revoked_token_is_401(api: Api, db: Any) -> None:
    token = await make_token(db, "carol")
    assert (await api.http.get("/v1/operations", headers=bearer(token))).status_code == 200
    token_id = await db.fetchval("SELECT token_id FROM api_tokens WHERE caller = 'carol'")
    await tokens.revoke_token(db, token_id)
    response = await api.http.get("/v1/operations", headers=bearer(token))
    assert_problem(response, 401, "unauthenticated")


async def test_tokens_are_stored_hashed_and_used_times_recorded(api: Api, db: Any) -> None:
    await api.http.get("/v1/operations", headers=api.alice)
    row = await db.fetchrow("SELECT * FROM api_tokens WHERE caller = 'alice'")
    secret = api.alice["Authorization"].removeprefix("Bearer ")
    assert secret not in json.dumps(dict(row), default=str)
    assert row["last_used_at"] is not None


# ------------------------------------------------------------------ submit


async def test_submit_is_202_and_says_not_complete(api: Api) -> None:
    response = await api.http.post("/v1/operations", json=JOB, headers=api.alice)
    assert response.status_code == 202
    body = response.json()
    op_id = body["operation_id"]
    assert response.headers["location"] == f"/v1/operations/{op_id}"
    assert body["name"] == f"operations/{op_id}" and body["done"] is False
    assert body["message"].startswith("STARTED and NOT complete")
    assert "Do not report success" in body["message"]
    meta = body["metadata"]
    assert meta["state"] == "create_pending" and meta["requested_by"] == "agent:alice"
    assert meta["message"] == body["message"] and meta["poll_after_seconds"] >= 1
    assert "response" not in body and "error" not in body
    assert body["replayed"] is False


async def test_operator_token_submits_as_operator(api: Api) -> None:
    response = await api.http.post("/v1/operations", json=JOB, headers=api.operator)
    assert response.json()["metadata"]["requested_by"] == "operator:ops"


async def test_resubmitting_the_same_request_returns_the_same_operation(api: Api) -> None:
    first = await submitted(api, client_reference="feb-export")
    again = await submitted(api, client_reference="feb-export")
    assert again["operation_id"] == first["operation_id"]
    assert again["replayed"] is True


async def test_resubmitting_a_changed_request_is_409(api: Api) -> None:
    await submitted(api, client_reference="feb-export")
    changed = {**JOB, "client_reference": "feb-export", "request": {"body": {"month": "03"}}}
    response = await api.http.post("/v1/operations", json=changed, headers=api.alice)
    body = assert_problem(response, 409, "request-mismatch")
    assert "body.month" in body["detail"] and "new client_reference" in body["detail"]


async def test_submit_to_an_unconfigured_provider_is_422(api: Api) -> None:
    response = await api.http.post(
        "/v1/operations", json={**JOB, "provider": "acme"}, headers=api.alice
    )
    body = assert_problem(response, 422, "invalid-request")
    assert "'acme' is not configured" in body["detail"] and "sim" in body["detail"]


async def test_submit_with_an_unknown_field_is_422(api: Api) -> None:
    response = await api.http.post(
        "/v1/operations", json={**JOB, "client_ref": "x"}, headers=api.alice
    )
    body = assert_problem(response, 422, "invalid-request")
    assert "client_ref" in body["detail"]


async def test_submit_without_kind_is_422(api: Api) -> None:
    job = {k: v for k, v in JOB.items() if k != "kind"}
    response = await api.http.post("/v1/operations", json=job, headers=api.alice)
    assert "kind is required" in assert_problem(response, 422, "invalid-request")["detail"]


async def test_submit_with_bad_json_is_400(api: Api) -> None:
    response = await api.http.post("/v1/operations", content=b"{nope", headers=api.alice)
    assert_problem(response, 400, "invalid-request")


async def test_submit_larger_than_the_limit_is_413(api: Api) -> None:
    big = {**JOB, "request": {"body": {"blob": "x" * (1024 * 1024)}}}
    response = await api.http.post("/v1/operations", json=big, headers=api.alice)
    assert_problem(response, 413, "invalid-request")


# ------------------------------------------------------------------ get / list


async def test_get_returns_the_operation(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.get(f"/v1/operations/{op_id}", headers=api.alice)
    assert response.status_code == 200
    assert response.json()["metadata"]["state"] == "create_pending"


async def test_another_agents_operation_is_404(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.get(f"/v1/operations/{op_id}", headers=api.bob)
    assert_problem(response, 404, "not-found")
    assert (await api.http.get(f"/v1/operations/{op_id}", headers=api.operator)).is_success


async def test_a_malformed_id_is_404(api: Api) -> None:
    response = await api.http.get("/v1/operations/op_nope", headers=api.alice)
    assert_problem(response, 404, "not-found")


async def test_success_has_a_response_with_counts(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    await finish_with_result(db, op_id, total=500, failed_items=[("7", "bad", "row 7")])
    body = (await api.http.get(f"/v1/operations/{op_id}", headers=api.alice)).json()
    assert body["done"] is True and "error" not in body
    assert body["response"]["outcome"] == "completed_with_errors"
    assert body["response"]["summary"] == {"total": 500, "succeeded": 499, "failed": 1}
    assert body["response"]["errors_ref"] == f"/v1/operations/{op_id}/failed-items"
    assert body["message"].startswith("Finished: 1 of 500 items failed")


async def test_list_shows_only_the_callers_operations(api: Api, db: Any) -> None:
    mine = (await submitted(api))["operation_id"]
    await submit(db, who="agent:bob")
    listed = (await api.http.get("/v1/operations", headers=api.alice)).json()
    assert [o["operation_id"] for o in listed["operations"]] == [mine]
    everyone = (await api.http.get("/v1/operations", headers=api.operator)).json()
    assert len(everyone["operations"]) == 2
    own = (await api.http.get("/v1/operations?mine=true", headers=api.operator)).json()
    assert own["operations"] == []


async def test_list_filters_by_state_provider_and_done(api: Api, db: Any) -> None:
    running = (await submitted(api))["operation_id"]
    finished = (await submitted(api))["operation_id"]
    await finish_with_result(db, finished, total=1)

    async def ids(query: str) -> list[str]:
        body = (await api.http.get(f"/v1/operations?{query}", headers=api.alice)).json()
        return [o["operation_id"] for o in body["operations"]]

    assert await ids("state=create_pending") == [running]
    assert await ids("state=succeeded,create_pending") == [finished, running]
    assert await ids("done=true") == [finished]
    assert await ids("done=false") == [running]
    assert await ids("final=false") == [running]
    assert await ids("provider=other") == []
    response = await api.http.get("/v1/operations?state=bogus", headers=api.alice)
    assert_problem(response, 400, "invalid-request")


async def test_list_pages_newest_first(api: Api) -> None:
    ids = [(await submitted(api))["operation_id"] for _ in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page = (
            await api.http.get(f"/v1/operations?page_size=2&page_token={token}", headers=api.alice)
        ).json()
        seen += [o["operation_id"] for o in page["operations"]]
        token = page["next_page_token"]
        if not token:
            break
    assert seen == list(reversed(ids))


# ------------------------------------------------------------------ wait


async def test_wait_returns_as_soon_as_the_operation_is_done(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    started = time.monotonic()
    task = await waiting_for(
        api, api.http.get(f"/v1/operations/{op_id}:wait?max_wait=30", headers=api.alice)
    )
    await drive(db, op_id, S.OBSERVING)
    assert not task.done()  # a transition that is not the end does not answer
    await finish_with_result(db, op_id, total=3)
    body = (await task).json()
    assert body["done"] is True and body["response"]["outcome"] == "succeeded"
    assert time.monotonic() - started < 10


async def test_wait_answers_done_false_at_max_wait(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    started = time.monotonic()
    response = await api.http.get(f"/v1/operations/{op_id}:wait?max_wait=0.3", headers=api.alice)
    elapsed = time.monotonic() - started
    body = response.json()
    assert response.status_code == 200 and body["done"] is False
    assert body["message"].startswith("STARTED and NOT complete")
    assert 0.3 <= elapsed < 5
    assert api.ops.hub.waiters == 0 and not api.ops.hub.listening  # connection handed back


async def test_wait_on_a_done_operation_answers_at_once(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    await finish_with_result(db, op_id, total=1)
    started = time.monotonic()
    response = await api.http.get(f"/v1/operations/{op_id}:wait?max_wait=60", headers=api.alice)
    assert response.json()["done"] is True and time.monotonic() - started < 2


async def test_wait_beyond_five_minutes_is_refused(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.get(f"/v1/operations/{op_id}:wait?max_wait=301", headers=api.alice)
    assert_problem(response, 400, "invalid-request")


async def test_many_waiters_share_one_listener(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    url = f"/v1/operations/{op_id}:wait?max_wait=30"
    tasks = [asyncio.ensure_future(api.http.get(url, headers=api.alice)) for _ in range(5)]
    await until(lambda: api.ops.hub.waiters == 5 and api.ops.hub.listening)
    listeners = await db.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE 'LISTEN%'"
    )
    assert listeners == 1
    await finish_with_result(db, op_id, total=1)
    assert all(r.json()["done"] for r in await asyncio.gather(*tasks))


# ------------------------------------------------------------------ events


def parse_sse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        if "event" in fields:
            fields["data"] = json.loads(fields["data"])
            events.append(fields)
    return events


async def test_events_deliver_every_transition_in_order(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    task = await waiting_for(api, api.http.get(f"/v1/operations/{op_id}/events", headers=api.alice))
    await drive(db, op_id, S.OBSERVING)
    await finish_with_result(db, op_id, total=2)
    response = await task
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    history = await db.fetch(
        "SELECT seq, to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
    )
    transitions = [e for e in events if e["event"] == "transition"]
    assert [(int(e["id"]), e["data"]["to_state"]) for e in transitions] == [
        tuple(h) for h in history
    ]
    assert [e["data"]["seq"] for e in transitions] == list(range(1, len(history) + 1))
    assert events[-1]["event"] == "end" and events[-1]["data"]["done"] is True


async def test_events_resume_after_last_event_id(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    await finish_with_result(db, op_id, total=2)
    response = await api.http.get(
        f"/v1/operations/{op_id}/events", headers={**api.alice, "Last-Event-ID": "2"}
    )
    seqs = [int(e["id"]) for e in parse_sse(response.text) if e["event"] == "transition"]
    last = await db.fetchval("SELECT history_seq FROM operations WHERE operation_id = $1", op_id)
    assert seqs == list(range(3, last + 1))


async def test_events_of_another_agents_operation_are_404(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.get(f"/v1/operations/{op_id}/events", headers=api.bob)
    assert_problem(response, 404, "not-found")


# ------------------------------------------------------------------ cancel


async def test_cancel_answers_cancel_requested_never_cancelled(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    await drive(db, op_id, S.OBSERVING)
    response = await api.http.post(
        f"/v1/operations/{op_id}:cancel", json={"reason": "wrong month"}, headers=api.alice
    )
    assert response.status_code == 202
    body = response.json()
    assert body["metadata"]["state"] == "cancel_requested" and body["done"] is False
    assert body["cancel"]["state"] == "cancel_requested"
    assert "NOT yet confirmed" in body["cancel"]["message"]
    assert "cancelled" not in json.dumps(body["cancel"]).replace("cancelled.", "")
    row = await db.fetchrow(
        "SELECT cancel_requested_by, cancel_reason, next_poll_at <= now() AS due"
        " FROM operations WHERE operation_id = $1",
        op_id,
    )
    assert tuple(row) == ("agent:alice", "wrong month", True)


async def test_a_second_cancel_of_an_unconfirmed_cancellation_says_it_was_not_recorded(
    api: Api, db: Any
) -> None:
    """Alice's cancel went unconfirmed (cancellation_unconfirmed, waiting for an operator);
    the operator then asks through the API to cancel it too. Nothing is recorded (the
    intent waiting for the operator stands, as `ledger.cancel_intent` keeps it), yet
    the answer said "Cancellation intent recorded": the CLI and the console say
    the earlier intent stands instead, and so must the API agents read."""
    op_id = (await submitted(api))["operation_id"]
    await drive(db, op_id, S.OBSERVING)
    first = await api.http.post(
        f"/v1/operations/{op_id}:cancel", json={"reason": "wrong month"}, headers=api.alice
    )
    assert first.status_code == 202
    await drive(db, op_id, S.CANCELLATION_UNCONFIRMED)
    again = await api.http.post(
        f"/v1/operations/{op_id}:cancel", json={"reason": "stop it now"}, headers=api.operator
    )
    assert again.status_code == 200
    said = again.json()["cancel"]
    assert said["state"] == "cancellation_unconfirmed"
    assert said["recorded"] is False
    assert said["message"].startswith("NOT recorded: an earlier cancellation intent (recorded at")
    assert "stands" in said["message"] and "nothing was done" in said["message"]
    row = await db.fetchrow(
        "SELECT cancel_requested_by, cancel_reason FROM operations WHERE operation_id = $1",
        op_id,
    )
    assert tuple(row) == ("agent:alice", "wrong month")


async def test_a_first_cancel_of_an_escalated_operation_says_it_was_recorded(
    api: Api, db: Any
) -> None:
    op_id = (await submitted(api))["operation_id"]
    await drive(db, op_id, S.NEEDS_ATTENTION)
    response = await api.http.post(
        f"/v1/operations/{op_id}:cancel", json={"reason": "wrong month"}, headers=api.alice
    )
    said = response.json()["cancel"]
    assert response.status_code == 200 and said["state"] == "needs_attention"
    assert said["recorded"] is True
    assert said["message"].startswith("Cancellation intent recorded, NOT acted on yet")


async def test_cancel_before_the_create_was_sent_abandons(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.post(
        f"/v1/operations/{op_id}:cancel", json={"reason": "typo"}, headers=api.alice
    )
    body = response.json()
    assert response.status_code == 200 and body["cancel"]["state"] == "abandoned"
    assert "nothing was started" in body["cancel"]["message"]


async def test_cancel_after_success_changes_nothing(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    await finish_with_result(db, op_id, total=1)
    response = await api.http.post(
        f"/v1/operations/{op_id}:cancel", json={"reason": "late"}, headers=api.alice
    )
    body = response.json()
    assert response.status_code == 200 and body["metadata"]["state"] == "succeeded"
    assert body["cancel"]["message"].startswith("Nothing to cancel")


async def test_cancel_without_a_reason_is_422(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.post(f"/v1/operations/{op_id}:cancel", json={}, headers=api.alice)
    assert_problem(response, 422, "invalid-request")


# ------------------------------------------------------------------ claim


async def test_claim_succeeds_exactly_once_under_concurrency(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    await finish_with_result(db, op_id, total=1)
    url = f"/v1/operations/{op_id}:claim"
    responses = await asyncio.gather(
        *(
            api.http.post(url, json={"consumer": "send-report"}, headers=api.alice)
            for _ in range(20)
        )
    )
    claims = [r.json() for r in responses]
    assert sum(c["claimed"] for c in claims) == 1
    assert {c["reason"] for c in claims if not c["claimed"]} == {"already_claimed"}
    other = await api.http.post(url, json={"consumer": "archive"}, headers=api.alice)
    assert other.json()["claimed"] is True


async def test_claim_before_success_is_refused(api: Api) -> None:
    op_id = (await submitted(api))["operation_id"]
    response = await api.http.post(
        f"/v1/operations/{op_id}:claim", json={"consumer": "next"}, headers=api.alice
    )
    body = response.json()
    assert body["claimed"] is False and body["reason"] == "not_succeeded"


# ------------------------------------------------------------------ failed items, openapi


async def test_failed_items_are_paginated(api: Api, db: Any) -> None:
    op_id = (await submitted(api))["operation_id"]
    failures = [(f"row-{i:03d}", "invalid", f"row {i}") for i in range(140)]
    await finish_with_result(db, op_id, total=20000, failed_items=failures)
    keys: list[str] = []
    token = ""
    pages = 0
    while True:
        page = (
            await api.http.get(
                f"/v1/operations/{op_id}/failed-items?page_size=50&page_token={token}",
                headers=api.alice,
            )
        ).json()
        pages += 1
        assert page["items_failed"] == 140
        keys += [item["item_key"] for item in page["items"]]
        token = page["next_page_token"]
        if not token:
            break
    assert pages == 3 and keys == [f[0] for f in failures]


async def test_openapi_is_served(api: Api) -> None:
    response = await api.http.get("/v1/openapi.json")
    document = response.json()
    assert response.status_code == 200 and document["openapi"] == "3.1.0"
    assert "/v1/operations/{operation_id}:wait" in document["paths"]
    assert "NOT complete" in document["paths"]["/v1/operations"]["post"]["summary"]


async def test_database_down_is_503_problem(api: Api) -> None:
    dead = await create_pool("postgresql://jw@127.0.0.1:1/none", min_size=0, max_size=1)
    try:
        ops = OperationsApi(sim_settings(), dead)
        transport = httpx.ASGITransport(app=Starlette(routes=ops.routes()))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            response = await http.get("/v1/operations", headers=api.alice)
    finally:
        await dead.close()
    assert_problem(response, 503, "unavailable")
    assert response.headers["retry-after"] == "2"
