"""Contract: the assemblyai preset against AssemblyAI's published OpenAPI document.

Document: AssemblyAI/assemblyai-api-spec, openapi.json at commit 3fcf678d
(2026-03-23), info.version 1.3.4. The excerpts, with their JSON pointers:
tests/contract/openapi_assemblyai.py.

Requests must call an operation of the document with a body its request
schema accepts; transcripts, webhook callbacks and error bodies generated from
the document's schemas at every edge must parse into usable facts and
verdicts, and each documented status must map as the preset's header says.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import RequestBuildError, WebhookParseError, adapter_for
from tests.contract import openapi_assemblyai as doc
from tests.contract.schema_cases import Case, edge_cases, validator
from tests.contract.support import (
    check_create,
    check_result,
    check_status,
    check_webhook,
    load_preset,
    operation_of,
    response,
)

pytestmark = pytest.mark.timeout(30)

API_KEY = "aai-contract-key"
HOOK_TOKEN = "contract-hook-token"
POLLING = adapter_for(load_preset("assemblyai", {"ASSEMBLYAI_API_KEY": API_KEY}))
HOOKED = adapter_for(
    load_preset(
        "assemblyai", {"ASSEMBLYAI_API_KEY": API_KEY, "ASSEMBLYAI_WEBHOOK_TOKEN": HOOK_TOKEN}
    )
)
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
TOKEN = "idem_0123456789abcdef0123456789abcdef"
OPERATION = "op_01JCONTRACT0000000000000000"
HOOK_URL = "https://jobwarden.example/webhooks/assemblyai"
CREATE_BODY = {
    "audio_url": "https://assembly.ai/wildfires.mp3",
    "speech_models": ["universal"],
    "speaker_labels": True,
}
TRANSCRIPT_ID = doc.TRANSCRIPT_EXAMPLE["id"]
STATES = dict(POLLING.desc.status.state_map)
TRANSCRIPT_CASES = edge_cases(doc.TRANSCRIPT, doc.TRANSCRIPT_EXAMPLE)


def case_ids(case: Case) -> str:
    return case.label


# --------------------------------------------------------------------- requests


def test_create_without_webhooks_sends_a_documented_body() -> None:
    request = POLLING.build_create(
        body=CREATE_BODY, idempotency_token=TOKEN, client_reference=OPERATION
    )
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "createTranscript"
    validator(doc.TRANSCRIPT_PARAMS).validate(request.json)
    assert "webhook_url" not in request.json
    assert request.headers["Authorization"] == API_KEY  # ApiKey: header Authorization


def test_create_with_webhooks_hands_over_a_documented_callback() -> None:
    request = HOOKED.build_create(
        body=CREATE_BODY,
        idempotency_token=TOKEN,
        client_reference=OPERATION,
        context={"webhook_url": HOOK_URL},
    )
    validator(doc.TRANSCRIPT_PARAMS).validate(request.json)
    assert request.json["webhook_url"] == f"{HOOK_URL}?op={OPERATION}"
    assert request.json["webhook_auth_header_value"] == HOOK_TOKEN


CREATE_CASES = [c for c in edge_cases(doc.TRANSCRIPT_PARAMS, CREATE_BODY) if c.documented]


@pytest.mark.parametrize("case", CREATE_CASES, ids=case_ids)
def test_every_documented_create_body_stays_documented(case: Case) -> None:
    request = HOOKED.build_create(
        body=case.body,
        idempotency_token=TOKEN,
        client_reference=OPERATION,
        context={"webhook_url": HOOK_URL},
    )
    validator(doc.TRANSCRIPT_PARAMS).validate(request.json)


def test_status_read_calls_get_transcript() -> None:
    request = POLLING.build_status(TRANSCRIPT_ID)
    assert operation_of(request, doc.SERVER, doc.OPERATIONS) == "getTranscript"


def test_no_cancel_and_no_lookup_are_built_as_the_document_has_none() -> None:
    # DELETE /v2/transcript/{id} removes a finished transcript's data; it stops nothing.
    assert {op.method for op in doc.OPERATIONS if "{transcript_id}" in op.path} == {
        "GET",
        "DELETE",
    }
    with pytest.raises(RequestBuildError):
        POLLING.build_cancel(TRANSCRIPT_ID)
    with pytest.raises(RequestBuildError):
        POLLING.build_lookup(OPERATION, TOKEN)


# --------------------------------------------------------------------- responses


@pytest.mark.parametrize("case", [c for c in TRANSCRIPT_CASES if c.documented], ids=case_ids)
def test_generated_transcripts_are_documented(case: Case) -> None:
    validator(doc.TRANSCRIPT).validate(case.body)


@pytest.mark.parametrize("case", TRANSCRIPT_CASES, ids=case_ids)
def test_status_read_of_any_transcript_is_a_usable_fact(case: Case) -> None:
    fact = check_status(POLLING.parse_status(response(200, case.body), NOW))
    raw = case.body.get("status")
    if not isinstance(raw, str):
        assert fact.remote_state is None and fact.problem
    else:
        assert fact.remote_state is STATES.get(raw) and fact.raw_state == raw


@pytest.mark.parametrize("case", TRANSCRIPT_CASES, ids=case_ids)
def test_create_answer_of_any_transcript_is_a_usable_fact(case: Case) -> None:
    fact = check_create(POLLING.parse_create(response(200, case.body), TOKEN, NOW))
    job_id = case.body.get("id")
    assert fact.kind == ("accepted" if isinstance(job_id, str) and job_id else "ambiguous")


@pytest.mark.parametrize("case", TRANSCRIPT_CASES, ids=case_ids)
def test_inline_result_of_any_transcript_gets_a_verdict(case: Case) -> None:
    answer = response(200, case.body)
    status = POLLING.parse_status(answer, NOW)
    check = check_result(POLLING.validate_inline_result(POLLING.inline_result(answer), status))
    text = case.body.get("text")
    assert check.ok == isinstance(text, str), check.reason  # the preset requires `text`


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("queued", RemoteState.PENDING),
        ("processing", RemoteState.RUNNING),
        ("completed", RemoteState.SUCCEEDED),
        ("error", RemoteState.FAILED),
    ],
)
def test_every_documented_status_maps_as_the_preset_promises(
    status: str, expected: RemoteState
) -> None:
    body = {**doc.TRANSCRIPT_EXAMPLE, "status": status}
    assert POLLING.parse_status(response(200, body), NOW).remote_state is expected


def test_every_documented_status_is_in_the_state_map() -> None:
    assert set(doc.TRANSCRIPT_STATUS["enum"]) <= set(STATES)


def test_a_failed_transcript_keeps_its_error_text() -> None:
    body = {**doc.TRANSCRIPT_EXAMPLE, "status": "error", "text": None, "error": "Download error"}
    fact = POLLING.parse_status(response(200, body), NOW)
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.message == "Download error"


ERROR_CASES = edge_cases(doc.ERROR, {"error": "format_text must be a Boolean", "status": "error"})


@pytest.mark.parametrize("case", ERROR_CASES, ids=case_ids)
@pytest.mark.parametrize("code", [400, 401, 404, 429, 500, 503, 504])
def test_error_answers_are_usable_facts(case: Case, code: int) -> None:
    if case.documented:
        validator(doc.ERROR).validate(case.body)
    created = check_create(POLLING.parse_create(response(code, case.body), TOKEN, NOW))
    assert created.kind == ("rejected" if code < 429 else "ambiguous")
    check_status(POLLING.parse_status(response(code, case.body), NOW))


# --------------------------------------------------------------------- webhooks

READY_CASES = [
    Case(f"ready {status} {case.label}", case.body, case.documented)
    for status in ("completed", "error")
    for case in edge_cases(
        doc.TRANSCRIPT_READY_NOTIFICATION, {"transcript_id": TRANSCRIPT_ID, "status": status}
    )
]
REDACTED_CASES = [
    Case(f"redacted audio {case.label}", case.body, case.documented)
    for case in edge_cases(
        doc.REDACTED_AUDIO_NOTIFICATION,
        {
            "status": "redacted_audio_ready",
            "redacted_audio_url": "https://s3.us-west-2.amazonaws.com/redacted-audio/x.wav",
        },
    )
]


def _schema_of(case: Case) -> dict[str, Any]:
    if case.label.startswith("ready"):
        return doc.TRANSCRIPT_READY_NOTIFICATION
    return doc.REDACTED_AUDIO_NOTIFICATION


@pytest.mark.parametrize("case", READY_CASES + REDACTED_CASES, ids=case_ids)
@pytest.mark.parametrize("query", [{"op": OPERATION}, {}], ids=["with op", "without op"])
def test_webhook_of_any_shape_is_a_fact_or_unmatched(case: Case, query: dict[str, str]) -> None:
    if case.documented:
        validator(_schema_of(case)).validate(case.body)
    headers = {"X-Jobwarden-Token": HOOK_TOKEN}
    try:
        fact = HOOKED.parse_webhook(json.dumps(case.body).encode(), headers, query)
    except WebhookParseError:
        assert not query  # with our `op` in the URL, every callback is ours
        return
    check_webhook(fact)
    if query:
        assert fact.operation_ref == OPERATION
    raw = case.body.get("status")
    assert fact.remote_state is (STATES.get(raw) if isinstance(raw, str) else None)


def test_a_ready_callback_names_the_transcript_and_its_state() -> None:
    body = {"transcript_id": TRANSCRIPT_ID, "status": "completed"}
    fact = HOOKED.parse_webhook(json.dumps(body).encode(), {}, {"op": OPERATION})
    assert (fact.remote_job_id, fact.remote_state) == (TRANSCRIPT_ID, RemoteState.SUCCEEDED)
