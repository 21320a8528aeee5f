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
import hashlib
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import h11
import httpx

from reconciler.connect_guard import Resolver, guard, system_resolver
from shared.closing import ClosedOnExit
from shared.providers.messages import CODINGS_NOT_UNDONE, UNDONE_CODINGS

# A lane's connections: the provider's API host, and a second (a result host).
LANE_CONNECTIONS = 2


# The most an answer's body may hold once decoded (any call but a result
# download, whose limit is its description's max_bytes): a status, create or
# error-page answer past it is a failed call ("protocol"), read no further.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
# The slowest a result download may be on average: it has its grace (its
# request_timeout plus a lease: see `download`), plus one second per
# MIN_TRANSFER_RATE bytes received (see `Reading`).
MIN_TRANSFER_RATE = 64 * 1024
# Decoded bytes one content-coding layer hands the next at a time (bounds
# the memory a stacked encoding such as "gzip, gzip" takes between layers).
DECODE_STEP = 256 * 1024
# The request extension that carries a call's `Reading` to `Lane.exchange`.
READING = "jobwarden.reading"
# The response extension holding, for a body that came content-coded, the
# digests of the bytes as sent (`_body`): what a digest header covers.
SENT_DIGESTS = "jobwarden.sent_digests"
# The algorithms those digests are made with (as ChecksumAlgorithm names them).
_SENT_HASHERS: tuple[tuple[str, Callable[[], Any]], ...] = (
    ("sha256", hashlib.sha256),
    ("sha512", hashlib.sha512),
    ("md5", functools.partial(hashlib.md5, usedforsecurity=False)),
)


