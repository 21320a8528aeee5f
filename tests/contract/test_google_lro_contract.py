"""Contract: the google_lro preset against google.longrunning as Google publishes it.

Document: googleapis/googleapis at commit f8291d2b (2026-08-22):
google/longrunning/operations.proto, google/rpc/status.proto and
google/rpc/code.proto (protos carry no version; package google.longrunning, HTTP
/v1), read through the proto3 JSON mapping; AIP-155 (request_id) and AIP-193
(errors) from aip-dev/google.aip.dev. Google publishes no OpenAPI document for
them: tests/contract/openapi_google_lro.py transcribes them into JSON Schema and
says how.

Requests must follow the HTTP rules of the Operations service and carry an
AIP-155 request id; operations generated from the messages at every edge --
`done` left out (false), an error without `code` (0), every google.rpc.Code and
one past them -- must parse into usable facts and the state AIP-151 gives them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import RequestBuildError, adapter_for
from tests.contract import openapi_google_lro as doc
from tests.contract.schema_cases import Case, edge_cases, validator
from tests.contract.support import (
    check_cancel,
    check_create,
    check_result,
    check_status,
    load_preset,
    operation_of,
    response,
)

pytestmark = pytest.mark.timeout(30)

SERVER = "https://example-service.googleapis.com"
ADAPTER = adapter_for(
    load_preset(
        "google_lro",
        {"GOOGLE_ACCESS_TOKEN": "ya29.contract"},
        {
            "base_url": SERVER,
            "create": {"path": "/v1/projects/my-project/locations/us-central1/things:process"},
        },
    )
)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
TOKEN = "idem_0123456789abcdef0123456789abcdef"
OPERATION = "op_01JCONTRACT0000000000000000"
NAME = "operations/abc-123"
METADATA = {"@type": "type.googleapis.com/example.v1.ProcessMetadata", "progressPercent": 40}
RUNNING = {"name": NAME, "metadata": METADATA}
SUCCEEDED = {
    **RUNNING,
    "done": True,
    "response": {
        "@type": "type.googleapis.com/example.v1.ProcessResponse",
        "outputUri": "gs://b/o",
    },
}
FAILED = {
    **RUNNING,
    "done": True,
    "error": {
        "code": 3,
        "message": "input is not valid",
        "details": [doc.ERROR_RESPONSE_EXAMPLE["error"]["details"][0]],
    },
}
CODE_CASES = [
    Case(f"done, error code {name} ({code})", {**FAILED, "error": {"code": code}}, True)
    for name, code in doc.RPC_CODES.items()
] + [Case("done, error code 17 (past google.rpc.Code)", {**FAILED, "error": {"code": 17}}, False)]
OPERATION_CASES = [
    *(Case(f"running {c.label}", c.body, c.documented) for c in edge_cases(doc.OPERATION, RUNNING)),
    *(Case(f"done {c.label}", c.body, c.documented) for c in edge_cases(doc.OPERATION, SUCCEEDED)),
    *(Case(f"error {c.label}", c.body, c.documented) for c in edge_cases(doc.OPERATION, FAILED)),
    *CODE_CASES,
    Case("done, error without code (0 is left out)", {**FAILED, "error": {"message": "x"}}, True),
    Case("done, empty error", {**FAILED, "error": {}}, True),
    Case("done, neither error nor response", {"name": NAME, "done": True}, True),
]


def case_ids(case: Case) -> str:
    return case.label


def aip151_state(body: dict[str, Any]) -> RemoteState:
    """The state AIP-151 and the protos give an operation (the expectation, spelled out)."""
    if body.get("done") is not True:
        return RemoteState.RUNNING
    error = body.get("error")
    if not isinstance(error, dict):
        return RemoteState.SUCCEEDED
    # error is the result "in case of failure or cancellation"; code 1 is CANCELLED
    return RemoteState.CANCELLED if error.get("code") == 1 else RemoteState.FAILED


# --------------------------------------------------------------------- requests


def test_create_carries_an_aip155_request_id() -> None:
    request = ADAPTER.build_create(
        body={"input": "gs://b/i"}, idempotency_token=TOKEN, client_reference=OPERATION
    )
    validator(doc.REQUEST_ID).validate(request.json)
    again = ADAPTER.build_create(
        body={"input": "gs://b/i"}, idempotency_token=TOKEN, client_reference=OPERATION
    )
    assert again.json["requestId"] == request.json["requestId"]  # a retry is the same request
    assert request.headers["Authorization"] == "Bearer ya29.contract"


@pytest.mark.parametrize("name", [NAME, "operations/abc/def-456"])
def test_status_and_cancel_follow_the_operations_http_rules(name: str) -> None:
    read = ADAPTER.build_status(name)
    assert operation_of(read, SERVER, doc.OPERATIONS) == "GetOperation"
    cancel = ADAPTER.build_cancel(name)
    assert operation_of(cancel, SERVER, doc.OPERATIONS) == "CancelOperation"
    assert cancel.json in (None, {})  # body "*": CancelOperationRequest has only its name


def test_a_name_bound_elsewhere_stays_a_path() -> None:
    name = "projects/my-project/locations/us-central1/operations/123"
    assert ADAPTER.build_status(name).url == f"{SERVER}/v1/{name}"
    assert ADAPTER.build_cancel(name).url == f"{SERVER}/v1/{name}:cancel"


def test_no_lookup_as_aip151_defines_none() -> None:
    with pytest.raises(RequestBuildError):
        ADAPTER.build_lookup(OPERATION, TOKEN)


# --------------------------------------------------------------------- responses


@pytest.mark.parametrize("case", [c for c in OPERATION_CASES if c.documented], ids=case_ids)
def test_generated_operations_are_documented(case: Case) -> None:
    validator(doc.OPERATION).validate(case.body)


@pytest.mark.parametrize("case", OPERATION_CASES, ids=case_ids)
def test_status_read_of_any_operation_gets_the_aip151_state(case: Case) -> None:
    fact = check_status(ADAPTER.parse_status(response(200, case.body), NOW))
    assert fact.remote_state is aip151_state(case.body)


@pytest.mark.parametrize("error", [{"message": "quota exceeded"}, {"code": 0}, {}])
def test_a_done_operation_with_an_error_is_never_a_success(error: dict[str, Any]) -> None:
    # Regression: proto3 JSON leaves code 0 out, and an error without a code was read as OK.
    body = {"name": NAME, "done": True, "error": error}
    fact = ADAPTER.parse_status(response(200, body), NOW)
    assert fact.remote_state is RemoteState.FAILED and fact.raw_state == "done=true error=0"
    if "message" in error:
        assert fact.error is not None and fact.error.message == error["message"]


@pytest.mark.parametrize("case", OPERATION_CASES, ids=case_ids)
def test_create_answer_of_any_operation_is_a_usable_fact(case: Case) -> None:
    fact = check_create(ADAPTER.parse_create(response(200, case.body), TOKEN, NOW))
    name = case.body.get("name")
    assert fact.kind == ("accepted" if isinstance(name, str) and name else "ambiguous")


@pytest.mark.parametrize("case", OPERATION_CASES, ids=case_ids)
def test_inline_response_of_any_operation_gets_a_verdict(case: Case) -> None:
    answer = response(200, case.body)
    status = ADAPTER.parse_status(answer, NOW)
    check = check_result(ADAPTER.validate_inline_result(ADAPTER.inline_result(answer), status))
    assert check.ok == isinstance(case.body.get("response"), dict)


@pytest.mark.parametrize("body", [{}, None], ids=["Empty", "no body"])
def test_cancel_answer_google_protobuf_empty_is_accepted(body: Any) -> None:
    assert check_cancel(ADAPTER.parse_cancel(response(200, body), NOW)).kind == "accepted"


ERROR_CASES = edge_cases(doc.ERROR_RESPONSE, doc.ERROR_RESPONSE_EXAMPLE)


@pytest.mark.parametrize("case", ERROR_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [400, 404, 409, 429, 500, 503])
def test_error_answers_are_usable_facts(case: Case, code: int) -> None:
    if case.documented:
        validator(doc.ERROR_RESPONSE).validate(case.body)
    created = check_create(ADAPTER.parse_create(response(code, case.body), TOKEN, NOW))
    assert created.kind == ("rejected" if code in (400, 404) else "ambiguous")
    check_status(ADAPTER.parse_status(response(code, case.body), NOW))
    check_cancel(ADAPTER.parse_cancel(response(code, case.body), NOW))


def test_an_error_answer_is_named_by_its_status() -> None:
    fact = ADAPTER.parse_create(response(429, doc.ERROR_RESPONSE_EXAMPLE), TOKEN, NOW)
    assert fact.error is not None and fact.error.code == "RESOURCE_EXHAUSTED"
