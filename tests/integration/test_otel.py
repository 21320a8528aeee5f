"""One OpenTelemetry trace per operation, across real receiver and reconciler processes.

The test is the collector: a small OTLP/HTTP receiver on loopback decodes
each `ExportTraceServiceRequest` (protobuf) the two processes send. An agent
submits through the receiver's API, the reconciler creates and polls the job
on the simulated provider, whose webhook reaches the receiver; then every
span of the operation must be in the operation's trace, under its submit
span, and each traceparent the provider saw must name a CLIENT span.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # the otel extra
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.harness import free_port, wait_until
from shared import telemetry
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from shared.telemetry import spans as hooks
from shared.telemetry.ids import parse_traceparent, root_span_id
from tests.harness import WEBHOOK_SECRET
from tests.integration.agent_support import make_token
from tests.processes import start_reconciler, write_config

WAIT_SECONDS = 30.0
RECEIVER = "jobwarden-receiver"
RECONCILER = "jobwarden-reconciler"
# protobuf's Span.SpanKind
INTERNAL, SERVER, CLIENT = 1, 2, 3


@dataclass(frozen=True)
class Span:
    service: str
    trace_id: str
    span_id: str
    parent: str
    name: str
    kind: int
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attrs(key_values: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in key_values}


@dataclass
class Collector:
    """An OTLP/HTTP trace receiver: what it was sent, and a signal per export."""

    spans: list[Span] = field(default_factory=list)
    content_types: set[str] = field(default_factory=set)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def traces(self, request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        self.content_types.add(request.headers.get("content-type", ""))
        export = trace_service_pb2.ExportTraceServiceRequest()
        export.ParseFromString(body)
        for resource_spans in export.resource_spans:
            service = _attrs(resource_spans.resource.attributes)["service.name"]
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    self.spans.append(
                        Span(
                            service=service,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent=s.parent_span_id.hex(),
                            name=s.name,
                            kind=s.kind,
                            attrs=_attrs(s.attributes),
                            events=[(e.name, _attrs(e.attributes)) for e in s.events],
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        )
                    )
        self.arrived.set()
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        return Response(reply, media_type="application/x-protobuf")

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait for exports until `condition()` holds (each export is the signal)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"not exported within {WAIT_SECONDS:g} s: {what}")
            self.arrived.clear()
            if condition():
                return
            with suppress(TimeoutError):  # the loop says what did not arrive
                await asyncio.wait_for(self.arrived.wait(), left)


@asynccontextmanager
async def collector() -> AsyncIterator[tuple[Collector, str]]:
    c = Collector()
    app = Starlette(routes=[Route("/v1/traces", c.traces, methods=["POST"])])
    async with serve_app(app) as url:
        yield c, url


def _start_receiver(
    db_url: str, config: Path, tmp_path: Path, port: int, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    full = {
        **os.environ,
        "DATABASE_URL": db_url,
        "JW_CONFIG": str(config),
        "JW_LOG_LEVEL": "WARNING",
        **env,
    }
    with open(tmp_path / "receiver.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "shared.cli", "receiver", "--port", str(port)],
            env=full,
            stdout=log,
            stderr=log,
        )


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


async def test_one_trace_per_operation_across_receiver_and_reconciler(
    db: Any, db_url: str, tmp_path: Path
) -> None:
    token = await make_token(db, "otel-agent")
    port = free_port()
    receiver_url = f"http://127.0.0.1:{port}"
    sim = SimulatorSettings(webhook_secret=WEBHOOK_SECRET, webhook_backoff=(0.05, 0.1, 0.2))
    async with collector() as (spans, otlp_url), serve_app(build_app(sim)) as sim_url:
        config = write_config(tmp_path / "jw.toml", sim_url)
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: spans leave within a tenth of a second
            "JW_SIM_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "JW_PUBLIC_WEBHOOK_URL": f"{receiver_url}/webhooks/{{provider}}",
        }
        receiver = _start_receiver(db_url, config, tmp_path, port, env)
        reconciler = start_reconciler(db_url, config, tmp_path, "otel", **env)
        try:
            async with httpx.AsyncClient(base_url=receiver_url) as http:

                async def ready() -> bool:
                    try:
                        return (await http.get("/healthz")).status_code == 200
                    except httpx.TransportError:
                        return False

                await wait_until(ready, WAIT_SECONDS, "the receiver to listen")
                submitted = await http.post(
                    "/v1/operations",
                    headers={"Authorization": f"Bearer {token}"},
                    json={
                        "provider": "sim",
                        "kind": "export",
                        "request": {
                            "body": {
                                "script": "success",
                                "params": {"duration": 1.0},
                                "input": {"rows": 3},
                            }
                        },
                    },
                )
                assert submitted.status_code == 202, submitted.text
                op_id = submitted.json()["operation_id"]

            async def finished() -> bool:
                state = await db.fetchval(
                    "SELECT state::text FROM operations WHERE operation_id = $1", op_id
                )
                webhooks = await db.fetchval(
                    "SELECT count(*) FROM webhook_events WHERE operation_id = $1", op_id
                )
                return bool(state == "succeeded" and webhooks > 0)

            await wait_until(
                finished, WAIT_SECONDS, "the operation to succeed with a webhook delivered"
            )
            trace_id = await db.fetchval(
                "SELECT trace_id FROM operations WHERE operation_id = $1", op_id
            )
            history = await db.fetch(
                "SELECT from_state::text AS src, to_state::text AS dst FROM history"
                " WHERE operation_id = $1 ORDER BY seq",
                op_id,
            )
            recorded = await db.fetch(
                "SELECT traceparent FROM provider_calls WHERE operation_id = $1", op_id
            )
            async with httpx.AsyncClient() as http:
                seen = (await http.get(f"{sim_url}/_sim/requests")).json()["requests"]
            transitions = [(h["src"], h["dst"]) for h in history]

            def ours() -> list[Span]:
                return [s for s in spans.spans if s.trace_id == trace_id]

            def events() -> list[tuple[str | None, str]]:
                return [
                    (attrs.get("from"), attrs["to"])
                    for s in ours()
                    for name, attrs in s.events
                    if name == "transition"
                ]

            def complete() -> bool:
                return (
                    sorted(events(), key=str) == sorted(transitions, key=str)
                    and len([s for s in ours() if s.kind == CLIENT]) >= len(seen)
                    and any(s.name == "POST /webhooks/{provider}" for s in ours())
                )

            await spans.until(complete, "the operation's spans")
        finally:
            codes = (_stop(reconciler), _stop(receiver))
        # uvicorn re-raises the SIGTERM it handled once it has shut down cleanly
        assert codes[0] == 0 and codes[1] in (0, -signal.SIGTERM), codes

    assert spans.content_types == {"application/x-protobuf"}
    root = f"{root_span_id(int(trace_id, 16), op_id):016x}"
    trace = ours()
    assert {s.service for s in trace} == {RECEIVER, RECONCILER}

    # the submit span is the operation's root: every other span hangs under it
    (submit,) = [s for s in trace if s.name == "POST /v1/operations"]
    assert (submit.service, submit.kind, submit.span_id, submit.parent) == (
        RECEIVER,
        SERVER,
        root,
        "",
    )
    assert submit.attrs["jobwarden.operation_id"] == op_id
    assert submit.attrs["http.response.status_code"] == 202
    assert ("transition", {"to": "create_pending", "cause": "submitted"}) in submit.events

    steps = [s for s in trace if s.kind == INTERNAL]
    assert steps and all(s.service == RECONCILER and s.parent == root for s in steps)
    assert {"step create", "step poll"} <= {s.name for s in steps}

    webhooks = [s for s in trace if s.name == "POST /webhooks/{provider}"]
    assert webhooks and all(s.service == RECEIVER and s.kind == SERVER for s in webhooks)
    assert all(s.parent == root for s in webhooks)
    assert all(s.attrs["jobwarden.operation_id"] == op_id for s in webhooks)
    assert all(s.attrs["http.response.status_code"] == 200 for s in webhooks)

    # one CLIENT span per provider call, a child of its step, after the conventions
    clients = [s for s in trace if s.kind == CLIENT]
    step_ids = {s.span_id for s in steps}
    for s in clients:
        assert s.service == RECONCILER and s.parent in step_ids
        assert s.attrs["http.request.method"] in {"GET", "POST"}
        assert s.attrs["url.full"].startswith(sim_url + "/")
        assert s.attrs["server.address"] == "127.0.0.1"
        assert s.attrs["server.port"] == int(sim_url.rsplit(":", 1)[1])
        assert 200 <= s.attrs["http.response.status_code"] < 300
        assert "error.type" not in s.attrs  # every call of this run succeeded
    assert any(s.attrs["jobwarden.call"] == "create" for s in clients)

    # what the provider saw: each call's traceparent names its CLIENT span
    client_ids = {(s.trace_id, s.span_id) for s in clients}
    sent = [parse_traceparent(r["traceparent"]) for r in seen]
    assert sent and all(p is not None for p in sent)
    assert {(f"{p[0]:032x}", f"{p[1]:016x}") for p in sent if p} == client_ids
    assert len(clients) == len(seen)
    # and the ledger recorded the same traceparents
    assert {r["traceparent"][3:52] for r in recorded} == {f"{t}-{s}" for t, s in client_ids}

    # every transition of the history is an event of the trace
    assert sorted(events(), key=str) == sorted(transitions, key=str)


@dataclass(frozen=True)
class _Op:
    operation_id: str = "op_1"
    trace_id: str = "ab" * 16
    provider: str = "sim"


async def test_shutdown_exports_what_is_still_batched(monkeypatch: pytest.MonkeyPatch) -> None:
    async with collector() as (spans, otlp_url):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")  # ms: nothing leaves on its own
        assert telemetry.configure("jobwarden-test")
        try:
            with hooks.step("step_poll", _Op()):
                pass
            assert spans.spans == []
        finally:
            await telemetry.shutdown()
        assert hooks.TRACER is None
        assert [(s.service, s.name, s.trace_id) for s in spans.spans] == [
            ("jobwarden-test", "step poll", "ab" * 16)
        ]
