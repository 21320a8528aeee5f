"""Contract: the anthropic_batches preset against Anthropic's published OpenAPI document.

Document: Anthropic's SDK OpenAPI document as copied in tryAGI/Anthropic,
src/libs/Anthropic/openapi.yaml at commit 8b42a21e (2026-08-18); it carries no
info.version, the API version is the anthropic-version header, 2023-06-01. The
excerpts, with their JSON pointers: tests/contract/openapi_anthropic_batches.py.

Requests must call an operation of the document with a body and headers it
accepts; message batches, result lines and error bodies generated from the
document's schemas at every edge must parse into usable facts and verdicts;
`ended` must be judged by its counts as the preset's header says.
"""

from __future__ import annotations

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
    adapter_for,
)
from tests.contract import openapi_anthropic_batches as doc
from tests.contract.schema_cases import Case, edge_cases, validator
from tests.contract.support import (
    check_cancel,
    check_create,
    check_result,
    check_status,
    jsonl,
    load_preset,
    operation_of,
    response,
)

pytestmark = pytest.mark.timeout(30)

API_KEY = "sk-ant-contract"
ADAPTER = adapter_for(load_preset("anthropic_batches", {"ANTHROPIC_API_KEY": API_KEY}))
DESC = ADAPTER.desc
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
TOKEN = "idem_0123456789abcdef0123456789abcdef"
OPERATION = "op_01JCONTRACT0000000000000000"
CREATE_BODY = {
    "requests": [
        {
            "custom_id": "my-first-request",
            "params": {
                "model": "claude-sonnet-4-6",
                "max_tokens": 1024,
                "messages": [{"role": "user", "content": "Hello, world"}],
            },
        }
    ]
}
BATCH_ID = doc.MESSAGE_BATCH_EXAMPLE["id"]
STATES = dict(DESC.status.state_map)
BATCH_CASES = [
    *edge_cases(doc.MESSAGE_BATCH, doc.MESSAGE_BATCH_EXAMPLE),
    *(
        Case(f"ended {case.label}", case.body, case.documented)
        for case in edge_cases(
            doc.MESSAGE_BATCH, {**doc.MESSAGE_BATCH_EXAMPLE, "processing_status": "ended"}
        )
    ),
]


def case_ids(case: Case) -> str:
    return case.label


# --------------------------------------------------------------------- requests


def test_create_calls_message_batches_post_with_a_documented_body() -> None:
    request = ADAPTER.build_create(
        body=CREATE_BODY, idempotency_token=TOKEN, client_reference=OPERATION
    )
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "message_batches_post"
    validator(doc.CREATE_MESSAGE_BATCH_PARAMS).validate(request.json)
    assert request.json == CREATE_BODY  # nothing of ours: a batch has no field to carry it
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["x-api-key"] == API_KEY


CREATE_CASES = [c for c in edge_cases(doc.CREATE_MESSAGE_BATCH_PARAMS, CREATE_BODY) if c.documented]


@pytest.mark.parametrize("case", CREATE_CASES, ids=case_ids)
def test_every_documented_create_body_is_sent_as_it_is(case: Case) -> None:
    request = ADAPTER.build_create(
        body=case.body, idempotency_token=TOKEN, client_reference=OPERATION
    )
    validator(doc.CREATE_MESSAGE_BATCH_PARAMS).validate(request.json)
    assert request.json == case.body


def test_status_cancel_and_results_call_documented_operations() -> None:
    read = ADAPTER.build_status(BATCH_ID)
    assert operation_of(read, doc.SERVER, doc.OPERATIONS) == "message_batches_retrieve"
    cancel = ADAPTER.build_cancel(BATCH_ID)
    assert operation_of(cancel, doc.SERVER, doc.OPERATIONS) == "message_batches_cancel"
    ended = StatusFact(200, result_url=doc.MESSAGE_BATCH_EXAMPLE["results_url"])
    (results,) = ADAPTER.build_result_requests(BATCH_ID, ended)
    assert operation_of(results, doc.SERVER, doc.OPERATIONS) == "message_batches_results"
    assert results.headers["x-api-key"] == API_KEY  # the results URL is on the API's host
    with pytest.raises(RequestBuildError):
        ADAPTER.build_lookup(OPERATION, TOKEN)


# --------------------------------------------------------------------- responses


