"""The webhook endpoint, fuzzed end to end on a real PostgreSQL.

Requests go to the real receiver app (`build_app`, its group-commit writer
running) through its ASGI interface, which lets a test send what no HTTP
client would: repeated and duplicated headers, header bytes outside ASCII,
a Content-Length that disagrees with the body, a body in many chunks, a
client that leaves mid-body. Then a real uvicorn socket takes raw request
heads (chunked past the limit, framing that lies), as a provider's or an
attacker's HTTP stack would send them.

Properties, over generated input (hypothesis, derandomized so a failure
replays and CI cannot flake):

- every answer is 2xx, 4xx or 503, with a JSON body that says why; input
  alone never makes a 500, an ERROR line or a traceback in the logs;
- a refused request stores nothing; an accepted one stores at most one row;
- an authentic delivery (signed with the configured secret) of any body
  (random bytes, deep nesting, huge numbers, NaN, duplicate keys, lone
  surrogates in escapes, BOMs, UTF-16) is stored exactly once however often,
  and however concurrently, it is sent;
- no log line carries a secret, a signature or anything of the body.

JW_FUZZ_EXAMPLES raises the example count (e.g. 2000 for a long run).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import itertools
import json
import logging
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receiver.app import build_app
from shared.logs import JsonFormatter
from shared.providers import ProviderDescription, parse_providers
from shared.serve import serve_app
from shared.signatures import sign
from tests.integration.test_receiver_support import NOW, settings_for, standard_headers
from tests.integration.test_webhook_hostile_bodies import SENDERS, Sender
from tests.integration.test_webhook_hostile_bodies import _providers as _signed_providers
from tests.integration.test_webhook_url_token import ENV as TOKEN_ENV
from tests.integration.test_webhook_url_token import TOKEN, luma
from tests.unit.test_webhook_fuzz import BODIES

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 400
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # one receiver and database per test, on purpose
    ],
)
MAX_BODY = 64 * 1024
# Bound on one request or one raw connection; generous for a loaded CI box.
WAIT_SECONDS = 10.0
# Put in bodies and in headers nobody reads: never to be seen in a log line.
MARKER = "zq-fuzz-marker-7731"
SECRETS = sorted({*(s.secret for s in SENDERS.values()), TOKEN, "fuzz-more-providers-key"})
TOKENED = "tokened"  # static_header with the token in the callback URL's query
_ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
# Answers input alone may get: stored/duplicate, a refusal, or "retry later".
ALLOWED = {200, 400, 401, 404, 405, 413, 415, 503}
_ids = itertools.count()


# ------------------------------------------------------------------ the receiver


def _table(scheme: str, **paths: str) -> dict[str, Any]:
    return {
        "base_url": "https://provider.example.test",
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/jobs/{job_id}",
            "state": "/status",
            "state_map": {"done": "succeeded"},
        },
        "result": {"source": "none"},
        "webhooks": {"scheme": scheme, "secrets_env": "MORE", **paths},
    }


def _providers() -> dict[str, ProviderDescription]:
    """The signed senders' providers (byheader and ownparser included), Slack
    and Shopify, references read from a header and from the query string, and
    one whose token rides in the URL."""
    table = {"base_url": "https://luma.example.test", **luma()}
    tokened = parse_providers({"providers": {TOKENED: table}}, "test", TOKEN_ENV)
    more = {
        "slackish": _table("slack", job_id="/job_id", event_id="/event_id"),
        "shopifyish": _table("shopify", job_id="/job_id"),
        "byquery": _table(
            "standard_webhooks", job_id="query:job", operation_id="query:op", state="/state"
        ),
        "headerid": _table("github", job_id="header:X-Job-Id", event_id="header:X-Event"),
    }
    described = parse_providers({"providers": more}, "test", {"MORE": MORE_SECRET})
    return {**_signed_providers(), **tokened, **described}


MORE_SECRET = "whsec_" + base64.b64encode(b"fuzz-more-providers-key-32-bytes").decode()


def _signer(scheme: str, **extra: str) -> Any:
    def headers(body: bytes, event_id: str, secret: str) -> dict[str, str]:
        value = sign(scheme, {}, secret, body, timestamp=NOW, event_id=event_id)
        names = {
            "slack": {"x-slack-signature": value, "x-slack-request-timestamp": str(NOW)},
            "shopify": {"x-shopify-hmac-sha256": value, "x-shopify-webhook-id": event_id},
            "github": {"x-hub-signature-256": value, "x-github-delivery": event_id},
        }[scheme]
        return {"content-type": "application/json", **names, **extra}

    return headers


def _standard_for(body: bytes, event_id: str, secret: str) -> dict[str, str]:
    return standard_headers(body, event_id, secret=secret)


ALL_SENDERS: dict[str, Sender] = {
    **SENDERS,
    "ownparser": Sender("ownparser", SENDERS["standard_webhooks"].secret, "x", _standard_for),
    "byheader": dataclasses.replace(
        SENDERS["github"], provider="byheader", signer=_signer("github", **{"x-job-id": "job_1"})
    ),
    "slack": Sender("slackish", MORE_SECRET, "x", _signer("slack"), body_keyed=True),
    "shopify": Sender("shopifyish", MORE_SECRET, "x", _signer("shopify"), body_keyed=True),
    "byquery": Sender("byquery", MORE_SECRET, "x", _standard_for),
    "headerid": Sender(
        "headerid",
        MORE_SECRET,
        "x",
        _signer("github", **{"x-job-id": "j", "x-event": "e"}),
        body_keyed=True,
    ),
}


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Rx:
    app: Any
    db: Any
    logs: LogLines

    async def rows(self) -> int:
        count: int = await self.db.fetchval("SELECT count(*) FROM webhook_events")
        return count

    async def holding(self, needle: str) -> list[str]:
        """The stored events whose text holds `needle` anywhere (payload in base64 decoded)."""
        rows = await self.db.fetch(
            "SELECT row_to_json(w)::text AS row, payload->>'body_base64' AS b64"
            " FROM webhook_events w"
        )
        found = []
        for row in rows:
            raw = base64.b64decode(row["b64"]) if row["b64"] else b""
            if needle in row["row"] or any(needle.encode(e) in raw for e in _ENCODINGS):
                found.append(row["row"])
        return found


class LogLines(logging.Handler):
    """Every record of the receiver's and the shared code's loggers, from DEBUG up."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logs() -> Iterator[LogLines]:
    handler = LogLines()
    loggers = [logging.getLogger(name) for name in ("receiver", "shared", "uvicorn")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.addHandler(handler)
    yield handler
    for lg, level in zip(loggers, levels, strict=True):
        lg.removeHandler(handler)
        lg.setLevel(level)


@pytest_asyncio.fixture
async def rx(pool: Any, db: Any, logs: LogLines) -> AsyncIterator[Rx]:
    app = build_app(settings_for(_providers(), max_body_bytes=MAX_BODY), pool, now=lambda: NOW)
    async with app.router.lifespan_context(app):
        yield Rx(app, db, logs)


async def asgi_request(
    app: Any,
    path: str,
    headers: Sequence[tuple[bytes, bytes]],
    chunks: Sequence[bytes],
    *,
    method: str = "POST",
    query: bytes = b"",
    leaves: bool = False,
) -> Answer:
    """One request through the app's ASGI interface, as a server would hand it over.

    An exception the app lets escape fails the test: a server would answer it
    500 and log its traceback.
    """
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogateescape"),
        "query_string": query,
        "root_path": "",
        "headers": list(headers),
        "client": ("127.0.0.1", 40000),
        "server": ("receiver.test", 80),
        "state": {},
    }
    parts = list(chunks) or [b""]
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": part, "more_body": leaves or i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with asyncio.timeout(WAIT_SECONDS):
        await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(start["status"], list(start.get("headers", [])), body)


