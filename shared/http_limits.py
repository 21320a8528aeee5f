"""What one client may cost a server before it sends a request: head size, head time, count.

uvicorn with httptools (llhttp) puts no bound on a request's line and
headers: a client that never ends its head makes the server buffer all of it
(200 MB of unfinished header took a receiver from 87 to 379 MB), and one that
sends it a byte every few seconds holds its connection, and the memory
behind it, for as long as it likes. Nothing capped the number of such
connections either, and every malformed request logged its own warning.

The protocol classes here are uvicorn's own, for each parser, with the
missing bounds added; shared/serve.py builds every server with them:

- a request's head (request line + headers) over MAX_HEAD_BYTES is answered
  431 and the connection closed as soon as the socket read that crosses the
  cap arrives, so no more than the cap and that one read is held (at most
  256 KiB, on uvloop and asyncio alike);
- a head not complete HEAD_TIMEOUT_SECONDS after the connection opened, or
  after the previous response on a keep-alive connection, is answered 408
  (or, if not a byte of it came, the connection is just closed); a request
  the app is still answering is never cut, unless its body is still awaited
  BODY_TIMEOUT_SECONDS after that (408, and the connection closed);
- past MAX_CONCURRENCY connections or requests in progress, uvicorn answers
  503 (its `limit_concurrency`);
- uvicorn's warnings about what clients send (malformed requests, refusals)
  are on a budget: WARNING_LINES of each per WARNING_WINDOW_SECONDS, then one
  line saying how many were not logged.

The cost on a served request is a few attribute operations: the head's bytes
are counted per socket read, not per header, and the deadline's timer is
armed once per connection and moved lazily (it re-arms itself when it finds
the clock restarted) rather than once per request.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import http
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# The largest request head (request line + headers) accepted. Our requests'
# heads are well under 8 KiB (a signed webhook's headers, an agent's bearer
# token); 64 KiB is 4x h11's own 16 KiB default and matches common proxies'
# largest settings, so no legitimate caller meets it, while a thousand
# connections at the cap hold 64 MiB at most.
MAX_HEAD_BYTES = 64 * 1024
# How long a complete request head may take, from the connection's opening or
# the end of the previous response. A head is one or two segments that a real
# client sends at once; 20 s leaves room for a congested mobile link and is
# what Apache's mod_reqtimeout allows by default, while a client trickling a
# byte every few seconds loses its connection within it.
HEAD_TIMEOUT_SECONDS = 20.0
# How much longer its body may take: a request not complete, body included,
# HEAD_TIMEOUT_SECONDS + BODY_TIMEOUT_SECONDS after its clock started is cut
# (a client declaring more body than it sends held its connection, and the
# handler awaiting the rest, for as long as it liked). 1 MiB, the largest
# body accepted, in 30 s is 35 KB/s.
BODY_TIMEOUT_SECONDS = 30.0
# Connections (or requests in progress) beyond which uvicorn answers 503.
# The benchmarks drive 32-64 connections at the receiver; a reconciler opens
# at most 2 per provider slot at the simulator (128 at the default
# max_in_flight), and bench.throughput keeps three such sets open at once:
# 1024 leaves room for all of that and for bursts of providers, and stays far
# below the receiver unit's LimitNOFILE (16384). uvicorn counts idle
# keep-alive connections too, and answers 503 once the count reaches it.
MAX_CONCURRENCY = 1024
# uvicorn's warnings about a client's request (malformed, refused) kept per
# message per window; the rest are counted into one line at the window's end.
# As many as a short incident needs to be diagnosed, few enough that a flood of
# garbage (2000 requests in under a second) costs the log a few lines a minute.
WARNING_LINES = 20
WARNING_WINDOW_SECONDS = 60.0

# uvicorn's own logger for its protocols' warnings and errors.
UVICORN_ERROR_LOGGER = "uvicorn.error"
HEAD_TOO_LARGE = "Request head too large."
HEAD_TOO_SLOW = "Request head not received in time."
BODY_TOO_SLOW = "Request body not received in time."


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """One server's limits (the module's constants unless a test injects smaller)."""

    max_head_bytes: int = MAX_HEAD_BYTES
    head_timeout: float = HEAD_TIMEOUT_SECONDS
    body_timeout: float = BODY_TIMEOUT_SECONDS
    max_concurrency: int = MAX_CONCURRENCY
    warning_lines: int = WARNING_LINES
    warning_window: float = WARNING_WINDOW_SECONDS

    def __post_init__(self) -> None:
        if (
            self.max_head_bytes < 1
            or self.head_timeout <= 0
            or self.body_timeout <= 0
            or self.max_concurrency < 1
        ):
            raise ValueError(f"limits must be positive: {self}")
        if self.warning_lines < 0 or self.warning_window <= 0:
            raise ValueError(f"bad warning budget: {self}")


class LogBudget:
    """At most `lines` lines of each message per window, then one line for the rest.

    A window opens with the first line after a quiet spell and closes
    `window` seconds later, on a timer, so the count of what was held back is
    reported even when the flood stops; `close` reports it at shutdown too.
    Called only from the server's event loop.
    """

    def __init__(self, lines: int, window: float, report_to: logging.Logger) -> None:
        self._lines = lines
        self._window = window
        self._report_to = report_to
        self._logged: dict[str, int] = {}
        self._held: dict[str, int] = {}
        self._timer: asyncio.TimerHandle | None = None

    def take(self, message: str) -> bool:
        """True if a line of `message` may be logged now; else it is counted."""
        if self._timer is None:  # the first line of a window
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._window, self._window_ended)
        logged = self._logged.get(message, 0)
        if logged < self._lines:
            self._logged[message] = logged + 1
            return True
        self._held[message] = self._held.get(message, 0) + 1
        return False

    def close(self) -> None:
        """Report what is held back now (the server stops) and forget the window."""
        if self._timer is not None:
            self._timer.cancel()
        self._window_ended()

    def _window_ended(self) -> None:
        self._timer = None
        self._logged.clear()
        held, self._held = self._held, {}
        if held:
            self._report_to.warning(
                "%d warnings not logged in the last %g s (at most %d of each per window): %s",
                sum(held.values()),
                self._window,
                self._lines,
                "; ".join(f"{count} x {message!r}" for message, count in held.items()),
                extra={"ctx": {"suppressed": held, "window_seconds": self._window}},
            )


class BudgetedLogger(logging.Logger):
    """uvicorn's protocol logger whose warnings go through a `LogBudget`.

    Every warning uvicorn's HTTP protocols log is about what a client sent
    (a malformed request, a refusal, an unsupported upgrade), so a client can
    make as many as it likes; errors are our app's faults and are not held
    back. One per server, not registered with `logging`: it has no level or
    handlers of its own, so its records reach uvicorn.error's handlers (and
    its ancestors') under uvicorn.error's level, exactly as uvicorn's would.
    """

    def __init__(self, parent: logging.Logger, budget: LogBudget) -> None:
        super().__init__(parent.name)
        self.parent = parent
        self._budget = budget

    @property
    def level(self) -> int:
        """The parent's level: uvicorn reads `logger.level` to skip its trace lines."""
        assert self.parent is not None
        return self.parent.level

    @level.setter
    def level(self, value: int) -> None:
        """Ignored (Logger.__init__ sets it): the level is always the parent's."""

    def isEnabledFor(self, level: int) -> bool:
        # Logger caches this per logger, and only registered loggers' caches are
        # cleared when a level changes: ask each time (uvicorn logs rarely).
        if self.disabled or self.manager.disable >= level:
            return False
        return level >= self.getEffectiveLevel()

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        if not self._budget.take(str(msg)):
            return
        kwargs.setdefault("stacklevel", 2)  # the caller is uvicorn's protocol, not this
        super().warning(msg, *args, **kwargs)