class BodyTooLarge(httpx.RemoteProtocolError):
    """An answer's decoded body went past its `Reading.keep` (not a result download)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """How much of an answer's body is read, and how slowly it may come.

    `keep`: the most decoded bytes read (after undoing any Content-Encoding,
    which a provider may send although we ask for identity). Past it, a
    result download (`cut`) stops and returns its first `keep` bytes (give it
    max_bytes + 1, and the validation says "larger than max_bytes"); any
    other call fails with `BodyTooLarge`. Nothing past `keep` (and one read
    or decoding step) is held in memory, however large the answer.

    `min_rate` (downloads, and status reads that may carry the result: the
    step's `_transfer`): the whole exchange, from connecting to the
    body's end, must finish within `allowance` seconds plus one second per
    `min_rate` bytes received so far, or it fails as a timeout. A stalled or
    trickling download (or an endless run of `100 Continue` heads) thus ends
    like any timed-out call, after at most allowance + keep / min_rate
    seconds, instead of renewing its lease (Step._transfer) for ever.
    """

    keep: int = MAX_ANSWER_BYTES
    cut: bool = False
    min_rate: float | None = None
    allowance: float = 0.0


# Every call but a result download.
ANSWER = Reading()


def download(max_bytes: int, request_timeout: float, lease_seconds: float) -> Reading:
    """A result download's reading: max_bytes + 1 kept (so "larger than max_bytes"
    can be told), at MIN_TRANSFER_RATE on average beyond a grace of
    request_timeout + lease_seconds.

    The grace is what a call is allowed anyway (its timeout) plus what the
    ledger already accepts an operation to be held without progress (a
    crashed worker's lease), so a slow start, or a slow but live transfer of
    a small result, is not cut; a stalled one holds its operation no longer
    than a crash would. In all, at most request_timeout + lease_seconds +
    (max_bytes + 1) / MIN_TRANSFER_RATE seconds.
    """
    grace = request_timeout + lease_seconds
    return Reading(max_bytes + 1, cut=True, min_rate=MIN_TRANSFER_RATE, allowance=grace)


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
      server that compresses anyway is decoded, as httpx always did, but
      here, within the call's `Reading`: see `_body`);
    - credentials in a URL (`https://user:pass@host/...`) are sent as Basic
      authorization, as httpx's client sent them, unless the call sets its own;
    - no redirects: a provider that redirects a status read is a contract
      change we want recorded, not silently followed (a transport never follows);
    - no cookies: a call sends exactly the headers its description builds and
      the evidence records, never one an earlier answer happened to set (a
      transport has no jar);
    - no proxy or certificate settings from the environment.
    """

    def __init__(
        self,
        max_connections: int = LANE_CONNECTIONS,
        *,
        authorities: str = "",
        trusted_hosts: frozenset[str] | None = None,
        resolve: Resolver = system_resolver,
    ) -> None:
        """`trusted_hosts`: connect only to public addresses but for these hosts
        (`reconciler.connect_guard`); None, as benchmarks' in-process lanes: unguarded."""
        self._transport = httpx.AsyncHTTPTransport(
            verify=tls_context(authorities),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            trust_env=False,
        )
        if trusted_hosts is not None:
            guard(self._transport._pool, trusted_hosts, resolve)
        self.is_closed = False

    async def call(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        content: bytes | None = None,
        phase_timeout: float = 10.0,
        trace: Callable[[str, Mapping[str, Any]], Awaitable[None]] | None = None,
        reading: Reading = ANSWER,
    ) -> httpx.Response:
        """One exchange, body read; `phase_timeout` bounds each phase (connect, write, each read).

        `headers` override the defaults by name, whatever their case, as
        httpx's client merged them. The body is `json`, or `content` as it is
        (a form: its Content-Type is among `headers`). `trace` is httpx's trace extension.
        `reading` bounds the body read (its size; for a download, its pace).
        Errors are httpx's, with their `request` set, as the client raised them
        (a download past its pace: TimeoutError).
        """
        if self.is_closed:
            raise RuntimeError("this lane is closed")  # it would open a connection nobody closes
        extensions: dict[str, Any] = {
            "timeout": dict.fromkeys(("connect", "read", "write", "pool"), phase_timeout),
            READING: reading,
        }
        if trace is not None:
            extensions["trace"] = trace
        target = httpx.URL(url)
        request = httpx.Request(
            method,
            target,
            headers=_merged(headers or {}, target),
            json=json,
            content=content,
            extensions=extensions,
        )
        return await self.exchange(request)

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        """Send `request` on this lane's connections and read the answer as its
        `Reading` allows (a benchmark overrides this to answer in process).

        The body is read as a stream (`_body`), never whole before its size is
        known. A connection with bytes left over after the answer (a second
        response, or more body than Content-Length said) is closed: kept
        alive, those bytes would be read as the answer to the lane's next call,
        another operation's.
        """
        reading: Reading = request.extensions.get(READING, ANSWER)
        if reading.min_rate is None:
            return await self._exchange(request, reading, None)
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with asyncio.timeout_at(started + reading.allowance) as bound:
            rate, allowance = reading.min_rate, reading.allowance

            def pace(received: int) -> None:
                bound.reschedule(started + allowance + received / rate)

            return await self._exchange(request, reading, pace)

    async def _exchange(
        self, request: httpx.Request, reading: Reading, pace: Callable[[int], None] | None
    ) -> httpx.Response:
        try:
            response = await self._transport.handle_async_request(request)
        except httpx.RequestError as exc:
            exc.request = request
            raise
        response.request = request
        leftover = None
        try:
            body = await _body(response, reading, pace)
            # what Response.aread would set: the body is read (and decoded)
            response._content = body
            leftover = _left_over(response)
        except httpx.RequestError as exc:
            exc.request = request
            raise
        finally:
            await response.aclose()
        if leftover is not None:
            await leftover.aclose()  # after aclose gave it back: the pool drops it as closed
        return response

    async def aclose(self) -> None:
        self.is_closed = True
        await self._transport.aclose()


async def _body(
    response: httpx.Response, reading: Reading, pace: Callable[[int], None] | None
) -> bytes:
    """The answer's body, decoded, at most `reading.keep` bytes (see `Reading`).

    Read from the transport's stream: a small body is one chunk, and costs
    one length check. Content codings are undone here, a bounded step at a
    time (`_decode`), not by httpx, whose decoders inflate each chunk whole:
    888 bytes of "gzip, gzip" became 400 MiB in one call. The bytes as sent
    of a content-coded body are hashed as they come (`SENT_DIGESTS`): a
    digest header covers those, not the decoded body.
    """
    coding = response.headers.get("content-encoding")
    layers = _layers(coding) if coding else ()
    # only a download can be checked against a digest header: hash only its bytes
    hashers = [(name, make()) for name, make in _SENT_HASHERS] if layers and reading.cut else []
    keep = reading.keep
    chunks: list[bytes] = []
    size = received = 0
    async for raw in cast(httpx.AsyncByteStream, response.stream):  # a transport's: async
        received += len(raw)
        if pace is not None:
            pace(received)
        for _name, hasher in hashers:
            hasher.update(raw)
        chunk = _decode(layers, raw, keep - size) if layers else raw
        chunks.append(chunk)
        size += len(chunk)
        if size > keep:
            if not reading.cut:
                raise BodyTooLarge(f"answer body larger than {keep} bytes; not read further")
            break
    else:
        if layers and received:
            size += _finish(layers, chunks, keep - size)
            if size > keep and not reading.cut:
                raise BodyTooLarge(f"answer body larger than {keep} bytes; not read further")
    if hashers:
        response.extensions[SENT_DIGESTS] = {name: hasher.digest() for name, hasher in hashers}
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return body[:keep] if size > keep else body


def _finish(layers: Sequence[_Layer], chunks: list[bytes], room: int) -> int:
    """What the layers still hold once the body has ended, appended to `chunks` (its
    size returned); httpx.DecodingError if any coding stopped short of its end.

    A body cut inside a gzip or deflate stream decodes, up to the cut, to a
    prefix of the document: without this check it passed as the whole
    answer (a result missing its last items, its digest over the bytes as
    sent matching all the same).
    """
    tail = _decode(layers, b"", room)
    chunks.append(tail)
    if len(tail) <= room and not all(layer.finished for layer in layers):
        raise httpx.DecodingError("the answer's content coding ends before its stream does")
    return len(tail)


class _Layer:
    """One content coding (gzip or deflate) being undone, as httpx's decoders did
    (deflate: zlib-wrapped or raw, told from its first two bytes), except that a
    gzip body of several members (RFC 1952 2.2, `cat a.gz b.gz`) is decoded
    whole, as `gzip.decompress` does, where httpx kept the first member only;
    bytes after a deflate stream's end are an error, not dropped.

    The layer keeps the input it has not decoded yet: `feed` it, then take
    `inflate` until it returns nothing.
    """

    __slots__ = ("_full", "_gzipped", "_inflater", "_pending")

    def __init__(self, coding: str) -> None:
        self._gzipped = coding != "deflate"
        self._pending = b""
        self._full = False  # the last inflate filled its `most`: output may be left inside
        self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16) if self._gzipped else None

    def feed(self, data: bytes) -> None:
        if data:
            self._pending = self._pending + data if self._pending else data

    @property
    def finished(self) -> bool:
        """The stream reached its end, and nothing came after it."""
        inflater = self._inflater
        return inflater is not None and inflater.eof and not self._pending

    def inflate(self, most: int) -> bytes:
        """At most `most` (> 0) decoded bytes of what was fed; b"" when it needs more."""
        while True:
            inflater = self._start()
            # an ended stream holds no output back (zlib ends it once all is out)
            if inflater is None or inflater.eof or not (self._pending or self._full):
                return b""
            try:
                out: bytes = inflater.decompress(self._pending, most)
            except zlib.error as exc:
                raise httpx.DecodingError(
                    f"cannot decode the answer's content coding: {exc}"
                ) from None
            self._pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
            self._full = len(out) == most
            if out or not inflater.eof or not self._pending:
                return out

    def _start(self) -> Any:
        """The inflater for the next bytes: a deflate stream's once its first two bytes
        tell its kind; a new one for the next gzip member after one ended."""
        inflater = self._inflater
        if inflater is None:  # deflate, not started
            data = self._pending
            if len(data) < 2:
                return None
            wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            inflater = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
            self._inflater = inflater
        elif inflater.eof and self._pending:
            if not self._gzipped:
                raise httpx.DecodingError("bytes after the end of the answer's deflate stream")
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
            self._inflater = inflater
        return inflater


