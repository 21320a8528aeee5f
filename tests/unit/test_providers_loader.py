"""Loading provider descriptions: the simulator preset, overrides, and every ConfigError path."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from receiver.metrics import UNKNOWN_PROVIDER
from shared.ledger.states import RemoteState
from shared.providers import (
    ConfigError,
    adapter_for,
    load_preset,
    load_providers,
    parse_providers,
)
from shared.providers.config import deep_merge, preset_names
from shared.providers.description import Checksum, Idempotency, LookupKind, ResultSource
from shared.providers.messages import HttpResponse, redacted
from shared.providers.requests import build_status
from shared.providers.responses import parse_status

SECRET_VALUE = "sk-live-DO-NOT-PRINT-4242"

MINIMAL: dict[str, Any] = {
    "base_url": "https://api.acme.test/",
    "create": {"path": "/v1/jobs", "idempotency": "header", "job_id": "/id"},
    "status": {
        "path": "/v1/jobs/{job_id}",
        "state": "/status",
        "state_map": {"queued": "pending", "running": "running", "done": "succeeded"},
    },
    "result": {"source": "inline", "inline": "/output"},
}


def acme(**changes: Any) -> dict[str, Any]:
    """The minimal provider with `section={...}` tables merged in (None deletes a key)."""
    table = copy.deepcopy(MINIMAL)
    for key, value in changes.items():
        if value is None:
            table.pop(key, None)
        elif isinstance(value, dict) and isinstance(table.get(key), dict):
            table[key] = deep_merge(table[key], value)
        else:
            table[key] = value
    return table


def load(table: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return parse_providers({"providers": {"acme": table}}, "config.toml", env or {})["acme"]


def config_error(table: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load(table, env)
    return str(caught.value)


# --------------------------------------------------------------------- presets


def test_simulator_preset_loads_without_secrets() -> None:
    desc = load_preset("simulator", env={})
    assert desc.name == "simulator"
    assert desc.auth is None  # optional, and JW_SIM_API_KEY is unset
    assert desc.webhooks is None  # optional, and JW_SIM_WEBHOOK_SECRET is unset
    assert desc.create.idempotency is Idempotency.HEADER
    assert desc.create.idempotency_header == "Idempotency-Key"
    assert desc.create.client_reference_field is not None
    assert desc.create.client_reference_field.segments == ("client_reference",)
    assert desc.create.accepted_statuses == {202}
    assert desc.create.sync_result_statuses == {200}
    assert desc.status.state_map["cancelling"] is RemoteState.RUNNING
    assert desc.status.state_map["queued"] is RemoteState.PENDING
    assert desc.status.state_map["partially_succeeded"] is RemoteState.PARTIALLY_SUCCEEDED
    assert desc.cancel.supported and desc.cancel.idempotent
    assert desc.result.source is ResultSource.URL
    assert desc.result.expect.checksum is Checksum.CONTENT_DIGEST
    assert desc.result.expect.item_count_from_status
    assert desc.result.errors is not None and desc.result.errors.page_size == 100
    assert desc.lookup.supported and desc.lookup.kind is LookupKind.LIST
    assert desc.lookup.query_param == "client_reference"


def test_simulator_preset_with_secrets_has_auth_and_webhooks() -> None:
    env = {"JW_SIM_API_KEY": SECRET_VALUE, "JW_SIM_WEBHOOK_SECRET": "whsec_c2VjcmV0"}
    desc = load_preset("simulator", env=env)
    assert desc.auth is not None and desc.auth.secret.reveal() == SECRET_VALUE
    assert desc.webhooks is not None
    assert [s.reveal() for s in desc.webhooks.secrets] == ["whsec_c2VjcmV0"]
    assert desc.webhooks.state_map["succeeded"] is RemoteState.SUCCEEDED
    assert SECRET_VALUE not in repr(desc)


def test_preset_names_lists_simulator() -> None:
    assert "simulator" in preset_names()


def test_preset_override_merges_key_by_key(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        """
[database]
dsn = "ignored by the provider loader"

[providers.sim]
preset = "simulator"
base_url = "http://127.0.0.1:9999"

[providers.sim.status.state_map]
queued = "running"

