"""Hostile input to the agent API: every request the parser or PostgreSQL cannot
take is a 4xx problem naming the field, never a 500.

Each case here was a 500 (or a torn SSE stream) found by schemathesis or by
reading the parse sites of receiver/api/. The app is the real one on the real
database, as the receiver role; bodies are sent as raw bytes, because httpx's
own JSON encoder cannot even produce some of them (a lone surrogate).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.ledger import receipts
from shared.ledger.log import LogCorrupt
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.integration.test_api import JOB, PROBLEM, bearer

NUL = "\x00"
SURROGATE = "\ud800"
OP_ID = "op_01HZZZZZZZZZZZZZZZZZZZZZZZ"


class Client:
    """The API on the real app, with one agent's token."""

    def __init__(self, http: httpx.AsyncClient, ops: OperationsApi, token: str) -> None:
        self.http = http
        self.ops = ops
        self.auth = bearer(token)

    async def post_raw(self, path: str, body: bytes) -> httpx.Response:
        headers = {**self.auth, "Content-Type": "application/json"}
        return await self.http.post(path, content=body, headers=headers)

    async def post(self, path: str, document: Any) -> httpx.Response:
        """JSON with every non-ASCII character escaped, so lone surrogates survive."""
        return await self.post_raw(path, json.dumps(document).encode("ascii"))

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.auth, **kwargs.pop("headers", {})}
        return await self.http.get(path, headers=headers, **kwargs)

    async def submitted(self) -> str:
        response = await self.post("/v1/operations", JOB)
        assert response.status_code == 202, response.text
        op_id: str = response.json()["operation_id"]
        return op_id


@pytest_asyncio.fixture
async def api(db: Any, db_url: str) -> AsyncIterator[Client]:
    async with receiver_pool(db_url) as pool:
        ops = OperationsApi(sim_settings(), pool)
        transport = httpx.ASGITransport(app=Starlette(routes=ops.routes()))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            yield Client(http, ops, await make_token(db, "alice"))


