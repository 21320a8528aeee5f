"""Result validation: digests, required fields, size, content type, item counts, JSONL splits."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import (
    ConfigError,
    Counts,
    HttpResponse,
    StatusFact,
    load_preset,
    parse_providers,
    validate_inline_result,
    validate_result,
)
from shared.providers.description import ProviderDescription

SIM = load_preset("simulator", env={})


def provider(result: dict[str, Any]) -> ProviderDescription:
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/v1/jobs", "idempotency": "header", "job_id": "/id"},
        "status": {
            "path": "/v1/jobs/{job_id}",
            "state": "/status",
            "state_map": {"done": "succeeded"},
            "counts_total": "/counts/total",
            "counts_succeeded": "/counts/succeeded",
            "counts_failed": "/counts/failed",
        },
        "result": result,
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def content_digest(body: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"


def sim_result(items: list[Any], digest: str | None = None, **headers: str) -> HttpResponse:
    body = json.dumps({"job_id": "job_1", "items": items}).encode()
    all_headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Content-Digest": digest or content_digest(body),
        **headers,
    }
    return HttpResponse(200, all_headers, body)


def final_status(total: int, succeeded: int, failed: int) -> StatusFact:
    return StatusFact(
        status_code=200,
        remote_state=RemoteState.PARTIALLY_SUCCEEDED,
        counts=Counts(total=total, succeeded=succeeded, failed=failed),
    )


def test_valid_simulator_result() -> None:
    resp = sim_result([{"n": 1}, {"n": 2}])
    check = validate_result(SIM, resp, final_status(2, 2, 0))
    assert check.ok, check.reason
    assert check.sha256 == hashlib.sha256(resp.body).hexdigest()
    assert check.size == len(resp.body)
    assert check.content_type == "application/json"
    assert (check.items_total, check.items_succeeded, check.items_failed) == (2, 2, 0)
    assert check.parsed["items"] == [{"n": 1}, {"n": 2}]


def test_content_digest_mismatch() -> None:
    wrong = content_digest(b"something else")
    check = validate_result(SIM, sim_result([1], digest=wrong), final_status(1, 1, 0))
    assert not check.ok and not check.unavailable
    assert check.reason == "Content-Digest sha-256 mismatch"


def test_content_digest_missing() -> None:
    resp = HttpResponse(200, {"Content-Type": "application/json"}, b'{"items": []}')
    check = validate_result(SIM, resp, None)
    assert check.reason == "Content-Digest missing or without sha-256"


def test_content_digest_with_several_algorithms_checks_all_known() -> None:
    body = b'{"items": [1]}'
    sha512 = base64.b64encode(hashlib.sha512(body).digest()).decode()
    header = f"{content_digest(body)}, sha-512=:{sha512}:, md5=:AAAA:"
    resp = HttpResponse(200, {"Content-Type": "application/json", "Content-Digest": header}, body)
    assert validate_result(SIM, resp, final_status(1, 1, 0)).ok


def test_legacy_digest_header() -> None:
    desc = provider(
        {"source": "path", "path": "/v1/jobs/{job_id}/result", "expect": {"checksum": "digest"}}
    )
    body = b'{"ok": true}'
    good = "SHA-256=" + base64.b64encode(hashlib.sha256(body).digest()).decode()
    assert validate_result(desc, HttpResponse(200, {"Digest": good}, body), None).ok
    bad = "SHA-256=" + base64.b64encode(hashlib.sha256(b"x").digest()).decode()
    check = validate_result(desc, HttpResponse(200, {"Digest": bad}, body), None)
    assert check.reason == "Digest sha-256 mismatch"


def test_missing_required_field() -> None:
    body = json.dumps({"job_id": "job_1", "rows": []}).encode()
    resp = HttpResponse(
        200, {"Content-Type": "application/json", "Content-Digest": content_digest(body)}, body
    )
    check = validate_result(SIM, resp, None)
    assert check.reason == "missing required field items"


def test_result_too_big() -> None:
    desc = provider({"source": "path", "path": "/r/{job_id}", "expect": {"max_bytes": 10}})
    check = validate_result(desc, HttpResponse(200, {}, b'{"a": "0123456789"}'), None)
    assert check.reason == "result larger than max_bytes (19 > 10 bytes)"


def test_wrong_content_type() -> None:
    resp = sim_result([1], **{"Content-Type": "text/html"})
    check = validate_result(SIM, resp, final_status(1, 1, 0))
    assert check.reason == "unexpected content type text/html (expected application/json)"


def test_item_count_mismatch_against_status_counts() -> None:
    check = validate_result(
        SIM, sim_result([{"n": i} for i in range(498)]), final_status(500, 500, 0)
    )
    assert not check.ok
    assert check.reason == "expected 500 successful items, got 498"


def test_partial_batch_items_match_succeeded_count() -> None:
    check = validate_result(
        SIM, sim_result([{"n": i} for i in range(498)]), final_status(500, 498, 2)
    )
    assert check.ok, check.reason


def test_no_counts_in_status_skips_the_count_check_with_a_note() -> None:
    check = validate_result(SIM, sim_result([1, 2, 3]), StatusFact(status_code=200))
    assert check.ok
    assert check.notes == ("item count not checked: the status reported no counts",)


def test_expired_result_link_is_unavailable() -> None:
    check = validate_result(SIM, HttpResponse(410, {}, b"gone"), None)
    assert not check.ok and check.unavailable
    assert check.reason == "result fetch answered HTTP 410 ('gone')"


def test_a_refused_fetch_is_told_in_the_providers_words_without_its_credentials() -> None:
    """S3's "Request has expired" reached the agent as a bare HTTP 403; quoted, cut
    short, whitespace folded, a signed link's signature redacted."""
    body = (
        b"<Error>\n  <Code>AccessDenied</Code>\n  <Message>Request has expired</Message>\n"
        b"  <Url>https://b.s3.test/r.csv?X-Amz-Signature=abcdef&amp;x=1</Url>\n</Error>"
        + b"x"
        * 400
    )
    check = validate_result(SIM, HttpResponse(403, {}, body), None)
    assert check.unavailable
    assert check.reason.startswith(
        "result fetch answered HTTP 403 ('<Error> <Code>AccessDenied</Code> <Message>Request "
        "has expired</Message> <Url>https://b.s3.test/r.csv?X-Amz-Signature=[redacted]"
    ), check.reason
    assert "abcdef" not in check.reason and check.reason.endswith("…')")