def _layers(coding: str) -> tuple[_Layer, ...]:
    """The codings to undo (`UNDONE_CODINGS`), last applied first; others (identity,
    unknown) are left, as httpx left those it had no decoder for. "x-gzip" is gzip
    (RFC 9110 8.4.1.3): left, a gzipped JSON result failed as "not valid JSON".

    Up to the first registered coding not undone (`CODINGS_NOT_UNDONE`), from the
    outside in: those applied before it are inside its bytes. `gzip, br` (Brotli
    outermost) fed the Brotli bytes to gunzip, a decoding error on every fetch,
    retried to "kept failing"; left whole, the result is refused naming br."""
    layers = []
    for name in reversed([name.strip().lower() for name in coding.split(",")]):
        if name in CODINGS_NOT_UNDONE:
            break
        if name in UNDONE_CODINGS:
            layers.append(_Layer(UNDONE_CODINGS[name]))
    return tuple(layers)


def _decode(layers: Sequence[_Layer], data: bytes, room: int) -> bytes:
    """`data` through every layer: at most room + 1 bytes (one more says "too large").

    Each layer hands the next at most DECODE_STEP bytes at a time, so a
    layer that would inflate far past `room` stops as soon as the last
    layer has produced room + 1 bytes. What a layer has not decoded yet it
    keeps for the next call (`data` b"" drains it at the body's end).
    """
    first, rest = layers[0], layers[1:]
    first.feed(data)
    out: list[bytes] = []
    got = 0
    while got <= room:
        piece = first.inflate(DECODE_STEP if rest else room + 1 - got)
        decoded = _decode(rest, piece, room - got) if rest else piece
        if not piece and not decoded:
            break
        out.append(decoded)
        got += len(decoded)
    return out[0] if len(out) == 1 else b"".join(out)


