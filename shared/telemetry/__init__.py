"""OpenTelemetry traces: one trace per operation, its trace id the operation's.

Off unless an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) and the `otel` extra is installed; then
spans are batched and exported over OTLP/HTTP (protobuf). Off, nothing of
the SDK is imported and every hook returns at its first line (`spans.TRACER
is None`).

- `config`: whether tracing is wanted, from the environment (pure);
- `setup`: `configure(service)` at a daemon's start, `shutdown()` (flush) at its end;
- `sdk`: the only module that imports the SDK, loaded by `configure` alone;
- `ids`: our hex trace ids as OpenTelemetry's integers, the operation's root span id;
- `attributes`: semantic-convention attributes, with URLs redacted (pure);
- `spans`: the hooks the receiver and the reconciler call.
"""

from shared.telemetry.setup import configure, shutdown

__all__ = ["configure", "shutdown"]
