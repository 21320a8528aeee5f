"""A PostgreSQL wire-protocol proxy that injects faults at an exact statement.

Crash-point enumeration needs "the connection died at statement k" and "the
client process died at statement k" for every k of a step, reproducibly. A
real TCP proxy gives both without touching the code under test: it parses the
client's stream into messages, counts each simple Query (`Q`) and each Execute
(`E`) as one statement, and when the armed fault's statement arrives it drops
the connection before or after the server ran it, or calls a kill callback.

    async with PgProxy.from_url(db_url) as proxy:
        run_step(proxy.url_for(db_url))          # fault-free: N = proxy.count
        for k in range(1, N + 1):
            proxy.reset()
            proxy.arm(Fault(at=k, action="drop_after"))
            run_step(proxy.url_for(db_url))      # expect a lost connection

The server-to-client direction is relayed as bytes; it is only framed far
enough to find ReadyForQuery (`Z`), which marks "the server finished that
batch" for `drop_after`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Literal
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit, urlunsplit

LISTEN_HOST = "127.0.0.1"
# One read's worth: as large as asyncio's default stream buffer, so a client's
# whole pipelined batch (Parse/Bind/Describe/Execute/Sync) is usually one read,
# while memory per connection stays bounded.
READ_SIZE = 64 * 1024
# The server refuses startup packets above this (MAX_STARTUP_PACKET_LENGTH in
# PostgreSQL); reading more would only buffer garbage from a confused client.
MAX_STARTUP_LENGTH = 10_000
# How long `drop_after` waits for the server's ReadyForQuery. Statements of a
# reconciler step take milliseconds on a local server; one that has not
# finished after this long is stuck (typically on a lock) and the harness is
# better served by a closed connection than by a hung run.
READY_WAIT_SECONDS = 10.0

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
# Client messages each answered by exactly one ReadyForQuery: simple Query,
# Sync and FunctionCall. They end a "batch" for `drop_after`.
READY_PRODUCERS = frozenset({b"Q", b"S", b"F"})
_READY = ord("Z")
_INT32 = struct.Struct("!I")
_STREAM_ERRORS = (OSError, asyncio.IncompleteReadError)

Action = Literal["drop_before", "drop_after", "kill"]


class ProtocolViolation(ValueError):
    """The stream cannot be framed (a length below 4): the connection is closed."""


@dataclass(frozen=True)
class Statement:
    """One counted statement: `index` is 1-based since the last `reset()`."""

    index: int
    connection: int
    sql: str


@dataclass(frozen=True, kw_only=True)
class Fault:
    """What to do, and at which statement: `at` (an index) or `match` (a regex).

    `match` fires at the first statement whose SQL it finds, counting only
    statements after one matched by `after_match` (when given): "the INSERT
    after the claim", without knowing its index.
    """

    action: Action
    at: int | None = None
    match: re.Pattern[str] | None = None
    after_match: re.Pattern[str] | None = None
    kill: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        if (self.at is None) == (self.match is None):
            raise ValueError("Fault needs exactly one of `at` (index) or `match` (regex)")
        if self.at is not None and self.at < 1:
            raise ValueError(f"Fault.at is 1-based, got {self.at}")
        if self.after_match is not None and self.match is None:
            raise ValueError("Fault.after_match only narrows `match`; give `match` too")
        if (self.action == "kill") != (self.kill is not None):
            raise ValueError("Fault.kill (a callable) is required for, and only for, action='kill'")


@dataclass
class _Message:
    kind: bytes
    raw: bytes

    @property
    def body(self) -> bytes:
        return self.raw[5:]


class _Splitter:
    """Frames a typed-message stream (type byte + int32 length incl. itself)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[_Message]:
        self._buf += data
        out: list[_Message] = []
        pos = 0
        while len(self._buf) - pos >= 5:
            end = pos + 1 + _length(_INT32.unpack_from(self._buf, pos + 1)[0])
            if end > len(self._buf):
                break
            out.append(_Message(bytes(self._buf[pos : pos + 1]), bytes(self._buf[pos:end])))
            pos = end
        del self._buf[:pos]
        return out