class LimitedConfig(uvicorn.Config):
    """A uvicorn config carrying this server's limits and its warning budget.

    uvicorn enforces two of the limits itself (`limit_concurrency`, and h11's
    head cap); the protocol classes below read the rest from here, once per
    connection.
    """

    def __init__(self, app: Any, limits: ServerLimits, **kwargs: Any) -> None:
        super().__init__(
            app,
            limit_concurrency=limits.max_concurrency,
            h11_max_incomplete_event_size=limits.max_head_bytes,
            **kwargs,
        )
        self.limits = limits
        parent = logging.getLogger(UVICORN_ERROR_LOGGER)
        self.warning_budget = LogBudget(limits.warning_lines, limits.warning_window, parent)
        self.protocol_logger = BudgetedLogger(parent, self.warning_budget)


def close_budget(config: uvicorn.Config) -> None:
    """Report the warnings a stopping server held back (any config: a no-op for uvicorn's)."""
    if isinstance(config, LimitedConfig):
        config.warning_budget.close()


def limited_protocol(http_parser: str) -> type:
    """uvicorn's protocol class for `http_parser` ("httptools", "h11"), with the limits."""
    if http_parser == "httptools":
        return _httptools_protocol()
    if http_parser == "h11":
        return LimitedH11Protocol
    raise ValueError(f"no limited protocol for HTTP parser {http_parser!r}")


