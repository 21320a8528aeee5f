"""The six shipped presets load, document themselves, and the small format extensions they need.

Extensions made for issue 6 (each tested here, one behaviour per test):
- `create.idempotency_format = "uuid"`: the token travels as a UUID derived from it;
- a preset's `idempotency_body_field` no longer applies once the user switches mode;
- `status.state_from_http_status`: the state from the HTTP code when the body has none;
- a final response without the inline result is result *unavailable*, not invalid.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import (
    ConfigError,
    HttpResponse,
    build_create,
    build_lookup,
    parse_create,
    parse_providers,
    parse_status,
    preset_names,
    validate_inline_result,
)
from shared.providers.description import ProviderDescription, TokenFormat
from shared.providers.tokens import wire_token

SIX = ["openai_batch", "replicate", "assemblyai", "google_lro", "azure_async", "anthropic_batches"]
ENV = {
    "OPENAI_API_KEY": "k",
    "REPLICATE_API_TOKEN": "k",
    "ASSEMBLYAI_API_KEY": "k",
    "GOOGLE_ACCESS_TOKEN": "k",
    "AZURE_ACCESS_TOKEN": "k",
    "ANTHROPIC_API_KEY": "k",
}
TOKEN = "idem_0123456789abcdef0123456789abcdef"


def provider(preset: str, **overrides: Any) -> ProviderDescription:
    table = {"preset": preset, **overrides}
    return parse_providers({"providers": {"p": table}}, "test.toml", ENV)["p"]


def response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> HttpResponse:
    raw = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(status, headers or {}, raw)


@pytest.mark.parametrize("name", SIX)
def test_preset_loads_with_only_its_secret(name: str) -> None:
    desc = provider(name)
    assert desc.preset == name and desc.auth is not None
    assert desc.webhooks is None  # webhook secrets are optional: absent, polling only


@pytest.mark.parametrize("name", SIX)
def test_preset_header_says_what_to_configure_and_what_is_guaranteed(name: str) -> None:
    from importlib import resources

    text = resources.files("shared.providers").joinpath("presets", f"{name}.toml").read_text()
    header = text.split("\n\n", 1)[0]
    assert "Configure" in header and "Secret" in header
    assert "guaranteed, and why" in header


def test_all_presets_ship() -> None:
    assert set(SIX) <= set(preset_names())


# --------------------------------------------------------------------- idempotency_format


def test_uuid_form_of_a_token_is_a_stable_uuid4() -> None:
    first = wire_token(TOKEN, TokenFormat.UUID)
    assert first == wire_token(TOKEN, TokenFormat.UUID)
    assert uuid.UUID(first).version == 4 and len(first) == 36
    assert first != wire_token(TOKEN.replace("0", "1"), TokenFormat.UUID)
    assert wire_token(TOKEN, TokenFormat.TOKEN) == TOKEN


def test_uuid_token_travels_in_the_body_field() -> None:
    desc = provider("google_lro", create={"path": "/v1/things"})
    request = build_create(desc, body={"a": 1}, idempotency_token=TOKEN, client_reference="op_1")
    assert request.json == {"a": 1, "requestId": wire_token(TOKEN, TokenFormat.UUID)}


def test_client_chosen_uuid_is_the_header_and_the_job_id() -> None:
    desc = provider("azure_async", create={"path": "/x?api-version=1"})
    expected = wire_token(TOKEN, TokenFormat.UUID)
    request = build_create(desc, body={}, idempotency_token=TOKEN, client_reference="op_1")
    assert request.headers["Operation-Id"] == expected
    answer = response(202, None, {"Operation-Location": "https://h/operations/1"})
    fact = parse_create(desc, answer, idempotency_token=TOKEN)
    assert (fact.kind, fact.remote_job_id) == ("accepted", expected)


def test_lookup_by_token_uses_the_same_form() -> None:
    desc = provider(
        "azure_async",
        create={"path": "/x"},
        # a job the lookup finds has no status URL on record: read at a path
        # (a lookup whose found job could never be read is refused at load)
        status={"path": "/operations/{job_id}"},
        lookup={"kind": "get", "path": "/operations/{idempotency_token}", "job_id": "/id"},
    )
    request = build_lookup(desc, "op_1", TOKEN)
    assert request.url.endswith("/operations/" + wire_token(TOKEN, TokenFormat.UUID))


# --------------------------------------------------------------------- switching a preset's mode


def test_switching_a_body_token_preset_to_none_drops_its_body_field() -> None:
    desc = provider("google_lro", create={"path": "/v1/x", "idempotency": "none"})
    assert desc.create.idempotency_body_field is None


def test_a_body_field_the_user_wrote_with_mode_none_is_still_an_error() -> None:
    with pytest.raises(ConfigError, match="only used with idempotency = body"):
        provider(
            "google_lro",
            create={"path": "/v1/x", "idempotency": "none", "idempotency_body_field": "rid"},
        )


# --------------------------------------------------------------------- state from HTTP status


def test_empty_202_from_a_location_url_is_running() -> None:
    desc = provider("azure_async", create={"path": "/x"})
    fact = parse_status(desc, response(202, None, {"Retry-After": "5"}))
    assert (fact.remote_state, fact.raw_state) == (RemoteState.RUNNING, "HTTP 202")
    assert fact.retry_after_seconds == 5


def test_200_whose_body_names_no_state_is_done() -> None:
    desc = provider("azure_async", create={"path": "/x"})
    fact = parse_status(desc, response(200, {"id": "/widgets/1", "properties": {}}))
    assert fact.remote_state is RemoteState.SUCCEEDED and fact.problem is None


def test_an_unknown_state_in_the_body_is_not_overruled_by_the_code() -> None:
    desc = provider("azure_async", create={"path": "/x"})
    fact = parse_status(desc, response(200, {"status": "Provisioning"}))
    assert fact.remote_state is None and fact.raw_state == "Provisioning"


def test_unmapped_error_codes_stay_failed_reads() -> None:
    desc = provider("azure_async", create={"path": "/x"})
    fact = parse_status(desc, response(403, {"error": {"code": "AuthorizationFailed"}}))
    assert fact.remote_state is None and fact.problem == "HTTP 403"


def test_state_from_http_status_keys_must_be_status_codes() -> None:
    with pytest.raises(ConfigError, match=r"state_from_http_status\.ok: not an HTTP status code"):
        provider(
            "azure_async",
            create={"path": "/x"},
            status={"state_from_http_status": {"ok": "running"}},
        )


# --------------------------------------------------------------------- missing inline result


def test_final_response_without_its_inline_result_is_unavailable() -> None:
    desc = provider("replicate")
    check = validate_inline_result(desc, None, None)
    assert not check.ok and check.unavailable
    assert check.reason == "no result in the final response"
