"""Responses -> canonical facts: create, status (state maps, AIP-151, counts), lookup, webhooks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from shared.ledger.states import RemoteState
from shared.providers import (
    ConfigError,
    HttpResponse,
    WebhookParseError,
    classify_transport_error,
    load_preset,
    may_have_been_delivered,
    parse_cancel,
    parse_create,
    parse_errors_page,
    parse_lookup,
    parse_providers,
    parse_status,
    parse_webhook,
)
from shared.providers.adapter import ProviderAdapter, parse_parsed_webhook
from shared.providers.description import ProviderDescription
from shared.providers.facts import WebhookFact
from shared.providers.requests import errors_list_url
from shared.providers.responses import map_state

NOW = datetime(2025, 1, 6, 12, 0, 0, tzinfo=UTC)
SIM = load_preset("simulator", env={"JW_SIM_WEBHOOK_SECRET": "whsec_dGVzdA=="})


def response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> HttpResponse:
    raw = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(status_code=status, headers=headers or {}, body=raw)


def provider(table: dict[str, Any], env: dict[str, str] | None = None) -> ProviderDescription:
    return parse_providers({"providers": {"p": table}}, "test.toml", env or {})["p"]


AIP151 = provider(
    {
        "base_url": "https://lro.example.test",
        "create": {
            "path": "/v1/things",
            "idempotency": "body",
            "idempotency_body_field": "request_id",
            "job_id": "/name",
        },
        "status": {"path": "/v1/{+job_id}", "done": "/done", "error": "/error"},
        "result": {"source": "inline", "inline": "/response"},
    }
)

BATCH = provider(
    {
        "base_url": "https://batch.example.test",
        "create": {"path": "/v1/batches", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/batches/{job_id}",
            "state": "/processing_status",
            "state_map": {"in_progress": "running", "canceling": "running", "ended": "succeeded"},
            "counts_succeeded": "/request_counts/succeeded",
            "counts_failed": ["/request_counts/errored", "/request_counts/expired"],
            "counts_total": [
                "/request_counts/processing",
                "/request_counts/succeeded",
                "/request_counts/errored",
                "/request_counts/expired",
            ],
            "outcome_from_counts": True,
        },
        "result": {"source": "none"},
    }
)


def batch_status(succeeded: int, errored: int, expired: int = 0) -> HttpResponse:
    counts = {"processing": 0, "succeeded": succeeded, "errored": errored, "expired": expired}
    return response(200, {"id": "b1", "processing_status": "ended", "request_counts": counts})


# --------------------------------------------------------------------- create


def test_create_202_is_accepted_with_job_id_state_and_status_url() -> None:
    resp = response(
        202,
        {"job_id": "job_1", "state": "queued", "status_url": "/v1/jobs/job_1"},
        {"X-Request-Id": "req_9"},
    )
    fact = parse_create(SIM, resp)
    assert fact.kind == "accepted"
    assert fact.remote_job_id == "job_1"
    assert fact.remote_state is RemoteState.PENDING and fact.raw_state == "queued"
    assert fact.status_url == "/v1/jobs/job_1"
    assert fact.provider_request_id == "req_9"


def test_create_200_with_result_is_a_sync_result() -> None:
    body = {"job_id": "job_2", "state": "succeeded", "result": {"items": [1, 2]}}
    fact = parse_create(SIM, response(200, body))
    assert fact.kind == "sync_result"
    assert fact.sync_result == {"items": [1, 2]}
    assert fact.remote_job_id == "job_2"
    assert fact.remote_state is RemoteState.SUCCEEDED


def test_create_200_without_result_on_simulator_is_ambiguous() -> None:
    # 200 is configured for sync results only; without one it is not an acceptance.
    fact = parse_create(SIM, response(200, {"job_id": "job_3", "state": "queued"}))
    assert fact.kind == "ambiguous"


def test_create_422_is_rejected_with_the_provider_error() -> None:
    body = {"error": {"code": "invalid_input", "message": "rows must be positive"}}
    fact = parse_create(SIM, response(422, body))
    assert fact.kind == "rejected"
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("invalid_input", "rows must be positive")
    assert not fact.idempotency_conflict


def test_create_409_token_reused_is_a_rejected_conflict() -> None:
    fact = parse_create(SIM, response(409, {"error": {"code": "idempotency_key_reused"}}))
    assert fact.kind == "rejected"
    assert fact.idempotency_conflict


def test_create_409_without_known_code_is_ambiguous() -> None:
    fact = parse_create(SIM, response(409, {"error": {"code": "request_in_progress"}}))
    assert fact.kind == "ambiguous"


def test_create_503_is_ambiguous_back_pressure_with_retry_after() -> None:
    fact = parse_create(SIM, response(503, {"error": "busy"}, {"Retry-After": "7"}), now=NOW)
    assert fact.kind == "ambiguous"
    assert fact.back_pressure
    assert fact.retry_after_seconds == 7.0


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 504])
def test_create_transient_statuses_are_ambiguous(status: int) -> None:
    assert parse_create(SIM, response(status)).kind == "ambiguous"


# Runway's image_to_video, as its docs describe it: no idempotency, no lookup,
# and a 429 that "may retry" because nothing was created.
RUNWAY: dict[str, Any] = {
    "base_url": "https://api.runway.example",
    "create": {"path": "/v1/image_to_video", "idempotency": "none", "job_id": "/id"},
    "status": {
        "path": "/v1/tasks/{job_id}",
        "state": "/status",
        "state_map": {"PENDING": "pending", "RUNNING": "running", "SUCCEEDED": "succeeded"},
    },
    "result": {"source": "inline", "inline": "/output"},
}


def test_a_create_refusal_listed_as_not_created_is_back_pressure_not_doubt() -> None:
    runway = provider({**RUNWAY, "create": {**RUNWAY["create"], "not_created_statuses": [429]}})
    throttled = response(429, {"error": "You have exceeded the rate limit."}, {"Retry-After": "7"})
    fact = parse_create(runway, throttled, now=NOW)
    assert (fact.kind, fact.back_pressure, fact.retry_after_seconds) == ("not_created", True, 7.0)
    assert fact.error is not None and "exceeded the rate limit" in (fact.error.message or "")
    assert "not_created_statuses" in fact.reason
    # only the listed codes: a 503 stays ambiguous, a 400 rejected
    assert parse_create(runway, response(503)).kind == "ambiguous"
    assert parse_create(runway, response(400, {"error": "bad"})).kind == "rejected"
    # without the key, a 429 is what it always was
    assert parse_create(provider(RUNWAY), throttled, now=NOW).kind == "ambiguous"


def test_create_2xx_without_job_id_is_ambiguous() -> None:
    fact = parse_create(SIM, response(202, {"state": "queued"}))
    assert fact.kind == "ambiguous"
    assert "without a job id at /job_id" in fact.reason


def test_create_2xx_with_non_json_body_is_ambiguous() -> None:
    resp = HttpResponse(202, {"Content-Type": "text/html"}, b"<html>Accepted</html>")
    assert parse_create(SIM, resp).kind == "ambiguous"


def test_create_job_id_from_header_and_status_url_from_header() -> None:
    desc = provider(
        {
            "base_url": "https://azure.example.test",
            "create": {
                "path": "/jobs",
                "idempotency": "client_job_id",
                "idempotency_header": "Operation-Id",
                "status_url": "header:Operation-Location",
            },
            "status": {
                "use_status_url": True,
                "state": "/status",
                "state_map": {"Running": "running", "Succeeded": "succeeded"},
            },
            "result": {"source": "none"},
        }
    )
    resp = response(202, None, {"operation-location": "https://azure.example.test/ops/abc"})
    fact = parse_create(desc, resp, idempotency_token="tok_1")
    assert fact.kind == "accepted"
    assert fact.remote_job_id == "tok_1"  # client-chosen id
    assert fact.status_url == "https://azure.example.test/ops/abc"


# --------------------------------------------------------------------- status


def test_status_reads_every_simulator_field() -> None:
    body = {
        "job_id": "job_1",
        "state": "running",
        "progress": {"completed": 25, "total": 100},
        "updated_at": "2025-01-06T11:59:58.123456789Z",
        "poll_after_seconds": 3,
        "error": None,
        "result_url": None,
        "errors_url": None,
        "counts": None,
    }
    fact = parse_status(SIM, response(200, body), now=NOW)
    assert fact.remote_state is RemoteState.RUNNING
    assert (fact.progress_completed, fact.progress_total, fact.progress_percent) == (25, 100, 25)
    assert fact.provider_updated_at == datetime(2025, 1, 6, 11, 59, 58, 123456, tzinfo=UTC)
    assert fact.poll_after_seconds == 3.0
    assert fact.error is None and fact.counts is None
    assert not fact.is_terminal


def test_status_cancelling_maps_to_running() -> None:
    fact = parse_status(SIM, response(200, {"job_id": "j", "state": "cancelling"}))
    assert fact.remote_state is RemoteState.RUNNING
    assert fact.raw_state == "cancelling"


def test_status_unknown_remote_state_is_none_with_raw_kept() -> None:
    fact = parse_status(SIM, response(200, {"job_id": "j", "state": "thawing"}))
    assert fact.remote_state is None
    assert fact.raw_state == "thawing"
    assert not fact.is_terminal


def test_status_terminal_with_result_url_counts_and_error() -> None:
    body = {
        "job_id": "j",
        "state": "partially_succeeded",
        "result_url": "/r/j",
        "errors_url": "/v1/jobs/j/errors",
        "counts": {"total": 500, "succeeded": 498, "failed": 2},
        "error": {"code": "partial", "message": "2 items failed"},
    }
    fact = parse_status(SIM, response(200, body))
    assert fact.is_terminal
    assert fact.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    assert fact.result_url == "/r/j" and fact.errors_url == "/v1/jobs/j/errors"
    assert fact.counts is not None and (fact.counts.total, fact.counts.failed) == (500, 2)
    assert fact.error is not None and fact.error.code == "partial"


def test_status_429_is_back_pressure_with_http_date_retry_after() -> None:
    resp = response(429, None, {"Retry-After": "Mon, 06 Jan 2025 12:00:30 GMT"})
    fact = parse_status(SIM, resp, now=NOW)
    assert fact.back_pressure
    assert fact.retry_after_seconds == 30.0
    assert fact.remote_state is None


def test_status_404_is_not_found() -> None:
    fact = parse_status(SIM, response(404, {"error": {"code": "not_found"}}))
    assert fact.not_found and fact.remote_state is None


def test_status_non_json_body_has_a_problem_not_a_state() -> None:
    fact = parse_status(SIM, HttpResponse(200, {}, b"oops"))
    assert fact.remote_state is None
    assert fact.problem == "status body is not a JSON object"


# Valid JSON nested deeper than json.loads can recurse: RecursionError, not ValueError.
TOO_DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("body", [TOO_DEEP, b"[" * 100_000], ids=["balanced", "unclosed"])
def test_a_body_nested_past_the_stack_is_not_json(body: bytes) -> None:
    resp = HttpResponse(200, {"Content-Type": "application/json"}, body)
    assert resp.json_body is None
    fact = parse_status(SIM, resp)
    assert fact.remote_state is None
    assert fact.problem == "status body is not a JSON object"
    assert parse_create(SIM, HttpResponse(201, {}, body)).kind == "ambiguous"


def test_aip151_not_done_is_running() -> None:
    fact = parse_status(AIP151, response(200, {"name": "operations/1", "done": False}))
    assert fact.remote_state is RemoteState.RUNNING


def test_aip151_missing_done_is_running() -> None:
    fact = parse_status(AIP151, response(200, {"name": "operations/1"}))
    assert fact.remote_state is RemoteState.RUNNING


def test_aip151_done_without_error_is_succeeded() -> None:
    body = {"name": "operations/1", "done": True, "response": {"ok": 1}}
    assert parse_status(AIP151, response(200, body)).remote_state is RemoteState.SUCCEEDED


def test_aip151_error_code_1_is_cancelled() -> None:
    body = {"name": "operations/1", "done": True, "error": {"code": 1, "message": "Cancelled"}}
    fact = parse_status(AIP151, response(200, body))
    assert fact.remote_state is RemoteState.CANCELLED
    assert fact.error is not None and fact.error.code == "1"


@pytest.mark.parametrize(
    ("code", "state", "raw"),
    [
        (1.0, RemoteState.CANCELLED, "done=true error=1"),
        (13.0, RemoteState.FAILED, "done=true error=13"),
        (0.0, RemoteState.FAILED, "done=true error=0"),  # OK, yet an error object is there
        (1.5, RemoteState.FAILED, "done=true error=1.5"),
    ],
)
def test_aip151_an_error_code_sent_as_a_float_reads_as_its_integer(
    code: float, state: RemoteState, raw: str
) -> None:
    body = {"name": "operations/1", "done": True, "error": {"code": code}}
    fact = parse_status(AIP151, response(200, body))
    assert (fact.remote_state, fact.raw_state) == (state, raw)


def test_google_lro_reads_a_cancelled_code_sent_as_1_0_as_cancelled() -> None:
    google = load_preset("google_lro", env={"GOOGLE_ACCESS_TOKEN": "x"})
    for body in (
        b'{"done": true, "error": {"code": 1.0}}',
        b'{"done": true, "error": {"code": 1}}',
    ):
        fact = parse_status(google, HttpResponse(200, {}, body))
        assert (fact.remote_state, fact.raw_state) == (RemoteState.CANCELLED, "done=true error=1")


def test_a_float_code_reads_alike_in_the_state_map_and_the_error_code() -> None:
    # map_state and the AIP-151 error code share as_code: 2.0 is "2", 1.0 is "1"
    assert map_state({"2": RemoteState.RUNNING}, 2.0) == (RemoteState.RUNNING, "2.0")
    assert map_state({"1": RemoteState.CANCELLED}, 1.0)[0] is RemoteState.CANCELLED
    assert map_state({"1": RemoteState.CANCELLED}, 1.5)[0] is None
    assert map_state({str(2**53): RemoteState.RUNNING}, float(2**53))[0] is None


def test_aip151_other_error_code_is_failed() -> None:
    body = {"name": "operations/1", "done": True, "error": {"code": 13, "message": "internal"}}
    fact = parse_status(AIP151, response(200, body))
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.message == "internal"


def test_outcome_from_counts_all_succeeded() -> None:
    assert parse_status(BATCH, batch_status(10, 0)).remote_state is RemoteState.SUCCEEDED


def test_outcome_from_counts_some_failed_is_partial() -> None:
    assert parse_status(BATCH, batch_status(8, 2)).remote_state is RemoteState.PARTIALLY_SUCCEEDED


def test_outcome_from_counts_expired_items_make_it_partial() -> None:
    fact = parse_status(BATCH, batch_status(8, 0, expired=2))
    assert fact.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    assert fact.counts is not None and (fact.counts.total, fact.counts.failed) == (10, 2)


def test_outcome_from_counts_all_failed_is_failed() -> None:
    assert parse_status(BATCH, batch_status(0, 10)).remote_state is RemoteState.FAILED


def test_outcome_from_counts_leaves_running_batches_alone() -> None:
    body = {"processing_status": "in_progress", "request_counts": {"succeeded": 0, "errored": 3}}
    assert parse_status(BATCH, response(200, body)).remote_state is RemoteState.RUNNING


# --------------------------------------------------------------------- cancel


def test_cancel_accepted_is_delivery_not_cancellation() -> None:
    fact = parse_cancel(SIM, response(202, {"job_id": "j", "state": "cancelling"}))
    assert fact.kind == "accepted"


def test_cancel_409_is_rejected_and_503_ambiguous() -> None:
    assert parse_cancel(SIM, response(409, {"error": {"code": "already_done"}})).kind == "rejected"
    assert parse_cancel(SIM, response(503)).kind == "ambiguous"


# --------------------------------------------------------------------- lookup


def test_lookup_finds_our_job() -> None:
    body = {
        "jobs": [
            {"job_id": "job_7", "client_reference": "op_1", "state": "running"},
            {"job_id": "job_8", "client_reference": "op_2", "state": "running"},
        ]
    }
    fact = parse_lookup(SIM, response(200, body), "op_1")
    assert fact.found_job_ids == ("job_7",)
    assert not fact.proven_absent


def test_lookup_reports_duplicates() -> None:
    body = {
        "jobs": [
            {"job_id": "a", "client_reference": "op_1"},
            {"job_id": "b", "client_reference": "op_1"},
        ]
    }
    assert parse_lookup(SIM, response(200, body), "op_1").found_job_ids == ("a", "b")


def test_lookup_empty_last_page_proves_absence() -> None:
    fact = parse_lookup(SIM, response(200, {"jobs": []}), "op_1")
    assert fact.found_job_ids == () and fact.proven_absent


def test_lookup_error_proves_nothing() -> None:
    fact = parse_lookup(SIM, response(500), "op_1")
    assert not fact.proven_absent and fact.problem == "HTTP 500"


def test_lookup_scan_with_more_pages_is_not_proof_of_absence() -> None:
    desc = provider(
        {
            "base_url": "https://api.openai.test",
            "create": {
                "path": "/v1/batches",
                "idempotency": "none",
                "job_id": "/id",
                "client_reference_field": "metadata.jobwarden_operation_id",
            },
            "status": {
                "path": "/v1/batches/{job_id}",
                "state": "/status",
                "state_map": {"completed": "succeeded"},
            },
            "result": {"source": "none"},
            "lookup": {
                "path": "/v1/batches",
                "list": "/data",
                "match": "metadata.jobwarden_operation_id",
                "next_page_token": "/last_id",
                "has_more": "/has_more",
                "page_token_param": "after",
            },
        }
    )
    page = {
        "data": [{"id": "batch_1", "metadata": {"jobwarden_operation_id": "op_9"}}],
        "last_id": "batch_1",
        "has_more": True,
    }
    fact = parse_lookup(desc, response(200, page), "op_1")
    assert fact.next_page_token == "batch_1" and not fact.proven_absent
    last = {**page, "has_more": False}
    fact = parse_lookup(desc, response(200, last), "op_1")
    assert fact.next_page_token is None and fact.proven_absent


# --------------------------------------------------------------------- errors pages


def test_errors_page_items_and_token() -> None:
    body = {
        "items": [{"index": 3, "code": "bad_row", "message": "row 3 is empty"}],
        "next_page_token": "p2",
    }
    page = parse_errors_page(SIM, response(200, body))
    assert page.next_page_token == "p2"
    assert [(i.index, i.code, i.message) for i in page.items] == [(3, "bad_row", "row 3 is empty")]


# --------------------------------------------------------------------- webhooks


def test_webhook_fields_and_scheme_event_id() -> None:
    body = json.dumps({"job_id": "job_1", "state": "succeeded"}).encode()
    fact = parse_webhook(SIM, body, {"webhook-id": "msg_1"}, {})
    assert (fact.event_id, fact.remote_job_id) == ("msg_1", "job_1")
    assert fact.remote_state is RemoteState.SUCCEEDED and fact.raw_state == "succeeded"


def test_a_parsed_body_is_read_without_parsing_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    body = json.dumps({"job_id": "job_1", "state": "succeeded"}).encode()
    headers = {"webhook-id": "msg_1"}
    expected = parse_webhook(SIM, body, headers, {})
    document = json.loads(body)

    def no_second_parse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the body was parsed again")

    monkeypatch.setattr(json, "loads", no_second_parse)
    assert parse_parsed_webhook(ProviderAdapter(SIM), document, body, headers, {}) == expected


def test_a_plugin_that_reads_webhooks_its_own_way_is_still_called() -> None:
    class OwnReading(ProviderAdapter):
        def parse_webhook(
            self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
        ) -> WebhookFact:
            return WebhookFact("own", body.decode(), None, None, None, thin=False)

    class Inherited(OwnReading):  # a plugin built on another plugin
        pass

    for plugin in (OwnReading(SIM), Inherited(SIM)):
        fact = parse_parsed_webhook(plugin, {"job_id": "job_1"}, b"raw", {}, {})
        assert (fact.event_id, fact.remote_job_id) == ("own", "raw")


def test_webhook_unknown_state_is_none_and_missing_event_id_uses_body_hash() -> None:
    body = json.dumps({"job_id": "job_1", "state": "weird"}).encode()
    fact = parse_webhook(SIM, body, {}, {})
    assert fact.remote_state is None and fact.raw_state == "weird"
    assert fact.event_id.startswith("sha256:")


def test_webhook_malformed_json_is_a_parse_error() -> None:
    with pytest.raises(WebhookParseError):
        parse_webhook(SIM, b"{not json", {}, {})


def test_webhook_nested_past_the_stack_is_a_parse_error() -> None:
    with pytest.raises(WebhookParseError, match="not valid JSON"):
        parse_webhook(SIM, TOO_DEEP, {}, {})


def test_webhook_without_job_id_is_a_parse_error() -> None:
    with pytest.raises(WebhookParseError, match="no job id"):
        parse_webhook(SIM, b'{"state": "succeeded"}', {}, {})


OPENAI_LIKE: dict[str, Any] = {
    "base_url": "https://batch.example.test",
    "create": {"path": "/v1/batches", "idempotency": "none", "job_id": "/id"},
    "status": {
        "path": "/v1/batches/{job_id}",
        "state": "/status",
        "state_map": {"completed": "succeeded"},
    },
    "result": {"source": "none"},
}


def test_webhook_operation_ref_from_query_and_thin_event_state_map() -> None:
    desc = provider(
        {
            **OPENAI_LIKE,
            "webhooks": {
                "scheme": "standard_webhooks",
                "secrets_env": "WH",
                "thin": True,
                "job_id": "/data/id",
                "state": "/type",
                "operation_ref": "query:op",
                "state_map": {"batch.completed": "succeeded"},
            },
        },
        env={"WH": "whsec_eA=="},
    )
    body = json.dumps({"type": "batch.completed", "data": {"id": "batch_1"}}).encode()
    fact = parse_webhook(desc, body, {}, {"op": "op_42"})
    assert fact.operation_ref == "op_42" and fact.remote_job_id == "batch_1"
    assert fact.remote_state is RemoteState.SUCCEEDED and fact.thin


REFERENCED = provider(
    {
        **OPENAI_LIKE,
        "webhooks": {
            "scheme": "standard_webhooks",
            "secrets_env": "WH",
            "operation_id": "query:op",
            "client_reference": "/data/metadata/ref",
            "job_id": "/data/id",
            "state": "/data/status",
        },
    },
    env={"WH": "whsec_eA=="},
)


def _referenced(data: dict[str, Any], query: dict[str, str] | None = None) -> Any:
    return parse_webhook(REFERENCED, json.dumps({"data": data}).encode(), {}, query or {})


def test_webhook_references_are_listed_in_the_order_the_receiver_trusts_them() -> None:
    fact = _referenced({"id": "batch_1", "metadata": {"ref": "inv-42"}}, {"op": "op_42"})
    assert (fact.operation_ref, fact.client_reference, fact.remote_job_id) == (
        "op_42",
        "inv-42",
        "batch_1",
    )
    assert fact.references == (
        ("operation_id", "op_42"),
        ("client_reference", "inv-42"),
        ("job_id", "batch_1"),
    )


def test_webhook_client_reference_alone_names_the_operation() -> None:
    fact = _referenced({"metadata": {"ref": 42}, "status": "completed"})
    assert fact.client_reference == "42"  # ids may be numbers
    assert fact.operation_ref is None and fact.remote_job_id is None
    assert fact.references == (("client_reference", "42"),)
    assert fact.remote_state is RemoteState.SUCCEEDED


def test_webhook_naming_no_reference_says_where_it_looked() -> None:
    with pytest.raises(WebhookParseError) as caught:
        _referenced({"metadata": {"ref": ""}, "status": "completed"})
    assert str(caught.value) == (
        "webhook carries no job id, operation id or client reference "
        "(query:op or /data/metadata/ref or /data/id)"
    )


@pytest.mark.parametrize("odd", ["\u0000", "\ud800", "\udfff"])
def test_webhook_references_postgres_cannot_hold_count_as_absent(odd: str) -> None:
    fact = _referenced(
        {"id": "batch_1", "metadata": {"ref": f"inv{odd}"}, "status": f"completed{odd}"},
        {"op": f"op_{odd}"},
    )
    assert fact.references == (("job_id", "batch_1"),)
    assert fact.remote_state is None and fact.raw_state == "completed\ufffd"
    with pytest.raises(WebhookParseError, match="no job id"):
        _referenced({"id": f"batch{odd}", "metadata": {"ref": f"inv{odd}"}})


def test_webhook_overlong_references_are_clipped() -> None:
    fact = _referenced({"id": "b" * 600, "metadata": {"ref": "r" * 600}})
    assert fact.remote_job_id is not None and fact.client_reference is not None
    assert len(fact.remote_job_id) == len(fact.client_reference) == 500


# --------------------------------------------------------------------- transport


@pytest.mark.parametrize(
    ("exc", "category", "delivered"),
    [
        (httpx.ConnectError("refused"), "connect", False),
        (httpx.ConnectTimeout("slow connect"), "connect", False),
        (httpx.PoolTimeout("pool"), "connect", False),
        (httpx.ReadTimeout("slow answer"), "timeout", True),
        (httpx.WriteTimeout("slow send"), "timeout", True),
        (httpx.ReadError("reset by peer"), "reset", True),
        (httpx.RemoteProtocolError("closed without response"), "protocol", True),
        (ConnectionResetError(), "reset", True),
        (RuntimeError("?"), "other", True),
    ],
)
def test_classify_transport_error(exc: BaseException, category: str, delivered: bool) -> None:
    found = classify_transport_error(exc)
    assert found == category
    assert may_have_been_delivered(found) is delivered


def test_an_unlisted_success_naming_its_job_is_taken_not_resent() -> None:
    """Resending would get the same answer until the create deadline (one create each time)."""
    desc = replace(SIM, create=replace(SIM.create, sync_result_statuses=frozenset()))
    fact = parse_create(desc, response(200, {"job_id": "job_3", "state": "queued"}))
    assert fact.kind == "accepted" and "not in create.accepted_statuses" in fact.reason
    assert parse_create(desc, response(200, {"state": "queued"})).kind == "ambiguous"


# ------------------------------------------------------- paths that name a header

HEADERS = provider(
    {
        "base_url": "https://api.example.test",
        "create": {
            "path": "/jobs",
            "idempotency": "none",
            "job_id": "/id",
            "error_code": "header:X-Error-Code",
        },
        "status": {
            "path": "/jobs/{job_id}",
            "state": "header:X-Task-Status",
            "error_message": "header:X-Error",
            "state_map": {"busy": "running", "ok": "succeeded", "bad": "failed"},
            "errors_url": "/errs",
        },
        "result": {
            "source": "path",
            "path": "/jobs/{job_id}/out",
            "errors": {"items": "/items", "next_page_token": "header:X-Next"},
        },
        "lookup": {
            "path": "/jobs",
            "list": "",
            "match": "/name",
            "job_id": "/id",
            "next_page_token": "header:X-Next-Page",
        },
    }
)


def test_a_page_cursor_in_a_header_is_read() -> None:
    """Read without the headers it was always absent: page 1 proved absence."""
    fact = parse_lookup(HEADERS, response(200, [], {"X-Next-Page": "2"}), "op_1")
    assert fact.next_page_token == "2" and not fact.proven_absent
    page = parse_errors_page(HEADERS, response(200, {"items": []}, {"x-next": "abc"}))
    assert page.next_page_token == "abc"


def test_a_state_and_an_error_in_headers_are_read_whatever_the_body() -> None:
    empty = HttpResponse(status_code=200, headers={"X-Task-Status": "ok"}, body=b"")
    assert parse_status(HEADERS, empty).remote_state is RemoteState.SUCCEEDED
    failed = response(200, {}, {"X-Task-Status": "bad", "X-Error": "disk full"})
    fact = parse_status(HEADERS, failed)
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.message == "disk full"
    refused = parse_create(HEADERS, response(400, {}, {"X-Error-Code": "quota"}))
    assert refused.error is not None and refused.error.code == "quota"
    nothing = parse_status(HEADERS, HttpResponse(status_code=200, headers={}, body=b""))
    assert nothing.remote_state is None and nothing.problem == "status body is not a JSON object"


def test_a_2xx_create_carrying_an_error_instead_of_a_job_keeps_the_error() -> None:
    """GraphQL answers 200 with `userErrors`: ambiguous still, but not without a reason."""
    desc = provider(
        {
            "base_url": "https://shop.example.test",
            "create": {
                "path": "/graphql.json",
                "idempotency": "none",
                "job_id": "/data/bulk/op/id",
                "error_code": "/data/bulk/userErrors/0/code",
                "error_message": "/data/bulk/userErrors/0/message",
            },
            "status": {"path": "/ops/{+job_id}", "done": "/done"},
            "result": {"source": "inline", "inline": "/out"},
        }
    )
    body = {"data": {"bulk": {"op": None, "userErrors": [{"code": "INVALID", "message": "no"}]}}}
    fact = parse_create(desc, response(200, body))
    assert fact.kind == "ambiguous" and fact.reason.endswith(": INVALID")
    assert fact.error is not None and fact.error.message == "no"


def test_an_integral_float_state_is_the_state_maps_integer_code() -> None:
    desc = provider(
        {
            "base_url": "https://codes.example.test",
            "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
            "status": {
                "path": "/jobs/{job_id}",
                "state": "/status",
                "state_map": {"1": "running", "2": "succeeded"},
                "poll_after_seconds": "/retry",
            },
            "result": {"source": "inline", "inline": "/out"},
        }
    )
    fact = parse_status(desc, response(200, {"status": 2.0, "retry": "PT30S"}))
    assert fact.remote_state is RemoteState.SUCCEEDED and fact.raw_state == "2.0"
    assert fact.poll_after_seconds == 30.0
    assert parse_status(desc, response(200, {"status": 2.5})).remote_state is None


def estimating(key: str) -> ProviderDescription:
    """A provider whose status says when it expects the job to end, at `/eta`."""
    return provider(
        {
            "base_url": "https://ft.example.test",
            "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
            "status": {
                "path": "/jobs/{job_id}",
                "state": "/status",
                "state_map": {"running": "running"},
                key: "/eta",
            },
            "result": {"source": "none"},
        }
    )


@pytest.mark.parametrize(
    ("key", "eta", "expected"),
    [
        ("estimated_end", int(NOW.timestamp()) + 600, NOW.replace(minute=10)),  # Unix seconds
        ("estimated_end", "2025-01-06T12:10:00Z", NOW.replace(minute=10)),
        ("estimated_end", "soon", None),
        ("estimated_end", "9999-12-31T23:59:59Z", None),  # no estimate past a month
        ("estimated_end", (int(NOW.timestamp()) + 600) * 1000, None),  # milliseconds
        ("estimated_end", None, None),
        ("estimated_seconds_left", 600, NOW.replace(minute=10)),  # from the answer's time
        ("estimated_seconds_left", "PT10M", NOW.replace(minute=10)),
        ("estimated_seconds_left", -5, None),
        ("estimated_seconds_left", 1e300, None),  # no estimate past a month
        ("estimated_seconds_left", "NaN", None),
    ],
)
def test_a_status_reads_the_providers_estimated_end(key: str, eta: Any, expected: Any) -> None:
    fact = parse_status(estimating(key), response(200, {"status": "running", "eta": eta}), NOW)
    assert fact.remote_state is RemoteState.RUNNING
    assert fact.estimated_end == expected


def test_estimated_end_and_seconds_left_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="exclude each other"):
        provider(
            {
                "base_url": "https://ft.example.test",
                "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
                "status": {
                    "path": "/jobs/{job_id}",
                    "state": "/status",
                    "state_map": {"running": "running"},
                    "estimated_end": "/a",
                    "estimated_seconds_left": "/b",
                },
                "result": {"source": "none"},
            }
        )


# A CloudConvert job: its tasks in a list whose order the API does not promise.
# The export task holds the file, the failed task the error: found by what they
# are (`[operation=export/url]`, `[status=error]`), not by where they stand.
CLOUDCONVERT = provider(
    {
        "base_url": "https://api.cloudconvert.test",
        "create": {"path": "/v2/jobs", "idempotency": "none", "job_id": "/data/id"},
        "status": {
            "path": "/v2/jobs/{job_id}",
            "state": "/data/status",
            "state_map": {
                "waiting": "pending",
                "processing": "running",
                "finished": "succeeded",
                "error": "failed",
            },
            "result_url": "/data/tasks/[operation=export/url]/result/files/0/url",
            "error_code": "data.tasks[status=error].code",
            "error_message": "/data/tasks/[status=error]/message",
        },
        "result": {"source": "url"},
    }
)
CC_IMPORT = {"name": "import-1", "operation": "import/url", "status": "finished"}
CC_EXPORT = {
    "name": "export-1",
    "operation": "export/url",
    "status": "finished",
    "result": {"files": [{"filename": "a.pdf", "url": "https://storage.cloudconvert.test/a.pdf"}]},
}


def cc_job(status: str, *tasks: dict[str, Any]) -> HttpResponse:
    return response(200, {"data": {"id": "job_1", "status": status, "tasks": list(tasks)}})


@pytest.mark.parametrize("reverse", [False, True], ids=["listed", "reversed"])
def test_cloudconvert_finished_job_names_the_export_tasks_file_in_any_order(
    reverse: bool,
) -> None:
    convert = {"name": "convert-1", "operation": "convert", "status": "finished"}
    tasks = [CC_IMPORT, convert, CC_EXPORT]
    fact = parse_status(CLOUDCONVERT, cc_job("finished", *(tasks[::-1] if reverse else tasks)))
    assert fact.remote_state is RemoteState.SUCCEEDED
    assert fact.result_url == "https://storage.cloudconvert.test/a.pdf"
    assert fact.error is None


@pytest.mark.parametrize("reverse", [False, True], ids=["listed", "reversed"])
def test_cloudconvert_failed_job_reports_the_failed_tasks_error_in_any_order(
    reverse: bool,
) -> None:
    failed = {
        "name": "convert-1",
        "operation": "convert",
        "status": "error",
        "code": "INVALID_CONVERSION_TYPE",
        "message": "conversion type not supported",
    }
    # the export task never ran: it waits, and carries a message of its own
    waiting = {**CC_EXPORT, "status": "waiting", "result": None, "message": "waiting for convert-1"}
    tasks = [CC_IMPORT, waiting, failed]
    fact = parse_status(CLOUDCONVERT, cc_job("error", *(tasks[::-1] if reverse else tasks)))
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None
    assert fact.error.code == "INVALID_CONVERSION_TYPE"
    assert fact.error.message == "conversion type not supported"
    assert fact.result_url is None


AWS_JSON = {
    "base_url": "https://textract.us-east-1.amazonaws.com",
    "create": {
        "path": "/",
        "idempotency": "body",
        "idempotency_body_field": "/ClientRequestToken",
        "job_id": "/JobId",
        "error_code": "/__type",
        "not_created_codes": {"/__type": ["LimitExceededException"]},
    },
    "status": {
        "method": "POST",
        "path": "/",
        "body": {"JobId": "{job_id}"},
        "state": "/JobStatus",
        "state_map": {"IN_PROGRESS": "running", "SUCCEEDED": "succeeded"},
        "throttle_codes": {
            "/__type": ["ProvisionedThroughputExceededException"],
            "header:x-amzn-ErrorType": ["ThrottlingException"],
        },
    },
    "result": {"source": "inline", "inline": "/Blocks"},
}


def test_aws_error_codes_match_in_the_forms_aws_sends_them() -> None:
    """AWS's JSON protocols may qualify `__type` with the shape's namespace
    (`com.amazonaws.textract#LimitExceededException`) and append a URI to
    `x-amzn-ErrorType` after a colon (`ThrottlingException:http://internal...`);
    botocore strips both before it compares. A code listed bare matches both forms."""
    from shared.providers.responses import throttle_code

    aws = provider(AWS_JSON)
    limit = {"__type": "com.amazonaws.textract#LimitExceededException", "message": "limit"}
    fact = parse_create(aws, response(400, limit), now=NOW)
    assert (fact.kind, fact.back_pressure) == ("not_created", True)
    qualified = {"__type": "com.amazonaws.textract#ProvisionedThroughputExceededException"}
    assert throttle_code(aws, response(400, qualified)) is not None
    suffixed = {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/x/"}
    assert throttle_code(aws, response(400, {"message": "slow down"}, suffixed)) is not None
    # another code, however qualified, is not a throttle
    other = {"__type": "com.amazonaws.textract#InvalidJobIdException"}
    assert throttle_code(aws, response(400, other)) is None
    assert parse_create(aws, response(400, other), now=NOW).kind == "rejected"


def test_a_failed_state_read_without_an_error_names_the_state_as_its_reason() -> None:
    """DashScope's UNKNOWN ("the task does not exist or its status is unknown", a task
    past its 24 hours) and Gemini's BATCH_STATE_EXPIRED are failed states that come
    with no code or message. Before, the read carried no error and the operation
    failed with no reason at all; the state is now its reason. A failed read with
    the provider's own error keeps it, and no other state gains one."""
    desc = provider(
        {
            **RUNWAY,
            "status": {
                "path": "/api/v1/tasks/{job_id}",
                "state": "/output/task_status",
                "error_code": "/output/code",
                "error_message": "/output/message",
                "state_map": {"RUNNING": "running", "FAILED": "failed", "UNKNOWN": "failed"},
            },
        }
    )
    gone = parse_status(desc, response(200, {"output": {"task_status": "UNKNOWN"}}))
    assert gone.remote_state is RemoteState.FAILED
    assert gone.error is not None and gone.error.code is None
    assert gone.error.message == (
        "the provider's status says 'UNKNOWN' (a failed state) and gives no reason"
    )
    said = {"task_status": "FAILED", "code": "DataInspectionFailed", "message": "bad input"}
    failed = parse_status(desc, response(200, {"output": said}))
    assert failed.error is not None
    assert (failed.error.code, failed.error.message) == ("DataInspectionFailed", "bad input")
    running = parse_status(desc, response(200, {"output": {"task_status": "RUNNING"}}))
    assert running.error is None