@pytest.mark.parametrize("case", [c for c in BATCH_CASES if c.documented], ids=case_ids)
def test_generated_batches_are_documented(case: Case) -> None:
    validator(doc.MESSAGE_BATCH).validate(case.body)


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_status_read_of_any_batch_is_a_usable_fact(case: Case) -> None:
    fact = check_status(ADAPTER.parse_status(response(200, case.body), NOW))
    raw = case.body.get("processing_status")
    if not isinstance(raw, str):
        assert fact.remote_state is None and fact.problem
    elif raw == "ended":
        assert fact.remote_state is not None and fact.remote_state.is_terminal
    else:
        assert fact.remote_state is STATES.get(raw) and fact.raw_state == raw


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_create_and_cancel_answers_of_any_batch_are_usable_facts(case: Case) -> None:
    created = check_create(ADAPTER.parse_create(response(200, case.body), TOKEN, NOW))
    job_id = case.body.get("id")
    assert created.kind == ("accepted" if isinstance(job_id, str) and job_id else "ambiguous")
    assert check_cancel(ADAPTER.parse_cancel(response(200, case.body), NOW)).kind == "accepted"


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_ids)
def test_results_download_for_any_batch_is_built_or_refused_as_documented(case: Case) -> None:
    status = ADAPTER.parse_status(response(200, case.body), NOW)
    try:
        (request,) = ADAPTER.build_result_requests(BATCH_ID, status)
    except (RequestBuildError, UnsafeJobIdError):
        assert not status.result_url
        return
    if status.result_url == doc.MESSAGE_BATCH_EXAMPLE["results_url"]:
        assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "message_batches_results"


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # processing, succeeded, errored, canceled, expired
        ((0, 100, 0, 0, 0), RemoteState.SUCCEEDED),
        ((0, 60, 30, 5, 5), RemoteState.PARTIALLY_SUCCEEDED),
        ((0, 0, 40, 0, 0), RemoteState.FAILED),
        ((0, 0, 0, 40, 0), RemoteState.CANCELLED),
        ((0, 0, 0, 0, 40), RemoteState.FAILED),
        ((0, 0, 10, 30, 0), RemoteState.FAILED),
        ((0, 0, 0, 0, 0), RemoteState.SUCCEEDED),  # nothing to judge: `ended` stands
    ],
)
def test_an_ended_batch_is_judged_by_its_counts(
    counts: tuple[int, int, int, int, int], expected: RemoteState
) -> None:
    names = ("processing", "succeeded", "errored", "canceled", "expired")
    body = {
        **doc.MESSAGE_BATCH_EXAMPLE,
        "processing_status": "ended",
        "request_counts": dict(zip(names, counts, strict=True)),
    }
    assert ADAPTER.parse_status(response(200, body), NOW).remote_state is expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [("in_progress", RemoteState.RUNNING), ("canceling", RemoteState.RUNNING)],
)
def test_every_running_status_maps_as_the_preset_promises(
    status: str, expected: RemoteState
) -> None:
    body = {**doc.MESSAGE_BATCH_EXAMPLE, "processing_status": status}
    assert ADAPTER.parse_status(response(200, body), NOW).remote_state is expected


def test_every_documented_status_is_in_the_state_map() -> None:
    assert set(doc.PROCESSING_STATUS["enum"]) <= set(STATES)


def _error(error_type: str) -> dict[str, Any]:
    message = doc.ERROR_TYPES[error_type]
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": None}


ERROR_CASES = [
    Case(f"{error_type} {case.label}", case.body, case.documented)
    for error_type in doc.ERROR_TYPES
    for case in edge_cases(doc.ERROR_RESPONSE, _error(error_type))
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [400, 404, 429, 500, 529])
def test_error_answers_are_usable_facts(case: Case, code: int) -> None:
    if case.documented:
        validator(doc.ERROR_RESPONSE).validate(case.body)
    created = check_create(ADAPTER.parse_create(response(code, case.body), TOKEN, NOW))
    assert created.kind == ("rejected" if code < 429 else "ambiguous")
    check_status(ADAPTER.parse_status(response(code, case.body), NOW))
    check_cancel(ADAPTER.parse_cancel(response(code, case.body), NOW))


def test_an_error_answer_names_its_type() -> None:
    fact = ADAPTER.parse_create(response(400, _error("invalid_request_error")), TOKEN, NOW)
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("invalid_request_error", "Invalid request")


# --------------------------------------------------------------------- results

SUCCEEDED: dict[str, Any] = {
    "custom_id": "r1",
    "result": {"type": "succeeded", "message": {"id": "msg_1", "type": "message"}},
}
ERRORED: dict[str, Any] = {
    "custom_id": "r2",
    "result": {"type": "errored", "error": _error("invalid_request_error")},
}
CANCELED: dict[str, Any] = {"custom_id": "r3", "result": {"type": "canceled"}}
EXPIRED: dict[str, Any] = {"custom_id": "r4", "result": {"type": "expired"}}
LINE_CASES = [
    Case(f"{line['result']['type']} line {case.label}", case.body, case.documented)
    for line in (SUCCEEDED, ERRORED, CANCELED, EXPIRED)
    for case in edge_cases(doc.RESULT_LINE, line)
]
ALL_ENDED = {"processing": 0, "succeeded": 1, "errored": 1, "canceled": 1, "expired": 1}


def results_file(lines: list[Any]) -> HttpResponse:
    return HttpResponse(200, {"Content-Type": "application/x-jsonl"}, jsonl(lines))


def ended_status(counts: dict[str, int]) -> StatusFact:
    body = {**doc.MESSAGE_BATCH_EXAMPLE, "processing_status": "ended", "request_counts": counts}
    return ADAPTER.parse_status(response(200, body), NOW)


@pytest.mark.parametrize("case", LINE_CASES, ids=case_ids)
def test_results_with_any_line_get_a_verdict(case: Case) -> None:
    if case.documented:
        validator(doc.RESULT_LINE).validate(case.body)
    lines = [SUCCEEDED, ERRORED, CANCELED, EXPIRED, case.body]
    check_result(ADAPTER.validate_result(results_file(lines), ended_status(ALL_ENDED)))


def test_documented_results_are_valid_and_list_their_failures() -> None:
    lines = [SUCCEEDED, ERRORED, CANCELED, EXPIRED]
    check = check_result(ADAPTER.validate_result(results_file(lines), ended_status(ALL_ENDED)))
    assert check.ok, check.reason
    assert [(f.item_id, f.code) for f in check.failed_items] == [
        ("r2", "invalid_request_error"),
        ("r3", None),
        ("r4", None),
    ]


def test_status_counts_reach_the_result_check() -> None:
    status = ended_status(ALL_ENDED)
    assert status.counts == Counts(total=4, succeeded=1, failed=3, cancelled=1)