def test_invalid_json() -> None:
    body = b"{broken"
    resp = HttpResponse(
        200, {"Content-Type": "application/json", "Content-Digest": content_digest(body)}, body
    )
    assert validate_result(SIM, resp, None).reason == "result is not valid JSON"


JSONL = provider(
    {
        "source": "files",
        "path": "/v1/files/{file_id}/content",
        "file_ids": ["/output_file_id", "/error_file_id"],
        "format": "jsonl",
        "item_id": "/custom_id",
        "item_error": "/error",
        "item_success": "/response/status_code",
        "item_success_values": [200],
        "expect": {"item_count": "from_status_counts", "required_fields": ["custom_id"]},
    }
)


def jsonl(*lines: dict[str, Any]) -> bytes:
    return b"\n".join(json.dumps(line).encode() for line in lines) + b"\n"


def test_jsonl_split_into_successes_and_failures_across_files() -> None:
    output = jsonl(
        {"custom_id": "a", "response": {"status_code": 200, "body": {}}, "error": None},
        {"custom_id": "b", "response": {"status_code": 200, "body": {}}, "error": None},
        {"custom_id": "c", "response": {"status_code": 400, "body": {}}, "error": None},
    )
    errors = jsonl(
        {
            "custom_id": "d",
            "response": None,
            "error": {"code": "batch_expired", "message": "not run in time"},
        }
    )
    parts = [HttpResponse(200, {}, output), HttpResponse(200, {}, errors)]
    check = validate_result(JSONL, parts, final_status(4, 2, 2))
    assert check.ok, check.reason
    assert (check.items_total, check.items_succeeded, check.items_failed) == (4, 2, 2)
    assert [(f.item_id, f.code) for f in check.failed_items] == [
        ("c", None),
        ("d", "batch_expired"),
    ]
    assert len(check.part_sha256) == 2
    assert check.sha256 == hashlib.sha256(output + errors).hexdigest()


def test_jsonl_missing_lines_fail_the_count() -> None:
    output = jsonl({"custom_id": "a", "response": {"status_code": 200}, "error": None})
    check = validate_result(JSONL, [HttpResponse(200, {}, output)], final_status(4, 1, 3))
    assert check.reason == "expected 4 items, got 1"


def test_results_nested_past_the_stack_are_not_valid_json() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    headers = {"Content-Type": "application/json", "Content-Digest": content_digest(deep)}
    check = validate_result(SIM, HttpResponse(200, headers, deep), None)
    assert check.reason == "result is not valid JSON"
    check = validate_result(JSONL, HttpResponse(200, {}, b"{}\n" + deep + b"\n"), None)
    assert check.reason == "result line 2 is not valid JSON"


def test_jsonl_bad_line_is_named() -> None:
    body = b'{"custom_id": "a", "response": {"status_code": 200}}\nnot json\n'
    check = validate_result(JSONL, HttpResponse(200, {}, body), None)
    assert check.reason == "result line 2 is not valid JSON"


def test_jsonl_required_field_applies_to_each_line() -> None:
    body = jsonl({"custom_id": "a", "response": {"status_code": 200}}, {"response": {}})
    check = validate_result(JSONL, HttpResponse(200, {}, body), None)
    assert check.reason == "missing required field custom_id"


