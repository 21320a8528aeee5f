"""Connections only to addresses a public service could have, unless the operator named the host.

`shared.providers.requests.check_sendable` refuses a URL whose host is an
internal address written out (`127.0.0.1`, `169.254.169.254`, `localhost`)
before anything is sent, but it resolves no name: a result URL on a host
name the submitter controls (`files.attacker.example`, resolving to
169.254.169.254 or to 10.0.0.5) passed it, and what that address answered
was fetched and stored for the agent to read. Checking the name's addresses
before the call would not close it either: the name could resolve to a
public address for the check and to an internal one for the connect (DNS
rebinding).

So the check is made where the address is chosen. `GuardedBackend` is the
network backend of a lane's connection pool: for a host the operator did not
name (`configured_hosts`: base_url's host, `auth.extra_hosts`,
`result.allowed_hosts`; an entry written `host:port` names that port alone),
it resolves the name itself, refuses the connection when any address it
resolves to is internal (`why_internal`), and connects to the address it
checked, not to the name again. TLS still verifies the
certificate against the name (httpcore passes the URL's host as the server
name, whatever address the stream reached). A named host connects as
before, by name: an operator who points a provider at an internal service
has said so.

A refusal is a `ConnectRefused` (an httpcore.ConnectError, so httpx raises
its ConnectError): the call never left, and the sender logs why.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import httpcore

from shared.providers import ProviderDescription
from shared.providers.requests import configured_hosts, normal_host, trusts, why_internal

# How long an attempt to connect has before the next address is tried beside it
# (RFC 8305's recommended Connection Attempt Delay, as anyio uses).
HAPPY_EYEBALLS_DELAY = 0.25
# Resolves a host name to the addresses to try, in order (a test injects one).
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]


class ConnectRefused(httpcore.ConnectError):
    """A connection refused before it was made: its host resolves to an internal address."""


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The addresses `host` resolves to, as the system resolver orders them, each once."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """The network backend of a lane's pool (module docstring)."""

    def __init__(
        self,
        inner: httpcore.AsyncNetworkBackend,
        trusted_hosts: frozenset[str],
        resolve: Resolver = system_resolver,
    ) -> None:
        self._inner = inner
        self._trusted = trusted_hosts
        self._resolve = resolve

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            name = normal_host(host)
        except ValueError:
            raise ConnectRefused(f"cannot check the host {host[:100]!r}") from None
        if trusts(self._trusted, name, port):
            return await self._inner.connect_tcp(
                host, port, timeout=timeout, local_address=local_address,
                socket_options=socket_options,
            )  # fmt: skip
        addresses = _interleaved(await self._addresses(host, name, port, timeout))

        def attempt(address: str) -> Awaitable[httpcore.AsyncNetworkStream]:
            return self._inner.connect_tcp(
                address, port, timeout=timeout, local_address=local_address,
                socket_options=socket_options,
            )  # fmt: skip

        return await _first_to_connect(addresses, attempt)

    async def _addresses(
        self, host: str, name: str, port: int, seconds: float | None
    ) -> Sequence[str]:
        """The checked addresses of `host`: an address literal itself, else what it resolves to."""
        if _is_address(name):
            resolved: Sequence[str] = [name]
        else:
            try:
                async with asyncio.timeout(seconds):
                    resolved = await self._resolve(host, port)
            except TimeoutError:
                raise httpcore.ConnectTimeout(f"resolving {name} timed out") from None
            except OSError as exc:  # socket.gaierror: no such name, no resolver
                raise httpcore.ConnectError(f"cannot resolve {name}: {exc.strerror}") from None
            if not resolved:
                raise httpcore.ConnectError(f"{name} resolves to no address")
        for address in resolved:
            kind = why_internal(normal_host(address.partition("%")[0]))
            if kind is not None:
                raise ConnectRefused(
                    f"{name} resolves to {address}, {kind}: refused, as it is not the "
                    "base_url's host, an auth.extra_hosts host or a result.allowed_hosts host"
                )
        return resolved

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ConnectRefused("provider calls are never made over a Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _interleaved(addresses: Sequence[str]) -> list[str]:
    """The resolver's order, the two families alternating from its first (RFC 8305 4)."""
    first_v6 = ":" in addresses[0]
    same = [a for a in addresses if (":" in a) == first_v6]
    other = [a for a in addresses if (":" in a) != first_v6]
    mixed: list[str] = []
    for index in range(max(len(same), len(other))):
        mixed += same[index : index + 1] + other[index : index + 1]
    return mixed


async def _first_to_connect(
    addresses: Sequence[str], attempt: Callable[[str], Awaitable[httpcore.AsyncNetworkStream]]
) -> httpcore.AsyncNetworkStream:
    """The first of `addresses` to connect, the next one started every
    HAPPY_EYEBALLS_DELAY (or as soon as one fails), as a connect by name does
    (anyio's happy eyeballs): a dead first address, an IPv6 path that drops
    everything, costs a quarter of a second, not the call. The others are
    cancelled, and a second connection that made it anyway is closed."""
    waiting = list(addresses)
    running: set[asyncio.Task[httpcore.AsyncNetworkStream]] = set()
    failure: BaseException | None = None
    try:
        while waiting or running:
            if waiting:
                running.add(asyncio.ensure_future(attempt(waiting.pop(0))))
            done, _ = await asyncio.wait(
                running,
                timeout=HAPPY_EYEBALLS_DELAY if waiting else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in done:
                running.discard(task)
                if task.exception() is None:
                    return task.result()
                failure = task.exception()
    finally:
        await _abandon(running)
    assert failure is not None  # `addresses` is never empty
    raise failure


async def _abandon(tasks: set[asyncio.Task[httpcore.AsyncNetworkStream]]) -> None:
    """Cancel the attempts still running; close a connection one made meanwhile."""
    for task in tasks:
        task.cancel()
    for outcome in await asyncio.gather(*tasks, return_exceptions=True):
        if isinstance(outcome, httpcore.AsyncNetworkStream):
            await outcome.aclose()


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def guard(pool: Any, trusted_hosts: frozenset[str], resolve: Resolver = system_resolver) -> None:
    """Put `GuardedBackend` under `pool` (httpcore 1.0's AsyncConnectionPool).

    httpx's transport takes no network backend, so its pool's is replaced
    through httpcore's private name; a new version that renamed it fails
    here, at the first lane, not silently unguarded.
    """
    inner = pool._network_backend
    if not isinstance(inner, httpcore.AsyncNetworkBackend):
        raise RuntimeError("httpcore's connection pool has no network backend to guard")
    pool._network_backend = GuardedBackend(inner, trusted_hosts, resolve)


def trusted_hosts(providers: Mapping[str, ProviderDescription]) -> dict[str, frozenset[str]]:
    """Each provider's hosts its lanes reach by name, whatever their addresses."""
    return {name: configured_hosts(desc) for name, desc in providers.items()}
