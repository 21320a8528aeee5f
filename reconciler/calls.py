"""Sending one provider request and turning the outcome into plain values.

Every outbound call goes through `send`, which adds the trace context (W3C
`traceparent` plus the operation's trace id) and never raises for network
trouble: the caller gets a category it can record and reason about.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


# Result downloads may be large: for them the timeout stays httpx's, per phase
# (no read may stall that long), not a bound on the whole transfer.
TRANSFERS = frozenset({"result"})


# Calls whose delivery matters (a create or cancel that may have arrived must
# not be treated as one that never left). For them, httpx reports when the
# request starts to leave, so an outer timeout that fires before that (waiting
# for a pooled connection, connecting) is known to be "connect".
DELIVERY_MATTERS = frozenset({"create", "cancel"})


class _Departure:
    """httpx `trace` callback: has the request started to leave this host?"""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        if name.endswith(".send_request_headers.started"):
            self.started = True


def not_sent(trace_id: str) -> Sent:
    """A call given up before it left this process (it may simply be made again)."""
    return Sent(None, "connect", 0, traceparent(trace_id), "connect")


async def send(client: httpx.AsyncClient, req: HttpRequest, trace_id: str) -> Sent:
    """One exchange, bounded as a whole by `req.timeout` (result downloads excepted).

    httpx's timeout applies to each phase (connect, write, each read); the
    outer bound makes it the whole call's, which is what the lease that
    fences the call is sized against. Downloads are not bounded as a whole;
    the step renews its lease while one runs (Step._transfer).
    """
    parent = traceparent(trace_id)
    headers = {**req.headers, "traceparent": parent, "X-Trace-Id": trace_id}
    departure = _Departure() if req.action in DELIVERY_MATTERS else None
    started = time.perf_counter()
    try:
        async with asyncio.timeout(None if req.action in TRANSFERS else req.timeout):
            resp = await client.request(
                req.method,
                req.url,
                headers=headers,
                json=req.json,
                timeout=req.timeout,
                extensions={"trace": departure.trace} if departure else None,
            )
            body = resp.content
    except (httpx.HTTPError, TimeoutError) as exc:
        elapsed = int((time.perf_counter() - started) * 1000)
        category = classify_transport_error(exc)
        if departure is not None and not departure.started and isinstance(exc, TimeoutError):
            category = "connect"  # our own bound fired before a byte left
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