[providers.sim.limits]
backoff_cap = 30
"""
    )
    desc = load_providers(config, env={})["sim"]
    assert desc.preset == "simulator"
    assert desc.base_url == "http://127.0.0.1:9999"
    assert desc.status.state_map["queued"] is RemoteState.RUNNING  # overridden
    assert desc.status.state_map["failed"] is RemoteState.FAILED  # kept from the preset
    assert desc.status.path is not None and desc.status.path.text == "/v1/jobs/{job_id}"
    assert desc.limits.backoff_cap == 30.0
    assert desc.limits.backoff_base == 2.0


def test_a_preset_credential_can_be_kept_in_a_file_instead(tmp_path: Path) -> None:
    # The google_lro and azure_async docs advise auth.secret_file for a token a
    # timer refreshes; the preset's secret_env made that "not both", for ever.
    token = tmp_path / "token"
    token.write_text("tok-from-file\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[providers.sim]\npreset = "simulator"\n\n[providers.sim.auth]\nsecret_file = "{token}"\n'
    )
    desc = load_providers(config, env={"JW_SIM_API_KEY": "tok-from-env"})["sim"]
    assert desc.auth is not None
    assert desc.auth.secret.reveal() == "tok-from-file"
    assert desc.auth.header == "Authorization"  # the rest of the preset's [auth] stays


def test_both_credential_sources_in_the_config_are_still_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok\n")
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.sim]\npreset = "simulator"\n\n[providers.sim.auth]\n'
        f'secret_env = "JW_SIM_API_KEY"\nsecret_file = "{token}"\n'
    )
    with pytest.raises(ConfigError, match="set secret_env or secret_file, not both"):
        load_providers(config, env={"JW_SIM_API_KEY": "tok"})


def test_unknown_preset_lists_available(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.sim]\npreset = "simulatr"\n')
    with pytest.raises(ConfigError) as caught:
        load_providers(config, env={})
    message = str(caught.value)
    assert message.startswith(f"{config}: providers.sim.preset: unknown preset 'simulatr'")
    assert "simulator" in message


def test_error_in_preset_value_says_it_came_from_the_preset() -> None:
    # The override removes the counts the preset's item_count check relies on:
    # the error is at a key the user never wrote, so the message says whose it is.
    table = {"preset": "simulator", "status": {"counts_total": [], "counts_succeeded": []}}
    message = config_error(table)
    assert message.startswith("config.toml: providers.acme.result.expect.item_count:")
    assert message.endswith("(value from preset 'simulator')")


def test_minimal_description_defaults() -> None:
    desc = load(acme())
    assert desc.base_url == "https://api.acme.test"
    assert desc.create.method == "POST"
    assert desc.create.accepted_statuses == {200, 201, 202}
    assert desc.status.not_found_statuses == {404, 410}
    assert not desc.cancel.supported
    assert not desc.lookup.supported
    assert desc.limits.backoff_base == 2.0 and desc.limits.backoff_cap == 60.0


def test_load_providers_reads_a_file(tmp_path: Path) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text(
        """