# --------------------------------------------------------------------- checks


def check_answer(answer: Answer) -> str | None:
    """The answer is one input may get, and says why; its status word when 200."""
    assert answer.status in ALLOWED, (answer.status, answer.body)
    document = answer.json()
    assert isinstance(document, dict)
    if answer.status == 200:
        assert document.get("status") in {"stored", "duplicate"}, document
        return str(document["status"])
    assert isinstance(document.get("error"), str), document
    return None


def check_logs(logs: LogLines, secrets: Sequence[str]) -> None:
    """No traceback, no ERROR (our own fault), nothing the sender sent, no secret."""
    for record in logs.records:
        assert record.exc_info is None, record.getMessage()
        assert record.levelno < logging.ERROR, record.getMessage()
        line = JsonFormatter().format(record)
        assert MARKER not in line, line
        for secret in (*SECRETS, *secrets):
            assert secret not in line, line
    logs.records.clear()


# ----------------------------------------------------------------- generation


_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
HOSTILE_BODIES = st.one_of(
    BODIES,
    _JSON_VALUES.map(lambda v: json.dumps({"note": MARKER, "x": v}).encode()),
    _JSON_VALUES.map(
        lambda v: json.dumps(
            {"note": MARKER, "job_id": "job_1", "x": v}, ensure_ascii=False
        ).encode("utf-8", "surrogatepass")
    ),
    st.integers(min_value=MAX_BODY - 20, max_value=MAX_BODY + 20).map(
        lambda n: (b'{"note":"' + MARKER.encode() + b'","p":"').ljust(n - 2, b"x") + b'"}'
    ),
)
SENDER = st.sampled_from(sorted(ALL_SENDERS)).map(ALL_SENDERS.__getitem__)