def refused(response: httpx.Response, status: int, field: str) -> str:
    """A problem+json refusal whose detail names `field`; returns the detail."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"] == "urn:jobwarden:problem:invalid-request"
    detail: str = body["detail"]
    assert field in detail, detail
    assert NUL not in detail and SURROGATE not in detail
    return detail


# ------------------------------------------------------------------ query parameters


@pytest.mark.parametrize("value", ["¹", "\u0661", "²³", "9" * 5000, "-1", "1.0", " 1"])
async def test_page_size_that_is_not_an_ascii_integer_is_400(api: Client, value: str) -> None:
    response = await api.get("/v1/operations", params={"page_size": value})
    refused(response, 400, "page_size")


async def test_failed_items_page_size_in_superscript_is_400(api: Client) -> None:
    op_id = await api.submitted()
    response = await api.get(f"/v1/operations/{op_id}/failed-items", params={"page_size": "¹"})
    refused(response, 400, "page_size")


@pytest.mark.parametrize("value", ["\u0661", "nan", "inf", "3_0", "0x1e", "1e999", "0"])
async def test_max_wait_that_is_not_an_ascii_number_is_400(api: Client, value: str) -> None:
    op_id = await api.submitted()
    response = await api.get(f"/v1/operations/{op_id}:wait", params={"max_wait": value})
    refused(response, 400, "max_wait")


@pytest.mark.parametrize("value", ["¹", str(2**63), "9" * 5000])
async def test_events_after_that_is_not_a_sequence_number_is_400(api: Client, value: str) -> None:
    op_id = await api.submitted()
    response = await api.get(f"/v1/operations/{op_id}/events", params={"after": value})
    refused(response, 400, "after")


async def test_last_event_id_in_superscript_is_400(api: Client) -> None:
    op_id = await api.submitted()
    response = await api.get(
        f"/v1/operations/{op_id}/events", headers={"Last-Event-ID": "¹".encode("latin-1")}
    )
    refused(response, 400, "Last-Event-ID")


@pytest.mark.parametrize("value", [NUL, "sim" + NUL, "x" * 64])
async def test_unstorable_provider_filter_is_400(api: Client, value: str) -> None:
    response = await api.get("/v1/operations", params={"provider": value})
    refused(response, 400, "provider")


async def test_an_unknown_state_is_not_echoed_raw(api: Client) -> None:
    response = await api.get("/v1/operations", params={"state": "x" + NUL})
    refused(response, 400, "state")


@pytest.mark.parametrize("decoded", [NUL, "op_" + NUL, "x" * 5000])
async def test_page_token_decoding_to_unstorable_text_is_400(api: Client, decoded: str) -> None:
    token = base64.urlsafe_b64encode(decoded.encode()).decode().rstrip("=")
    response = await api.get("/v1/operations", params={"page_token": token})
    refused(response, 400, "page_token")


async def test_a_malformed_operation_id_is_404_without_echoing_it(api: Client) -> None:
    response = await api.get("/v1/operations/op_%00%FF")
    assert response.status_code == 404 and response.headers["content-type"] == PROBLEM
    assert "\\u0000" not in response.text and NUL not in response.text


# ------------------------------------------------------------------ JSON bodies


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
@pytest.mark.parametrize(
    ("field", "document"),
    [
        ("kind", lambda s: {**JOB, "kind": "export" + s}),
        ("client_reference", lambda s: {**JOB, "client_reference": "ref" + s}),
        ("approval_ref", lambda s: {**JOB, "approval_ref": s}),
        ("request.target", lambda s: {**JOB, "request": {"target": "/v1/x" + s}}),
        ("request.body.month", lambda s: {**JOB, "request": {"body": {"month": s}}}),
        ("request.body[1]", lambda s: {**JOB, "request": {"body": ["a", s]}}),
        ("request.body", lambda s: {**JOB, "request": {"body": {"k" + s: 1}}}),
    ],
)
async def test_unstorable_text_in_a_submit_is_422_naming_it(
    api: Client, field: str, document: Any, bad: str
) -> None:
    refused(await api.post("/v1/operations", document(bad)), 422, field)


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
async def test_unstorable_cancel_reason_is_422(api: Client, bad: str) -> None:
    op_id = await api.submitted()
    response = await api.post(f"/v1/operations/{op_id}:cancel", {"reason": "stop" + bad})
    refused(response, 422, "reason")


@pytest.mark.parametrize("bad", [NUL, SURROGATE])
async def test_unstorable_claim_consumer_is_422(api: Client, bad: str) -> None:
    op_id = await api.submitted()
    response = await api.post(f"/v1/operations/{op_id}:claim", {"consumer": "me" + bad})
    refused(response, 422, "consumer")


async def test_json_nested_fifty_thousand_deep_is_400(api: Client) -> None:
    deep = b'{"request": {"body": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}"
    refused(await api.post_raw("/v1/operations", deep), 400, "nest")


async def test_a_request_body_nested_past_the_limit_is_422(api: Client) -> None:
    body: Any = "leaf"
    for _ in range(500):
        body = [body]
    refused(await api.post("/v1/operations", {**JOB, "request": {"body": body}}), 422, "nest")


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
async def test_a_non_json_number_literal_is_400(api: Client, literal: bytes) -> None:
    raw = b'{"provider": "sim", "kind": "k", "request": {"body": {"n": ' + literal + b"}}}"
    refused(await api.post_raw("/v1/operations", raw), 400, "body")


async def test_a_number_too_large_for_a_double_is_422(api: Client) -> None:
    raw = b'{"provider": "sim", "kind": "k", "request": {"body": {"n": 1e400}}}'
    refused(await api.post_raw("/v1/operations", raw), 422, "request.body.n")


async def test_an_integer_of_five_thousand_digits_is_400(api: Client) -> None:
    raw = b'{"provider": "sim", "kind": "k", "request": {"body": ' + b"7" * 5000 + b"}}"
    refused(await api.post_raw("/v1/operations", raw), 400, "body")


async def test_a_deadline_too_large_for_a_float_is_422(api: Client) -> None:
    raw = b'{"provider": "sim", "kind": "k", "request": {}, "create_deadline_seconds": 1'
    raw += b"0" * 400 + b"}"
    refused(await api.post_raw("/v1/operations", raw), 422, "create_deadline_seconds")


async def test_keys_equal_after_unicode_normalization_are_422(api: Client) -> None:
    composed, decomposed = "\u00e9", "e\u0301"
    document = {**JOB, "request": {"body": {composed: 1, decomposed: 2}}}
    refused(await api.post("/v1/operations", document), 422, "request.body")


@pytest.mark.parametrize("declared", ["¹", "9" * 5000])
async def test_a_content_length_that_is_not_ascii_digits_is_400(api: Client, declared: str) -> None:
    """Sent straight to the ASGI app: no client library would send this header."""
    messages: list[MutableMapping[str, Any]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/operations",
        "raw_path": b"/v1/operations",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"authorization", api.auth["Authorization"].encode()),
            (b"content-type", b"application/json"),
            (b"content-length", declared.encode("utf-8")),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("api", 80),
    }
    body = json.dumps(JOB).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        messages.append(message)

    await Starlette(routes=api.ops.routes())(scope, receive, send)
    assert messages[0]["status"] == 400
    assert b"Content-Length" in b"".join(m.get("body", b"") for m in messages)


async def test_a_streamed_body_over_the_limit_is_413(api: Client) -> None:
    """No Content-Length (chunked): the limit holds while reading, not only up front."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"provider": "sim", "kind": "k", "request": {"body": "'
        for _ in range(40):
            yield b"x" * 32_768
        yield b'"}}'

    headers = {**api.auth, "Content-Type": "application/json"}
    response = await api.http.post("/v1/operations", content=chunks(), headers=headers)
    refused(response, 413, "body")


