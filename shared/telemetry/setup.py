"""Turning tracing on at a daemon's start and flushing it at its end."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
from collections.abc import Mapping
from typing import Any

from shared.redaction import sanitize_url
from shared.telemetry import spans
from shared.telemetry.config import PROTOCOL, choose

log = logging.getLogger("jobwarden.telemetry")

# The provider spans are exported through; None while tracing is off.
_provider: Any = None


def configure(service: str, env: Mapping[str, str] | None = None) -> bool:
    """Export this process's spans as `service` if an OTLP endpoint is configured.

    Returns whether tracing is on. Off (no endpoint, OTEL_SDK_DISABLED=true,
    OTEL_TRACES_EXPORTER=none, or the `otel` extra not installed), the SDK is
    never imported. A second call keeps the first configuration.
    """
    global _provider
    if _provider is not None:
        return True
    environ = os.environ if env is None else env
    choice = choose(environ)
    if not choice.enabled:
        log.debug("tracing off", extra={"ctx": {"reason": choice.why}})
        return False
    try:
        from shared.telemetry import sdk
    except ImportError as exc:
        log.warning(
            "an OTLP endpoint is set but the OpenTelemetry SDK is not installed: tracing off;"
            " install jobwarden's otel extra (pip install 'jobwarden[otel]', or the wheel you"
            " installed from with [otel])",
            extra={"ctx": {"missing": exc.name}},
        )
        return False
    if choice.other_protocol is not None:
        log.warning(
            "only OTLP over http/protobuf is supported: exporting with it",
            extra={"ctx": {"asked": choice.other_protocol, "used": PROTOCOL}},
        )
    _provider = sdk.tracer_provider(service, _version(), environ)
    spans.install(_provider.get_tracer("jobwarden", _version()))
    log.info(
        "tracing on",
        extra={"ctx": {"service": service, "endpoint": sanitize_url(choice.why)}},
    )
    return True


async def shutdown() -> None:
    """Stop recording and export what is still batched (a no-op when tracing is off).

    The exporter's calls block, so the flush runs in a thread; it is bounded
    by the exporter's timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default).
    """
    global _provider
    provider, _provider = _provider, None
    spans.install(None)
    if provider is not None:
        await asyncio.to_thread(provider.shutdown)


def _version() -> str:
    try:
        return importlib.metadata.version("jobwarden")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
