"""One TCP segment per response: uvicorn's writes within one loop step leave together.

uvicorn writes a response's status line and headers in one `transport.write`
and its body in another, and uvloop sends each at once: two system calls and
two segments for every response with a body, and a second wake-up of the
client. On a small virtual machine that second write is not small: in a
one-off measurement here, a bare Starlette endpoint answering 200 with a
36-byte body used about 35 µs more CPU per request than the same endpoint
answering 204 (no body, one write).

`OneSegment` is the transport uvicorn's protocol sees: writes made in one
step of the event loop are joined and handed to the real transport once, by
a callback at the end of that step, in the order they were made. Nothing
waits for more data than the current step produced, so no response is held
back; `close()`, `write_eof()` and the peer's end of stream write what is
pending first. Past MAX_PENDING_BYTES the writes go out at once, so a large
body streamed within one step meets the real transport's flow control as
before. Every other transport method is the real transport's.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

# Joined writes beyond this size go out at once: a response's head and a small
# body are what is worth joining; a large body gains nothing from waiting.
MAX_PENDING_BYTES = 64 * 1024


class OneSegment:
    """A transport that joins the writes of one loop step (module docstring)."""

    __slots__ = ("_loop", "_pending", "_pending_bytes", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        chunk = bytes(data)
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        if self._pending_bytes > MAX_PENDING_BYTES:
            self.flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Hand what is pending to the real transport now (also done at the step's end)."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending = []
        self._pending_bytes = 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._pending_bytes + int(self._transport.get_write_buffer_size())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


@functools.cache
def one_segment_protocol(base: type) -> type:
    """`base` (uvicorn's HTTP protocol class) writing through `OneSegment`."""

    class OneSegmentProtocol(base):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(OneSegment(transport, asyncio.get_running_loop()))

        def eof_received(self) -> bool | None:
            # The peer finished sending; the real transport may close itself
            # right after this returns, bypassing OneSegment.close: what this
            # step wrote goes out first.
            if isinstance(self.transport, OneSegment):
                self.transport.flush()
            keep_open: bool | None = super().eof_received()
            return keep_open

    OneSegmentProtocol.__name__ = OneSegmentProtocol.__qualname__ = f"OneSegment{base.__name__}"
    return OneSegmentProtocol
