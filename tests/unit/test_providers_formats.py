"""The description format can express the six real APIs of issue 6.

These are sketches written to exercise the format, not the shipped presets
(those come with issue 6 and are verified against each provider's docs).
Each test loads a sketch and pushes one characteristic response through it.
"""

from __future__ import annotations

import json
import random
import tomllib
from typing import Any

from shared.ledger.states import RemoteState
from shared.providers import (
    HttpResponse,
    build_create,
    build_lookup,
    build_result_requests,
    build_status,
    describe_guarantees,
    next_poll_delay,
    parse_create,
    parse_providers,
    parse_status,
    parse_webhook,
    validate_result,
)
from shared.providers.description import ProviderDescription
from shared.providers.facts import Counts

ENV = {"API_KEY": "sk-test", "WH_SECRET": "whsec_dGVzdA==", "HOOK_TOKEN": "tok-123"}


def load(text: str) -> ProviderDescription:
    document = tomllib.loads(text)
    (name,) = document["providers"]
    return parse_providers(document, "sketch.toml", ENV)[name]


def response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> HttpResponse:
    raw = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(status, headers or {}, raw)


def guarantee(desc: ProviderDescription, name: str) -> tuple[bool, str]:
    return next((holds, why) for n, holds, why in describe_guarantees(desc) if n == name)


OPENAI = """
[providers.openai]
base_url = "https://api.openai.com"
auth = { secret_env = "API_KEY" }
[providers.openai.create]
path = "/v1/batches"
idempotency = "none"
client_reference_field = "metadata.jobwarden_operation_id"
job_id = "/id"
state = "/status"
accepted_statuses = [200]
[providers.openai.status]
path = "/v1/batches/{job_id}"
state = "/status"
counts_total = "/request_counts/total"
counts_succeeded = "/request_counts/completed"
counts_failed = "/request_counts/failed"
outcome_from_counts = true
outcome_from_counts_states = ["completed", "expired"]
[providers.openai.status.state_map]
validating = "pending"
in_progress = "running"
finalizing = "running"
cancelling = "running"
completed = "succeeded"
expired = "failed"
failed = "failed"
cancelled = "cancelled"
[providers.openai.cancel]
path = "/v1/batches/{job_id}/cancel"
[providers.openai.result]
source = "files"
path = "/v1/files/{file_id}/content"
file_ids = ["/output_file_id", "/error_file_id"]
format = "jsonl"
item_id = "/custom_id"
item_error = "/error"
item_success = "/response/status_code"
item_success_values = [200]
expect = { item_count = "from_status_counts" }
[providers.openai.lookup]
path = "/v1/batches"
list = "/data"
match = "metadata.jobwarden_operation_id"
job_id = "id"
next_page_token = "/last_id"
has_more = "/has_more"
page_token_param = "after"
[providers.openai.webhooks]
scheme = "standard_webhooks"
secrets_env = "WH_SECRET"
thin = true
event_id = "/id"
job_id = "/data/id"
state = "/type"
[providers.openai.webhooks.state_map]
"batch.completed" = "succeeded"
"batch.failed" = "failed"
"batch.expired" = "failed"
"batch.cancelled" = "cancelled"
"""


def test_openai_batch_expired_with_partial_output_is_partial() -> None:
    desc = load(OPENAI)
    body = {
        "id": "batch_1",
        "status": "expired",
        "output_file_id": "file-o",
        "error_file_id": "file-e",
        "request_counts": {"total": 10, "completed": 6, "failed": 1},
    }
    status = parse_status(desc, response(200, body))
    assert status.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    urls = [r.url for r in build_result_requests(desc, "batch_1", status)]
    assert urls[1] == "https://api.openai.com/v1/files/file-e/content"
    create = build_create(
        desc,
        body={"endpoint": "/v1/chat/completions"},
        idempotency_token="t",
        client_reference="op_1",
    )
    assert create.json["metadata"] == {"jobwarden_operation_id": "op_1"}
    assert "Idempotency-Key" not in create.headers
    assert build_lookup(desc, "op_1", page_token="batch_9").url.endswith("?after=batch_9")
    thin = b'{"id": "evt_1", "type": "batch.completed", "data": {"id": "batch_1"}}'
    event = parse_webhook(desc, thin, {}, {})
    assert (event.event_id, event.remote_job_id, event.thin) == ("evt_1", "batch_1", True)
    assert guarantee(desc, "at-most-once create")[0] is False
    assert guarantee(desc, "lookup after lost response")[0] is True