class HeadProgress(enum.Enum):
    """How far the awaited request head got when its deadline passed."""

    NOTHING = "nothing"  # not a byte of it: an idle connection, closed quietly
    PARTIAL = "partial"  # some of it: answered 408
    IN_FLIGHT = "in_flight"  # it came, and the app is answering it: not ours to cut


class _Limits(asyncio.Protocol):
    """The deadline and the refusals, shared by both parsers' protocol classes.

    The head clock runs from the connection's opening, and again from the end
    of each response that leaves nothing in flight. Its timer is armed when
    the clock starts with none pending; when it fires it either re-arms for
    what is left (the clock restarted meanwhile), stops (a request is in
    flight: the clock restarts when its response ends), or refuses.
    """

    # Set by the uvicorn protocol class this is mixed into.
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    server_state: ServerState
    logger: logging.Logger

    _head_timeout: float
    _body_timeout: float
    _head_since: float | None
    _head_timer: asyncio.TimerHandle | None

    def _init_limits(self, config: uvicorn.Config) -> ServerLimits:
        if isinstance(config, LimitedConfig):
            limits = config.limits
            self.logger = config.protocol_logger
        else:  # a bare uvicorn config (unit tests): the default limits, no budget
            limits = _DEFAULT_LIMITS
        self._head_timeout = limits.head_timeout
        self._body_timeout = limits.body_timeout
        self._head_since = None
        self._head_timer = None
        return limits

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._start_head_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        super().connection_lost(exc)

    def _head_progress(self) -> HeadProgress:
        raise NotImplementedError

    def _response_in_flight(self) -> bool:
        raise NotImplementedError

    def _body_pending(self) -> bool:
        """The request in flight still awaits body bytes, and no answer has begun.

        Not while requests are pipelined (httptools queues them): the newest
        parsed request's body waits, by design, for the one being answered
        ahead of it (a long-poll may hold it for minutes).
        """
        if getattr(self, "pipeline", None):
            return False
        cycle: Any = getattr(self, "cycle", None)
        return cycle is not None and cycle.more_body and not cycle.response_started

    def _start_head_clock(self) -> None:
        self._head_since = self.loop.time()
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self._head_timeout, self._head_deadline)

    def _stop_head_clock(self) -> None:
        self._head_since = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_deadline(self) -> None:
        self._head_timer = None
        since = self._head_since
        if since is None or self.transport.is_closing():
            return
        serving: object = self.transport.get_protocol()
        if serving is not self:  # upgraded to WebSocket: no HTTP heads any more
            self._head_since = None
            return
        progress = self._head_progress()
        if progress is HeadProgress.IN_FLIGHT:
            if self._body_pending():
                self._body_deadline(since)
                return
            self._head_since = None
            return
        left = since + self._head_timeout - self.loop.time()
        if left > 0:
            self._head_timer = self.loop.call_later(left, self._head_deadline)
            return
        self._head_since = None
        if progress is HeadProgress.PARTIAL:
            self.logger.warning(HEAD_TOO_SLOW)
            self._refuse(http.HTTPStatus.REQUEST_TIMEOUT)
        else:
            self.transport.close()

    def _body_deadline(self, since: float) -> None:
        """The head came in time and its body has not yet: wait the body's
        allowance, then answer 408 and close (the handler awaiting the rest
        sees the client gone). Checked only when the head clock's timer fires,
        so a served request pays nothing for it."""
        left = since + self._head_timeout + self._body_timeout - self.loop.time()
        if left > 0:
            self._head_timer = self.loop.call_later(left, self._head_deadline)
            return
        self._head_since = None
        self.logger.warning(BODY_TOO_SLOW)
        self._answer_and_close(http.HTTPStatus.REQUEST_TIMEOUT)

    def _refuse(self, status: http.HTTPStatus) -> None:
        """Answer `status` with Connection: close, and close.

        If a response to an earlier (pipelined) request is still being
        written, ours would land inside it: the connection is only closed.
        """
        if not self._response_in_flight():
            self._answer_and_close(status)
            return
        self.transport.close()

    def _answer_and_close(self, status: http.HTTPStatus) -> None:
        """Write `status` with Connection: close (no response of the app has begun), and close."""
        text = status.phrase.encode("ascii")
        content = [b"HTTP/1.1 %d %s\r\n" % (status.value, text)]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.append(
            b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(text), text)
        )
        self.transport.write(b"".join(content))
        self.transport.close()


_DEFAULT_LIMITS = ServerLimits()


