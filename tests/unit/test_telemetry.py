"""shared/telemetry: off by default and free, safe without the extra, spans as specified."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import shared.telemetry
from shared.ids import new_trace_id
from shared.telemetry import attributes, setup, spans
from shared.telemetry.config import choose, traces_url
from shared.telemetry.ids import parse_traceparent, root_span_id, trace_id_int, traceparent
from tests.spans_support import recording_spans

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


# ------------------------------------------------------------------ when it is on


def test_off_without_an_endpoint() -> None:
    assert not choose({}).enabled
    assert not choose({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}).enabled


@pytest.mark.parametrize(
    "var", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
def test_on_with_either_endpoint(var: str) -> None:
    choice = choose({var: "http://collector:4318"})
    assert choice.enabled and choice.other_protocol is None


def test_spans_go_to_the_traces_endpoint_or_the_base_ones_v1_traces() -> None:
    assert (
        traces_url({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    )
    both = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x",
    }
    assert traces_url(both) == "http://t/x"
    assert traces_url({}) is None


def test_the_standard_switches_turn_it_off() -> None:
    assert not choose({**ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}).enabled
    assert not choose({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}).enabled
    assert choose({**ENDPOINT, "OTEL_SDK_DISABLED": "false"}).enabled


def test_another_protocol_is_named_for_a_warning() -> None:
    choice = choose({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert choice.enabled and choice.other_protocol == "grpc"


# ------------------------------------------------------------------ off: no-ops


@dataclass(frozen=True)
class _Op:
    operation_id: str = "op_1"
    trace_id: str = "ab" * 16
    provider: str = "sim"


@dataclass(frozen=True)
class _Req:
    method: str = "GET"
    url: str = "https://api.example.com/v1/jobs/1"
    action: str = "status"


def test_configure_without_an_endpoint_leaves_every_hook_a_no_op() -> None:
    assert setup.configure("jobwarden-test", env={}) is False
    assert spans.TRACER is None
    assert spans.client_span(_Req(), "ab" * 16) is None
    with spans.step("step_poll", _Op()) as inside:
        assert inside is None
    spans.transition("polling", "succeeded", "remote succeeded")
    app = object()
    assert spans.webhook_receipts(app) is app  # type: ignore[arg-type]
    assert spans.clock() == 0
    spans.submitted(
        0,
        incoming=None,
        trace_id="ab" * 16,
        operation_id="op_1",
        provider="sim",
        kind="export",
        created=True,
        route="/v1/operations",
        status=202,
    )
    asyncio.run(setup.shutdown())  # nothing to flush


def test_without_the_extra_tracing_stays_off_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # None in sys.modules makes `import` raise ImportError: the SDK "is not installed".
    # Whatever an earlier test in this process left (tracing configured, the sdk
    # module imported and bound on its package) is set aside first.
    monkeypatch.setattr(setup, "_provider", None)
    monkeypatch.setattr(spans, "TRACER", None)
    monkeypatch.delattr(shared.telemetry, "sdk", raising=False)
    monkeypatch.delitem(sys.modules, "shared.telemetry.sdk", raising=False)
    for name in ("opentelemetry.sdk", "opentelemetry.sdk.trace", "opentelemetry.sdk.resources"):
        monkeypatch.setitem(sys.modules, name, None)
    with caplog.at_level(logging.WARNING, logger="jobwarden.telemetry"):
        assert setup.configure("jobwarden-test", env=ENDPOINT) is False
    assert spans.TRACER is None
    assert "jobwarden[otel]" in caplog.text


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_daemons_import_no_sdk_when_tracing_is_off() -> None:
    out = _run(
        """
        import sys
        import reconciler.calls, reconciler.step, reconciler.worker, reconciler.daemon
        import receiver.app, receiver.webhooks.endpoint, receiver.api.operations
        from shared import telemetry
        assert telemetry.configure("jobwarden-test", env={}) is False
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
        """
    )
    assert out.strip() == "[]"


def test_everything_works_with_no_opentelemetry_installed_at_all() -> None:
    """Every `opentelemetry` import fails, as on an install without the extra (and
    without any dependency that brings the API): the hooks are no-ops all the same."""
    _run(
        """
        import importlib.abc, sys

        class NoOtel(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoOtel())
        import reconciler.calls, reconciler.worker, receiver.app, receiver.webhooks.endpoint
        from shared import telemetry
        from shared.telemetry import spans
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
        assert telemetry.configure("jobwarden-test", env=env) is False
        assert spans.TRACER is None and spans.clock() == 0
        assert not [m for m in sys.modules if m.startswith("opentelemetry")]
        """
    )


# ------------------------------------------------------------------ pure pieces


def test_urls_lose_userinfo_fragment_and_credentials() -> None:
    url = "https://user:pw@files.example.com/r.csv?X-Amz-Signature=s3cr3t&api_key=k3y&part=2#frag"
    clean = attributes.redacted_url(url)
    for secret in ("user", "pw", "s3cr3t", "k3y", "frag"):
        assert secret not in clean
    assert clean.startswith("https://files.example.com/r.csv?") and "part=2" in clean


def test_client_attributes_follow_the_conventions() -> None:
    attrs = attributes.client_request("post", "https://tok:x@api.example.com/v1/jobs?sig=abc")
    assert attrs == {
        "http.request.method": "POST",
        "url.full": "https://api.example.com/v1/jobs?sig=[redacted]",
        "server.address": "api.example.com",
        "server.port": 443,
    }
    assert attributes.client_request("BREW", "http://h:8080/")["http.request.method"] == "_OTHER"
    assert attributes.client_request("GET", "http://h:8080/")["server.port"] == 8080


def test_an_unparseable_url_is_not_copied() -> None:
    assert attributes.redacted_url("http://[::1/secret?token=x") == "[unparseable]"


def test_error_types() -> None:
    assert attributes.client_error_type(200, None) is None
    assert attributes.client_error_type(503, "back_pressure") == "503"
    assert attributes.client_error_type(None, "timeout") == "timeout"
    assert attributes.client_error_type(None, None) == "_OTHER"
    assert attributes.server_error_type(401) is None
    assert attributes.server_error_type(503) == "503"


def test_trace_ids_bridge() -> None:
    trace = new_trace_id()
    value = trace_id_int(trace)
    assert value is not None and f"{value:032x}" == trace
    for bad in (None, "0" * 32, "AB" * 16, "0x" + "a" * 30, " " + "a" * 31, "a" * 31):
        assert trace_id_int(bad) is None
    assert root_span_id(value, "op_1") == root_span_id(value, "op_1") != 0
    # operations sharing a trace (an agent's) each have a root of their own
    assert root_span_id(value, "op_1") != root_span_id(value, "op_2")
    header = traceparent(value, 0x1234, 1)
    assert header == f"00-{trace}-0000000000001234-01"
    assert parse_traceparent(header) == (value, 0x1234, 1)
    for bad_header in (None, "", "01-" + header[3:], header.replace("1234", "0000")):
        assert parse_traceparent(bad_header) is None


# ------------------------------------------------------------------ on: the spans


@pytest.fixture
def recorded() -> Iterator[Any]:
    with recording_spans() as exporter:
        yield exporter


def _submit(trace_id: str, *, created: bool, incoming: str | None = None) -> None:
    spans.submitted(
        spans.clock(),
        incoming=incoming,
        trace_id=trace_id,
        operation_id="op_1",
        provider="sim",
        kind="export",
        created=created,
        route="/v1/operations",
        status=202,
    )


def test_a_created_operations_submit_span_is_its_trace_root(recorded: Any) -> None:
    trace = new_trace_id()
    _submit(trace, created=True)
    _submit(trace, created=False, incoming=f"00-{'cd' * 16}-{'ef' * 8}-01")
    first, replay = recorded.get_finished_spans()
    root = root_span_id(int(trace, 16), "op_1")
    assert (first.context.trace_id, first.context.span_id, first.parent) == (
        int(trace, 16),
        root,
        None,
    )
    assert [(e.name, dict(e.attributes)) for e in first.events] == [
        ("transition", {"to": "create_pending", "cause": "submitted"})
    ]
    assert replay.parent.span_id == root and replay.context.span_id != root
    assert [link.context.trace_id for link in replay.links] == [int("cd" * 16, 16)]


def test_a_submit_joins_the_agents_trace(recorded: Any) -> None:
    trace = new_trace_id()
    _submit(trace, created=True, incoming=f"00-{trace}-{'12' * 8}-01")
    (span,) = recorded.get_finished_spans()
    assert span.parent.span_id == 0x1212121212121212
    assert span.context.span_id == root_span_id(int(trace, 16), "op_1")


def test_a_call_in_a_step_is_its_child_and_its_traceparent_names_it(recorded: Any) -> None:
    op = _Op(trace_id=new_trace_id())
    with spans.step("step_poll", op):
        span = spans.client_span(_Req(url="https://a:b@api.example.com/j?token=t"), op.trace_id)
        assert span is not None
        header = spans.traceparent_of(span)
        spans.transition("polling", "succeeded", "remote succeeded")
        spans.end_client_span(span, 503, "back_pressure")
    client, step = recorded.get_finished_spans()
    assert parse_traceparent(header) == (int(op.trace_id, 16), client.context.span_id, 1)
    assert client.parent.span_id == step.context.span_id
    assert step.parent.span_id == root_span_id(int(op.trace_id, 16), op.operation_id)
    assert client.attributes["error.type"] == "503" and client.status.is_ok is False
    assert "token=t" not in client.attributes["url.full"]
    assert [dict(e.attributes) for e in step.events] == [
        {"from": "polling", "to": "succeeded", "cause": "remote succeeded"}
    ]


def test_a_failed_step_records_the_exception_type_only(recorded: Any) -> None:
    with pytest.raises(RuntimeError), spans.step("step_create", _Op(trace_id=new_trace_id())):
        raise RuntimeError("a message that may quote a secret")
    (step,) = recorded.get_finished_spans()
    assert step.attributes["error.type"] == "RuntimeError"
    assert not step.events and "secret" not in str(step.status.description)


@dataclass(frozen=True)
class _Outcome:
    status: str = "stored"
    operation_id: str | None = "op_1"
    trace_id: str | None = None


def _deliver(outcome: _Outcome | None, traceparent_header: str) -> None:
    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        if outcome is not None:
            spans.webhook_outcome("sim", outcome)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def send(message: Any) -> None:
        pass

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/webhooks/sim",
        "query_string": b"token=secret",
        "headers": [(b"traceparent", traceparent_header.encode()), (b"authorization", b"x")],
        "server": ("127.0.0.1", 8080),
        "scheme": "http",
        "http_version": "1.1",
    }
    asyncio.run(spans.webhook_receipts(endpoint)(scope, receive, send))


def test_a_matched_webhook_receipt_joins_its_operations_trace(recorded: Any) -> None:
    trace, sender = new_trace_id(), f"00-{'cd' * 16}-{'ef' * 8}-01"
    _deliver(_Outcome(trace_id=trace), sender)
    _deliver(None, sender)  # refused before it was stored: the sender's trace
    matched, refused = recorded.get_finished_spans()
    assert matched.name == "POST /webhooks/{provider}"
    assert matched.parent.trace_id == int(trace, 16)
    assert matched.parent.span_id == root_span_id(int(trace, 16), "op_1")
    assert [link.context.span_id for link in matched.links] == [int("ef" * 8, 16)]
    assert dict(matched.attributes) == {
        "http.request.method": "POST",
        "http.route": "/webhooks/{provider}",
        "url.path": "/webhooks/sim",
        "url.scheme": "http",
        "network.protocol.version": "1.1",
        "server.address": "127.0.0.1",
        "server.port": 8080,
        "http.response.status_code": 200,
        "jobwarden.provider": "sim",
        "jobwarden.webhook.outcome": "stored",
        "jobwarden.operation_id": "op_1",
    }
    assert (refused.parent.trace_id, refused.parent.span_id) == (
        int("cd" * 16, 16),
        int("ef" * 8, 16),
    )
    assert "jobwarden.provider" not in refused.attributes
