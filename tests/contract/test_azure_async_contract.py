"""Contract: the azure_async preset against the Azure REST API Guidelines and Document Translation.

Documents: microsoft/api-guidelines azure/Guidelines.md at commit 011dd3c9
(2024-03-21), the long-running-operation status monitor; and
Azure/azure-rest-api-specs, Azure.AI.DocumentTranslation stable/2024-05-01
openapi.json at commit 00874be6, info.version 2024-05-01 -- the service the
preset's header configures as its example. The excerpts, with their JSON
pointers: tests/contract/openapi_azure_async.py.

Requests must call the document's operations (api-version included) with a
body it accepts and a GUID Operation-Id; status monitors generated from both
documents at every edge must parse into usable facts, and every status either
document lists must be in the preset's state map.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import RequestBuildError, adapter_for
from tests.contract import openapi_azure_async as doc
from tests.contract.schema_cases import Case, edge_cases, validator
from tests.contract.support import (
    check_create,
    check_status,
    load_preset,
    operation_of,
    query_of,
    response,
)

pytestmark = pytest.mark.timeout(30)

ENV = {"AZURE_ACCESS_TOKEN": "eyJ0eXAi.contract"}
CONFIG = {
    "base_url": doc.ENDPOINT,
    "create": {"path": f"/translator/document/batches?api-version={doc.API_VERSION}"},
}
ADAPTER = adapter_for(load_preset("azure_async", ENV, CONFIG))
CANCELLING = adapter_for(
    load_preset(
        "azure_async",
        ENV,
        {
            **CONFIG,
            "cancel": {
                "supported": True,
                "method": "DELETE",
                "path": f"/translator/document/batches/{{job_id}}?api-version={doc.API_VERSION}",
                "accepted_statuses": [200],
            },
        },
    )
)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
TOKEN = "idem_0123456789abcdef0123456789abcdef"
OPERATION = "op_01JCONTRACT0000000000000000"
BATCH_ID = "727bf148-f327-47a0-9481-abae6362f11e"
MONITOR_URL = f"{doc.SERVER}/document/batches/{BATCH_ID}?api-version={doc.API_VERSION}"
STATES = dict(ADAPTER.desc.status.state_map)
TRANSLATION = {
    "id": BATCH_ID,
    **{k: v for k, v in doc.TRANSLATION_STATUS_EXAMPLE.items() if k != "translationId"},
    "error": {
        "code": "InvalidRequest",
        "message": "Cannot access source document location with the current permissions.",
        "target": "Operation",
        "innerError": {"code": "InvalidDocumentAccessLevel", "message": "Cannot access source."},
    },
}
MONITOR = {
    "id": BATCH_ID,
    "status": "Running",
    "error": {"code": "BadArgument", "message": "Invalid input."},
    "result": {"documents": 3},
}
STATUS_CASES = [
    *(
        Case(f"translation {c.label}", c.body, c.documented)
        for c in edge_cases(doc.TRANSLATION_STATUS, TRANSLATION)
    ),
    *(
        Case(f"monitor {c.label}", c.body, c.documented)
        for c in edge_cases(doc.STATUS_MONITOR, MONITOR)
    ),
    Case("examples/cancel.json as printed", doc.TRANSLATION_STATUS_EXAMPLE, False),
]


def case_ids(case: Case) -> str:
    return case.label


def _schema_of(case: Case) -> dict[str, Any]:
    return doc.TRANSLATION_STATUS if case.label.startswith("translation") else doc.STATUS_MONITOR


# --------------------------------------------------------------------- requests


def test_create_starts_a_translation_with_a_documented_body_and_a_guid_operation_id() -> None:
    request = ADAPTER.build_create(
        body=doc.START_TRANSLATION_EXAMPLE, idempotency_token=TOKEN, client_reference=OPERATION
    )
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == (
        "DocumentTranslationOperations_StartTranslation"
    )
    assert query_of(request)["api-version"] == [doc.API_VERSION]
    validator(doc.START_TRANSLATION_DETAILS).validate(request.json)
    assert request.json == doc.START_TRANSLATION_EXAMPLE
    operation_id = request.headers["Operation-Id"]
    assert str(uuid.UUID(operation_id)) == operation_id  # "typically a GUID"
    again = ADAPTER.build_create(
        body=doc.START_TRANSLATION_EXAMPLE, idempotency_token=TOKEN, client_reference=OPERATION
    )
    assert again.headers["Operation-Id"] == operation_id  # a retry names the same operation


def test_status_reads_the_monitor_url_with_its_api_version() -> None:
    request = ADAPTER.build_status(BATCH_ID, MONITOR_URL)
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == (
        "DocumentTranslationOperations_GetTranslationStatus"
    )
    assert query_of(request)["api-version"] == [doc.API_VERSION]
    assert request.headers["Authorization"] == f"Bearer {ENV['AZURE_ACCESS_TOKEN']}"


def test_cancel_is_off_by_default_and_a_configured_one_calls_cancel_translation() -> None:
    with pytest.raises(RequestBuildError):
        ADAPTER.build_cancel(BATCH_ID)
    request = CANCELLING.build_cancel(BATCH_ID)
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == (
        "DocumentTranslationOperations_CancelTranslation"
    )


# --------------------------------------------------------------------- create answers


@pytest.mark.parametrize(
    ("headers", "status_url"),
    [
        ({"Operation-Location": MONITOR_URL}, MONITOR_URL),
        ({"location": MONITOR_URL}, MONITOR_URL),
        ({"Azure-AsyncOperation": MONITOR_URL, "Location": doc.SERVER}, MONITOR_URL),
        (doc.START_RESPONSE_EXAMPLE_HEADERS, doc.START_RESPONSE_EXAMPLE_HEADERS["location"]),
    ],
    ids=["Operation-Location", "location (2024-05-01)", "Azure-AsyncOperation", "examples"],
)
def test_a_202_is_accepted_with_the_status_monitor_it_names(
    headers: dict[str, str], status_url: str
) -> None:
    answer = response(202, {"id": BATCH_ID, "status": "NotStarted"}, headers)
    fact = check_create(ADAPTER.parse_create(answer, TOKEN, NOW))
    assert fact.kind == "accepted" and fact.status_url == status_url
    assert fact.remote_job_id  # the echoed Operation-Id, else the one we chose


def test_a_202_without_any_monitor_header_is_accepted_but_cannot_be_read() -> None:
    # "YOU SHOULD include an Operation-Location header": a service may leave it out. The
    # adapter says so with its documented error; what the reconciler makes of it is its own.
    fact = ADAPTER.parse_create(response(202, {"id": BATCH_ID, "status": "NotStarted"}), TOKEN, NOW)
    assert fact.kind == "accepted" and fact.status_url is None
    with pytest.raises(RequestBuildError):
        ADAPTER.build_status(fact.remote_job_id or "", fact.status_url)


# --------------------------------------------------------------------- status monitors


@pytest.mark.parametrize("case", [c for c in STATUS_CASES if c.documented], ids=case_ids)
def test_generated_status_monitors_are_documented(case: Case) -> None:
    validator(_schema_of(case)).validate(case.body)


@pytest.mark.parametrize("case", STATUS_CASES, ids=case_ids)
def test_status_read_of_any_monitor_is_a_usable_fact(case: Case) -> None:
    headers = {"Content-Type": "application/json", "Retry-After": "30"}
    fact = check_status(ADAPTER.parse_status(response(200, case.body, headers), NOW))
    raw = case.body.get("status")
    if not isinstance(raw, str):
        # no state in the body: a 200 on a monitor URL then means done (ARM Location polling)
        assert fact.remote_state is RemoteState.SUCCEEDED and fact.raw_state == "HTTP 200"
    else:
        assert fact.remote_state is STATES.get(raw) and fact.raw_state == raw
    assert fact.retry_after_seconds == 30.0


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("NotStarted", RemoteState.PENDING),
        ("Running", RemoteState.RUNNING),
        ("Cancelling", RemoteState.RUNNING),
        ("Succeeded", RemoteState.SUCCEEDED),
        ("Failed", RemoteState.FAILED),
        ("ValidationFailed", RemoteState.FAILED),
        ("Canceled", RemoteState.CANCELLED),
        ("Cancelled", RemoteState.CANCELLED),
    ],
)
def test_every_documented_status_maps_to_its_state(status: str, expected: RemoteState) -> None:
    body = {**TRANSLATION, "status": status}
    assert ADAPTER.parse_status(response(200, body), NOW).remote_state is expected


def test_every_status_either_document_lists_is_in_the_state_map() -> None:
    documented = set(doc.STATUS_MONITOR["properties"]["status"]["enum"])
    documented |= set(doc.TRANSLATION_STATUS_VALUES["enum"])
    assert documented <= set(STATES)


@pytest.mark.parametrize(
    ("code", "expected"),
    [(202, RemoteState.RUNNING), (200, RemoteState.SUCCEEDED), (204, RemoteState.SUCCEEDED)],
)
def test_location_polling_reads_the_state_from_the_code(code: int, expected: RemoteState) -> None:
    fact = check_status(ADAPTER.parse_status(response(code, None, {"Retry-After": "10"}), NOW))
    assert fact.remote_state is expected and fact.retry_after_seconds == 10.0


@pytest.mark.parametrize("value", ["0", "1", "86400", "4294967296", "-1", "soon", ""])
def test_any_retry_after_on_a_running_monitor_is_read_or_ignored(value: str) -> None:
    answer = response(200, {**MONITOR, "status": "Running"}, {"Retry-After": value})
    fact = check_status(ADAPTER.parse_status(answer, NOW))
    assert fact.retry_after_seconds is None or 0.0 <= fact.retry_after_seconds <= 86400.0


ERROR_CASES = edge_cases(
    doc.ERROR_RESPONSE,
    {
        "error": {
            "code": "InvalidRequest",
            "message": "Target language is not valid.",
            "target": "Operation",
        }
    },
)


@pytest.mark.parametrize("case", ERROR_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [400, 401, 409, 429, 500, 503])
def test_error_answers_are_usable_facts(case: Case, code: int) -> None:
    if case.documented:
        validator(doc.ERROR_RESPONSE).validate(case.body)
    created = check_create(ADAPTER.parse_create(response(code, case.body), TOKEN, NOW))
    assert created.kind == ("rejected" if code in (400, 401) else "ambiguous")
    fact = check_status(ADAPTER.parse_status(response(code, case.body), NOW))
    assert fact.remote_state is None  # an error answer is no state, whatever its body