REPLICATE = """
[providers.replicate]
base_url = "https://api.replicate.com"
auth = { secret_env = "API_KEY" }
[providers.replicate.create]
path = "/v1/predictions"
idempotency = "none"
job_id = "/id"
state = "/status"
accepted_statuses = [201, 202]
sync_result_statuses = [201]
sync_result = "/output"
set_headers = { "Cancel-After" = "{result_deadline_seconds}s" }
[providers.replicate.create.set_body]
webhook = "{webhook_url}?op={client_reference}"
webhook_events_filter = ["completed"]
[providers.replicate.status]
path = "/v1/predictions/{job_id}"
state = "/status"
error = "/error"
[providers.replicate.status.state_map]
starting = "pending"
processing = "running"
succeeded = "succeeded"
failed = "failed"
canceled = "cancelled"
aborted = "cancelled"
[providers.replicate.cancel]
path = "/v1/predictions/{job_id}/cancel"
[providers.replicate.result]
source = "inline"
inline = "/output"
[providers.replicate.webhooks]
scheme = "standard_webhooks"
secrets_env = "WH_SECRET"
job_id = "/id"
state = "/status"
operation_ref = "query:op"
"""


def test_replicate_webhook_url_carries_operation_id_and_literal_filter() -> None:
    desc = load(REPLICATE)
    request = build_create(
        desc,
        body={"version": "v1", "input": {}},
        idempotency_token="t",
        client_reference="op_5",
        context={
            "webhook_url": "https://jw.example/webhooks/replicate",
            "result_deadline_seconds": "900",
        },
    )
    assert request.json["webhook"] == "https://jw.example/webhooks/replicate?op=op_5"
    assert request.json["webhook_events_filter"] == ["completed"]
    assert request.headers["Cancel-After"] == "900s"
    started = parse_create(desc, response(201, {"id": "p1", "status": "starting", "output": None}))
    assert started.kind == "accepted"
    done = parse_create(desc, response(201, {"id": "p1", "status": "succeeded", "output": ["x"]}))
    assert done.kind == "sync_result" and done.sync_result == ["x"]


ASSEMBLYAI = """
[providers.assemblyai]
base_url = "https://api.assemblyai.com"
auth = { header = "Authorization", value = "{secret}", secret_env = "API_KEY" }
[providers.assemblyai.create]
path = "/v2/transcript"
idempotency = "none"
job_id = "/id"
state = "/status"
accepted_statuses = [200]
[providers.assemblyai.create.set_body]
webhook_url = "{webhook_url}?op={client_reference}"
webhook_auth_header_name = "X-Jobwarden-Token"
webhook_auth_header_value = "{webhook_secret}"
[providers.assemblyai.status]
path = "/v2/transcript/{job_id}"
state = "/status"
error = "/error"
[providers.assemblyai.status.state_map]
queued = "pending"
processing = "running"
completed = "succeeded"
error = "failed"
[providers.assemblyai.cancel]
supported = false
reason = "AssemblyAI has no endpoint to stop a transcript in progress"
[providers.assemblyai.result]
source = "inline"
inline = ""
expect = { required_fields = ["text"] }
[providers.assemblyai.webhooks]
scheme = "static_header"
options = { header = "X-Jobwarden-Token" }
secrets_env = "HOOK_TOKEN"
job_id = "/transcript_id"
state = "/status"
operation_ref = "query:op"
"""


