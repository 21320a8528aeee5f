"""The guarantees report and Python plugins (loading, errors, the documented example)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from shared.cli.captures import Capture
from shared.cli.proofs import prove_delivery
from shared.providers import (
    ConfigError,
    HttpRequest,
    HttpResponse,
    LookupFact,
    ProviderAdapter,
    ProviderPlugin,
    adapter_for,
    describe_guarantees,
    load_preset,
    parse_providers,
)
from shared.providers.description import ProviderDescription
from shared.providers.example_plugin import LocationJobIdPlugin
from shared.signatures import SignatureError
from shared.signatures.verified import Verified

BASE: dict[str, Any] = {
    "base_url": "https://api.example.test",
    "create": {"path": "/v1/exports", "idempotency": "header", "status_url": "header:Location"},
    "status": {
        "path": "/v1/exports/{job_id}",
        "state": "/state",
        "state_map": {"done": "succeeded", "working": "running", "stopped": "cancelled"},
    },
    "result": {"source": "none"},
}


def provider(changes: dict[str, Any], env: dict[str, str] | None = None) -> ProviderDescription:
    table = copy.deepcopy(BASE)
    table.update(changes)
    return parse_providers({"providers": {"p": table}}, "config.toml", env or {})["p"]


def report(desc: ProviderDescription) -> dict[str, tuple[bool, str]]:
    return {name: (holds, why) for name, holds, why in describe_guarantees(desc)}


# --------------------------------------------------------------------- guarantees


def test_simulator_guarantees() -> None:
    env = {"JW_SIM_WEBHOOK_SECRET": "whsec_dGVzdA=="}
    lines = report(load_preset("simulator", env=env))
    assert list(lines) == [
        "at-most-once create",
        "lookup after lost response",
        "cancellable",
        "webhooks signed",
        "result integrity checked",
    ]
    assert all(holds for holds, _ in lines.values())
    assert "Idempotency-Key" in lines["at-most-once create"][1]
    assert "client_reference" in lines["lookup after lost response"][1]
    assert "standard_webhooks" in lines["webhooks signed"][1]
    assert "Content-Digest" in lines["result integrity checked"][1]


def test_no_idempotency_no_lookup_is_reported_plainly() -> None:
    desc = provider({"create": {**BASE["create"], "idempotency": "none", "job_id": "/id"}})
    lines = report(desc)
    assert lines["at-most-once create"][0] is False
    assert "never retried automatically" in lines["at-most-once create"][1]
    assert lines["lookup after lost response"][0] is False
    assert lines["lookup after lost response"][1].startswith(
        "create after a lost response cannot be reconciled automatically"
    )
    assert lines["cancellable"] == (
        False,
        "cancellation is unsupported: no cancel endpoint is configured",
    )
    assert lines["webhooks signed"][0] is False
    assert lines["result integrity checked"][0] is False


def test_a_cancel_read_first_is_never_called_safe_to_resend() -> None:
    """An idempotent DELETE that deletes finished jobs: resending it deletes too."""
    create = {**BASE["create"], "job_id": "/id"}
    delete = {"method": "DELETE", "path": "/v1/exports/{job_id}", "idempotent": True}
    destroys = provider({"create": create, "cancel": {**delete, "read_first": True}})
    holds, why = report(destroys)["cancellable"]
    assert holds
    assert "safe to resend" not in why
    assert "only after a status read under the same lease shows the job still running" in why
    assert "narrowed, not closed" in why
    holds, why = report(provider({"create": create, "cancel": delete}))["cancellable"]
    assert "idempotent, safe to resend" in why  # unchanged without the key...
    assert "set cancel.read_first = true" in why  # ...which a DELETE is told about
    post = provider({"create": create, "cancel": {"path": "/v1/exports/{job_id}/cancel"}})
    assert "read_first" not in report(post)["cancellable"][1]


def test_a_delete_that_reads_first_is_told_of_deletes_job() -> None:
    """Runway's DELETE aborts a running task too, which is then never fetched again
    (404): with read_first alone every such cancel stopped for a human, and check
    named only read_first (a new user of Runway followed it)."""
    create = {**BASE["create"], "job_id": "/id"}
    delete = {"method": "DELETE", "path": "/v1/tasks/{job_id}"}
    _, why = report(provider({"create": create, "cancel": delete}))["cancellable"]
    assert "cancel.deletes_job = true" in why
    _, why = report(provider({"create": create, "cancel": {**delete, "read_first": True}}))[
        "cancellable"
    ]
    assert "reads not found after it" in why and "cancel.deletes_job = true" in why
    gone = provider({"create": create, "cancel": {**delete, "deletes_job": True}})
    assert "set cancel.deletes_job" not in report(gone)["cancellable"][1]


def test_a_cancel_no_status_can_confirm_is_not_called_cancellable() -> None:
    """fal.ai answers COMPLETED for a cancelled request: no state reads cancelled,
    so a cancel is sent but never confirmed; check said "cancellable? yes"."""
    create = {**BASE["create"], "job_id": "/id"}
    status = {**BASE["status"], "state_map": {"COMPLETED": "succeeded", "IN_QUEUE": "pending"}}
    desc = provider({"create": create, "status": status, "cancel": {"path": "/c/{job_id}"}})
    holds, why = report(desc)["cancellable"]
    assert not holds
    assert "no status the description reads means cancelled" in why
    assert report(provider({"create": create, "cancel": {"path": "/c/{job_id}"}}))["cancellable"][0]


def test_static_header_webhooks_are_not_signatures() -> None:
    desc = provider(
        {
            "create": {**BASE["create"], "job_id": "/id"},
            "webhooks": {
                "scheme": "static_header",
                "options": {"header": "X-Hook-Token"},
                "secrets_env": "WH",
                "job_id": "/id",
            },
        },
        env={"WH": "shared"},
    )
    holds, why = report(desc)["webhooks signed"]
    assert holds is False and "static shared header" in why


# --------------------------------------------------------------------- plugins


def test_declarative_adapter_satisfies_the_plugin_protocol() -> None:
    desc = load_preset("simulator", env={})
    adapter = adapter_for(desc)
    assert type(adapter) is ProviderAdapter
    assert isinstance(adapter, ProviderPlugin)


def test_example_plugin_loads_by_import_path_and_reads_location() -> None:
    desc = provider({"plugin": "shared.providers.example_plugin:LocationJobIdPlugin"})
    adapter = adapter_for(desc)
    assert isinstance(adapter, LocationJobIdPlugin)
    resp = HttpResponse(202, {"Location": "/v1/exports/exp_123"}, b"")
    fact = adapter.parse_create(resp)
    assert fact.kind == "accepted"
    assert fact.remote_job_id == "exp_123"
    assert fact.status_url == "/v1/exports/exp_123"
    # Everything else stays declarative.
    assert adapter.build_status("exp_123").url == "https://api.example.test/v1/exports/exp_123"


def test_example_plugin_by_registered_name_with_options() -> None:
    desc = provider({"plugin": "location_job_id", "plugin_options": {"header": "Content-Location"}})
    resp = HttpResponse(202, {"Content-Location": "/v1/exports/exp_9/"}, b"")
    assert adapter_for(desc).parse_create(resp).remote_job_id == "exp_9"


def test_example_plugin_does_not_invent_ids_on_errors() -> None:
    desc = provider({"plugin": "location_job_id"})
    resp = HttpResponse(503, {"Location": "/v1/exports/exp_1"}, b"")
    fact = adapter_for(desc).parse_create(resp)
    assert fact.kind == "ambiguous" and fact.remote_job_id is None


def test_bad_plugin_import_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        provider({"plugin": "no_such_package.plugins:Thing"})
    message = str(caught.value)
    assert message.startswith("config.toml: providers.p.plugin: cannot import 'no_such_package")


def test_plugin_attribute_missing_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="has no attribute 'Nope'"):
        provider({"plugin": "shared.providers.example_plugin:Nope"})


def test_plugin_must_be_an_adapter_subclass() -> None:
    with pytest.raises(ConfigError, match="not a subclass of ProviderAdapter"):
        provider({"plugin": "shared.providers.errors:ConfigError"})


def test_plugin_spec_without_colon_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"neither 'package\.module:Class'"):
        provider({"plugin": "shared.providers.example_plugin"})


@pytest.mark.parametrize("spec", [".plugins:Thing", "..plugins:Thing"])
def test_a_relative_plugin_module_is_a_config_error(spec: str) -> None:
    """import_module raised TypeError for it: a traceback out of providers check."""
    with pytest.raises(ConfigError, match="is a relative module name"):
        provider({"plugin": spec})


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def broken(:\n", "a syntax error (jw_fuzz_plugin.py, line 1)"),
        (
            'import os\nraise RuntimeError("bad key " + os.environ["PLUGIN_KEY"])\n',
            "importing it raised RuntimeError (python -c 'import jw_fuzz_plugin' shows it)",
        ),
    ],
    ids=["syntax_error", "raises"],
)
def test_a_plugin_that_fails_as_it_loads_is_a_config_error_quoting_nothing_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: str
) -> None:
    """Any failure but ImportError escaped as a traceback, with the plugin's own
    message: one that quoted an environment key showed it."""
    (tmp_path / "jw_fuzz_plugin.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PLUGIN_KEY", "sk-plugin-secret-77")
    with pytest.raises(ConfigError) as caught:
        provider({"plugin": "jw_fuzz_plugin:Adapter"})
    assert str(caught.value) == (
        f"config.toml: providers.p.plugin: cannot import 'jw_fuzz_plugin': {expected}"
    )
    assert "sk-plugin-secret-77" not in str(caught.value)


def test_plugin_options_are_checked_at_load() -> None:
    with pytest.raises(ConfigError) as caught:
        provider({"plugin": "location_job_id", "plugin_options": {"segment": 2}})
    assert str(caught.value) == (
        "config.toml: providers.p.plugin_options.segment: unknown option "
        "(this plugin takes 'header')"
    )


def test_declarative_provider_still_needs_a_job_id_path() -> None:
    with pytest.raises(ConfigError, match=r"providers\.p\.create\.job_id: required"):
        provider({})


class HeaderTokenPlugin(ProviderAdapter):
    """Verifies by a fixed token header (a sender no scheme option describes)."""

    def verify_webhook(
        self,
        headers: Mapping[str, str],
        body: bytes,
        secrets: Sequence[str],
        now: float,
        *,
        method: str | None = None,
        url: str | None = None,
    ) -> Verified:
        if headers.get("x-token") not in secrets:
            raise SignatureError("bad_signature")
        return Verified(scheme="header_token", event_id=None, id_signed=False, timestamp=None)


def test_providers_check_delivery_verifies_with_the_plugins_own_verifier() -> None:
    """`providers check --delivery` checked the configured scheme only: a delivery
    the receiver accepts through the plugin was reported REFUSED."""
    webhooks = {
        "scheme": "static_header",
        "options": {"header": "x-other"},
        "secrets_env": "HOOK_SECRET",
        "job_id": "/id",
    }
    desc = provider(
        {"plugin": f"{__name__}:HeaderTokenPlugin", "webhooks": webhooks},
        env={"HOOK_SECRET": "s3cret"},
    )
    body = b'{"id": "job_1"}'
    good = Capture(method="POST", target="/webhooks/p", headers={"x-token": "s3cret"}, body=body)
    report = prove_delivery(desc, good, at=None, url=None)
    assert report["verified"] is True, report
    assert "plugin's verify_webhook (HeaderTokenPlugin)" in report["why"]
    assert report["records"]["job_id"] == "job_1"
    forged = Capture(method="POST", target="/webhooks/p", headers={"x-token": "nope"}, body=body)
    assert prove_delivery(desc, forged, at=None, url=None)["verified"] is False


class HooksOfOld(ProviderAdapter):
    """Paging hooks as a plugin wrote them before next_page_url, offset paging
    and numbered lookups passed each one argument more."""

    def build_result_page(self, first: HttpRequest, page_token: str) -> HttpRequest:  # type: ignore[override]
        return super().build_result_page(first, page_token)

    def result_next_page(self, resp: HttpResponse) -> str | None:  # type: ignore[override]
        return super().result_next_page(resp)

    def parse_lookup(self, resp: HttpResponse, client_reference: str) -> LookupFact:  # type: ignore[override]
        return super().parse_lookup(resp, client_reference)


class HooksOfToday(HooksOfOld):
    def build_result_page(
        self, first: HttpRequest, page_token: str, page_url: str | None = None
    ) -> HttpRequest:
        return ProviderAdapter.build_result_page(self, first, page_token, page_url)

    def result_next_page(self, resp: HttpResponse, *args: Any) -> str | None:
        return ProviderAdapter.result_next_page(self, resp, *args)

    def parse_lookup(
        self, resp: HttpResponse, client_reference: str, page_token: str | None = None
    ) -> LookupFact:
        return ProviderAdapter.parse_lookup(self, resp, client_reference, page_token)


PAGED_RESULT = {"source": "url", "format": "csv"}
LINKED = {**BASE["status"], "result_url": "/result_url"}
LISTED = {"path": "/v1/exports", "list": "/data", "match": "/metadata/op", "job_id": "/id"}


@pytest.mark.parametrize(
    ("changes", "hook", "parameter", "key"),
    [
        (
            {
                "status": LINKED,
                "result": {**PAGED_RESULT, "pages": {"next_page_url": "header:Next-Page"}},
            },
            "build_result_page",
            "page_url",
            "result.pages.next_page_url",
        ),
        (
            {
                "status": LINKED,
                "result": {**PAGED_RESULT, "pages": {"offset_param": "offset", "page_size": 3}},
            },
            "result_next_page",
            "page_token",
            "result.pages.offset_param",
        ),
        (
            {"lookup": {**LISTED, "page_param": "page", "first_page": 1}},
            "parse_lookup",
            "page_token",
            "lookup",
        ),
    ],
    ids=["next_page_url", "offset", "numbered-lookup"],
)
def test_a_plugins_hook_of_old_is_refused_where_a_mode_passes_it_more(
    changes: dict[str, Any], hook: str, parameter: str, key: str
) -> None:
    """It raised TypeError at the first page, on every claim, for ever; now the
    configuration names the hook and the parameter to add."""
    spec = f"{__name__}:HooksOfOld"
    with pytest.raises(ConfigError) as caught:
        provider({**changes, "plugin": spec})
    assert str(caught.value) == (
        f"config.toml: providers.p.plugin: '{spec}' overrides {hook} without the "
        f"{parameter} parameter that {key} passes it (add `{parameter}: str | None = None`)"
    )
    assert provider({**changes, "plugin": f"{__name__}:HooksOfToday"}).plugin_class is HooksOfToday


class LookupOfOld(ProviderAdapter):
    def build_lookup(self, client_reference: str) -> HttpRequest:  # type: ignore[override]
        return super().build_lookup(client_reference)


def test_a_plugins_lookup_builder_of_old_is_refused_where_a_lookup_is_described() -> None:
    """Every lookup is built with our token and a page token: a builder taking the
    reference alone raised TypeError on every lookup (a lost create never found)."""
    spec = f"{__name__}:LookupOfOld"
    lookup = {**LISTED, "page_param": "page", "first_page": 1}
    with pytest.raises(ConfigError) as caught:
        provider({"lookup": lookup, "plugin": spec})
    assert str(caught.value) == (
        f"config.toml: providers.p.plugin: '{spec}' overrides build_lookup without the "
        "idempotency_token and page_token parameters that lookup passes it (add "
        "`idempotency_token: str | None = None, page_token: str | None = None`)"
    )
    assert provider({"plugin": spec}).plugin_class is LookupOfOld  # no lookup, no call


def test_a_plugins_hooks_of_old_load_where_no_mode_needs_more() -> None:
    """A cursor (next_page_token) passes them what they always took."""
    pages = {"next_page_token": "header:Next-Cursor", "page_token_param": "cursor"}
    result = {**PAGED_RESULT, "pages": pages}
    desc = provider({"status": LINKED, "result": result, "plugin": f"{__name__}:HooksOfOld"})
    assert desc.plugin_class is HooksOfOld


class ReferenceInAHeader(ProviderAdapter):
    """Names our reference in a header of its lookup (a read the description's
    keys cannot write: no lookup header is templated)."""

    def build_lookup(
        self,
        client_reference: str,
        idempotency_token: str | None = None,
        page_token: str | None = None,
    ) -> HttpRequest:
        req = super().build_lookup(client_reference, idempotency_token, page_token)
        req.headers["X-Client-Reference"] = client_reference
        return req


def test_a_direct_read_a_plugins_builder_names_our_reference_in_loads() -> None:
    """A kind = get lookup naming nothing of ours in its path, body or query is
    refused (it would adopt whatever is there), unless a plugin builds the lookup:
    its builder may name us where no key can (a header). Before, such a plugin's
    description was refused as a read naming nothing of ours."""
    lookup = {"kind": "get", "path": "/v1/exports/by-reference", "job_id": "/id"}
    changes = {"create": {**BASE["create"], "job_id": "/id"}, "lookup": lookup}
    with pytest.raises(ConfigError, match="must name our reference"):
        provider(changes)
    desc = provider({**changes, "plugin": f"{__name__}:ReferenceInAHeader"})
    req = adapter_for(desc).build_lookup("op_1", None, None)
    assert req.headers["X-Client-Reference"] == "op_1"
