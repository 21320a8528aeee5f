"""An httpx transport that calls an ASGI app in this process, streaming both ways.

The MCP endpoint mounted in the receiver reaches the ledger through the agent
API, with the caller's own bearer token, exactly as a remote client would: the
same authentication, visibility rules, problem documents and wake-ups, and no
second code path to keep in step. Going through a socket to our own port would
need the receiver to know an address it can reach itself at (it may listen on
0.0.0.0 behind a proxy); this transport needs nothing.

httpx's own `ASGITransport` buffers the whole response before returning it,
which cannot carry a server-sent event stream that stays open for minutes.
Here the app runs in its own task and each body chunk is handed over as the
app sends it. Closing the response (or cancelling the caller) tells the app the
client went away and then cancels it, so a tool call that is cancelled ends the
API request it was waiting on at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.types import ASGIApp, Message

log = logging.getLogger(__name__)
_END = b""  # marks the end of the body (the app's own empty chunks are dropped)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, call: _AppCall) -> None:
        self._call = call

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._call.next_chunk()
            if chunk is _END:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._call.stop()


class _AppCall:
    """One request running through the app: its receive/send channels and its task."""

    def __init__(self, app: ASGIApp, scope: dict[str, Any], body: bytes) -> None:
        self._app = app
        self._scope = scope
        self._body: bytes | None = body
        self._disconnected = asyncio.Event()
        self._started: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        # Unbounded: the API's bodies are small JSON documents and events.
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"asgi {self._scope['path']}")

    async def _run(self) -> None:
        try:
            await self._app(self._scope, self._receive, self._send)
        except Exception as exc:
            if self._started.done():
                log.exception("in-process request %s failed mid-response", self._scope["path"])
            else:
                self._started.set_exception(exc)
        finally:
            if not self._started.done():
                self._started.set_exception(RuntimeError("the app sent no response"))
            self._chunks.put_nowait(_END)

    async def _receive(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._disconnected.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._started.set_result(message)
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                self._chunks.put_nowait(body)
            if not message.get("more_body", False):
                self._chunks.put_nowait(_END)

    async def response_start(self) -> Message:
        try:
            return await asyncio.shield(self._started)
        except BaseException:
            await self.stop()
            raise

    async def next_chunk(self) -> bytes:
        return await self._chunks.get()

    async def stop(self) -> None:
        """The client is gone: say so to the app, then make sure it has stopped."""
        self._disconnected.set()
        self._started.add_done_callback(_consume)  # nobody may read it any more
        task = self._task
        if task is None or task.done():
            return
        task.cancel()
        # asyncio.wait, not `await task`: a cancellation aimed at the caller
        # still propagates, and the app's own end is not re-raised here.
        await asyncio.wait([task])


def _consume(future: asyncio.Future[Message]) -> None:
    """Mark an abandoned future's outcome as read (no 'never retrieved' log)."""
    if not future.cancelled():
        future.exception()


class InProcessTransport(httpx.AsyncBaseTransport):
    """Send each request to `app` in this event loop; responses stream as the app sends."""

    def __init__(self, app: ASGIApp, *, client: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self._app = app
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        call = _AppCall(self._app, self._scope(request), body)
        call.start()
        start = await call.response_start()
        return httpx.Response(
            start["status"],
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in start["headers"]],
            stream=_ResponseStream(call),
            request=request,
        )

    def _scope(self, request: httpx.Request) -> dict[str, Any]:
        url = request.url
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "query_string": url.query,
            "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "server": (url.host, url.port or (443 if url.scheme == "https" else 80)),
            "client": self._client,
            "state": {},
        }
