"""Contract: the openai_batch preset against OpenAI's published OpenAPI document.

Document: openai/openai-openapi, openapi.json at commit f85dbe22 (2026-08-21),
info.version 2.3.0; the result-line schema (BatchRequestOutput) from openapi.yaml
at commit 498c71dd (2025-04-29), info.version 2.3.0. The excerpts, with their
JSON pointers: tests/contract/openapi_openai_batch.py.

Requests the preset builds must call an operation of the document with a body
its request schema accepts. Responses built from the document's schemas, at
every edge (see tests/contract/schema_cases.py), must parse into a usable fact
(tests/contract/support.py says what that means), and each documented status
must map to the state the preset's header promises.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import (
    Counts,
    HttpResponse,
    RequestBuildError,
    StatusFact,
    UnsafeJobIdError,
    WebhookParseError,
    adapter_for,
    validate_result,
)
from tests.contract import openapi_openai_batch as doc
from tests.contract.schema_cases import Case, edge_cases, validator
from tests.contract.support import (
    WEBHOOK_SECRET,
    check_cancel,
    check_create,
    check_lookup,
    check_result,
    check_status,
    check_webhook,
    jsonl,
    load_preset,
    operation_of,
    query_of,
    response,
)

pytestmark = pytest.mark.timeout(30)

ENV = {"OPENAI_API_KEY": "sk-contract", "OPENAI_WEBHOOK_SECRET": WEBHOOK_SECRET}
DESC = load_preset("openai_batch", ENV)
ADAPTER = adapter_for(DESC)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
TOKEN = "idem_0123456789abcdef0123456789abcdef"
OPERATION = "op_01JCONTRACT0000000000000000"
REFERENCE_KEY = "jobwarden_operation_id"

CREATE_BODY = {
    "input_file_id": "file-abc123",
    "endpoint": "/v1/chat/completions",
    "completion_window": "24h",
    "metadata": {"customer_id": "user_123456789"},
    "output_expires_after": {"anchor": "created_at", "seconds": 86400},
}
# The document's example minus its nulls: a body its schema accepts, the edges' starting point.
BATCH = {key: value for key, value in doc.BATCH_EXAMPLE.items() if value is not None}
BATCH_CASES = [
    *edge_cases(doc.BATCH, BATCH),
    Case("the document's example as printed (nulls)", doc.BATCH_EXAMPLE, False),
]
STATES = dict(DESC.status.state_map)


def case_ids(case: Case) -> str:
    return case.label


# --------------------------------------------------------------------- requests


def test_create_calls_create_batch_with_a_body_the_document_accepts() -> None:
    request = ADAPTER.build_create(
        body=CREATE_BODY, idempotency_token=TOKEN, client_reference=OPERATION
    )
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "createBatch"
    validator(doc.CREATE_BATCH_REQUEST).validate(request.json)
    assert request.json["metadata"][REFERENCE_KEY] == OPERATION
    assert request.headers["Authorization"] == "Bearer sk-contract"  # ApiKeyAuth: http bearer


CREATE_CASES = [c for c in edge_cases(doc.CREATE_BATCH_REQUEST, CREATE_BODY) if c.documented]


@pytest.mark.parametrize("case", CREATE_CASES, ids=case_ids)
def test_every_documented_create_body_stays_documented(case: Case) -> None:
    request = ADAPTER.build_create(
        body=case.body, idempotency_token=TOKEN, client_reference=OPERATION
    )
    validator(doc.CREATE_BATCH_REQUEST).validate(request.json)
    metadata = request.json["metadata"]
    limits = doc.METADATA_LIMITS
    assert len(metadata) <= limits["pairs"]
    assert len(REFERENCE_KEY) <= limits["key_length"]
    assert len(metadata[REFERENCE_KEY]) <= limits["value_length"]


def test_status_cancel_and_result_reads_call_documented_operations() -> None:
    assert operation_of(ADAPTER.build_status("batch_abc123"), doc.SERVER, doc.OPERATIONS) == (
        "retrieveBatch"
    )
    assert operation_of(ADAPTER.build_cancel("batch_abc123"), doc.SERVER, doc.OPERATIONS) == (
        "cancelBatch"
    )
    status = StatusFact(200, result_file_ids=("file-cvaTdG", "file-HOWS94"))
    for request in ADAPTER.build_result_requests("batch_abc123", status):
        assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "downloadFile"


@pytest.mark.parametrize("page_token", [None, "batch_abc456"])
def test_lookup_calls_list_batches_with_documented_parameters(page_token: str | None) -> None:
    request = ADAPTER.build_lookup(OPERATION, TOKEN, page_token)
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "listBatches"
    query = query_of(request)
    assert set(query) <= set(doc.LIST_PARAMETERS)
    low, high = doc.LIST_LIMIT_RANGE
    (limit,) = query["limit"]
    assert low <= int(limit) <= high
    assert query.get("after") == ([page_token] if page_token else None)


# --------------------------------------------------------------------- responses


@pytest.mark.parametrize("case", [c for c in BATCH_CASES if c.documented], ids=case_ids)
def test_generated_batches_are_documented(case: Case) -> None:
    validator(doc.BATCH).validate(case.body)


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_status_read_of_any_batch_is_a_usable_fact(case: Case) -> None:
    fact = check_status(ADAPTER.parse_status(response(200, case.body), NOW))
    raw = case.body.get("status")
    if not isinstance(raw, str):
        assert fact.remote_state is None and fact.problem
    elif raw not in STATES:
        assert fact.remote_state is None and fact.raw_state == raw  # undecided, never guessed
    elif raw in ("completed", "expired"):
        assert fact.remote_state is not None and fact.remote_state.is_terminal  # judged by counts
    else:
        assert fact.remote_state is STATES[raw]


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_create_answer_of_any_batch_is_a_usable_fact(case: Case) -> None:
    fact = check_create(ADAPTER.parse_create(response(200, case.body), TOKEN, NOW))
    job_id = case.body.get("id")
    if isinstance(job_id, str) and job_id:
        assert fact.kind == "accepted" and fact.remote_job_id == job_id
    else:
        assert fact.kind == "ambiguous"  # a 200 without an id: something may exist


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_result_downloads_for_any_batch_are_built_or_refused_as_documented(case: Case) -> None:
    status = ADAPTER.parse_status(response(200, case.body), NOW)
    try:
        requests = ADAPTER.build_result_requests("batch_abc123", status)
    except (RequestBuildError, UnsafeJobIdError):
        assert not status.result_file_ids or any(f in (".", "..") for f in status.result_file_ids)
        return
    assert len(requests) == len(status.result_file_ids) > 0
    for request in requests:
        assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "downloadFile"


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_cancel_answer_of_any_batch_is_a_usable_fact(case: Case) -> None:
    fact = check_cancel(ADAPTER.parse_cancel(response(200, case.body), NOW))
    assert fact.kind == "accepted"


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_lookup_page_holding_any_batch_is_a_usable_fact(case: Case) -> None:
    batch = case.body
    page = {"object": "list", "data": [batch], "first_id": "b", "last_id": "b", "has_more": False}
    fact = check_lookup(ADAPTER.parse_lookup(response(200, page), OPERATION))
    assert not fact.found_job_ids  # the document's batches carry no reference of ours


def _page(batch: dict[str, Any]) -> dict[str, Any]:
    ours = {**batch, "id": "batch_ours", "metadata": {REFERENCE_KEY: OPERATION}}
    return {
        "object": "list",
        "data": [batch, ours],
        "first_id": "batch_abc123",
        "last_id": "batch_ours",
        "has_more": True,
    }


PAGE_CASES = edge_cases(doc.LIST_BATCHES_RESPONSE, _page(BATCH))


@pytest.mark.parametrize("case", PAGE_CASES, ids=case_ids)
def test_lookup_page_at_every_edge_is_a_usable_fact(case: Case) -> None:
    if case.documented:
        validator(doc.LIST_BATCHES_RESPONSE).validate(case.body)
    fact = check_lookup(ADAPTER.parse_lookup(response(200, case.body), OPERATION))
    if case.body.get("has_more") is not True:
        assert fact.next_page_token is None


@pytest.mark.parametrize(
    ("status", "counts", "expected"),
    [
        ("validating", (0, 0, 0), RemoteState.PENDING),
        ("in_progress", (100, 40, 1), RemoteState.RUNNING),
        ("finalizing", (100, 95, 5), RemoteState.RUNNING),
        ("cancelling", (100, 40, 1), RemoteState.RUNNING),
        ("completed", (100, 100, 0), RemoteState.SUCCEEDED),
        ("completed", (100, 95, 5), RemoteState.PARTIALLY_SUCCEEDED),
        ("completed", (100, 0, 100), RemoteState.FAILED),
        ("expired", (100, 40, 0), RemoteState.PARTIALLY_SUCCEEDED),
        ("expired", (100, 0, 0), RemoteState.FAILED),
        ("failed", (0, 0, 0), RemoteState.FAILED),
        ("cancelled", (100, 40, 1), RemoteState.CANCELLED),
    ],
)
def test_every_documented_status_maps_as_the_preset_promises(
    status: str, counts: tuple[int, int, int], expected: RemoteState
) -> None:
    total, completed, failed = counts
    body = {**BATCH, "status": status}
    body["request_counts"] = {"total": total, "completed": completed, "failed": failed}
    assert ADAPTER.parse_status(response(200, body), NOW).remote_state is expected


def test_every_documented_status_is_in_the_state_map() -> None:
    assert set(doc.BATCH["properties"]["status"]["enum"]) <= set(STATES)


def test_a_count_past_what_a_double_holds_stays_exact() -> None:
    total = 2**53 + 1
    body = {**BATCH, "request_counts": {"total": total, "completed": total, "failed": 0}}
    fact = ADAPTER.parse_status(response(200, body), NOW)
    assert fact.counts == Counts(total=total, succeeded=total, failed=0)


ERROR_CASES = edge_cases(
    doc.ERROR_RESPONSE,
    {
        "error": {
            "code": "invalid_request",
            "message": "Invalid 'input_file_id'",
            "param": "input_file_id",
            "type": "invalid_request_error",
        }
    },
)


@pytest.mark.parametrize("case", ERROR_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [400, 409, 429, 500])
def test_error_answers_are_usable_facts(case: Case, code: int) -> None:
    if case.documented:
        validator(doc.ERROR_RESPONSE).validate(case.body)
    created = check_create(ADAPTER.parse_create(response(code, case.body), TOKEN, NOW))
    assert created.kind == ("rejected" if code == 400 else "ambiguous")
    status = check_status(ADAPTER.parse_status(response(code, case.body), NOW))
    assert status.remote_state is None
    check_cancel(ADAPTER.parse_cancel(response(code, case.body), NOW))
    check_lookup(ADAPTER.parse_lookup(response(code, case.body), OPERATION))


# --------------------------------------------------------------------- results


SUCCESS_LINE = {
    "id": "batch_req_wnaDys",
    "custom_id": "request-2",
    "response": {"status_code": 200, "request_id": "req_c187b3", "body": {"id": "chatcmpl-9758Iw"}},
    "error": None,
}
FAILURE_LINE = {
    "id": "batch_req_x",
    "custom_id": "request-3",
    "response": None,
    "error": {"code": "batch_expired", "message": "This request could not be executed."},
}


def file_part(lines: list[Any]) -> HttpResponse:
    """One downloaded file (GET /files/{file_id}/content answers its bytes as they are)."""
    return HttpResponse(200, {"Content-Type": "application/octet-stream"}, jsonl(lines))


LINE_CASES = [
    Case(f"{kind} line {case.label}", case.body, case.documented)
    for kind, line in (("success", SUCCESS_LINE), ("failure", FAILURE_LINE))
    for case in edge_cases(doc.RESULT_LINE, line)
]


@pytest.mark.parametrize("case", LINE_CASES, ids=case_ids)
def test_result_files_with_any_line_give_a_verdict(case: Case) -> None:
    if case.documented:
        validator(doc.RESULT_LINE).validate(case.body)
    status = StatusFact(200, counts=Counts(total=2, succeeded=1, failed=1))
    parts = [file_part([SUCCESS_LINE, case.body]), file_part([FAILURE_LINE])]
    check_result(validate_result(DESC, parts, status))


def test_documented_result_files_are_valid_and_list_their_failures() -> None:
    status = StatusFact(200, counts=Counts(total=2, succeeded=1, failed=1))
    parts = [file_part([SUCCESS_LINE]), file_part([FAILURE_LINE])]
    check = check_result(validate_result(DESC, parts, status))
    assert check.ok, check.reason
    assert [f.item_id for f in check.failed_items] == ["request-3"]


# --------------------------------------------------------------------- webhooks


def _event(event_type: str) -> dict[str, Any]:
    return {
        "created_at": 1719168000,
        "id": "evt_abc123",
        "data": {"id": "batch_abc123"},
        "object": "event",
        "type": event_type,
    }


WEBHOOK_CASES = [
    Case(f"{event_type} {case.label}", case.body, case.documented)
    for event_type in doc.WEBHOOK_TYPES
    for case in edge_cases(doc.webhook_event(event_type), _event(event_type))
]
WEBHOOK_STATES = {
    "batch.completed": RemoteState.SUCCEEDED,
    "batch.failed": RemoteState.FAILED,
    "batch.cancelled": RemoteState.CANCELLED,
    "batch.expired": None,  # partial or failed: the event lacks the counts that decide
}


@pytest.mark.parametrize("case", WEBHOOK_CASES, ids=case_ids)
def test_webhook_event_of_any_shape_is_a_fact_or_unmatched(case: Case) -> None:
    headers = {"webhook-id": "msg_1", "webhook-timestamp": "1719168000"}
    try:
        fact = ADAPTER.parse_webhook(json.dumps(case.body).encode(), headers, {})
    except WebhookParseError:
        data = case.body.get("data")
        assert not (isinstance(data, dict) and isinstance(data.get("id"), str) and data["id"])
        return
    check_webhook(fact)
    assert fact.thin and fact.event_id == "msg_1"
    if case.body.get("type") in WEBHOOK_STATES:
        assert fact.remote_state is WEBHOOK_STATES[case.body["type"]]
    else:
        assert fact.remote_state is None