def _chunked(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    edges = [0, *points, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)] or [b""]


def signed(sender: Sender, body: bytes, event_id: str) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in sender.headers(body, event_id).items()]


# Names a mutation may add or repeat: the ones the schemes read, framing, others.
_HEADER_NAMES = st.sampled_from(
    [
        b"webhook-id",
        b"webhook-timestamp",
        b"webhook-signature",
        b"svix-id",
        b"svix-signature",
        b"stripe-signature",
        b"x-hub-signature-256",
        b"x-github-delivery",
        b"x-signature",
        b"x-timestamp",
        b"x-event-id",
        b"x-job-id",
        b"x-event",
        b"x-slack-signature",
        b"x-slack-request-timestamp",
        b"x-shopify-hmac-sha256",
        b"content-type",
        b"content-length",
        b"content-encoding",
        b"transfer-encoding",
        b"expect",
        b"user-agent",
        b"traceparent",
        b"x-" + MARKER.encode(),
        b"\xc3\xa9",
        b"",
    ]
)
_HEADER_VALUES = st.one_of(
    st.binary(max_size=60),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"application/json",
            b"APPLICATION/JSON; charset=utf-16",
            b"application/vnd.x+json",
            b"application/+json",
            b"text/json",
            b"application/json\x00",
            b"identity",
            b"gzip",
            b"chunked",
            b"100-continue",
            b"0",
            b"-1",
            b"1e3",
            b"99999999999999999999999999",
            str(MAX_BODY + 1).encode(),
            b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            b"00-" + b"0" * 32 + b"-" + b"0" * 16 + b"-01",
            MARKER.encode(),
        ]
    ),
    st.sampled_from([b"x", b"v1,", b" ", b"\xff"]).flatmap(
        lambda unit: st.sampled_from([100, 4096, 4097, 20000]).map(lambda n: unit * n)
    ),
)


