"""Sending one provider request and turning the outcome into plain values.

Every outbound call goes through `send`, which adds the trace context (W3C
`traceparent` plus the operation's trace id) and never raises for network
trouble: the caller gets a category it can record and reason about.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from shared.ids import traceparent
from shared.providers import HttpRequest, HttpResponse, classify_transport_error
from shared.providers.sanitize import sanitize_headers
from shared.providers.transport import TransportCategory


@dataclass(frozen=True)
class Sent:
    response: HttpResponse | None
    error_category: str | None  # timeout | connect | reset | protocol | other
    duration_ms: int
    traceparent: str
    transport_failure: TransportCategory | None = None

    @property
    def status_code(self) -> int | None:
        return self.response.status_code if self.response is not None else None

    def sanitized_response_headers(self) -> dict[str, str] | None:
        if self.response is None:
            return None
        return sanitize_headers(dict(self.response.headers.items()))


def http_error_category(status: int | None) -> str | None:
    if status is None:
        return None
    if status in (429, 503):
        return "back_pressure"
    if status >= 500:
        return "http_5xx"
    if status >= 400:
        return "http_4xx"
    return None


async def send(client: httpx.AsyncClient, req: HttpRequest, trace_id: str) -> Sent:
    parent = traceparent(trace_id)
    headers = {**req.headers, "traceparent": parent, "X-Trace-Id": trace_id}
    started = time.perf_counter()
    try:
        resp = await client.request(
            req.method, req.url, headers=headers, json=req.json, timeout=req.timeout
        )
        body = resp.content
    except httpx.HTTPError as exc:
        elapsed = int((time.perf_counter() - started) * 1000)
        category = classify_transport_error(exc)
        return Sent(None, category, elapsed, parent, category)
    elapsed_s = time.perf_counter() - started
    response = HttpResponse(
        status_code=resp.status_code,
        headers=dict(resp.headers.items()),
        body=body,
        elapsed=elapsed_s,
        url=str(resp.url),
    )
    return Sent(response, http_error_category(resp.status_code), int(elapsed_s * 1000), parent)
