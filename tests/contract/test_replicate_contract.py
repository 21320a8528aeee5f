"""Contract: the replicate preset against Replicate's published OpenAPI document.

Document: Replicate's openapi.json (api.replicate.com/openapi.json) as copied in
tryAGI/Replicate, src/libs/Replicate/openapi.json at commit 6c8ab8ea
(2026-04-09), info.version 1.0.0-a1. The excerpts, with their JSON pointers:
tests/contract/openapi_replicate.py.

Requests must call an operation of the document with a body and a
`Cancel-After` header it accepts; predictions (as read, as answered to create
and cancel, and as webhook bodies), their outputs and problem documents,
generated from the document's schemas at every edge, must parse into usable
facts and verdicts, and each documented status must map as the preset says.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import RequestBuildError, WebhookParseError, adapter_for
from tests.contract import openapi_replicate as doc
from tests.contract.schema_cases import Case, edge_cases, validator
from tests.contract.support import (
    WEBHOOK_SECRET,
    check_cancel,
    check_create,
    check_result,
    check_status,
    check_webhook,
    load_preset,
    operation_of,
    response,
)

pytestmark = pytest.mark.timeout(30)

API_TOKEN = "r8_contract"
POLLING = adapter_for(load_preset("replicate", {"REPLICATE_API_TOKEN": API_TOKEN}))
HOOKED = adapter_for(
    load_preset(
        "replicate", {"REPLICATE_API_TOKEN": API_TOKEN, "REPLICATE_WEBHOOK_SECRET": WEBHOOK_SECRET}
    )
)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
TOKEN = "idem_0123456789abcdef0123456789abcdef"
OPERATION = "op_01JCONTRACT0000000000000000"
HOOK_URL = "https://jobwarden.example/webhooks/replicate"
CREATE_BODY = {
    "version": "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa",
    "input": {"text": "Alice"},
}
PREDICTION_ID = doc.PREDICTION_EXAMPLE["id"]
STATES = dict(POLLING.desc.status.state_map)
OUTPUTS: list[Any] = [
    None,
    [
        "https://replicate.delivery/pbxt/abc/out-0.png",
        "https://replicate.delivery/pbxt/abc/out-1.png",
    ],
    {"text": "hello", "tokens": [1, 2, 3]},
    0,
    False,
    "",
]
PREDICTION_CASES = [
    *edge_cases(doc.PREDICTION_RESPONSE, doc.PREDICTION_EXAMPLE),
    *(
        Case(f"/output = {json.dumps(output)}", {**doc.PREDICTION_EXAMPLE, "output": output}, True)
        for output in OUTPUTS
    ),
    Case(
        "output removed after an hour",
        {**doc.PREDICTION_EXAMPLE, "output": None, "data_removed": True},
        True,
    ),
]


def case_ids(case: Case) -> str:
    return case.label


def cancel_after_seconds(value: str) -> int:
    """Seconds of a `Cancel-After` value, read as the document's description spells it."""
    match = doc.CANCEL_AFTER_SYNTAX.fullmatch(value)
    assert match is not None and value, f"Cancel-After {value!r} is not a documented duration"
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


# --------------------------------------------------------------------- requests


@pytest.mark.parametrize("deadline", ["3600", "5", "93600"])
def test_create_calls_predictions_create_with_a_documented_body_and_deadline(
    deadline: str,
) -> None:
    request = HOOKED.build_create(
        body=CREATE_BODY,
        idempotency_token=TOKEN,
        client_reference=OPERATION,
        context={"webhook_url": HOOK_URL, "result_deadline_seconds": deadline},
    )
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "predictions.create"
    validator(doc.VERSION_PREDICTION_REQUEST).validate(request.json)
    assert request.json["webhook"] == f"{HOOK_URL}?op={OPERATION}"
    validator(doc.CANCEL_AFTER_HEADER).validate(request.headers["Cancel-After"])
    seconds = cancel_after_seconds(request.headers["Cancel-After"])
    assert seconds == int(deadline) >= doc.CANCEL_AFTER_MINIMUM_SECONDS
    assert request.headers["Authorization"] == f"Bearer {API_TOKEN}"  # bearerAuth


def test_the_least_deadline_sent_is_cancel_afters_documented_minimum() -> None:
    # the reconciler never fills {result_deadline_seconds} with less than this
    assert POLLING.desc.create.min_result_deadline_seconds == doc.CANCEL_AFTER_MINIMUM_SECONDS


def test_create_without_a_webhook_url_sends_no_webhook_fields() -> None:
    request = POLLING.build_create(
        body=CREATE_BODY, idempotency_token=TOKEN, client_reference=OPERATION
    )
    validator(doc.VERSION_PREDICTION_REQUEST).validate(request.json)
    assert "webhook" not in request.json
    assert "Cancel-After" not in request.headers  # no deadline given, none invented


CREATE_CASES = [c for c in edge_cases(doc.VERSION_PREDICTION_REQUEST, CREATE_BODY) if c.documented]


@pytest.mark.parametrize("case", CREATE_CASES, ids=case_ids)
def test_every_documented_create_body_stays_documented(case: Case) -> None:
    request = HOOKED.build_create(
        body=case.body,
        idempotency_token=TOKEN,
        client_reference=OPERATION,
        context={"webhook_url": HOOK_URL, "result_deadline_seconds": "3600"},
    )
    validator(doc.VERSION_PREDICTION_REQUEST).validate(request.json)


