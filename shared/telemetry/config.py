"""Whether traces are exported, read from the standard OpenTelemetry variables (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
# The one protocol the `otel` extra's exporter speaks.
PROTOCOL = "http/protobuf"


@dataclass(frozen=True)
class Choice:
    enabled: bool
    why: str  # the reason it is off, or where spans go
    # a protocol asked for that is not ours (spans are sent as http/protobuf anyway)
    other_protocol: str | None = None


def traces_url(env: Mapping[str, str]) -> str | None:
    """Where spans are POSTed: the traces endpoint as given, or the base endpoint's
    `/v1/traces` (as the OTLP exporter specification says)."""
    specific = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return base.rstrip("/") + "/v1/traces" if base else None


def choose(env: Mapping[str, str]) -> Choice:
    """Tracing is on when an OTLP endpoint is set and nothing standard turns it off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Choice(False, "OTEL_SDK_DISABLED=true")
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return Choice(False, "OTEL_TRACES_EXPORTER=none")
    endpoint = traces_url(env)
    if endpoint is None:
        return Choice(False, "no OTLP endpoint set")
    protocol = next((env[v].strip() for v in PROTOCOL_VARS if env.get(v, "").strip()), PROTOCOL)
    other = protocol if protocol != PROTOCOL else None
    return Choice(True, endpoint, other)
