"""Request building: URLs, job id quoting, idempotency placement, credentials only to our hosts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import (
    HttpResponse,
    RequestBuildError,
    StatusFact,
    UnsafeJobIdError,
    adapter_for,
    build_cancel,
    build_create,
    build_errors_page,
    build_lookup,
    build_result_requests,
    build_status,
    load_preset,
    parse_providers,
    parse_status,
)
from shared.providers.config import CREATE_VALUES
from shared.providers.description import ProviderDescription
from shared.providers.requests import CREATE_CONTEXT_VALUES
from shared.providers.templates import check_path_value

API_KEY = "sk-test-0123456789abcdef"
SIM = load_preset(
    "simulator", env={"JW_SIM_API_KEY": API_KEY, "JW_SIM_WEBHOOK_SECRET": "whsec_dGVzdA=="}
)


def provider(table: dict[str, Any], env: dict[str, str] | None = None) -> ProviderDescription:
    return parse_providers({"providers": {"p": table}}, "test.toml", env or {})["p"]


def test_simulator_create_carries_token_reference_and_auth() -> None:
    body = {"rows": 10}
    request = build_create(
        SIM,
        body=body,
        idempotency_token="idem_1",
        client_reference="op_1",
        extra_headers={"traceparent": "00-abc-def-01"},
    )
    assert (request.action, request.method) == ("create", "POST")
    assert request.url == "http://127.0.0.1:8765/v1/jobs"
    assert request.headers["Idempotency-Key"] == "idem_1"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert request.headers["traceparent"] == "00-abc-def-01"
    assert request.json == {"rows": 10, "client_reference": "op_1"}
    assert body == {"rows": 10}  # the stored body is never mutated
    assert request.timeout == 10.0


def test_a_header_set_twice_in_two_spellings_is_sent_once_as_the_later_says() -> None:
    """Header names are case-insensitive: AWS's JSON protocol names the operation in
    `X-Amz-Target`, the read's in `headers` and the create's in `set_headers`. Spelt
    differently, both were sent, and the create went out as two operations."""
    desc = provider(
        {
            "base_url": "https://textract.test",
            "headers": {"x-amz-target": "Textract.GetDocumentTextDetection", "accept": "*/*"},
            "create": {
                "path": "/",
                "idempotency": "header",
                "idempotency_header": "Idem",
                "job_id": "/JobId",
                "set_headers": {"X-Amz-Target": "Textract.StartDocumentTextDetection", "idem": "x"},
            },
            "status": {"path": "/{job_id}", "state": "/s", "state_map": {"a": "running"}},
            "result": {"source": "none"},
        }
    )
    create = build_create(desc, body={}, idempotency_token="idem_1", client_reference="op_1")
    assert create.headers == {
        "accept": "*/*",
        "X-Amz-Target": "Textract.StartDocumentTextDetection",
        "Idem": "idem_1",
    }
    assert build_status(desc, "j1").headers == {
        "accept": "*/*",
        "x-amz-target": "Textract.GetDocumentTextDetection",
    }


def test_request_repr_and_sanitized_headers_hide_the_credential() -> None:
    request = build_status(SIM, "job_1")
    assert API_KEY not in repr(request)
    assert request.sanitized_headers()["Authorization"] == "[redacted]"


def test_status_path_quotes_the_job_id() -> None:
    request = build_status(SIM, "job 1/../admin?x=1")
    assert request.url == "http://127.0.0.1:8765/v1/jobs/job%201%2F..%2Fadmin%3Fx%3D1"


@pytest.mark.parametrize("job_id", ["..", ".", "", "job\r\nX-Evil: 1"])
def test_status_refuses_ids_that_break_out_of_the_path(job_id: str) -> None:
    with pytest.raises(UnsafeJobIdError):
        build_status(SIM, job_id)


def test_a_path_value_is_refused_for_exactly_the_control_characters() -> None:
    """C0 controls and DEL, anywhere in the value; every other code point passes
    (the whole of Unicode, lone surrogates included: quoting handles the rest)."""
    for code in range(0x110000):
        value = f"job{chr(code)}1"
        if code < 0x20 or code == 0x7F:
            with pytest.raises(UnsafeJobIdError, match="control character"):
                check_path_value(value)
        else:
            check_path_value(value)


def test_reserved_expansion_keeps_slashes_but_refuses_climbing() -> None:
    desc = provider(
        {
            "base_url": "https://lro.example.test",
            "create": {
                "path": "/v1/things",
                "idempotency": "body",
                "idempotency_body_field": "request_id",
                "job_id": "/name",
            },
            "status": {"path": "/v1/{+job_id}", "done": "/done"},
            "cancel": {"path": "/v1/{+job_id}:cancel"},
            "result": {"source": "inline", "inline": "/response"},
        }
    )
    assert (
        build_status(desc, "operations/op 1").url == "https://lro.example.test/v1/operations/op%201"
    )
    assert (
        build_cancel(desc, "operations/1").url == "https://lro.example.test/v1/operations/1:cancel"
    )
    with pytest.raises(UnsafeJobIdError):
        build_status(desc, "operations/../../admin")
    create = build_create(desc, body={"a": 1}, idempotency_token="t1", client_reference="op_1")
    assert create.json == {"a": 1, "request_id": "t1"}
    assert "Idempotency-Key" not in create.headers


def test_status_url_recorded_at_create_is_used_and_credential_stays_home() -> None:
    desc = provider(
        {
            "base_url": "https://api.example.test",
            "auth": {"header": "Api-Key", "value": "{secret}", "secret_env": "KEY"},
            "create": {
                "path": "/jobs",
                "idempotency": "client_job_id",
                "idempotency_header": "Operation-Id",
                "status_url": "header:Operation-Location",
            },
            "status": {
                "use_status_url": True,
                "state": "/status",
                "state_map": {"Succeeded": "succeeded"},
            },
            "result": {"source": "none"},
        },
        env={"KEY": API_KEY},
    )
    same_host = build_status(desc, "tok", "https://api.example.test/ops/tok?api-version=1")
    assert same_host.url == "https://api.example.test/ops/tok?api-version=1"
    assert same_host.headers["Api-Key"] == API_KEY
    assert same_host.sanitized_headers()["Api-Key"] == "[redacted]"
    elsewhere = build_status(desc, "tok", "https://attacker.example.net/ops/tok")
    assert "Api-Key" not in elsewhere.headers
    create = build_create(desc, body=None, idempotency_token="tok", client_reference="op_1")
    assert create.headers["Operation-Id"] == "tok"


def test_status_without_recorded_url_or_path_cannot_be_built() -> None:
    desc = provider(
        {
            "base_url": "https://api.example.test",
            "create": {
                "path": "/jobs",
                "idempotency": "none",
                "job_id": "/id",
                "status_url": "header:Location",
            },
            "status": {"use_status_url": True, "state": "/s", "state_map": {"ok": "succeeded"}},
            "result": {"source": "none"},
        }
    )
    with pytest.raises(RequestBuildError):
        build_status(desc, "job_1", None)


def test_result_url_relative_to_base_and_presigned_url_gets_no_credential() -> None:
    status = StatusFact(status_code=200, result_url="/results/job_1")
    (request,) = build_result_requests(SIM, "job_1", status)
    assert request.url == "http://127.0.0.1:8765/results/job_1"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    presigned = StatusFact(
        status_code=200, result_url="https://bucket.s3.test/r?X-Amz-Signature=abc"
    )
    (request,) = build_result_requests(SIM, "job_1", presigned)
    assert "Authorization" not in request.headers
    assert "abc" not in request.sanitized_url()


def test_result_without_url_cannot_be_built() -> None:
    with pytest.raises(RequestBuildError):
        build_result_requests(SIM, "job_1", StatusFact(status_code=200))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("/results/job_1\x01", "the provider's URL contains a control character"),
        ("https://[secret@host/r", "the provider's URL cannot be parsed"),
        ("https://h\uff03secret/r", "the provider's URL cannot be parsed"),
        ("ftp://files.test/r", "the provider's URL is not an http(s) URL"),
    ],
)
def test_a_provider_url_no_request_can_carry_is_refused_without_repeating_it(
    url: str, reason: str
) -> None:
    with pytest.raises(RequestBuildError) as refused:
        build_result_requests(SIM, "job_1", StatusFact(status_code=200, result_url=url))
    assert str(refused.value) == reason  # never the URL: it may carry a credential


def test_every_refusal_to_build_is_one_type() -> None:
    assert issubclass(UnsafeJobIdError, RequestBuildError)


def test_a_stored_body_that_cannot_carry_our_reference_cannot_be_built() -> None:
    openai = load_preset("openai_batch", {"OPENAI_API_KEY": "sk-x"})
    with pytest.raises(RequestBuildError, match="'metadata' holds a non-object value"):
        build_create(
            openai, body={"metadata": "x"}, idempotency_token="idem_1", client_reference="op_1"
        )


def test_a_stored_body_nested_too_deeply_to_copy_cannot_be_built() -> None:
    # json.loads (the API's intake) reads this; copying it recurses twice as deep
    body = json.loads('{"a": ' * 800 + "{}" + "}" * 800)
    with pytest.raises(RequestBuildError, match="nested too deeply"):
        build_create(SIM, body=body, idempotency_token="idem_1", client_reference="op_1")


def test_result_files_one_request_per_file_id() -> None:
    desc = provider(
        {
            "base_url": "https://api.openai.test",
            "create": {"path": "/v1/batches", "idempotency": "none", "job_id": "/id"},
            "status": {
                "path": "/v1/batches/{job_id}",
                "state": "/status",
                "state_map": {"completed": "succeeded"},
            },
            "result": {
                "source": "files",
                "path": "/v1/files/{file_id}/content",
                "file_ids": ["/output_file_id", "/error_file_id"],
                "format": "jsonl",
            },
        }
    )
    status = StatusFact(status_code=200, result_file_ids=("file-out", "file-err"))
    urls = [r.url for r in build_result_requests(desc, "batch_1", status)]
    assert urls == [
        "https://api.openai.test/v1/files/file-out/content",
        "https://api.openai.test/v1/files/file-err/content",
    ]
    # the same file under both paths is one file: fetched (and its items counted) once
    answer = {"status": "completed", "output_file_id": "file-1", "error_file_id": "file-1"}
    read = parse_status(desc, HttpResponse(200, {}, json.dumps(answer).encode()))
    assert read.result_file_ids == ("file-1",)


def test_errors_page_and_lookup_query_parameters() -> None:
    first = build_errors_page(SIM, "/v1/jobs/j/errors")
    assert first.url == "http://127.0.0.1:8765/v1/jobs/j/errors?page_size=100"
    second = build_errors_page(SIM, "/v1/jobs/j/errors?x=1", page_token="p 2")
    # a space as %20, never "+" (which AWS signs as itself, and some servers read as a space)
    assert second.url == "http://127.0.0.1:8765/v1/jobs/j/errors?x=1&page_size=100&page_token=p%202"
    lookup = build_lookup(SIM, "op_1")
    assert lookup.url == "http://127.0.0.1:8765/v1/jobs?client_reference=op_1"


def test_cancel_request() -> None:
    request = build_cancel(SIM, "job_1")
    assert (request.method, request.url) == ("POST", "http://127.0.0.1:8765/v1/jobs/job_1/cancel")


def test_cancel_unsupported_says_why() -> None:
    desc = provider(
        {
            "base_url": "https://api.assemblyai.test",
            "create": {"path": "/v2/transcript", "idempotency": "none", "job_id": "/id"},
            "status": {
                "path": "/v2/transcript/{job_id}",
                "state": "/status",
                "state_map": {"completed": "succeeded"},
            },
            "cancel": {"supported": False, "reason": "AssemblyAI has no cancel endpoint"},
            "result": {"source": "inline", "inline": ""},
        }
    )
    with pytest.raises(RequestBuildError, match="AssemblyAI has no cancel endpoint"):
        build_cancel(desc, "t1")


def test_set_body_and_headers_templates_and_secret_fields_redacted() -> None:
    desc = provider(
        {
            "base_url": "https://api.example.test",
            "create": {
                "path": "/v1/predictions",
                "idempotency": "none",
                "job_id": "/id",
                "set_body": {
                    "webhook": "{webhook_url}?op={client_reference}",
                    "webhook_auth_header_value": "{webhook_secret}",
                },
                "set_headers": {"Cancel-After": "{result_deadline_seconds}s"},
            },
            "status": {
                "path": "/v1/predictions/{job_id}",
                "state": "/status",
                "state_map": {"succeeded": "succeeded"},
            },
            "result": {"source": "inline", "inline": "/output"},
            "webhooks": {
                "scheme": "static_header",
                "options": {"header": "X-Hook-Token"},
                "secrets_env": "WH",
                "job_id": "/id",
            },
        },
        env={"WH": "hook-secret-value"},
    )
    request = adapter_for(desc).build_create(
        body={"input": {}},
        idempotency_token="t",
        client_reference="op_7",
        context={
            "webhook_url": "https://hooks.example.test/webhooks/p",
            "result_deadline_seconds": "3600",
        },
    )
    assert request.json["webhook"] == "https://hooks.example.test/webhooks/p?op=op_7"
    assert request.json["webhook_auth_header_value"] == "hook-secret-value"
    assert request.headers["Cancel-After"] == "3600s"
    assert request.sanitized_json()["webhook_auth_header_value"] == "[redacted]"
    without_url = build_create(desc, body={}, idempotency_token="t", client_reference="op_7")
    assert "webhook" not in without_url.json  # unknown value: the field is left out
    assert "Cancel-After" not in without_url.headers


def test_the_create_values_are_those_a_caller_supplies_and_those_the_builder_fills() -> None:
    """The API dry-runs a body with every caller-supplied value set (receiver/api/bodies.py):
    a value the config allows that neither side fills would go untried there."""
    filled_by_builder = {"client_reference", "operation_id", "idempotency_token", "webhook_secret"}
    assert set(CREATE_CONTEXT_VALUES) | filled_by_builder == CREATE_VALUES
    assert not set(CREATE_CONTEXT_VALUES) & filled_by_builder


def adobe_like() -> ProviderDescription:
    """Adobe PDF Services' two credential headers: a bearer token and the client id."""
    return provider(
        {
            "base_url": "https://pdf-services.adobe.io",
            "auth": {
                "secret_env": "ADOBE_TOKEN",
                "also": {"x-api-key": {"secret_env": "ADOBE_CLIENT_ID"}},
            },
            "create": {"path": "/operation/compresspdf", "idempotency": "none", "job_id": "/id"},
            "status": {
                "path": "/jobs/{job_id}",
                "state": "/status",
                "state_map": {"done": "succeeded"},
                "result_url": "/url",
            },
            "result": {"source": "url"},
        },
        {"ADOBE_TOKEN": "tok-secret", "ADOBE_CLIENT_ID": "client-id-secret"},
    )