class _ReadyScanner:
    """Finds where ReadyForQuery messages end in a byte stream, without copying it.

    The server side is relayed as raw chunks (a large DataRow need not be
    complete before the client gets its first bytes); only headers are read,
    in a tight loop, because a big result set is hundreds of thousands of them.
    """

    def __init__(self) -> None:
        self._header = bytearray()  # a header split across chunks (< 5 bytes so far)
        self._kind = 0  # type byte of the message being skipped
        self._left = 0  # its payload bytes still to come
        self._pending = False  # a message started in an earlier chunk is unfinished

    def feed(self, chunk: bytes) -> list[int]:
        """Offsets in `chunk` just past each `Z` message that completes in it."""
        ends: list[int] = []
        pos = self._finish_pending(chunk, ends)
        size = len(chunk)
        while pos + 5 <= size:
            end = pos + 1 + _length(_INT32.unpack_from(chunk, pos + 1)[0])
            if end > size:
                self._kind, self._left, self._pending = chunk[pos], end - size, True
                return ends
            if chunk[pos] == _READY:
                ends.append(end)
            pos = end
        self._header += chunk[pos:]
        return ends

    def _finish_pending(self, chunk: bytes, ends: list[int]) -> int:
        """Consume the rest of a header, then of a payload, begun in earlier chunks."""
        pos = 0
        if self._header:
            pos = min(5 - len(self._header), len(chunk))
            self._header += chunk[:pos]
            if len(self._header) < 5:
                return pos
            self._kind = self._header[0]
            self._left = _length(_INT32.unpack_from(self._header, 1)[0]) - 4
            self._pending = True
            self._header.clear()
        if self._pending:
            step = min(self._left, len(chunk) - pos)
            pos += step
            self._left -= step
            if not self._left:
                self._pending = False
                if self._kind == _READY:
                    ends.append(pos)
        return pos


def _length(length: int) -> int:
    if length < 4:
        raise ProtocolViolation(f"message length {length}")
    return length


def _cstrings(body: bytes, count: int) -> list[str]:
    """The first `count` NUL-terminated strings of a message body."""
    parts = body.split(b"\0", count)[:count]
    return [p.decode("utf-8", "replace") for p in parts] + [""] * (count - len(parts))


def _split_url_host(db_url: str) -> tuple[str, int]:
    """The server's host (a Unix-socket directory when it starts with "/") and port."""
    parts = urlsplit(db_url)
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or LISTEN_HOST])[0]
    return host, int(query.get("port", [parts.port or 5432])[0])