def test_a_failed_state_told_by_the_http_status_alone_names_it_as_its_reason() -> None:
    """`state_from_http_status = {"410" = "failed"}`: a job read answered 410 Gone
    with no error of the provider's is failed, the code its state. A failed state
    read from the body names itself as the reason; one told by the status code alone
    had none, and the operation failed with no reason at all."""
    desc = provider(
        {
            **RUNWAY,
            "status": {
                "path": "/api/v1/tasks/{job_id}",
                "state": "/output/task_status",
                "error_message": "/output/message",
                "state_map": {"RUNNING": "running", "FAILED": "failed"},
                "state_from_http_status": {"410": "failed"},
            },
        }
    )
    gone = parse_status(desc, response(410, {"detail": "Gone"}))
    assert gone.remote_state is RemoteState.FAILED
    assert gone.error is not None and gone.error.code is None
    assert gone.error.message == (
        "the provider's status says 'HTTP 410' (a failed state) and gives no reason"
    )
    said = parse_status(desc, response(410, {"output": {"message": "expired after 24h"}}))
    assert said.error is not None and said.error.message == "expired after 24h"


def test_an_error_status_listed_as_carrying_the_job_is_read_for_its_state() -> None:
    """`status.state_in_error_statuses = [504]`: Intercom's failed export is read
    HTTP 504, the job in its body (status "failed"): that read is the job failed.
    A 504 whose body names no state (a gateway's own page) is the transient error
    it always was, and an unlisted code's body is never read for a state. Before,
    every non-2xx read's body went unread: the export stayed "running" until the
    result deadline, a human then told it had timed out."""
    status = {
        "path": "/export/content/data/{job_id}",
        "state": "/status",
        "state_map": {"in_progress": "running", "failed": "failed"},
    }
    listed = provider({**RUNWAY, "status": {**status, "state_in_error_statuses": [504]}})
    failed = {"job_identifier": "v5x", "status": "failed", "download_url": ""}
    read = parse_status(listed, response(504, failed))
    assert read.remote_state is RemoteState.FAILED and read.raw_state == "failed"
    assert read.error is not None
    gateway = parse_status(listed, response(504, {"message": "Gateway Timeout"}))
    assert gateway.remote_state is None and gateway.problem == "HTTP 504"
    unknown = parse_status(listed, response(504, {"status": "exploded"}))
    assert unknown.remote_state is None and unknown.problem == "HTTP 504"
    unlisted = parse_status(provider({**RUNWAY, "status": status}), response(504, failed))
    assert unlisted.remote_state is None and unlisted.problem == "HTTP 504"
    for bad in ([200], [404]):
        with pytest.raises(ConfigError, match="state_in_error_statuses"):
            provider({**RUNWAY, "status": {**status, "state_in_error_statuses": bad}})
    mapped = {
        **status,
        "state_in_error_statuses": [504],
        "state_from_http_status": {"504": "failed"},
    }
    with pytest.raises(ConfigError, match="state_in_error_statuses"):
        provider({**RUNWAY, "status": mapped})