def test_assemblyai_static_header_secret_sent_at_create_and_error_string() -> None:
    desc = load(ASSEMBLYAI)
    request = build_create(
        desc,
        body={"audio_url": "https://a/b.mp3"},
        idempotency_token="t",
        client_reference="op_1",
        context={"webhook_url": "https://jw/w"},
    )
    assert request.json["webhook_auth_header_value"] == "tok-123"
    assert request.sanitized_json()["webhook_auth_header_value"] == "[redacted]"
    failed = parse_status(
        desc, response(200, {"id": "t1", "status": "error", "error": "audio too short"})
    )
    assert failed.remote_state is RemoteState.FAILED
    assert failed.error is not None and failed.error.message == "audio too short"
    assert guarantee(desc, "cancellable")[0] is False
    assert guarantee(desc, "webhooks signed")[0] is False


AIP151 = """
[providers.lro]
base_url = "https://example.googleapis.com"
auth = { secret_env = "API_KEY" }
[providers.lro.create]
path = "/v1/projects/p/things"
idempotency = "body"
idempotency_body_field = "requestId"
job_id = "/name"
[providers.lro.status]
path = "/v1/{+job_id}"
done = "/done"
error = "/error"
[providers.lro.cancel]
path = "/v1/{+job_id}:cancel"
[providers.lro.result]
source = "inline"
inline = "/response"
"""


def test_google_lro_cancelled_and_nested_names() -> None:
    desc = load(AIP151)
    assert build_status(desc, "projects/p/operations/op-1").url == (
        "https://example.googleapis.com/v1/projects/p/operations/op-1"
    )
    cancelled = {
        "name": "projects/p/operations/op-1",
        "done": True,
        "error": {"code": 1, "message": "CANCELLED"},
    }
    assert parse_status(desc, response(200, cancelled)).remote_state is RemoteState.CANCELLED
    assert guarantee(desc, "at-most-once create")[0] is True


AZURE = """
[providers.azure]
base_url = "https://management.azure.com"
auth = { secret_env = "API_KEY" }
[providers.azure.create]
method = "PUT"
path = "/subscriptions/s/resourceGroups/g/providers/X/things/{client_reference}?api-version=1"
idempotency = "client_job_id"
status_url = ["header:Azure-AsyncOperation", "header:Location", "header:Operation-Location"]
[providers.azure.status]
use_status_url = true
state = "/status"
error = "/error"
[providers.azure.status.state_map]
NotStarted = "pending"
Running = "running"
Succeeded = "succeeded"
Failed = "failed"
Canceled = "cancelled"
[providers.azure.result]
source = "none"
[providers.azure.limits]
default_poll_after_seconds = 60
"""


def test_azure_status_url_header_fallback_and_default_poll() -> None:
    desc = load(AZURE)
    only_location = response(202, None, {"Location": "https://management.azure.com/ops/1"})
    fact = parse_create(desc, only_location, idempotency_token="tok-1")
    assert (fact.kind, fact.remote_job_id) == ("accepted", "tok-1")
    assert fact.status_url == "https://management.azure.com/ops/1"
    both = response(
        201,
        None,
        {
            "Location": "https://management.azure.com/ops/loc",
            "Azure-AsyncOperation": "https://management.azure.com/ops/aa",
        },
    )
    assert parse_create(desc, both, "tok-1").status_url == "https://management.azure.com/ops/aa"
    rng = random.Random(0)
    assert next_poll_delay(desc.limits, 3, None, None, rng, webhooks_configured=False) == 60.0
    assert next_poll_delay(desc.limits, 3, 5.0, None, rng, webhooks_configured=False) == 5.0