# ------------------------------------------------------------------ 503


async def test_every_503_carries_retry_after(api: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The receipt's log-inconsistent 503 had none; the clients' back-off reads it."""
    op_id = await api.submitted()

    async def corrupt(*_args: Any) -> Any:
        raise LogCorrupt("stored hash differs")

    monkeypatch.setattr(receipts, "build_receipt", corrupt)
    response = await api.get(f"/v1/operations/{op_id}/receipt")
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == PROBLEM
    assert int(response.headers["retry-after"]) > 0


# ------------------------------------------------------------------ the document


async def test_a_wrong_method_is_405_listing_every_allowed_one(api: Client) -> None:
    """Starlette answered `Allow: POST` in plain text for a path that also takes GET."""
    response = await api.http.request("PUT", "/v1/operations", headers=api.auth)
    assert response.status_code == 405 and response.headers["content-type"] == PROBLEM
    assert response.headers["allow"] == "GET, POST"


async def test_the_document_states_every_error_and_limit(api: Client) -> None:
    """Findings of issue 14: no Problem references, no operationIds, untyped parameters,
    the event stream's resume points and events undocumented."""
    document = (await api.get("/v1/openapi.json")).json()
    operations = [op for item in document["paths"].values() for op in item.values()]
    problems = set(document["components"]["responses"])
    for op in operations:
        assert op["operationId"] and op["tags"], op["summary"]
        errors = {code: r for code, r in op["responses"].items() if int(code) >= 400}
        assert {"401", "503"} <= set(errors), op["operationId"]
        for response in errors.values():
            assert response["$ref"].rsplit("/", 1)[1] in problems
    for response in document["components"]["responses"].values():
        schema = response["content"][PROBLEM]["schema"]
        assert schema == {"$ref": "#/components/schemas/Problem"}
    unavailable = document["components"]["responses"]["Unavailable"]
    assert "Retry-After" in unavailable["headers"]
    listing = {p["name"]: p for p in document["paths"]["/v1/operations"]["get"]["parameters"]}
    assert listing["page_size"]["schema"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 200,
        "default": 50,
    }
    assert listing["done"]["schema"]["type"] == "boolean"
    events = document["paths"]["/v1/operations/{operation_id}/events"]["get"]
    assert {p["name"] for p in events["parameters"]} >= {"after", "Last-Event-ID"}
    assert set(events["responses"]["200"]["x-events"]) == {"transition", "end", "error"}
    submit = document["components"]["schemas"]["SubmitRequest"]["properties"]
    assert submit["provider"]["enum"] == ["sim"]


async def test_a_sequence_beyond_32_bits_reads_no_transition(db: Any) -> None:
    """`after` is documented up to 2**63-1; history.seq is an integer: the query
    compares in 64 bits instead of failing inside an open event stream."""
    from shared.db.queries import q

    assert await db.fetch(q("api_history_after"), "op_x", 2**40) == []


@pytest.mark.parametrize("query", ["stat=running", "=null", "done=false&bogus=1"])
async def test_an_unknown_query_parameter_is_400_not_ignored(api: Client, query: str) -> None:
    """A misspelt filter would otherwise list everything as if it had been applied."""
    response = await api.get(f"/v1/operations?{query}")
    refused(response, 400, "unknown query parameter")