def _left_over(response: httpx.Response) -> Any:
    """The HTTP/1.1 connection that answered, if it holds bytes past the answer; else None.

    h11 keeps what it read beyond the response's end (`trailing_data`) for
    the connection's next response. httpcore 1.0's own objects are reached
    through private names: if a new version renames them this finds nothing
    (tests/integration/test_transport_review.py then fails).
    """
    pooled = getattr(response.stream, "_httpcore_stream", None)
    connection = getattr(getattr(pooled, "_stream", None), "_connection", None)
    state = getattr(connection, "_h11_state", None)
    if state is None or state.their_state is not h11.DONE:  # not DONE: httpcore closes it
        return None
    data, _closed = state.trailing_data
    return connection if data else None


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

    def __init__(
        self,
        max_in_flight: int,
        make_lane: Callable[..., Lane] = Lane,
        *,
        trusted_hosts: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        """`trusted_hosts`: each provider's hosts its lanes may reach on an internal
        address (`configured_hosts`), every other host's addresses checked at connect
        (`reconciler.connect_guard`). None: lanes as `make_lane()` makes them."""
        self._make_lane = make_lane  # benchmarks pass lanes answered in process
        self._trusted_hosts = trusted_hosts
        self._idle: dict[str, list[Lane]] = {}
        self._made: list[Lane] = []
        self._in_flight = asyncio.Semaphore(max_in_flight)

    @contextlib.asynccontextmanager
    async def lane(self, provider: str) -> AsyncIterator[Lane]:
        """A lane of `provider`'s, for one call, under the process-wide bound."""
        idle = self._idle.setdefault(provider, [])
        lane = idle.pop() if idle else self._make(provider)
        try:
            async with self._in_flight:
                yield lane
        finally:
            idle.append(lane)

    def _make(self, provider: str) -> Lane:
        if self._trusted_hosts is None:
            lane = self._make_lane()
        else:  # a provider not configured (never, from the reconciler) trusts no host
            lane = self._make_lane(trusted_hosts=self._trusted_hosts.get(provider, frozenset()))
        self._made.append(lane)
        return lane

    async def aclose(self) -> None:
        lanes, self._made, self._idle = self._made, [], {}
        for lane in lanes:
            await lane.aclose()