def test_status_and_cancel_call_documented_operations() -> None:
    status = POLLING.build_status(PREDICTION_ID)
    assert operation_of(status, doc.SERVER, doc.OPERATIONS) == "predictions.get"
    cancel = POLLING.build_cancel(PREDICTION_ID)
    assert operation_of(cancel, doc.SERVER, doc.OPERATIONS) == "predictions.cancel"
    with pytest.raises(RequestBuildError):
        POLLING.build_lookup(OPERATION, TOKEN)  # predictions.list filters by date and source only


# --------------------------------------------------------------------- responses


@pytest.mark.parametrize("case", [c for c in PREDICTION_CASES if c.documented], ids=case_ids)
def test_generated_predictions_are_documented(case: Case) -> None:
    validator(doc.PREDICTION_RESPONSE).validate(case.body)


@pytest.mark.parametrize("case", PREDICTION_CASES, ids=case_ids)
def test_status_read_of_any_prediction_is_a_usable_fact(case: Case) -> None:
    fact = check_status(POLLING.parse_status(response(200, case.body), NOW))
    raw = case.body.get("status")
    if not isinstance(raw, str):
        assert fact.remote_state is None and fact.problem
    else:
        assert fact.remote_state is STATES.get(raw) and fact.raw_state == raw


@pytest.mark.parametrize("case", PREDICTION_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [201, 202])
def test_create_answer_of_any_prediction_is_a_usable_fact(case: Case, code: int) -> None:
    fact = check_create(POLLING.parse_create(response(code, case.body), TOKEN, NOW))
    job_id = case.body.get("id")
    assert fact.kind == ("accepted" if isinstance(job_id, str) and job_id else "ambiguous")


@pytest.mark.parametrize("case", PREDICTION_CASES, ids=case_ids)
def test_cancel_answer_of_any_prediction_is_a_usable_fact(case: Case) -> None:
    assert check_cancel(POLLING.parse_cancel(response(200, case.body), NOW)).kind == "accepted"


@pytest.mark.parametrize("case", PREDICTION_CASES, ids=case_ids)
def test_inline_output_of_any_prediction_gets_a_verdict(case: Case) -> None:
    answer = response(200, case.body)
    status = POLLING.parse_status(answer, NOW)
    check = check_result(POLLING.validate_inline_result(POLLING.inline_result(answer), status))
    output = case.body.get("output")
    assert check.ok == (output is not None)
    assert check.unavailable == (output is None)  # removed or never produced: not invalid


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("starting", RemoteState.PENDING),
        ("processing", RemoteState.RUNNING),
        ("succeeded", RemoteState.SUCCEEDED),
        ("failed", RemoteState.FAILED),
        ("canceled", RemoteState.CANCELLED),
        ("aborted", RemoteState.CANCELLED),
    ],
)
def test_every_documented_status_maps_as_the_preset_promises(
    status: str, expected: RemoteState
) -> None:
    body = {**doc.PREDICTION_EXAMPLE, "status": status}
    assert POLLING.parse_status(response(200, body), NOW).remote_state is expected


def test_every_documented_status_is_in_the_state_map() -> None:
    assert set(doc.PREDICTION_STATUS["enum"]) <= set(STATES)


def test_a_failed_prediction_keeps_its_error_text() -> None:
    body = {**doc.PREDICTION_EXAMPLE, "status": "failed", "output": None, "error": "CUDA OOM"}
    fact = POLLING.parse_status(response(200, body), NOW)
    assert fact.error is not None and fact.error.message == "CUDA OOM"


PROBLEM_CASES = edge_cases(doc.PROBLEM, {"detail": "Invalid version or not permitted"})


@pytest.mark.parametrize("case", PROBLEM_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [400, 404, 422, 429, 500])
def test_problem_answers_are_usable_facts(case: Case, code: int) -> None:
    if case.documented:
        validator(doc.PROBLEM).validate(case.body)
    created = check_create(POLLING.parse_create(response(code, case.body), TOKEN, NOW))
    assert created.kind == ("rejected" if code < 429 else "ambiguous")
    check_status(POLLING.parse_status(response(code, case.body), NOW))
    check_cancel(POLLING.parse_cancel(response(code, case.body), NOW))


# --------------------------------------------------------------------- webhooks


@pytest.mark.parametrize("case", PREDICTION_CASES, ids=case_ids)
@pytest.mark.parametrize("query", [{"op": OPERATION}, {}], ids=["with op", "without op"])
def test_webhook_of_any_prediction_is_a_fact_or_unmatched(
    case: Case, query: dict[str, str]
) -> None:
    headers = {"webhook-id": "msg_2", "webhook-timestamp": "1719168000"}
    try:
        fact = HOOKED.parse_webhook(json.dumps(case.body).encode(), headers, query)
    except WebhookParseError:
        job_id = case.body.get("id")
        assert not query and not (isinstance(job_id, str) and job_id)
        return
    check_webhook(fact)
    assert fact.event_id == "msg_2"
    raw = case.body.get("status")
    assert fact.remote_state is (STATES.get(raw) if isinstance(raw, str) else None)