def test_a_listed_back_pressure_code_read_for_its_state_keeps_its_wait() -> None:
    """`status.state_in_error_statuses = [503]`: a 503 whose body still names the
    job (running) is read for its state, and is still the back-pressure it says it
    is: its Retry-After is kept as a wait no call may break. Before, the body's
    state made the read an ordinary one, back_pressure and rate_limited dropped,
    and the next read went at the usual pace, inside the provider's window."""
    status = {
        "path": "/export/content/data/{job_id}",
        "state": "/status",
        "state_map": {"in_progress": "running", "failed": "failed"},
        "state_in_error_statuses": [503],
    }
    listed = provider({**RUNWAY, "status": status})
    read = parse_status(listed, response(503, {"status": "in_progress"}, {"Retry-After": "120"}))
    assert read.remote_state is RemoteState.RUNNING and read.raw_state == "in_progress"
    assert read.back_pressure and read.rate_limited, read
    assert read.retry_after_seconds == 120


CSV_ERRORS = parse_providers(
    {
        "providers": {
            "sf": {
                "base_url": "https://sf.test",
                "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
                "status": {
                    "path": "/jobs/{job_id}",
                    "state": "/state",
                    "state_map": {"InProgress": "running", "JobComplete": "succeeded"},
                },
                "result": {
                    "source": "path",
                    "path": "/jobs/{job_id}/ok",
                    "errors": {
                        "path": "/jobs/{job_id}/failedResults/",
                        "format": "csv",
                        "item_id": "sf__Id",
                        "item_message": "sf__Error",
                        "next_page_token": "header:Sforce-Locator",
                        "page_token_param": "locator",
                        "end_values": ["null"],
                    },
                },
            }
        }
    },
    "config.toml",
    {},
)["sf"]