class LimitedH11Protocol(_Limits, H11Protocol):
    """uvicorn's h11 protocol with the head cap, the deadline and the budget.

    h11's own cap (LimitedConfig gives it MAX_HEAD_BYTES) applies only to a
    head still incomplete after a read: a complete one of any size that
    arrives in one read is accepted. So heads are counted here as well, while
    h11 awaits one (`their_state` IDLE). h11 is the slow fallback: nothing
    here is tuned.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits = self._init_limits(config)
        self._max_head = limits.max_head_bytes
        self._head_room = limits.max_head_bytes

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._head_room -= len(data)
            if self._head_room < 0:
                self._past_head_cap(data, len(data) + self._head_room)
                return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the head ended: the next starts afresh
            self._head_room = self._max_head

    def on_response_complete(self) -> None:
        self._head_room = self._max_head  # h11 starts the next cycle in here
        super().on_response_complete()
        if not self._response_in_flight():  # else a pipelined request was started
            self._start_head_clock()

    def _past_head_cap(self, data: bytes, fits: int) -> None:
        """As LimitedHttpToolsProtocol's: parse what fits; a head that ended
        there (a new cycle) lets the rest through, else the head is too large."""
        cycle = self.cycle
        self._head_room = 0
        if fits:
            super().data_received(data[:fits])
            if self.transport.is_closing():
                return
        if self.cycle is cycle and self.conn.their_state is h11.IDLE:
            self.logger.warning(HEAD_TOO_LARGE)
            self._refuse(http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            return
        self._head_room = self._max_head
        self.data_received(data[fits:])

    def _response_in_flight(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _head_progress(self) -> HeadProgress:
        if self._response_in_flight():
            return HeadProgress.IN_FLIGHT
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            return HeadProgress.PARTIAL
        return HeadProgress.NOTHING


@functools.cache
def _httptools_protocol() -> type[HttpToolsProtocol]:
    """The httptools class, defined on first use: httptools may not be installed."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    base = HttpToolsProtocol

    class LimitedHttpToolsProtocol(_Limits, HttpToolsProtocol):
        """uvicorn's httptools protocol with the head cap, the deadline and the budget.

        `_head_room` is how many more bytes the current head may have, or
        None while a body is being read: each socket read is subtracted from
        it, and only a read that takes it below zero leaves the fast path.
        The head ends at `on_headers_complete`; the next one begins at
        `on_message_complete`, so bytes of a pipelined request that share a
        read with the end of the previous one are not counted: the cap holds
        to within one socket read, and across reads exactly.
        """

        def __init__(
            self,
            config: uvicorn.Config,
            server_state: ServerState,
            app_state: dict[str, Any],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            limits = self._init_limits(config)
            self._max_head = limits.max_head_bytes
            self._head_room: int | None = limits.max_head_bytes

        # The hot path: base methods called directly (no super() object per call).

        def data_received(self, data: bytes) -> None:
            room = self._head_room
            if room is not None:
                room -= len(data)
                self._head_room = room
                if room < 0:
                    self._past_head_cap(data, len(data) + room)
                    return
            base.data_received(self, data)

        def on_headers_complete(self) -> None:
            self._head_room = None
            base.on_headers_complete(self)

        def on_message_complete(self) -> None:
            self._head_room = self._max_head
            base.on_message_complete(self)

        def on_response_complete(self) -> None:
            base.on_response_complete(self)
            if self.cycle.response_complete:  # else a pipelined request was started
                # _start_head_clock, inlined: this runs once per request
                self._head_since = self.loop.time()
                if self._head_timer is None:
                    self._head_timer = self.loop.call_later(self._head_timeout, self._head_deadline)

        def _past_head_cap(self, data: bytes, fits: int) -> None:
            """`data` takes the head past the cap; its first `fits` bytes do not.

            Those are parsed first: if the head ends among them, the rest is
            body or the next request, and is taken as a read of its own;
            if not, the head is too large whatever follows.
            """
            self._head_room = 0
            if fits:
                base.data_received(self, data[:fits])
                if self.transport.is_closing():
                    return
            if self._head_room == 0:  # the same head, full, and not ended
                self._head_room = None
                self.logger.warning(HEAD_TOO_LARGE)
                self._refuse(http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
                return
            self.data_received(data[fits:])

        def _response_in_flight(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _head_progress(self) -> HeadProgress:
            if self._response_in_flight():
                return HeadProgress.IN_FLIGHT
            room = self._head_room
            if room is not None and room < self._max_head:
                return HeadProgress.PARTIAL
            return HeadProgress.NOTHING

    return LimitedHttpToolsProtocol
