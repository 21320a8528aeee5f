"""Span attributes after OpenTelemetry's HTTP semantic conventions (pure).

Nothing secret goes into a span: no header is recorded at all, and URLs lose
their user-info, fragment and every credential-looking query value
(`shared.redaction.sanitize_url`, the rule the call log follows). Webhook
receipts record the path only, never the query string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from shared.redaction import sanitize_url

# Methods the conventions name; any other is recorded as "_OTHER" (bounded cardinality).
KNOWN_METHODS = frozenset(
    {"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE", "QUERY"}
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Free text (a transition's cause quotes providers) is cut to this many characters.
MAX_TEXT = 500

Attributes = dict[str, Any]


def method_attributes(method: str) -> Attributes:
    upper = method.upper()
    if upper in KNOWN_METHODS:
        return {"http.request.method": upper}
    return {"http.request.method": "_OTHER", "http.request.method_original": method}


def redacted_url(url: str) -> str:
    """`url` fit for a span: no user-info, no fragment, credential-looking query values redacted."""
    try:
        clean = sanitize_url(url)
        return clean.partition("#")[0]
    except ValueError:  # not parseable as a URL: say so rather than risk copying a secret
        return "[unparseable]"


def client_request(method: str, url: str) -> Attributes:
    """A provider call's request side (HTTP client span)."""
    attrs = method_attributes(method)
    attrs["url.full"] = redacted_url(url)
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        host, port = None, None
    if host:
        attrs["server.address"] = host
    if port:
        attrs["server.port"] = port
    return attrs


def client_error_type(status: int | None, error_category: str | None) -> str | None:
    """`error.type` of a provider call: the status code of a 4xx/5xx answer, else the
    transport failure's category (timeout, connect, reset, protocol, other)."""
    if status is None:
        return error_category or "_OTHER"
    return str(status) if status >= 400 else None


def server_request(scope: Mapping[str, Any], route: str) -> Attributes:
    """An incoming request (HTTP server span): method, route and path, never the query."""
    attrs = method_attributes(str(scope.get("method", "")))
    attrs["http.route"] = route
    attrs["url.path"] = str(scope.get("path", ""))
    attrs["url.scheme"] = str(scope.get("scheme", "http"))
    version = scope.get("http_version")
    if version:
        attrs["network.protocol.version"] = str(version)
    server = scope.get("server")
    if server and server[0]:
        attrs["server.address"] = str(server[0])
        if server[1] is not None:
            attrs["server.port"] = int(server[1])
    return attrs


def server_error_type(status: int) -> str | None:
    """A server span is an error only for a 5xx (a 4xx is the client's)."""
    return str(status) if status >= 500 else None


def text(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"
