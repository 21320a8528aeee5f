"""The OpenTelemetry SDK, configured: the only module that imports it.

`setup.configure` imports this module only when tracing is wanted, so a
process without an OTLP endpoint (or without the `otel` extra) never loads
the SDK. The endpoint comes from the environment `configure` was given; the
SDK reads everything else from the process environment as usual: the
exporter's headers, timeout, compression and TLS files
(`OTEL_EXPORTER_OTLP_*`), the batch processor's delays and sizes
(`OTEL_BSP_*`), the sampler (`OTEL_TRACES_SAMPLER`) and resource attributes
(`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

from shared.telemetry.config import traces_url
from shared.telemetry.spans import FORCED_IDS


class OperationIds(RandomIdGenerator):
    """Random ids, except those of a created operation's submit span: the
    operation's trace id and its root span id (`ids.root_span_id`)."""

    def generate_trace_id(self) -> int:
        forced = FORCED_IDS.get()
        return forced[0] if forced is not None else super().generate_trace_id()

    def generate_span_id(self) -> int:
        forced = FORCED_IDS.get()
        return forced[1] if forced is not None else super().generate_span_id()


def resource(service: str, version: str, env: Mapping[str, str]) -> Resource:
    """Standard resource attributes; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win."""
    name = env.get("OTEL_SERVICE_NAME") or service
    ours: dict[str, str | int] = {
        "service.name": name,
        "service.namespace": "jobwarden",
        "service.version": version,
        "service.instance.id": str(uuid.uuid4()),
        "host.name": socket.gethostname(),
        "process.pid": os.getpid(),
    }
    # Resource.create adds the SDK's own attributes and OTEL_RESOURCE_ATTRIBUTES,
    # which it reads from the process environment; those override ours.
    from_env = Resource.create({"service.name": name})
    return Resource(ours).merge(from_env)


def tracer_provider(service: str, version: str, env: Mapping[str, str]) -> TracerProvider:
    """A provider exporting in batches over OTLP/HTTP (protobuf) to the configured endpoint."""
    provider = TracerProvider(
        resource=resource(service, version, env),
        id_generator=OperationIds(),
        # flushed by `setup.shutdown` at the daemon's orderly end, not at interpreter exit
        shutdown_on_exit=False,
    )
    exporter = OTLPSpanExporter(endpoint=traces_url(env))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
