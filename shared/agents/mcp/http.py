"""The MCP server over Streamable HTTP, mounted in the receiver next to the agent API.

Who may call it: the bearer tokens of the agent API, checked against the
ledger on every request (a revoked token stops working at once). Agent tokens
only: an operator token is refused with 403. The tools act for a model, and a
model holding an operator token could read and cancel every agent's jobs;
operators have the CLI, which records their name on every decision.

How it reaches the ledger: through the agent API itself, in this process
(`InProcessTransport`), with the caller's own token. The answers, visibility
rules, problem documents and NOTIFY wake-ups are then exactly those a remote
client of the API gets, and the receiver keeps one code path per operation.
The endpoint only imports `shared`: the receiver hands it the API's routes.

Lifecycle: the SDK's session manager needs a running task group for the
sessions it serves. `around(app)` starts it when the app starts and stops it
when the app begins its shutdown, before the pool closes, so an `await` in
flight is cancelled rather than left holding the event stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthenticationError
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.agents.inprocess import InProcessTransport
from shared.agents.mcp.server import build_server
from shared.agents.mcp.sources import TokenClientSource
from shared.db import pooled
from shared.db.errors import DATABASE_UNREACHABLE
from shared.ledger import tokens
from shared.ledger.tokens import requested_by
from shared.settings import Settings

MCP_PATH = "/mcp"
AGENT_SCOPE = "agent"
# The API refuses longer bearer tokens before hashing; so do we.
MAX_TOKEN_LENGTH = 200
# A client told the database is down retries after this many seconds.
RETRY_AFTER_SECONDS = 5
# What an unreachable database looks like from here (a pool acquire that
# gave up is a TimeoutError, an OSError).


class DatabaseUnavailable(AuthenticationError):
    """The token could not be checked: the ledger did not answer."""


class LedgerTokenVerifier:
    """The SDK's TokenVerifier over the API's token table."""

    def __init__(self, pool: Any, *, acquire_timeout: float) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout

    async def verify_token(self, token: str) -> AccessToken | None:
        # The API's rule (receiver/api/auth.py): "Bearer", a space, then the token
        # with surrounding whitespace ignored; the SDK hands over header[7:].
        token = token.strip()
        if not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        try:
            conn = await self._pool.acquire(timeout=self._acquire_timeout)
            try:
                found = await tokens.authenticate(conn, token)
            finally:
                await pooled.release(self._pool, conn)
        except DATABASE_UNREACHABLE as exc:
            raise DatabaseUnavailable("the database is unavailable") from exc
        if found is None:
            return None
        return AccessToken(
            token=token,
            client_id=found.token_id,  # a session stays bound to the token that opened it
            scopes=[found.scope],
            subject=requested_by(found.caller, found.scope),
        )


def _auth_error(conn: HTTPConnection, exc: Exception) -> Response:
    if isinstance(exc, DatabaseUnavailable):
        return JSONResponse(
            {"error": "temporarily_unavailable", "error_description": str(exc)},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    return JSONResponse({"error": "invalid_request", "error_description": str(exc)}, 400)


class LowerCaseHost:
    """Host and Origin lower-cased before the SDK's exact, case-sensitive check:
    host names are case-insensitive (`Host: Jobwarden.Example.com` got 421)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [
                (name, value.lower() if name in (b"host", b"origin") else value)
                for name, value in scope["headers"]
            ]
            scope = {**scope, "headers": headers}
        await self._app(scope, receive, send)


