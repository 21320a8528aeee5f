"""Tracing on, into memory: the SDK as shared/telemetry/sdk.py configures it, bar the exporter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from shared.telemetry import spans


@contextlib.contextmanager
def recording_spans() -> Iterator[Any]:
    """Yields the in-memory exporter; finished spans are in `get_finished_spans()`."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from shared.telemetry.sdk import OperationIds

    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=OperationIds(), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.install(provider.get_tracer("test"))
    try:
        yield exporter
    finally:
        spans.install(None)
        provider.shutdown()