def csv_page(text: str, locator: str) -> HttpResponse:
    return HttpResponse(status_code=200, headers={"Sforce-Locator": locator}, body=text.encode())


def test_a_csv_errors_page_is_its_rows_by_the_columns_named() -> None:
    text = '"sf__Id","sf__Error",FirstName,LastName\n,"REQUIRED_FIELD_MISSING:x",No,\n'
    page = parse_errors_page(CSV_ERRORS, csv_page(text, "MjAwMDAw"))
    assert page.next_page_token == "MjAwMDAw"
    assert [(i.index, i.item_id, i.message) for i in page.items] == [
        (None, None, "REQUIRED_FIELD_MISSING:x")
    ]
    last = parse_errors_page(CSV_ERRORS, csv_page("sf__Id,sf__Error,A\n001,bad,x\n", "null"))
    assert last.next_page_token is None and last.items[0].item_id == "001"
    empty = parse_errors_page(CSV_ERRORS, csv_page("sf__Id,sf__Error,A\n", "null"))
    assert empty.items == ()


def test_a_csv_errors_page_without_its_column_is_unreadable() -> None:
    with pytest.raises(ValueError, match="no column sf__Error"):
        parse_errors_page(CSV_ERRORS, csv_page("sf__Id,Oops\n1,x\n", "null"))


def test_the_status_named_errors_url_wins_over_the_path() -> None:
    assert errors_list_url(CSV_ERRORS, "750", "/named/errs") == "/named/errs"
    assert errors_list_url(CSV_ERRORS, "750", None) == "https://sf.test/jobs/750/failedResults/"
    assert errors_list_url(SIM, "j", None) is None
