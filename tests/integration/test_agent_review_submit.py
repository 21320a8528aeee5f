"""What a submit may say, and what a replay must match (a reviewer's findings).

- request.method / request.target were stored and fingerprinted but never
  sent (the create call is always the provider's configured one): anything
  else is now a 422 naming the field; absent or equal is still accepted.
- a body the provider's create cannot carry (a number, a string, an array where
  our token must be written) was accepted with 202 and ended in
  needs_attention, never sent; 1e-400 was stored as 0.0: both are 422 now.
- a replay under the same client_reference with another kind, approval_ref or
  explicitly given deadline was answered "replayed" while keeping the old
  intent: now a 409 naming the field.
- a key repeated in one JSON object was silently last-wins: now a 422.

A real uvicorn on loopback and a real PostgreSQL, as the receiver role.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.serve import serve_app
from tests.integration.agent_support import make_token, receiver_pool, sim_settings

PROBLEM = "application/problem+json"
JOB: dict[str, Any] = {"provider": "sim", "kind": "export", "request": {"body": {"m": "2025-02"}}}


@contextlib.asynccontextmanager
async def client(db: Any, db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    token = await make_token(db, "bot")
    async with receiver_pool(db_url) as pool:
        app = Starlette(routes=OperationsApi(sim_settings(), pool).routes())
        async with (
            serve_app(app) as url,
            httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http,
        ):
            yield http


async def post_raw(http: httpx.AsyncClient, raw: str) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return await http.post("/v1/operations", content=raw.encode(), headers=headers)


def problem(response: httpx.Response, status: int, names: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert names in body["detail"], body["detail"]
    return body


async def count_operations(db: Any) -> int:
    return int(await db.fetchval("SELECT count(*) FROM operations"))


# ------------------------------------------------------------------ method and target


@pytest.mark.parametrize(
    ("field", "request_"),
    [
        ("request.method", {"method": "DELETE", "body": {}}),
        ("request.method", {"method": "get", "body": {}}),
        ("request.target", {"target": "http://169.254.169.254/latest/meta-data", "body": {}}),
        ("request.target", {"target": "//evil.example/x", "body": {}}),
        ("request.target", {"target": "/a\r\nX-Injected: 1", "body": {}}),
        ("request.target", {"target": "/v1/jobs/../admin", "body": {}}),
    ],
)
async def test_a_method_or_target_other_than_the_create_call_is_422(
    db: Any, db_url: str, field: str, request_: dict[str, Any]
) -> None:
    async with client(db, db_url) as http:
        response = await http.post("/v1/operations", json={**JOB, "request": request_})
    body = problem(response, 422, field)
    assert "X-Injected" not in body["detail"] and "evil" not in body["detail"]
    assert await count_operations(db) == 0


@pytest.mark.parametrize(
    "request_",
    [
        {"body": {"m": 1}},
        {"method": "POST", "target": "/v1/jobs", "body": {"m": 1}},
        {"method": "post", "body": {"m": 1}},
    ],
)
async def test_a_method_and_target_absent_or_equal_to_the_create_call_are_accepted(
    db: Any, db_url: str, request_: dict[str, Any]
) -> None:
    async with client(db, db_url) as http:
        response = await http.post("/v1/operations", json={**JOB, "request": request_})
    assert response.status_code == 202, response.text
    stored = await db.fetchval("SELECT request FROM operations")
    assert (stored["method"], stored["target"]) == ("POST", "/v1/jobs")


async def test_the_served_document_states_the_create_call_and_an_object_body(
    db: Any, db_url: str
) -> None:
    async with client(db, db_url) as http:
        document = (await http.get("/v1/openapi.json")).json()
    fields = document["components"]["schemas"]["ProviderRequest"]["properties"]
    assert {"type": "string", "enum": ["/v1/jobs"]} in fields["target"]["anyOf"]
    assert any(s.get("type") == "object" for s in fields["body"]["anyOf"])
    assert not any(s.get("type") == "array" for s in fields["body"]["anyOf"])


# ------------------------------------------------------------------ bodies the provider cannot take


@pytest.mark.parametrize("body", ["1", '"text"', "[1, 2]", "true", "1e-400"])
async def test_a_body_the_provider_cannot_send_is_422(db: Any, db_url: str, body: str) -> None:
    raw = '{"provider": "sim", "kind": "export", "request": {"body": ' + body + "}}"
    async with client(db, db_url) as http:
        problem(await post_raw(http, raw), 422, "body")
    assert await count_operations(db) == 0


async def test_a_number_that_underflows_to_zero_is_422_anywhere(db: Any, db_url: str) -> None:
    raw = '{"provider": "sim", "kind": "export", "request": {"body": {"x": [1e-400]}}}'
    async with client(db, db_url) as http:
        problem(await post_raw(http, raw), 422, "too small")
        zero = '{"provider": "sim", "kind": "export", "request": {"body": {"x": 0e-400}}}'
        assert (await post_raw(http, zero)).status_code == 202


# ------------------------------------------------------------------ replays


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"kind": "import"}, "kind"),
        ({"approval_ref": "CHG-2"}, "approval_ref"),
        ({"result_deadline_seconds": 5}, "result_deadline_seconds"),
        ({"create_deadline_seconds": 7}, "create_deadline_seconds"),
    ],
)
async def test_a_replay_with_another_intent_is_409_naming_it(
    db: Any, db_url: str, changed: dict[str, Any], field: str
) -> None:
    first = {**JOB, "client_reference": "ref1", "approval_ref": "CHG-1"}
    async with client(db, db_url) as http:
        created = await http.post("/v1/operations", json=first)
        assert created.status_code == 202, created.text
        replay = await http.post("/v1/operations", json={**first, **changed})
    problem(replay, 409, field)
    row = await db.fetchrow("SELECT kind, approval_ref FROM operations")
    assert (row["kind"], row["approval_ref"]) == ("export", "CHG-1")


async def test_a_replay_of_the_same_intent_is_still_the_same_operation(
    db: Any, db_url: str
) -> None:
    first = {
        **JOB,
        "client_reference": "ref1",
        "approval_ref": "CHG-1",
        "result_deadline_seconds": 600,
        "create_deadline_seconds": 90.5,
    }
    async with client(db, db_url) as http:
        created = (await http.post("/v1/operations", json=first)).json()
        again = await http.post("/v1/operations", json=first)
        # deadlines left out of the replay are not compared (the default may have changed)
        bare = {k: v for k, v in first.items() if not k.endswith("_seconds")}
        without_deadlines = await http.post("/v1/operations", json=bare)
    for response in (again, without_deadlines):
        assert response.status_code == 202, response.text
        assert response.json()["replayed"] is True
        assert response.json()["operation_id"] == created["operation_id"]


# ------------------------------------------------------------------ duplicate keys


@pytest.mark.parametrize(
    "raw",
    [
        '{"provider": "sim", "kind": "export", "kind": "import", "request": {"body": {}}}',
        '{"provider": "sim", "kind": "export", "request": {"body": {"a": 1, "a": 2}}}',
        '{"provider": "sim", "kind": "export", "request": {"body": {"x": [{"b": 1, "b": 1}]}}}',
    ],
)
async def test_a_key_repeated_in_one_object_is_422(db: Any, db_url: str, raw: str) -> None:
    json.loads(raw)  # Python itself takes it (last wins): the API must not
    async with client(db, db_url) as http:
        problem(await post_raw(http, raw), 422, "twice")
    assert await count_operations(db) == 0