[providers.acme]
base_url = "https://api.acme.test"
[providers.acme.create]
path = "/v1/jobs"
idempotency = "none"
job_id = "/id"
[providers.acme.status]
path = "/v1/jobs/{job_id}"
done = "/done"
[providers.acme.result]
source = "none"
"""
    )
    desc = load_providers(config, env={})["acme"]
    assert desc.create.idempotency is Idempotency.NONE
    assert desc.status.error_code is not None and desc.status.error_code.text == "/error/code"


# --------------------------------------------------------------------- ConfigError paths


def test_typo_in_key_is_named_with_a_suggestion() -> None:
    message = config_error(acme(create={"idempotency_heder": "X-Idem"}))
    assert message == (
        "config.toml: providers.acme.create.idempotency_heder: unknown key "
        "(did you mean 'idempotency_header'?)"
    )


def test_key_from_another_vocabulary_points_to_ours() -> None:
    message = config_error(acme(result={"jsonl_id_field": "/custom_id"}))
    assert message == (
        "config.toml: providers.acme.result.jsonl_id_field: unknown key "
        "(this format calls it result.item_id)"
    )


def test_typo_in_section_name_is_caught() -> None:
    message = config_error(acme(limts={"backoff_cap": 5}))
    assert message == "config.toml: providers.acme.limts: unknown key (did you mean 'limits'?)"


def test_typo_in_required_key_points_at_the_typo() -> None:
    status = {"path": "/v1/jobs/{job_id}", "stat": "/status", "state_map": {"a": "running"}}
    message = config_error(acme(status=None) | {"status": status})
    assert message.startswith("config.toml: providers.acme.status.state: required")
    assert "'stat'" in message


def test_bad_enum_value_lists_choices() -> None:
    message = config_error(acme(create={"idempotency": "headers"}))
    assert message.startswith("config.toml: providers.acme.create.idempotency: 'headers' is not")
    assert "header, body, client_job_id, none" in message


def test_bad_state_map_value_names_the_raw_state() -> None:
    message = config_error(acme(status={"state_map": {"done": "complete"}}))
    assert message.startswith("config.toml: providers.acme.status.state_map.done: 'complete'")
    assert "partially_succeeded" in message


def test_type_error_is_named() -> None:
    message = config_error(acme(limits={"max_concurrency": "8"}))
    assert message == "config.toml: providers.acme.limits.max_concurrency: must be an integer"


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize(
    "key", ["result_deadline_seconds", "backoff_cap", "backoff_factor", "result_retry_seconds"]
)
def test_a_limit_toml_spells_as_inf_or_nan_is_refused(key: str, value: float) -> None:
    message = config_error(acme(limits={key: value}))
    assert message == f"config.toml: providers.acme.limits.{key}: must be a finite number"


@pytest.mark.parametrize(
    ("key", "value", "most"),
    [
        # stored, a deadline past year 9999 could not be read back: every claim it met failed
        ("result_deadline_seconds", 1e12, "2592000"),
        ("create_deadline_seconds", 31 * 86400.0, "2592000"),
        ("backoff_cap", 86401.0, "86400"),
        ("webhook_backstop_poll_seconds", 1e9, "86400"),
        ("default_poll_after_seconds", 1e9, "86400"),
        ("backoff_factor", 11.0, "10"),
        ("result_retry_seconds", 31 * 86400.0, "2592000"),
    ],
)
def test_a_limit_beyond_what_any_job_needs_is_refused(key: str, value: float, most: str) -> None:
    message = config_error(acme(limits={key: value}))
    assert message == f"config.toml: providers.acme.limits.{key}: must be at most {most}"


def test_a_replay_window_longer_than_a_day_is_refused() -> None:
    hooks = {"scheme": "static_header", "options": {"header": "X-Token"}, "secrets_env": "WH"}
    hooks |= {"job_id": "/id", "tolerance_seconds": 86401}
    message = config_error(acme(webhooks=hooks), env={"WH": "s"})
    assert message.endswith("webhooks.tolerance_seconds: must be at most 86400")


def test_boolean_is_not_an_integer() -> None:
    message = config_error(acme(create={"accepted_statuses": [True]}))
    assert message.startswith("config.toml: providers.acme.create.accepted_statuses:")


def test_bad_json_pointer_is_named() -> None:
    message = config_error(acme(status={"state": "/status/~3"}))
    assert message.startswith("config.toml: providers.acme.status.state: bad path")
    assert "~" in message


def test_bad_dotted_path_is_named() -> None:
    message = config_error(acme(create={"job_id": "data..id"}))
    assert message.startswith("config.toml: providers.acme.create.job_id: bad path")


def test_unknown_path_source_is_named() -> None:
    message = config_error(acme(create={"job_id": "heder:Location"}))
    assert message.startswith("config.toml: providers.acme.create.job_id: bad path")
    assert "unknown source 'heder:'" in message


def test_query_path_refused_where_only_responses_are_read() -> None:
    message = config_error(acme(create={"job_id": "query:id"}))
    assert message.startswith("config.toml: providers.acme.create.job_id: 'query:id' reads")


def test_missing_required_section() -> None:
    message = config_error(acme(status=None))
    assert message.startswith("config.toml: providers.acme.status: required: "), message


def test_missing_required_key() -> None:
    table = acme()
    del table["create"]["job_id"]
    message = config_error(table)
    assert message.startswith("config.toml: providers.acme.create.job_id: required")


def test_body_idempotency_needs_a_field() -> None:
    message = config_error(acme(create={"idempotency": "body"}))
    assert message.startswith("config.toml: providers.acme.create.idempotency_body_field:")


def test_unknown_template_placeholder() -> None:
    message = config_error(acme(status={"path": "/v1/jobs/{id}"}))
    assert message.startswith("config.toml: providers.acme.status.path: unknown placeholder {id}")


def test_bad_base_url() -> None:
    message = config_error(acme(base_url="ftp://api.acme.test"))
    assert message.startswith("config.toml: providers.acme.base_url: 'ftp://api.acme.test'")


def test_missing_env_secret_names_the_variable_not_a_value() -> None:
    message = config_error(acme(auth={"secret_env": "ACME_API_KEY"}), env={})
    assert message == (
        "config.toml: providers.acme.auth.secret_env: environment variable ACME_API_KEY is not set"
    )


def test_missing_secret_file_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.key"
    message = config_error(acme(auth={"secret_file": str(missing)}))
    assert message == (
        f"config.toml: providers.acme.auth.secret_file: secret file {missing} does not exist"
    )


def test_secret_file_is_read(tmp_path: Path) -> None:
    key_file = tmp_path / "acme.key"
    key_file.write_text(SECRET_VALUE + "\n")
    desc = load(
        acme(auth={"secret_file": str(key_file), "header": "X-Api-Key", "value": "{secret}"})
    )
    assert desc.auth.header_value() == SECRET_VALUE
    assert SECRET_VALUE not in repr(desc)


def test_credential_pasted_in_auth_value_is_refused_without_echo() -> None:
    table = acme(auth={"secret_env": "ACME_API_KEY", "value": f"Bearer {SECRET_VALUE}"})
    message = config_error(table, env={"ACME_API_KEY": SECRET_VALUE})
    assert message.startswith("config.toml: providers.acme.auth.value: must contain {secret}")
    assert SECRET_VALUE not in message


def test_credential_in_static_headers_is_refused_without_echo() -> None:
    message = config_error(acme(headers={"X-Api-Key": SECRET_VALUE}))
    assert message.startswith("config.toml: providers.acme.headers.X-Api-Key: looks like a")
    assert SECRET_VALUE not in message


def test_missing_webhook_secret_names_the_variable() -> None:
    webhooks = {
        "scheme": "standard_webhooks",
        "secrets_env": ["ACME_WH_1", "ACME_WH_2"],
        "job_id": "/id",
    }
    message = config_error(acme(webhooks=webhooks), env={"ACME_WH_1": "whsec_b25l"})
    assert message == (
        "config.toml: providers.acme.webhooks.secrets_env: environment variable ACME_WH_2 "
        "is not set"
    )


def test_webhook_secrets_for_rotation_are_all_loaded() -> None:
    webhooks = {"scheme": "stripe", "secrets_env": ["ACME_WH_1", "ACME_WH_2"], "job_id": "/id"}
    desc = load(acme(webhooks=webhooks), env={"ACME_WH_1": "one", "ACME_WH_2": "two"})
    assert [s.reveal() for s in desc.webhooks.secrets] == ["one", "two"]


def test_webhooks_need_a_way_to_name_the_job() -> None:
    webhooks = {"scheme": "github", "secrets_env": ["ACME_WH"]}
    message = config_error(acme(webhooks=webhooks), env={"ACME_WH": "x"})
    assert message == (
        "config.toml: providers.acme.webhooks.job_id: required (or operation_id, or "
        "client_reference): a webhook must name the operation or job it is about"
    )


@pytest.mark.parametrize(
    ("key", "attribute"),
    [
        ("operation_id", "operation_ref"),
        ("operation_ref", "operation_ref"),  # the former name, still accepted
        ("client_reference", "client_reference"),
        ("job_id", "job_id"),
    ],
)
def test_any_one_reference_names_the_operation_of_a_webhook(key: str, attribute: str) -> None:
    webhooks = {"scheme": "github", "secrets_env": ["ACME_WH"], key: "/data/ref"}
    spec = load(acme(webhooks=webhooks), env={"ACME_WH": "x"}).webhooks
    found = {name: getattr(spec, name) for name in ("operation_ref", "client_reference", "job_id")}
    assert {name: p.text for name, p in found.items() if p is not None} == {attribute: "/data/ref"}


def test_operation_id_and_its_former_name_together_are_refused() -> None:
    webhooks = {
        "scheme": "github",
        "secrets_env": ["ACME_WH"],
        "operation_id": "query:op",
        "operation_ref": "query:op",
    }
    message = config_error(acme(webhooks=webhooks), env={"ACME_WH": "x"})
    assert message == (
        "config.toml: providers.acme.webhooks.operation_ref: operation_ref is the former name "
        "of operation_id: set one of them, not both"
    )


@pytest.mark.parametrize("key", ["operation_id", "operation_ref"])
def test_a_users_operation_reference_overrides_the_presets_under_either_name(key: str) -> None:
    table = {"preset": "replicate", "webhooks": {key: "/input/op"}}
    env = {"REPLICATE_API_TOKEN": "r8_test", "REPLICATE_WEBHOOK_SECRET": "whsec_dGVzdA=="}
    desc = parse_providers({"providers": {"rep": table}}, "config.toml", env)["rep"]
    assert desc.webhooks is not None and desc.webhooks.operation_ref is not None
    assert desc.webhooks.operation_ref.text == "/input/op"


def test_webhook_scheme_must_be_known() -> None:
    webhooks = {"scheme": "svix", "secrets_env": ["ACME_WH"], "job_id": "/id"}
    message = config_error(acme(webhooks=webhooks), env={"ACME_WH": "x"})
    assert message.startswith("config.toml: providers.acme.webhooks.scheme: 'svix' is not one of")


def test_webhook_scheme_options_are_checked_at_load() -> None:
    webhooks = {"scheme": "static_header", "secrets_env": ["ACME_WH"], "job_id": "/id"}
    message = config_error(acme(webhooks=webhooks), env={"ACME_WH": "x"})
    assert message.startswith("config.toml: providers.acme.webhooks.options: static_header:")
    assert "'header'" in message


def test_unusable_webhook_secret_names_the_variable_not_the_value() -> None:
    webhooks = {"scheme": "standard_webhooks", "secrets_env": ["ACME_WH"], "job_id": "/id"}
    message = config_error(acme(webhooks=webhooks), env={"ACME_WH": SECRET_VALUE})
    assert message.startswith("config.toml: providers.acme.webhooks.secrets_env: ACME_WH:")
    assert "whsec_" in message
    assert SECRET_VALUE not in message


def test_state_and_done_are_exclusive() -> None:
    message = config_error(acme(status={"done": "/done"}))
    assert message.startswith("config.toml: providers.acme.status.done: set either state")


def test_url_result_needs_a_result_url_in_status() -> None:
    message = config_error(acme(result={"source": "url"}))
    assert message.startswith("config.toml: providers.acme.result.source: 'url' needs")


def test_checksum_on_inline_result_is_refused() -> None:
    message = config_error(acme(result={"expect": {"checksum": "content-digest"}}))
    assert message.startswith("config.toml: providers.acme.result.expect.checksum:")


def test_use_status_url_needs_create_status_url() -> None:
    message = config_error(acme(status={"use_status_url": True}))
    assert message.startswith("config.toml: providers.acme.status.use_status_url: needs")


def test_bad_provider_name() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_providers({"providers": {"Acme Corp": MINIMAL}}, "config.toml", {})
    assert str(caught.value).startswith("config.toml: providers.Acme Corp:")


def test_the_receivers_label_for_no_provider_is_not_a_provider_name() -> None:
    """A provider called "unknown" would share its refusal counts with deliveries
    to no configured provider (the receiver's label for those)."""
    with pytest.raises(ConfigError, match="'unknown' is reserved"):
        parse_providers({"providers": {UNKNOWN_PROVIDER: MINIMAL}}, "config.toml", {})


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[providers.acme\nbase_url = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_providers(config, env={})
    assert str(caught.value).startswith(f"{config}: invalid TOML:")


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_providers(tmp_path / "absent.toml", env={})
    assert str(caught.value) == f"{tmp_path / 'absent.toml'}: file not found"


def test_outcome_from_counts_needs_counts() -> None:
    message = config_error(acme(status={"outcome_from_counts": True}))
    assert message.startswith("config.toml: providers.acme.status.outcome_from_counts: needs")


def test_a_status_or_cancel_path_that_names_no_job_is_refused() -> None:
    """Every operation would read (or cancel) the same resource (a GraphQL endpoint)."""
    message = config_error(acme(status={"path": "/graphql.json"}))
    assert "providers.acme.status.path: '/graphql.json' must name the job" in message
    message = config_error(acme(cancel={"path": "/cancel"}))
    assert "providers.acme.cancel.path: '/cancel' must name the job" in message
    load(acme(status={"path": "/v1/{+job_id}"}))  # a name that is itself a path


def test_read_first_is_an_opt_in_boolean_of_the_cancel() -> None:
    """A cancel that deletes a finished job (Runway's DELETE) asks for a read first."""
    assert not load(acme(cancel={"path": "/j/{job_id}"})).cancel.read_first
    desc = load(acme(cancel={"method": "DELETE", "path": "/j/{job_id}", "read_first": True}))
    assert desc.cancel.read_first
    message = config_error(acme(cancel={"path": "/j/{job_id}", "read_first": "yes"}))
    assert "providers.acme.cancel.read_first" in message


def test_a_redirect_is_not_an_accepted_create_or_cancel() -> None:
    message = config_error(acme(create={"accepted_statuses": [202, 303]}))
    assert "create.accepted_statuses: only 2xx codes accept a request" in message
    message = config_error(acme(cancel={"path": "/j/{job_id}", "accepted_statuses": [302]}))
    assert "cancel.accepted_statuses: only 2xx codes" in message


def test_not_created_statuses_are_error_codes_only_and_none_by_default() -> None:
    assert load(acme()).create.not_created_statuses == frozenset()
    assert load(acme(create={"not_created_statuses": [429, 503]})).create.not_created_statuses == {
        429,
        503,
    }
    refused: list[Any] = [[202], [429, 200], [303], [100], [600], ["429"], 429]
    for codes in refused:
        message = config_error(acme(create={"not_created_statuses": codes}))
        assert message.startswith("config.toml: providers.acme.create.not_created_statuses:"), codes


def test_not_created_codes_name_a_path_and_its_codes() -> None:
    assert load(acme()).create.not_created_codes == ()
    codes = {"/errors/0/extensions/code": ["THROTTLED", 42], "header:X-Error": ["busy"]}
    found = dict(load(acme(create={"not_created_codes": codes})).create.not_created_codes)
    assert {path.text: value for path, value in found.items()} == {
        "/errors/0/extensions/code": {"THROTTLED", "42"},
        "header:X-Error": {"busy"},
    }
    refused: list[Any] = [
        {"/e": []},
        {"/e": "THROTTLED"},
        {"/e": [True]},
        {"/e": [1.5]},
        {"query:x": ["a"]},
        {"nope:x": ["a"]},
        ["THROTTLED"],
    ]
    for bad in refused:
        message = config_error(acme(create={"not_created_codes": bad}))
        assert message.startswith("config.toml: providers.acme.create.not_created_codes"), bad


def test_status_throttle_codes_are_checked_like_not_created_codes() -> None:
    """`[status.throttle_codes]` takes what `[create.not_created_codes]` does."""
    table = acme(status={"throttle_codes": {"/__type": ["ThrottlingException"]}})
    ((path, codes),) = load(table).status.throttle_codes
    assert path.text == "/__type" and codes == {"ThrottlingException"}
    refused: list[dict[str, Any]] = [{"/e": []}, {"query:x": ["a"]}, {"/e": "THROTTLED"}]
    for bad in refused:
        message = config_error(acme(status={"throttle_codes": bad}))
        assert message.startswith("config.toml: providers.acme.status.throttle_codes"), bad


def test_a_result_read_by_post_with_its_page_token_in_the_body() -> None:
    """`result.method`/`result.body` (source = path) and `page_token_body_field`:
    Textract's result is its status read, a POST, paged by NextToken in the body."""
    paged: dict[str, Any] = {"next_page_token": "/NextToken", "page_token_body_field": "/NextToken"}
    post: dict[str, Any] = {
        "source": "path",
        "path": "/",
        "method": "POST",
        "body": {"JobId": "{job_id}"},
    }
    spec = load(acme(result={**post, "format": "json", "pages": paged})).result
    assert spec.method == "POST" and spec.pages.page_token_body_field.text == "/NextToken"
    refusals = [
        ({**post, "source": "url"}, "result.method: only with source = path"),
        ({"source": "path", "path": "/", "body": {"a": 1}}, "result.body: a GET sends no body"),
        ({"source": "path", "path": "/", "format": "json", "pages": paged}, "needs result.body"),
        (
            {**post, "format": "json", "pages": {**paged, "page_token_param": "t"}},
            "contradicts page_token_body_field",
        ),
        (
            {
                **post,
                "format": "json",
                "pages": {"next_page_url": "/n", "page_token_body_field": "/t"},
            },
            "only with next_page_token",
        ),
        (
            # the token cannot be written through a string: the second page's
            # build raised on every claim, the result never collected
            {**post, "format": "json", "pages": {**paged, "page_token_body_field": "/JobId/T"}},
            "holds no object to write the token in",
        ),
    ]
    for result, said in refusals:
        table = acme(result=result)
        if result.get("source") == "url":
            table["status"]["result_url"] = "/url"
        assert said in config_error(table), result


def test_a_content_type_other_than_json_is_refused() -> None:
    """The body is JSON whatever the header says: a form type would lie about it."""
    form = "application/x-www-form-urlencoded"
    message = config_error(acme(create={"set_headers": {"Content-Type": form}}))
    assert f"create.set_headers.Content-Type: '{form}': bodies are sent as JSON" in message
    message = config_error(acme(headers={"content-type": "text/xml"}))
    assert "headers.content-type: 'text/xml': bodies are sent as JSON" in message
    load(acme(headers={"Content-Type": "application/vnd.api+json; charset=utf-8"}))
    assert "bodies are sent as JSON" in config_error(
        acme(headers={"Content-Type": "application/x-amz-json-2.0"})
    )


def test_the_aws_json_protocols_content_types_are_json() -> None:
    """Textract, Transcribe and DynamoDB take their JSON bodies only under
    application/x-amz-json-1.1 (or -1.0): refusing it left those APIs undescribable."""
    for media in ("application/x-amz-json-1.1", "application/x-amz-json-1.0; charset=utf-8"):
        load(acme(headers={"Content-Type": media}))
        load(acme(create={"set_headers": {"Content-Type": media}}))


def test_a_process_that_never_calls_providers_needs_no_api_key() -> None:
    """The receiver loads the same config without any provider's key (its env file
    needed a stand-in under each key's name); every other process still refuses."""
    table = acme(auth={"secret_env": "ACME_API_KEY"})
    assert "ACME_API_KEY" in config_error(table)
    described = parse_providers(
        {"providers": {"acme": table}}, "config.toml", {}, credentials=False
    )
    assert described["acme"].auth is None
    with_key = parse_providers(
        {"providers": {"acme": table}}, "config.toml", {"ACME_API_KEY": "k"}, credentials=False
    )
    assert with_key["acme"].auth is not None


def test_result_failed_names_error_answers_of_a_fetched_result_only() -> None:
    """`[result.failed]`: 4xx/5xx but 429, on a result that is fetched; paths may name headers."""
    fetched = {"source": "path", "path": "/v1/jobs/{job_id}/result"}
    failed = load(
        acme(
            result={
                **fetched,
                "failed": {"statuses": [422, 500], "error_code": "header:X-Fal-Error-Type"},
            }
        )
    ).result.failed
    assert failed.statuses == {422, 500}
    assert failed.error_code.text == "header:X-Fal-Error-Type"
    assert failed.error_message is None
    assert load(acme(result=fetched)).result.failed is None
    refused: list[Any] = [[], [200], [429], [302], [422, 204], ["422"], [503], [502], [504]]
    for codes in refused:
        message = config_error(acme(result={**fetched, "failed": {"statuses": codes}}))
        assert message.startswith("config.toml: providers.acme.result.failed.statuses:"), codes
    message = config_error(acme(result={**fetched, "failed": {}}))
    assert "result.failed.statuses: required" in message
    message = config_error(acme(result={**fetched, "failed": {"statuses": [422], "code": "/x"}}))
    assert "code" in message
    bare_500 = {**fetched, "failed": {"statuses": [422, 500]}}
    assert "carries the provider's error" in config_error(acme(result=bare_500))
    inline = {"source": "inline", "inline": "/output", "failed": {"statuses": [422]}}
    assert "nothing is fetched with source = inline" in config_error(acme(result=inline))


def test_empty_without_url_needs_a_url_source_a_total_and_a_format_that_can_be_empty() -> None:
    status = {"result_url": "/url", "counts_total": "/objectCount"}
    jsonl_url = {"source": "url", "format": "jsonl", "empty_without_url": True}
    assert load(acme(status=status, result=jsonl_url)).result.empty_without_url
    bare_csv = {**jsonl_url, "format": "csv", "csv": {"header": False}}
    assert load(acme(status=status, result=bare_csv)).result.empty_without_url
    assert not load(acme(status=status, result={"source": "url"})).result.empty_without_url
    cases = {
        "only with source = url": ({"source": "path", "path": "/r/{job_id}"}, status),
        "needs status.counts_total": ({"source": "url", "format": "jsonl"}, {"result_url": "/url"}),
        "an empty document is no JSON": ({"source": "url"}, status),
        "an empty CSV has no header row": ({"source": "url", "format": "csv"}, status),
        "has no checksum": (
            {"source": "url", "format": "jsonl", "expect": {"checksum": "content-digest"}},
            status,
        ),
    }
    for said, (result, status_table) in cases.items():
        table = acme(status=status_table, result={**result, "empty_without_url": True})
        message = config_error(table)
        assert "result.empty_without_url:" in message and said in message, message


def test_empty_states_are_succeeded_states_of_a_fetched_result_that_can_be_empty() -> None:
    """`result.empty_states`: Intercom's `no_data`, a finished export with nothing in
    it. Only a state the map reads as succeeded, of a result that is fetched, in a
    format an empty document is one of."""
    status = {"state_map": {"running": "running", "done": "succeeded", "no_data": "succeeded"}}
    path = {"source": "path", "path": "/r/{job_id}", "format": "binary"}
    loaded = load(acme(status=status, result={**path, "empty_states": ["no_data"]}))
    assert loaded.result.empty_states == frozenset({"no_data"})
    assert load(acme(status=status, result=path)).result.empty_states == frozenset()
    cases = {
        "'running' is not a state status.state_map reads as succeeded": ({**path}, ["running"]),
        "'gone' is not a state": ({**path}, ["gone"]),
        "only where the result is fetched": ({"source": "inline", "inline": "/o"}, ["no_data"]),
        "an empty document is no JSON": ({**path, "format": "json"}, ["no_data"]),
        "an empty CSV has no header row": ({**path, "format": "csv"}, ["no_data"]),
    }
    for said, (result, states) in cases.items():
        message = config_error(acme(status=status, result={**result, "empty_states": states}))
        assert "result.empty_states:" in message and said in message, message


def test_a_status_body_names_the_job_for_a_graphql_endpoint() -> None:
    """`status.body` (POST): its strings with no placeholder of ours are sent as written
    (a GraphQL query's braces); the path may then omit {job_id} if the body names it."""
    query = "query($id: ID!) { node(id: $id) { ... on BulkOperation { status } } }"
    graphql = {
        "method": "POST",
        "path": "/graphql.json",
        "body": {"query": query, "variables": {"id": "{job_id}"}},
    }
    desc = load(acme(status=graphql))
    assert desc.status.body["query"] == query
    request = build_status(desc, "gid://shopify/BulkOperation/7")
    assert request.method == "POST" and request.url.endswith("/graphql.json")
    assert request.json == {"query": query, "variables": {"id": "gid://shopify/BulkOperation/7"}}
    cases = {
        "a GET carries no body": {**graphql, "method": "GET"},
        "must name the job": {**graphql, "body": {"query": query}},
        "{jobid} is no placeholder": {**graphql, "body": {"variables": {"id": "{jobid}"}}},
        "unknown placeholder {task}": {**graphql, "body": {"variables": {"id": "{task}"}}},
        "{jobId} is no placeholder": {**graphql, "body": {"note": "job {jobId} please"}},
    }
    for said, status in cases.items():
        message = config_error(acme(status=status))
        assert "providers.acme.status." in message and said in message, message


def test_a_binary_result_names_one_file() -> None:
    files = {
        "source": "files",
        "path": "/jobs/{job_id}/files/{file_id}",
        "format": "binary",
        "file_ids": ["/audio_id", "/video_id"],
    }
    message = config_error(acme(result=files))
    assert "providers.acme.result.file_ids: a binary result is one file" in message
    assert load(acme(result={**files, "file_ids": "/audio_id"})).result.file_ids


def test_a_code_mapped_to_a_state_is_no_longer_a_miss() -> None:
    """`state_from_http_status = {"404" = "cancelled"}` (a cancel that deletes): the
    default not-found codes leave 404 to it; naming it in both is refused."""
    mapped = {"state_from_http_status": {"404": "cancelled"}}
    status = load(acme(status=mapped)).status
    assert status.not_found_statuses == {410}
    assert status.state_from_http_status == {404: RemoteState.CANCELLED}
    fact = parse_status(load(acme(status=mapped)), HttpResponse(404, body=b"{}"))
    assert (fact.remote_state, fact.not_found) == (RemoteState.CANCELLED, False)
    both = {**mapped, "not_found_statuses": [404]}
    message = config_error(acme(status=both))
    assert "status.not_found_statuses: [404] also mapped by state_from_http_status" in message


def test_deletes_job_needs_a_cancel() -> None:
    delete = {"method": "DELETE", "path": "/v1/jobs/{job_id}", "deletes_job": True}
    assert load(acme(cancel=delete)).cancel.deletes_job
    off = {"supported": False, "deletes_job": True}
    assert "there is no cancel to delete the job" in config_error(acme(cancel=off))


def test_a_description_without_a_status_read_says_why_one_is_needed() -> None:
    """Deepgram's pre-recorded API with a `callback` answers only a request_id and
    posts the transcript to the callback; nothing reads a request later. A user
    describing it got "providers.acme.status: required", as for a forgotten key,
    with nothing to say that no key can stand in for the read."""
    message = config_error(acme(status=None, result={"source": "none"}))
    assert message.startswith("config.toml: providers.acme.status: required: "), message
    assert "webhook is a hint" in message and "only calls back" in message


def test_a_placeholder_inside_a_literal_set_body_value_is_filled_at_each_create() -> None:
    """Speechmatics takes its callback in a list inside the config part:
    `notification_config = [{url, contents}]`, which no path can reach. Written as
    a literal list, its strings that name our placeholders are filled like a
    field's; without a public URL the whole field is left out, as a field naming
    `{webhook_url}` is; the token is redacted from the recorded body. Before, it
    was refused at load (and before that, sent as the text "{webhook_url}...")."""
    table = acme(
        create={
            "set_body": {
                "/config/notification_config": [
                    {"url": "{webhook_url}?token={webhook_secret}", "contents": ["jobinfo"]}
                ]
            }
        },
        webhooks={
            "scheme": "static_header",
            "options": {"query": "token"},
            "secrets_env": "ACME_TOKEN",
            "job_id": "/id",
        },
    )
    desc = load(table, env={"ACME_TOKEN": "t" * 32})
    assert desc.create.asks_callback
    adapter = adapter_for(desc)
    context = {
        "webhook_url": "https://hooks.example/w/acme",
        "trace_id": "t1",
        "result_deadline_seconds": "60",
    }
    req = adapter.build_create(
        body={}, idempotency_token="k", client_reference="op_1", context=context
    )
    [config] = [req.json["config"]]
    assert config["notification_config"] == [
        {"url": "https://hooks.example/w/acme?token=" + "t" * 32, "contents": ["jobinfo"]}
    ]
    assert "t" * 32 not in json.dumps(redacted(req.json, req.secret_fields))
    silent = adapter.build_create(
        body={},
        idempotency_token="k",
        client_reference="op_1",
        context={**context, "webhook_url": None},
    )
    assert "notification_config" not in (silent.json or {}).get("config", {})


def test_braces_inside_a_literal_set_body_value_that_name_nothing_of_ours_are_kept() -> None:
    body = {"/options": {"prompt": "{not a placeholder}", "n": [1, "{x}"]}}
    desc = load(acme(create={"set_body": body}))
    (field,) = desc.create.set_body
    assert field.literal == {"prompt": "{not a placeholder}", "n": [1, "{x}"]}


# --- [result.errors] at a path, CSV ------------------------------------------------

CSV_ERRORS = {
    "path": "/v1/jobs/{job_id}/failed",
    "format": "csv",
    "item_id": "sf__Id",
    "item_message": "sf__Error",
    "next_page_token": "header:Sforce-Locator",
    "page_token_param": "locator",
    "end_values": ["null"],
}


def test_an_errors_list_at_a_path_needs_no_status_url() -> None:
    """Salesforce's failedResults/ and HubSpot's /errors: the status names no URL;
    before, [result.errors] was refused without status.errors_url."""
    spec = load(acme(result={"errors": CSV_ERRORS})).result.errors
    assert spec.path.text == "/v1/jobs/{job_id}/failed" and spec.items is None
    assert (spec.id_column, spec.message_column) == ("sf__Id", "sf__Error")
    assert spec.end_values == frozenset({"null"})


@pytest.mark.parametrize(
    ("errors", "refusal"),
    [
        ({"items": "/items"}, "needs status.errors_url or a path with {job_id}"),
        ({"items": "/items", "path": "/v1/errors"}, "must name the job"),
        ({**CSV_ERRORS, "item_message": None}, "item_message: required with format = csv"),
        ({**CSV_ERRORS, "items": "/items"}, "items: only with format = json"),
        ({**CSV_ERRORS, "item_message": "/message"}, None),  # a column may be named so
        ({**CSV_ERRORS, "format": "jsonl"}, "an errors list is read as json or csv"),
        ({"items": "/items", "path": "/v1/{job_id}/e", "end_values": ["x"]}, "needs next_page"),
    ],
)
def test_nonsense_in_an_errors_list_is_refused(errors: dict[str, Any], refusal: str | None) -> None:
    table = acme(result={"errors": {k: v for k, v in errors.items() if v is not None}})
    if refusal is None:
        load(table)
        return
    assert refusal in config_error(table)