class PgProxy:
    """Listens on 127.0.0.1 (free port) and forwards to `upstream_host:upstream_port`
    (`upstream_host` may be a Unix-socket directory, as libpq's `host=` takes it).

    Public state, read by the harness:
    - `statements`: every counted statement since `reset()`, in arrival order;
    - `count`: their number;
    - `fired_statement`: the statement the armed fault fired at (set at once);
    - `fired`: set when that fault has fully happened (sockets closed), so a
      waiter may inspect the database at once;
    - `ready_missed`: for `drop_after`, True when the sockets were closed without
      the server's ReadyForQuery (timeout or server gone): the statement's
      outcome is then unknown, not "took effect".
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures: list[BaseException] = []
        self._connections = 0
        self._count = 0
        self._armed: Fault | None = None
        self._gate_open = False
        self._generation = 0
        self.statements: list[Statement] = []
        self.fired = asyncio.Event()
        self.fired_statement: Statement | None = None
        self.ready_missed = False

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """TCP, or the server's Unix socket (an embedded server listens only there)."""
        host, port = self._upstream
        if host.startswith("/"):
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    @classmethod
    def from_url(cls, db_url: str) -> PgProxy:
        """A proxy in front of the server `db_url` points at."""
        return cls(*_split_url_host(db_url))

    # -- lifecycle -------------------------------------------------------

    async def __aenter__(self) -> PgProxy:
        self._server = await asyncio.start_server(self._accept, LISTEN_HOST, 0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        if exc_type is None and self._failures:
            # A handler bug would otherwise look like a flaky connection in the test.
            raise RuntimeError("pgproxy connection handler failed") from self._failures[0]

    async def aclose(self) -> None:
        """Stop listening and close every connection pair."""
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def host(self) -> str:
        return LISTEN_HOST

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("PgProxy is not listening (use `async with`)")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def url_for(self, db_url: str) -> str:
        """`db_url` pointed at the proxy, in plaintext (the proxy cannot read TLS)."""
        parts = urlsplit(db_url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@" if userinfo else ""
        # host/port in the query string would override the netloc for libpq and asyncpg
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = [(k, v) for k, v in pairs if k not in {"sslmode", "host", "port"}]
        query.append(("sslmode", "disable"))
        netloc += f"{self.host}:{self.port}"
        # %20, not "+", for spaces: libpq does not decode "+" in a URI query
        encoded = urlencode(query, quote_via=quote)
        return urlunsplit((parts.scheme, netloc, parts.path, encoded, parts.fragment))

    # -- faults and counting ---------------------------------------------

    @property
    def count(self) -> int:
        return self._count

    def arm(self, fault: Fault) -> None:
        """Arm `fault` (replacing any armed one); it fires at most once."""
        if fault.at is not None and fault.at <= self._count:
            raise ValueError(f"statement {fault.at} already passed (count is {self._count})")
        self._armed = fault
        self._gate_open = fault.after_match is None
        self._new_generation()

    def reset(self) -> None:
        """Forget statements and any armed or fired fault; the count restarts at 0."""
        self._count = 0
        self.statements = []
        self._armed = None
        self._new_generation()

    def _new_generation(self) -> None:
        # A drop_after still waiting for `Z` must not set `fired` for a newer arm.
        self._generation += 1
        self.fired.clear()
        self.fired_statement = None
        self.ready_missed = False

    def _observe(self, connection: int, sql: str) -> tuple[Fault, int] | None:
        """Record a statement; the fault (and its generation) if it fires here."""
        self._count += 1
        stmt = Statement(self._count, connection, sql)
        self.statements.append(stmt)
        fault = self._armed
        if fault is None or not self._hits(fault, stmt):
            return None
        self._armed = None
        self.fired_statement = stmt
        return fault, self._generation

    def _hits(self, fault: Fault, stmt: Statement) -> bool:
        if fault.match is None:
            return stmt.index == fault.at
        hit = self._gate_open and fault.match.search(stmt.sql) is not None
        if fault.after_match is not None and fault.after_match.search(stmt.sql):
            self._gate_open = True
        return hit

    def _complete(self, generation: int, ready_missed: bool) -> None:
        if generation == self._generation:
            self.ready_missed = ready_missed
            self.fired.set()

    # -- connections -----------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Our own task (not start_server's) so shutdown can cancel and await it.
        # Numbered here, in accept order, so numbers follow the order clients connected.
        self._connections += 1
        serve = self._serve(self._connections, reader, writer)
        task = asyncio.get_running_loop().create_task(serve)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Even a task cancelled before its first step must not leave the client socket open.
        task.add_done_callback(lambda _: writer.close())

    async def _serve(
        self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            up_reader, up_writer = await self._open_upstream()
        except OSError:
            writer.close()  # upstream down: the client sees a refused session
            return
        except asyncio.CancelledError:
            writer.close()  # shutdown while connecting: never leave the client socket open
            raise
        link = _Link(self, number, (reader, writer), (up_reader, up_writer))
        self._links.add(link)
        try:
            await link.run()
        except Exception as exc:  # kept for __aexit__: a task exception nobody reads is lost
            self._failures.append(exc)
        finally:
            self._links.discard(link)


_Pair = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: PgProxy, number: int, client: _Pair, upstream: _Pair) -> None:
        self._proxy = proxy
        self.number = number
        self._client_r, self._client_w = client
        self._up_r, self._up_w = upstream
        self._splitter = _Splitter()
        self._scanner = _ReadyScanner()
        self._prepared: dict[str, str] = {}  # statement name -> SQL
        self._portals: dict[str, str] = {}  # portal name -> SQL of its statement
        self._producers = 0  # ReadyForQuery-producing messages forwarded
        self._readies = 0  # ReadyForQuery messages received
        self._fault: tuple[Fault, int] | None = None  # fired here, not yet complete
        self._hold_after: int | None = None  # relay only the first N `Z` batches
        self._ready_target: int | None = None  # the `Z` that ends drop_after's batch
        self._ready_reached = False
        self._timer: asyncio.TimerHandle | None = None
        self._client_gone = False
        self._closed = False

    async def run(self) -> None:
        server_side = asyncio.create_task(self._pump_server())
        try:
            await self._pump_client()
            await server_side
        finally:
            server_side.cancel()
            await asyncio.gather(server_side, return_exceptions=True)
            self.close()
            await self._wait_closed()

    def close(self) -> None:
        """Close both sockets (idempotent); completes a fault fired on this link."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._client_w.close()
        self._up_w.close()
        if self._fault is not None:
            missed = self._hold_after is not None and not self._ready_reached
            self._proxy._complete(self._fault[1], ready_missed=missed)

    async def _wait_closed(self) -> None:
        for writer in (self._client_w, self._up_w):
            with contextlib.suppress(*_STREAM_ERRORS):
                await writer.wait_closed()

    # -- client -> server ------------------------------------------------

    async def _pump_client(self) -> None:
        try:
            if await self._startup():
                await self._relay_client()
        except (*_STREAM_ERRORS, ProtocolViolation):
            pass
        finally:
            if self._ready_target is None or self._ready_reached:
                self.close()  # unless drop_after is still waiting for the server's `Z`

    async def _startup(self) -> bool:
        """Refuse SSL/GSS encryption, then forward the StartupMessage untouched."""
        while True:
            header = await self._client_r.readexactly(4)
            length = int.from_bytes(header, "big")
            if not 8 <= length <= MAX_STARTUP_LENGTH:
                return False
            body = await self._client_r.readexactly(length - 4)
            if length == 8 and int.from_bytes(body, "big") in (SSL_REQUEST, GSSENC_REQUEST):
                self._client_w.write(b"N")  # "not supported": the client goes on in plaintext
                await self._client_w.drain()
                continue
            self._producers = 1  # the server's first `Z` ends authentication
            await self._send_upstream(header + body)
            return True

    async def _relay_client(self) -> None:
        while data := await self._client_r.read(READ_SIZE):
            out, stop = self._route(self._splitter.feed(data))
            if out:
                await self._send_upstream(out)
            if stop:
                self._after_stop()
                return

    def _route(self, messages: list[_Message]) -> tuple[bytes, bool]:
        """Bytes to forward from one read, and whether the client side stops here."""
        out = bytearray()
        for msg in messages:
            fired = self._inspect(msg)
            if fired is not None:
                self._fault = fired
                if fired[0].action != "drop_after":
                    return bytes(out), True  # the statement is not forwarded
                self._begin_drop_after()
            out += msg.raw
            if msg.kind in READY_PRODUCERS:
                self._producers += 1
                if self._hold_after is not None:
                    self._ready_target = self._producers
                    return bytes(out), True  # the batch is complete; the rest is discarded
        return bytes(out), False

    def _inspect(self, msg: _Message) -> tuple[Fault, int] | None:
        """Track Parse/Bind/Close; count Query/Execute (the fault, if it fires)."""
        if msg.kind == b"P":
            name, sql = _cstrings(msg.body, 2)
            self._prepared[name] = sql
        elif msg.kind == b"B":
            portal, statement = _cstrings(msg.body, 2)
            self._portals[portal] = self._prepared.get(statement, "")
        elif msg.kind == b"C":
            names = self._prepared if msg.body[:1] == b"S" else self._portals
            names.pop(_cstrings(msg.body[1:], 1)[0], None)
        elif msg.kind == b"Q":
            return self._proxy._observe(self.number, _cstrings(msg.body, 1)[0])
        elif msg.kind == b"E":
            portal = _cstrings(msg.body, 1)[0]
            return self._proxy._observe(self.number, self._portals.get(portal, ""))
        return None

    def _begin_drop_after(self) -> None:
        # Responses to earlier batches still reach the client; this batch's do not.
        self._hold_after = self._producers
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(READY_WAIT_SECONDS, self.close)

    def _after_stop(self) -> None:
        if self._hold_after is not None:
            return  # drop_after: the server side closes on `Z` (or the timer does)
        assert self._fault is not None
        if self._fault[0].kill is not None:
            self._fault[0].kill()
        self.close()

    async def _send_upstream(self, data: bytes) -> None:
        self._up_w.write(data)
        await self._up_w.drain()

    # -- server -> client ------------------------------------------------

    async def _pump_server(self) -> None:
        try:
            while data := await self._up_r.read(READ_SIZE):
                ends = self._scanner.feed(data)
                relay = self._relayable(data, ends)
                self._readies += len(ends)
                if relay:
                    await self._send_client(relay)
                if self._ready_target is not None and self._readies >= self._ready_target:
                    self._ready_reached = True
                    break
        except (*_STREAM_ERRORS, ProtocolViolation):
            pass
        finally:
            self.close()

    def _relayable(self, data: bytes, ends: list[int]) -> bytes:
        """The part of `data` the client may see: all of it unless drop_after holds."""
        if self._hold_after is None:
            return data
        left = self._hold_after - self._readies  # `Z`s of earlier batches still to relay
        if left <= 0:
            return b""
        return data if left > len(ends) else data[: ends[left - 1]]

    async def _send_client(self, data: bytes) -> None:
        # A vanished client must not end the server side: drop_after still needs its `Z`,
        # and otherwise the client side sees the loss and closes the pair.
        if self._client_gone:
            return
        try:
            self._client_w.write(data)
            await self._client_w.drain()
        except OSError:
            self._client_gone = True


__all__ = ["Action", "Fault", "PgProxy", "ProtocolViolation", "Statement"]