def test_a_second_credential_header_goes_home_redacted_and_nowhere_else() -> None:
    """`[auth.also.x-api-key]`: sent with the token on every call to the API, redacted
    wherever the call is recorded, and, like the token, never sent to another host
    (a pre-signed download URL). Before, there was no way to send it: a static
    `headers` entry is refused as a credential, and Adobe answers every call
    without its client id 401."""
    desc = adobe_like()
    request = build_status(desc, "j1")
    assert request.headers["Authorization"] == "Bearer tok-secret"
    assert request.headers["x-api-key"] == "client-id-secret"
    assert request.sanitized_headers()["x-api-key"] == "[redacted]"
    assert "client-id-secret" not in repr(request)
    elsewhere = StatusFact(status_code=200, result_url="https://dcplatformstorage.s3.test/a.pdf")
    (download,) = build_result_requests(desc, "j1", elsewhere)
    assert "x-api-key" not in download.headers and "Authorization" not in download.headers


def test_a_second_credential_header_naming_the_first_is_refused() -> None:
    with pytest.raises(Exception, match=r"auth\.also\.Authorization: is auth\.header"):
        provider(
            {
                "base_url": "https://api.test",
                "auth": {"secret_env": "T", "also": {"Authorization": {"secret_env": "T"}}},
                "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
                "status": {"path": "/jobs/{job_id}", "state": "/status"},
                "result": {"source": "url"},
            },
            {"T": "x"},
        )


def test_every_second_credential_header_is_checked_when_a_secret_is_not_set() -> None:
    """`providers check` for the receiver (no credentials loaded), or an optional auth
    whose secrets are not set yet: a mistake in an `[auth.also]` entry after one whose
    secret is unset went unsaid (the entries after it were never read), and surfaced
    only when the reconciler started with the credentials."""
    described = {
        "base_url": "https://api.test",
        "auth": {
            "secret_env": "T",
            "optional": True,
            "also": {
                "a-key": {"secret_env": "A"},
                "b-key": {"secret_evn": "B"},
            },
        },
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/jobs/{job_id}",
            "state": "/status",
            "state_map": {"done": "succeeded"},
            "result_url": "/url",
        },
        "result": {"source": "url"},
    }
    with pytest.raises(Exception, match=r"auth\.also\.b-key\.secret_env: required"):
        provider(described, {"T": "x"})