ANTHROPIC = """
[providers.anthropic]
base_url = "https://api.anthropic.com"
auth = { header = "x-api-key", value = "{secret}", secret_env = "API_KEY" }
headers = { "anthropic-version" = "2023-06-01" }
[providers.anthropic.create]
path = "/v1/messages/batches"
idempotency = "none"
job_id = "/id"
state = "/processing_status"
accepted_statuses = [200]
[providers.anthropic.status]
path = "/v1/messages/batches/{job_id}"
state = "/processing_status"
result_url = "/results_url"
counts_succeeded = "/request_counts/succeeded"
counts_failed = ["/request_counts/errored", "/request_counts/canceled", "/request_counts/expired"]
counts_cancelled = "/request_counts/canceled"
counts_total = [
    "/request_counts/processing",
    "/request_counts/succeeded",
    "/request_counts/errored",
    "/request_counts/canceled",
    "/request_counts/expired",
]
outcome_from_counts = true
state_map = { in_progress = "running", canceling = "running", ended = "succeeded" }
[providers.anthropic.cancel]
path = "/v1/messages/batches/{job_id}/cancel"
[providers.anthropic.result]
source = "url"
format = "jsonl"
item_id = "/custom_id"
item_success = "/result/type"
item_success_values = ["succeeded"]
item_error = "/result/error"
expect = { item_count = "from_status_counts" }
"""


def anthropic_counts(succeeded: int, errored: int, canceled: int) -> dict[str, int]:
    return {
        "processing": 0,
        "succeeded": succeeded,
        "errored": errored,
        "canceled": canceled,
        "expired": 0,
    }


def test_counts_sum_what_their_paths_hold_and_are_absent_when_none_does() -> None:
    """Several paths to one count add up; a path holding nothing (absent, null, not a
    number) adds nothing; zero is a count; integers stay exact."""
    desc = load(ANTHROPIC)

    def counts(request_counts: object) -> Counts | None:
        body = {"id": "b1", "processing_status": "in_progress", "request_counts": request_counts}
        return parse_status(desc, response(200, body)).counts

    assert counts(anthropic_counts(2, 1, 3)) == Counts(total=6, succeeded=2, failed=4, cancelled=3)
    assert counts({"succeeded": 0}) == Counts(total=0, succeeded=0, failed=None, cancelled=None)
    assert counts({"errored": "2", "canceled": None, "expired": "x", "processing": 1.0}) == Counts(
        total=3, succeeded=None, failed=2, cancelled=None
    )
    assert counts({"other": 1}) is None
    assert counts(None) is None
    big = 2**70  # exact, never through a double
    assert counts({"succeeded": big, "errored": 1}) == Counts(
        total=big + 1, succeeded=big, failed=1, cancelled=None
    )


def test_anthropic_counts_decide_and_lookup_is_impossible() -> None:
    desc = load(ANTHROPIC)
    ended = {
        "id": "b1",
        "processing_status": "ended",
        "results_url": "/v1/messages/batches/b1/results",
        "request_counts": anthropic_counts(1, 1, 0),
    }
    status = parse_status(desc, response(200, ended))
    assert status.remote_state is RemoteState.PARTIALLY_SUCCEEDED
    all_cancelled = {**ended, "request_counts": anthropic_counts(0, 0, 2)}
    assert parse_status(desc, response(200, all_cancelled)).remote_state is RemoteState.CANCELLED
    lines = [
        {"custom_id": "a", "result": {"type": "succeeded", "message": {}}},
        {"custom_id": "b", "result": {"type": "errored", "error": {"type": "invalid_request"}}},
    ]
    body = b"\n".join(json.dumps(line).encode() for line in lines)
    check = validate_result(desc, HttpResponse(200, {}, body), status)
    assert check.ok, check.reason
    assert [(f.item_id, f.code) for f in check.failed_items] == [("b", "invalid_request")]
    (request,) = build_result_requests(desc, "b1", status)
    assert request.headers["x-api-key"] == "sk-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    holds, why = guarantee(desc, "lookup after lost response")
    assert holds is False
    assert why.startswith("create after a lost response cannot be reconciled automatically")