def test_inline_result_is_validated_and_hashed_canonically() -> None:
    desc = provider(
        {
            "source": "inline",
            "inline": "/output",
            "items": "/items",
            "expect": {"required_fields": ["items"]},
        }
    )
    first = validate_inline_result(desc, {"items": [1, 2], "b": 1}, None)
    second = validate_inline_result(desc, {"b": 1, "items": [1, 2]}, None)
    assert first.ok and first.sha256 == second.sha256
    assert first.items_total == 2
    missing = validate_inline_result(desc, None, None)
    assert missing.reason == "no result in the final response"


def test_a_refused_fetch_quoting_the_callback_url_does_not_quote_its_token() -> None:
    """A result's own bytes keep the token (they are the result); the words quoted
    from a refused fetch are a reason agents read, and must not."""
    token = "lumatok_3f9a1c7e5b2d4f6a8c0e1a3b"
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/v1/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/jobs/{job_id}",
            "state": "/s",
            "state_map": {"d": "succeeded"},
            "result_url": "/url",
        },
        "result": {"source": "url"},
        "webhooks": {
            "scheme": "static_header",
            "options": {"query": "token"},
            "secrets_env": "T",
            "job_id": "/id",
        },
    }
    desc = parse_providers({"providers": {"p": table}}, "test.toml", {"T": token})["p"]
    body = json.dumps({"error": "bad", "callback": "https://h/w%3Ftoken%3D" + token}).encode()
    check = validate_result(desc, HttpResponse(400, {}, body), None)
    assert check.unavailable and token not in check.reason, check.reason


def test_a_result_of_failures_alone_counts_them_and_looks_for_no_successes() -> None:
    """`failures_only` (HubSpot's import errors): every item is a failed one and the
    status's successes are not looked for among them. Before, the items all read
    as failures left the status's 1 success unfound: a result "cut short"."""
    errors = {
        "source": "path",
        "path": "/v1/jobs/{job_id}/errors",
        "items": "/results",
        "item_error": "/errorType",
    }
    desc = provider({**errors, "failures_only": True})
    failed = [{"id": f"e{n}", "errorType": "INVALID_EMAIL"} for n in (1, 2)]
    body = json.dumps({"results": failed}).encode()
    resp = HttpResponse(200, {"Content-Type": "application/json"}, body)
    check = validate_result(desc, resp, final_status(3, 1, 2))
    assert check.ok, check.reason
    assert (check.items_total, check.items_succeeded, check.items_failed) == (2, None, 2)
    ordinary = provider(errors)
    assert not validate_result(ordinary, resp, final_status(3, 1, 2)).ok


def _zendesk_like(**result: Any) -> ProviderDescription:
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/v1/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/jobs/{job_id}",
            "state": "/status",
            "state_map": {"completed": "succeeded"},
        },
        "result": {
            "source": "inline",
            "inline": "/job_status",
            "format": "json",
            "items": "/results",
            "expect": {"item_count": "/total"},
            **result,
        },
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


ZENDESK_STATUS = {
    "id": "V3-1",
    "status": "completed",
    "total": 3,
    "results": [
        {"id": 1, "status": "Created"},
        {"index": 1, "error": "UserCreateFailed", "details": "Email is already in use"},
        {"id": 3, "status": "Created"},
    ],
}


def test_a_count_in_a_result_that_lists_its_failures_counts_them_too() -> None:
    """Zendesk's job status: `total` users, one `results` entry each, made or
    refused (item_error). Before, the count was held to the successes alone:
    "expected 3 items, got 2" for a job that said exactly what it did."""
    check = validate_inline_result(_zendesk_like(item_error="/error"), ZENDESK_STATUS, None)
    assert check.ok, check.reason
    assert (check.items_total, check.items_failed) == (3, 1)
    short = dict(ZENDESK_STATUS, total=4)
    check = validate_inline_result(_zendesk_like(item_error="/error"), short, None)
    assert check.reason == "expected 4 items, got 3"


def test_a_count_in_a_result_that_cannot_tell_failures_counts_its_items() -> None:
    check = validate_inline_result(_zendesk_like(), ZENDESK_STATUS, None)
    assert check.ok, check.reason


def test_a_failed_items_code_and_message_are_read_where_the_description_says() -> None:
    """Zendesk's refused user: {"index", "error": "UserCreateFailed", "details":
    "Email ... is already in use"}. item_error reads one value (the name, taken as
    the message); item_code and item_message read both. Before, no key could,
    and the human read "UserCreateFailed" without why."""
    desc = _zendesk_like(item_error="/error", item_code="/error", item_message="/details")
    check = validate_inline_result(desc, ZENDESK_STATUS, None)
    assert check.ok, check.reason
    (failed,) = check.failed_items
    assert (failed.index, failed.code, failed.message) == (
        1,
        "UserCreateFailed",
        "Email is already in use",
    )


def test_item_code_without_a_way_to_fail_an_item_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        _zendesk_like(item_message="/details")
    assert str(caught.value) == (
        "test.toml: providers.p.result.item_message: read in failed items: needs"
        " item_error, item_success or failures_only"
    )