@st.composite
def mutations(draw: st.DrawFn, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` with some dropped, repeated (same or other value), replaced or added."""
    result = list(headers)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        kind = draw(st.sampled_from(["drop", "repeat", "repeat_other", "replace", "add"]))
        if kind == "add" or not result:
            result.insert(
                draw(st.integers(0, len(result))), (draw(_HEADER_NAMES), draw(_HEADER_VALUES))
            )
            continue
        index = draw(st.integers(0, len(result) - 1))
        name, value = result[index]
        if kind == "drop":
            del result[index]
        elif kind == "repeat":
            result.append((name, value))
        elif kind == "repeat_other":
            result.append((name, draw(_HEADER_VALUES)))
        else:
            result[index] = (name, draw(_HEADER_VALUES))
    return result


_PATHS = st.sampled_from(
    ["/webhooks/{p}", "/webhooks/{p}/", "/webhooks/nosuch", "/webhooks/{p}%00", "/webhooks/\u00e9"]
)


# ---------------------------------------------------------------------- tests


@FUZZ
@given(data=st.data())
async def test_any_request_gets_a_reason_and_only_a_verified_one_is_stored(
    rx: Rx, data: st.DataObject
) -> None:
    sender = data.draw(SENDER)
    body = data.draw(HOSTILE_BODIES)
    event_id = f"evt_fuzz_{next(_ids)}"
    genuine = signed(sender, body, event_id)
    headers = data.draw(mutations(genuine))
    path = data.draw(_PATHS).replace("{p}", sender.provider)
    chunks = _chunked(body, data.draw(st.lists(st.integers(0, MAX_BODY), max_size=4)))
    method = data.draw(st.sampled_from(["POST"] * 8 + ["GET", "PUT", "post"]))
    leaves = data.draw(st.integers(0, 15)) == 0  # the client goes away mid-body
    query = data.draw(
        st.sampled_from(
            [
                b"",
                b"token=" + MARKER.encode(),
                b"%ff=%00",
                b"a&&=&",
                b"job=j1&op=op_01",
                b"job=%00&job=%ff&op=" + b"9" * 600,
                b"job=\xc3\xa9&op=%ud800",
            ]
        )
    )

    before = await rx.rows()
    answer = await asgi_request(
        rx.app, path, headers, chunks, method=method, query=query, leaves=leaves
    )
    status = check_answer(answer)
    added = await rx.rows() - before
    assert added == (1 if status == "stored" else 0), (answer.status, answer.body)
    signatures = [v.decode("latin-1") for k, v in genuine if b"signature" in k]
    check_logs(rx.logs, signatures)


@FUZZ
@given(
    sender=SENDER,
    body=HOSTILE_BODIES,
    copies=st.integers(min_value=1, max_value=3),
    together=st.booleans(),
    cuts=st.lists(st.integers(0, MAX_BODY), max_size=3),
    content_type=st.sampled_from(
        [b"application/json", b"application/json; charset=utf-8", b"application/cloudevents+json"]
    ),
)
async def test_an_authentic_hostile_body_is_stored_exactly_once(
    rx: Rx,
    sender: Sender,
    body: bytes,
    copies: int,
    together: bool,
    cuts: list[int],
    content_type: bytes,
) -> None:
    event_id = f"evt_fuzz_{next(_ids)}"
    headers = [
        (k, content_type if k == b"content-type" else v) for k, v in signed(sender, body, event_id)
    ]
    chunks = _chunked(body, cuts)
    path = f"/webhooks/{sender.provider}"
    before = await rx.rows()
    if together:
        answers = await asyncio.gather(
            *(asgi_request(rx.app, path, headers, chunks) for _ in range(copies))
        )
    else:
        answers = [await asgi_request(rx.app, path, headers, chunks) for _ in range(copies)]
    added = await rx.rows() - before
    if len(body) > MAX_BODY:
        assert {a.status for a in answers} == {413}
        assert added == 0
    else:
        words = [check_answer(a) for a in answers]
        assert {a.status for a in answers} == {200}, [(a.status, a.body) for a in answers]
        assert words.count("stored") == added <= 1, words
        if not sender.body_keyed and sender.provider != "stripeish":
            # a fresh signed id each example: a new event, whatever the body
            assert words.count("stored") == 1, words
    signatures = [v.decode("latin-1") for k, v in headers if b"signature" in k]
    check_logs(rx.logs, signatures)


# ------------------------------------------------------------ over a real socket

_FRAMINGS = st.sampled_from(
    ["exact", "short", "long", "chunked", "chunked_over", "chunked_bad", "both", "none"]
)


def _raw_request(
    sender: Sender, body: bytes, framing: str, extra: list[tuple[bytes, bytes]]
) -> bytes:
    """A request as bytes on the wire, its framing as `framing` says (true or not)."""
    # Connection: close, so the server ends the exchange once it answered.
    lines = [
        f"POST /webhooks/{sender.provider} HTTP/1.1".encode(),
        b"host: rx",
        b"connection: close",
    ]
    lines += [k + b": " + v for k, v in signed(sender, body, f"evt_raw_{next(_ids)}")]
    lines += [k + b": " + v for k, v in extra]
    payload = body
    if framing == "exact":
        lines.append(b"content-length: %d" % len(body))
    elif framing == "short":
        lines.append(b"content-length: %d" % max(0, len(body) - 3))
    elif framing == "long":
        lines.append(b"content-length: %d" % (len(body) + 7))
    elif framing in ("chunked", "chunked_over", "both"):
        lines.append(b"transfer-encoding: chunked")
        if framing == "both":
            lines.append(b"content-length: %d" % len(body))
        if framing == "chunked_over":
            body = body + b" " * (MAX_BODY + 1)
        payload = (
            b"".join(
                b"%x\r\n%s\r\n" % (len(body[i : i + 1000]), body[i : i + 1000])
                for i in range(0, len(body), 1000)
            )
            + b"0\r\n\r\n"
        )
    elif framing == "chunked_bad":
        lines.append(b"transfer-encoding: chunked")
        payload = b"zz\r\n" + body + b"\r\n0\r\n\r\n"
    return b"\r\n".join(lines) + b"\r\n\r\n" + payload


async def _exchange(url: str, request: bytes, *, half_close: bool) -> bytes:
    """Send `request`, read what the server says until it closes.

    `half_close`: for a body that never ends (a Content-Length too long), say
    so. Not otherwise: a server may take the client's going for a disconnect
    mid-request, and store an event whose answer then never arrives (which is
    right: the sender retries, a duplicate), which this test could not count.
    """
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    received = bytearray()
    async with asyncio.timeout(WAIT_SECONDS):
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            writer.write(request)
            await writer.drain()
            if half_close:
                writer.write_eof()
            while chunk := await reader.read(65536):
                received += chunk
        except ConnectionError:
            pass  # a refusal that closed with the body unread: the kernel's reset
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
    return bytes(received)


def _statuses(raw: bytes) -> list[int]:
    return [int(line.split()[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


@pytest_asyncio.fixture
async def served(pool: Any, db: Any, logs: LogLines) -> AsyncIterator[tuple[Rx, str]]:
    """The receiver on a real uvicorn socket (which runs its lifespan)."""
    app = build_app(settings_for(_providers(), max_body_bytes=MAX_BODY), pool, now=lambda: NOW)
    async with serve_app(app) as url:
        yield Rx(app, db, logs), url


_RAW_FUZZ = settings(FUZZ, max_examples=max(EXAMPLES // 4, 25))


@_RAW_FUZZ
@given(
    sender=SENDER,
    body=HOSTILE_BODIES,
    framing=_FRAMINGS,
    extra=st.lists(
        st.tuples(
            st.sampled_from([b"x-extra", b"user-agent", b"content-type", b"x-hub-signature-256"]),
            st.binary(max_size=30).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
        ),
        max_size=3,
    ),
)
async def test_framing_that_lies_over_a_socket_is_refused_or_read_never_a_500(
    served: tuple[Rx, str],
    sender: Sender,
    body: bytes,
    framing: str,
    extra: list[tuple[bytes, bytes]],
) -> None:
    rx, url = served
    before = await rx.rows()
    request = _raw_request(sender, body, framing, extra)
    raw = await _exchange(url, request, half_close=framing == "long")
    statuses = _statuses(raw)
    assert all(s in ALLOWED for s in statuses), raw[:300]
    assert await rx.rows() - before <= statuses.count(200)
    check_logs(rx.logs, [])


# ------------------------------------------------- a token in the URL, echoed


@st.composite
def token_echoes(draw: st.DrawFn) -> bytes:
    """A callback body echoing the token, each character as itself, a JSON
    escape (either case) or a percent escape, in any encoding JSON is read in."""
    # One way of escaping per echo, as an encoder writes it, some characters as is.
    escape = draw(st.sampled_from(["\\u{:04x}", "\\u{:04X}", "%{:02x}", "%{:02X}"]))
    spelled = "".join(escape.format(ord(char)) if draw(st.booleans()) else char for char in TOKEN)
    where = draw(st.sampled_from(["value", "key", "url"]))
    echo = {
        "value": f'"echo": "{spelled}"',
        "key": f'"{spelled}": 1',
        "url": f'"callback_url": "https://rx.test/webhooks/tokened?token={spelled}"',
    }[where]
    text = f'{{"id": "gen_{next(_ids)}", "state": "dreaming", {echo}, "note": "{MARKER}"}}'
    encoding = draw(
        st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
    )
    return text.encode(encoding)


@FUZZ
@given(body=st.one_of(token_echoes(), BODIES), copies=st.integers(1, 2))
async def test_a_token_echoed_in_any_spelling_is_never_stored(
    rx: Rx, body: bytes, copies: int
) -> None:
    headers = [(b"content-type", b"application/json")]
    query = b"token=" + TOKEN.encode()
    for _ in range(copies):
        answer = await asgi_request(rx.app, f"/webhooks/{TOKENED}", headers, [body], query=query)
        word = check_answer(answer)
        assert word in {"stored", "duplicate"} or (answer.status == 413 and len(body) > MAX_BODY)
    assert await rx.holding(TOKEN) == []
    check_logs(rx.logs, [])


# --------------------------------------------- regressions the fuzzing found


async def test_a_token_echoed_escaped_in_utf16_is_not_stored(rx: Rx) -> None:
    """UTF-16 text, which the JSON reader reads, with the echo's first character
    written as a JSON escape: the token was stored in clear, re-encoded as UTF-8."""
    text = f'{{"id": "gen_1", "state": "dreaming", "echo": "\\u006c{TOKEN[1:]}"}}'
    headers = [(b"content-type", b"application/json")]
    for encoding in ("utf-16-le", "utf-16", "utf-32-be"):
        answer = await asgi_request(
            rx.app,
            f"/webhooks/{TOKENED}",
            headers,
            [text.replace("gen_1", f"gen_{encoding}").encode(encoding)],
            query=b"token=" + TOKEN.encode(),
        )
        assert (answer.status, answer.json()) == (200, {"status": "stored", "matched": False})
    assert await rx.holding(TOKEN) == []
    assert len(await rx.holding("[redacted]")) == 3
