"""Where a tool call gets its API client: the environment (stdio) or the caller's token (HTTP).

Both transports reach the ledger the same way, through the agent API with a
bearer token, so what a model may see and do over MCP is exactly what its
token may see and do over HTTP. Only the origin of the token differs: stdio
serves one agent, named by JW_API_TOKEN; the HTTP endpoint serves whoever
authenticated the request.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Protocol

import httpx

from shared.agents.client import AsyncJobwardenClient, JobwardenError

# Clients kept for recently seen tokens over HTTP: agents are few, and a
# client over the in-process transport holds no socket, so evicting one costs
# nothing but the next request building a new one.
MAX_CACHED_CLIENTS = 64
# The in-process API is addressed by this URL; nothing resolves it.
IN_PROCESS_URL = "http://jobwarden.in-process"


class ClientSource(Protocol):
    def client(self) -> AsyncJobwardenClient:
        """The API client for the current request; JobwardenError when there is none."""
        ...

    async def aclose(self) -> None: ...


class EnvClientSource:
    """One client from JW_API_URL / JW_API_TOKEN, built on first use.

    A server without the settings still starts and answers `tools/list`; the
    first tool call says what is missing.
    """

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env
        self._client: AsyncJobwardenClient | None = None

    def client(self) -> AsyncJobwardenClient:
        if self._client is None:
            self._client = AsyncJobwardenClient.from_env(self._env)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class TokenClientSource:
    """A client per caller token, over `transport` (the API app in this process)."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        current_token: Callable[[], str | None],
    ) -> None:
        self._transport = transport
        self._current_token = current_token
        self._clients: OrderedDict[str, AsyncJobwardenClient] = OrderedDict()

    def client(self) -> AsyncJobwardenClient:
        token = self._current_token()
        if token is None:  # the endpoint refuses unauthenticated requests before this
            raise JobwardenError("this request carries no bearer token")
        found = self._clients.get(token)
        if found is None:
            found = AsyncJobwardenClient(IN_PROCESS_URL, token, transport=self._transport)
            self._clients[token] = found
            if len(self._clients) > MAX_CACHED_CLIENTS:
                self._clients.popitem(last=False)  # nothing to close: no socket behind it
        else:
            self._clients.move_to_end(token)
        return found

    async def aclose(self) -> None:
        self._clients.clear()
