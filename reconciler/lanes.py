"""HTTP connections for provider calls: a lane per concurrency slot, not one pool for all.

One pooled httpx client shared by every call scans all its connections each
time a request starts and each time a response closes (httpcore asks every
idle connection whether it has expired, which polls its socket). At eight
calls in flight a bare GET loop on one shared client is 30-35 % slower than
one with a client per task (bench.throughput's "one shared client" row),
and in a one-off py-spy profile of the reconciler (not kept) those checks
were its largest single cost. A lane per slot (`Lane`: httpx's transport,
without the client layer) holds at most two connections (the provider's API
and, for downloads, a second host) and is used by one call at a time, so
there is nothing to scan and no connection to wait for: whoever holds the
provider's slot holds its lane.

A lane is taken only inside the provider's slot (Context.semaphore), so a
provider never has more lanes than its max_concurrency; the most recently
returned lane goes out first, so the connections in use stay warm. All
providers together still make at most `max_in_flight` calls at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx

from shared.closing import ClosedOnExit

# A lane's connections: the provider's API host, and a second (a result host).
LANE_CONNECTIONS = 2


# What every provider call carries unless its description sets the header
# itself (see `Lane`).
DEFAULT_HEADERS: tuple[tuple[str, str], ...] = (
    ("Accept", "*/*"),
    ("Accept-Encoding", "identity"),
    ("Connection", "keep-alive"),
    ("User-Agent", "jobwarden-reconciler"),
)


@functools.cache
def tls_context(extra_authorities: str = "") -> ssl.SSLContext:
    """The certificate checks every lane makes: httpx's defaults (certifi's
    authorities, host names checked), none taken from the environment, and
    the authorities in the PEM file `extra_authorities` as well when given
    (`provider_ca_file`; an unreadable file raises OSError or ssl.SSLError).

    Built once per process, not once per lane: loading the authorities takes
    about 40 ms of CPU here, and lanes are made as slots first need them, so
    each new lane stalled every call in flight on the event loop for that
    long. One serves them all because every lane speaks HTTP/1.1 only:
    httpcore sets the ALPN list on the context for each connection, and it is
    the same list for every lane. Never hand it to an HTTP/2 transport, and
    never change it (no load_cert_chain): every lane would see the change.
    """
    context = httpx.create_ssl_context(trust_env=False)
    if extra_authorities:
        context.load_verify_locations(cafile=extra_authorities)
    return context


class Lane(ClosedOnExit):
    """One slot's connections: httpx's transport, without httpx's client layer.

    The client layer (request building from parts, auth, redirects, cookies,
    event hooks) did nothing a provider call needs, and without it the
    reconciler makes about 10 % more status reads per second (bench.throughput's
    "through httpx's client layer" row). What it did that matters is done here,
    as the client was configured before:

    - `Accept-Encoding: identity` asks for bodies as the provider signed them,
      so Content-Digest and our own sha256 are computed over those bytes (a
      server that compresses anyway is decoded, as httpx always did);
    - credentials in a URL (`https://user:pass@host/...`) are sent as Basic
      authorization, as httpx's client sent them, unless the call sets its own;
    - no redirects: a provider that redirects a status read is a contract
      change we want recorded, not silently followed (a transport never follows);
    - no cookies: a call sends exactly the headers its description builds and
      the evidence records, never one an earlier answer happened to set (a
      transport has no jar);
    - no proxy or certificate settings from the environment.
    """

    def __init__(self, max_connections: int = LANE_CONNECTIONS, *, authorities: str = "") -> None:
        self._transport = httpx.AsyncHTTPTransport(
            verify=tls_context(authorities),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            trust_env=False,
        )
        self.is_closed = False

    async def call(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        phase_timeout: float = 10.0,
        trace: Callable[[str, Mapping[str, Any]], Awaitable[None]] | None = None,
    ) -> httpx.Response:
        """One exchange, body read; `phase_timeout` bounds each phase (connect, write, each read).

        `headers` override the defaults by name, whatever their case, as
        httpx's client merged them. `trace` is httpx's trace extension.
        Errors are httpx's, with their `request` set, as the client raised them.
        """
        if self.is_closed:
            raise RuntimeError("this lane is closed")  # it would open a connection nobody closes
        extensions: dict[str, Any] = {
            "timeout": dict.fromkeys(("connect", "read", "write", "pool"), phase_timeout)
        }
        if trace is not None:
            extensions["trace"] = trace
        target = httpx.URL(url)
        request = httpx.Request(
            method, target, headers=_merged(headers or {}, target), json=json, extensions=extensions
        )
        return await self.exchange(request)

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        """Send `request` on this lane's connections and read the answer whole
        (a benchmark overrides this to answer in process)."""
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.RequestError as exc:
            exc.request = request
            raise
        response.request = request
        try:
            await response.aread()
        finally:
            await response.aclose()
        return response

    async def aclose(self) -> None:
        self.is_closed = True
        await self._transport.aclose()


def _merged(headers: Mapping[str, str], url: httpx.URL) -> list[tuple[str, str]]:
    """The defaults `headers` do not set, then `headers`, then the URL's credentials
    as Basic authorization when `headers` carry none."""
    named = {name.lower() for name in headers}
    merged = [
        *((name, value) for name, value in DEFAULT_HEADERS if name.lower() not in named),
        *headers.items(),
    ]
    if (url.username or url.password) and "authorization" not in named:
        pair = f"{url.username}:{url.password}".encode()
        merged.append(("Authorization", "Basic " + base64.b64encode(pair).decode("ascii")))
    return merged


class Lanes(ClosedOnExit):
    """Each provider's idle lanes, made as its slots first need them."""

    def __init__(self, max_in_flight: int, make_lane: Callable[[], Lane] = Lane) -> None:
        self._make_lane = make_lane  # benchmarks pass lanes answered in process
        self._idle: dict[str, list[Lane]] = {}
        self._made: list[Lane] = []
        self._in_flight = asyncio.Semaphore(max_in_flight)

    @contextlib.asynccontextmanager
    async def lane(self, provider: str) -> AsyncIterator[Lane]:
        """A lane of `provider`'s, for one call, under the process-wide bound."""
        idle = self._idle.setdefault(provider, [])
        lane = idle.pop() if idle else self._make()
        try:
            async with self._in_flight:
                yield lane
        finally:
            idle.append(lane)

    def _make(self) -> Lane:
        lane = self._make_lane()
        self._made.append(lane)
        return lane

    async def aclose(self) -> None:
        lanes, self._made, self._idle = self._made, [], {}
        for lane in lanes:
            await lane.aclose()