class AgentsOnly:
    """Refuse operator tokens (403) before anything else is done for them."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if isinstance(user, AuthenticatedUser) and AGENT_SCOPE not in user.scopes:
            body = json.dumps(
                {
                    "error": "insufficient_scope",
                    "error_description": (
                        "MCP serves agents: use an agent token (`jobwarden tokens create NAME`). "
                        "Operator tokens are refused here; operators use the CLI."
                    ),
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer error="insufficient_scope", scope="agent"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)


def _current_token() -> str | None:
    access = get_access_token()
    return access.token if access is not None else None


# Host names a browser on this machine uses for a loopback server; a page that
# rebinds its own domain to 127.0.0.1 sends its domain instead, and is refused.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_ANY_ADDRESS = frozenset({"", "0.0.0.0", "::", "[::]"})  # noqa: S104 - compared, never bound


def allowed_hosts(settings: Settings, extra: Sequence[str] = ()) -> list[str]:
    """The Host names /mcp answers to: loopback, the address the receiver binds
    (unless it is a wildcard), the host of JW_PUBLIC_WEBHOOK_URL, and `extra`."""
    hosts = [*LOOPBACK_HOSTS]
    bound = settings.receiver_host.strip().lower()
    if bound not in _ANY_ADDRESS:
        hosts.append(f"[{bound}]" if ":" in bound else bound)
    public = urlsplit(settings.public_webhook_url)
    if public.hostname:
        # with its port, and without: a proxy may serve the bare name
        hosts.append(public.netloc.rsplit("@", 1)[-1].lower())
        hosts.append(f"[{public.hostname}]" if ":" in public.hostname else public.hostname)
    hosts.extend(h.strip().lower() for h in extra if h.strip())
    return list(dict.fromkeys(hosts))


def transport_security(settings: Settings, extra: Sequence[str] = ()) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding guard for /mcp: Host must name this receiver, and a
    browser's Origin, when sent, must be one of its http(s) origins (421 / 403).

    A host with no port also matches any port (`host:*`): the receiver's port is
    not what a proxy in front of it listens on.
    """
    hosts = allowed_hosts(settings, extra)
    with_ports = [form for host in hosts for form in (host, f"{host}:*")]
    origins = [f"{scheme}://{form}" for scheme in ("http", "https") for form in with_ports]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=with_ports,
        allowed_origins=origins,
    )


class McpHttpEndpoint:
    """Routes to mount, and the wrapper that runs the sessions for the app's lifetime."""

    def __init__(
        self,
        api: ASGIApp,
        pool: Any,
        *,
        acquire_timeout: float,
        path: str = MCP_PATH,
        security: TransportSecuritySettings | None = None,
    ) -> None:
        self._source = TokenClientSource(InProcessTransport(api), _current_token)
        self.manager = StreamableHTTPSessionManager(
            app=build_server(self._source),
            security_settings=security or transport_security(Settings()),
        )
        verifier = LedgerTokenVerifier(pool, acquire_timeout=acquire_timeout)
        # AgentsOnly first, to say why an operator token is refused; the SDK's
        # scope check behind it is the second lock on the same door.
        guarded = AgentsOnly(
            RequireAuthMiddleware(
                LowerCaseHost(StreamableHTTPASGIApp(self.manager)), required_scopes=[AGENT_SCOPE]
            )
        )
        self.app: ASGIApp = AuthenticationMiddleware(
            AuthContextMiddleware(guarded),
            backend=BearerAuthBackend(verifier),
            on_error=_auth_error,
        )
        self.routes: list[BaseRoute] = [Route(path, endpoint=self.app)]
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start serving sessions; returns once the session manager runs."""
        started, self._stop = asyncio.Event(), asyncio.Event()
        stop = self._stop

        async def hold() -> None:
            async with self.manager.run():
                started.set()
                await stop.wait()

        self._task = asyncio.create_task(hold(), name="mcp-sessions")
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait([self._task, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self._task.done():
            self._task.result()  # re-raises why it could not start

    async def stop(self) -> None:
        """End every session (cancelling tool calls in flight) and release the clients."""
        if self._stop is None or self._task is None:
            return
        self._stop.set()
        await self._task
        await self._source.aclose()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    def around(self, app: ASGIApp) -> ASGIApp:
        """`app`, with the sessions started at its lifespan startup and stopped at its shutdown."""

        async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "lifespan":
                await app(scope, receive, send)
                return

            async def receive_and_follow() -> Message:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self.start()
                elif message["type"] == "lifespan.shutdown":
                    await self.stop()
                return message

            await app(scope, receive_and_follow, send)

        return wrapped


def mcp_endpoint(
    settings: Settings, pool: Any, api_routes: Sequence[BaseRoute], *, path: str = MCP_PATH
) -> McpHttpEndpoint:
    """The endpoint for the receiver: `api_routes` are the agent API's routes it calls.

    Host names beyond those derived from the settings come from
    `settings.mcp_allowed_hosts` (JW_MCP_ALLOWED_HOSTS, comma-separated).
    """
    extra = [name.strip() for name in settings.mcp_allowed_hosts.split(",") if name.strip()]
    return McpHttpEndpoint(
        Starlette(routes=list(api_routes)),
        pool,
        acquire_timeout=settings.db_acquire_timeout,
        path=path,
        security=transport_security(settings, extra),
    )
