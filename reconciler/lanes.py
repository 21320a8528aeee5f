"""HTTP clients for provider calls: one per concurrency slot, not one for all.

One pooled httpx client shared by every call scans all its connections each
time a request starts and each time a response closes (httpcore asks every
idle connection whether it has expired, which polls its socket). At eight
calls in flight a bare GET loop on one shared client is 35-40 % slower than
one with a client per task (bench.throughput's "one shared client" row),
and in a one-off py-spy profile of the reconciler (not kept) those checks
were its largest single cost. A client per slot holds at most two connections (the
provider's API and, for downloads, a second host) and is used by one call at
a time, so there is nothing to scan and no connection to wait for: whoever
holds the provider's slot holds its lane.

A lane is taken only inside the provider's slot (Context.semaphore), so a
provider never has more lanes than its max_concurrency; the most recently
returned lane goes out first, so the connections in use stay warm. All
providers together still make at most `max_in_flight` calls at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import TracebackType

import httpx

# A lane's connections: the provider's API host, and a second (a result host).
LANE_CONNECTIONS = 2


class _NoCookies(httpx.Cookies):
    """A jar that keeps nothing a response sets, and takes nothing to send."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set(self, name: str, value: str, domain: str = "", path: str = "/") -> None:
        raise TypeError("provider calls carry no cookies")


class _Client(httpx.AsyncClient):
    """httpx's client without its cookie jar (see `http_client`)."""

    _jar: _NoCookies | None = None

    @property
    def cookies(self) -> httpx.Cookies:
        if self._jar is None:
            self._jar = _NoCookies()
        return self._jar

    @cookies.setter
    def cookies(self, value: object) -> None:
        if value:  # httpx's own constructor sets an empty jar
            raise TypeError("provider calls carry no cookies")


def http_client(max_connections: int) -> httpx.AsyncClient:
    """A client as every provider call uses it.

    `Accept-Encoding: identity` keeps bodies byte-exact, so Content-Digest and
    our own sha256 are computed over what the provider actually signed. No
    redirects: a provider that redirects a status read is a contract change we
    want recorded, not silently followed. No cookies: a call sends exactly the
    headers its description builds and the evidence records, never one that an
    earlier answer (to another operation, on the same client) happened to set.
    """
    return _Client(
        headers={"Accept-Encoding": "identity", "User-Agent": "jobwarden-reconciler"},
        follow_redirects=False,
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        trust_env=False,
    )


class Lanes(contextlib.AbstractAsyncContextManager["Lanes"]):
    """Each provider's idle lanes (clients), made as its slots first need them."""

    def __init__(self, max_in_flight: int) -> None:
        self._idle: dict[str, list[httpx.AsyncClient]] = {}
        self._made: list[httpx.AsyncClient] = []
        self._in_flight = asyncio.Semaphore(max_in_flight)

    @contextlib.asynccontextmanager
    async def lane(self, provider: str) -> AsyncIterator[httpx.AsyncClient]:
        """A client of `provider`'s, for one call, under the process-wide bound."""
        idle = self._idle.setdefault(provider, [])
        client = idle.pop() if idle else self._make()
        try:
            async with self._in_flight:
                yield client
        finally:
            idle.append(client)

    def _make(self) -> httpx.AsyncClient:
        client = http_client(LANE_CONNECTIONS)
        self._made.append(client)
        return client

    async def aclose(self) -> None:
        clients, self._made, self._idle = self._made, [], {}
        for client in clients:
            await client.aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
