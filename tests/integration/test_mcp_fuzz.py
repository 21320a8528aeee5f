"""The MCP server, fuzzed with hostile JSON-RPC over Streamable HTTP.

The endpoint is the one the receiver mounts (`mounted_receiver`: the
receiver app with the agent API and /mcp, on a real uvicorn socket, over a
real PostgreSQL). Messages are written as raw text, so a test sends what no
SDK client would: NaN and Infinity literals, integers past every range,
duplicate keys, NUL characters, nesting past any parser's limit, arguments
of the wrong type or missing, unknown tools and methods, odd request ids.

Properties, over generated input (hypothesis, derandomized so a failure
replays and CI cannot flake):

- every message is answered within a bound (no hang), never with a 5xx, and
  a request's answer is a JSON-RPC error with an integer code or a result;
- a tool call with arguments the tool cannot use is a tool error (isError)
  or a JSON-RPC error, and creates no operation; an operation exists only
  where an answer names it;
- the server answers a plain call afterwards, and logs no traceback.

JW_FUZZ_EXAMPLES raises the example count (e.g. 2000 for a long run).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.ledger.states import LocalState as S
from tests.integration.agent_support import advance, finish_with_result, make_token
from tests.integration.mcp_support import Mounted, mounted_receiver

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 150
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # one receiver and session per test, on purpose
    ],
)
# Bound on one exchange: every call here either fails fast or names an
# operation that does not exist; a wait is at most the short ones asked for.
WAIT_SECONDS = 15.0
PROTOCOL = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
UNKNOWN_OP = "op_00000000000000000000000000"
TOOLS = ["start", "check", "await", "cancel", "pending"]
# JSON-RPC 2.0's error codes, and the server-defined range.
ERROR_CODES = {-32700, -32600, -32601, -32602, -32603}


class Raw:
    """Text put into a message as is (NaN, a too-long integer, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text


def encode(value: Any) -> str:
    """JSON text of `value`, with `Raw` pieces written as they are."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}:{encode(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # NaN / Infinity / -Infinity, as Python writes them
    return json.dumps(value)


# ----------------------------------------------------------------- the session


@dataclass
class Session:
    http: httpx.AsyncClient
    url: str
    headers: dict[str, str]
    db: Any
    next_id: int = 100

    async def send(self, text: str | bytes) -> tuple[int, list[dict[str, Any]]]:
        """POST one message; the HTTP status and the JSON-RPC messages that came back."""
        body = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        async with self._bounded():
            answer = await self.http.post(self.url, content=body, headers=self.headers)
        return answer.status_code, _messages(answer)

    async def call(self, name: Any, arguments: Any) -> dict[str, Any]:
        """A well-formed tools/call; its one answer (a result or an error)."""
        self.next_id += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        status, messages = await self.send(encode(message))
        if status == 413:  # over the transport's body limit: refused before any JSON-RPC
            return {"refused": status}
        if status == 400:  # not read at all (a parser's limit): said so, to no id
            [answer] = messages
            assert answer["id"] is None and answer["error"]["code"] == -32700, answer
            return dict(answer)
        assert status == 200, (status, messages)
        [answer] = [m for m in messages if m.get("id") == self.next_id]
        return answer

    async def operations(self) -> int:
        count: int = await self.db.fetchval("SELECT count(*) FROM operations")
        return count

    def _bounded(self) -> Any:
        return asyncio.timeout(WAIT_SECONDS)


def _messages(answer: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a JSON answer or of an event stream."""
    kind = answer.headers.get("content-type", "")
    if not answer.content:
        return []
    if kind.startswith("text/event-stream"):
        found = []
        # Lines end at CR, LF or CRLF only (not at U+2028, as str.splitlines has it).
        for line in answer.text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            if line.startswith("data:") and line[5:].strip():
                found.append(json.loads(line[5:]))
        return found
    if not kind.startswith("application/json"):  # an HTTP refusal, in words (413)
        return []
    document = json.loads(answer.content)
    return document if isinstance(document, list) else [document]


class LogLines(logging.Handler):
    """The records of the server's loggers; `until` waits for one, as a signal."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._arrived = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._arrived.set()

    async def until(self, message: str) -> None:
        async with asyncio.timeout(WAIT_SECONDS):
            while not any(r.getMessage() == message for r in self.records):
                self._arrived.clear()
                await self._arrived.wait()


@pytest.fixture
def logs() -> Iterator[LogLines]:
    handler = LogLines()
    loggers = [logging.getLogger(name) for name in ("shared", "receiver", "mcp", "uvicorn")]
    for lg in loggers:
        lg.addHandler(handler)
    yield handler
    for lg in loggers:
        lg.removeHandler(handler)


@pytest_asyncio.fixture
async def session(db_url: str, db: Any, logs: LogLines) -> AsyncIterator[Session]:
    """An initialized MCP session of the agent "claude" on the mounted endpoint."""
    token = await make_token(db, "claude")
    async with (
        mounted_receiver(db_url) as mounted,
        httpx.AsyncClient(timeout=WAIT_SECONDS * 2) as http,
    ):
        yield await _initialized(mounted, http, token, db)


async def _initialized(mounted: Mounted, http: httpx.AsyncClient, token: str, db: Any) -> Session:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "Content-Type": "application/json",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"},
        },
    }
    answer = await http.post(mounted.mcp_url, json=initialize, headers=headers)
    assert answer.status_code == 200, answer.text
    headers["mcp-session-id"] = answer.headers["mcp-session-id"]
    headers["mcp-protocol-version"] = PROTOCOL
    session = Session(http, mounted.mcp_url, headers, db)
    status, _ = await session.send(
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    assert status == 202
    return session


# ----------------------------------------------------------------- generation

_HOSTILE_TEXT = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            "\x00",
            "op_\x00",
            "sim",
            "export",
            UNKNOWN_OP,
            UNKNOWN_OP + "\n",
            "op_" + "Z" * 26,
            "op_" + "u" * 26,
            "../openapi.json",
            "op_01/../../v1/operations",
            "\ud800",
            "\u202e",
        ]
    ),
    st.sampled_from(["x", "\x00", "\u00e9"]).flatmap(
        lambda unit: st.sampled_from([200, 5000, 100_000]).map(lambda n: unit * n)
    ),
)
_RAW_VALUES = st.sampled_from(
    [
        Raw("NaN"),
        Raw("Infinity"),
        Raw("-Infinity"),
        Raw("1e400"),
        Raw("-1e400"),
        Raw("9" * 5000),
        Raw("-0"),
        Raw("1E-400"),
        Raw('{"a":1,"a":"two"}'),
        Raw("[" * 64 + "]" * 64),
        Raw("[" * 3000 + "]" * 3000),
        Raw('{"a":' * 3000 + "1" + "}" * 3000),
        Raw('"\\u0000"'),
        Raw('"\\ud800"'),
    ]
)
_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(),
        _HOSTILE_TEXT,
        _RAW_VALUES,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYS = st.sampled_from(
    [
        "provider",
        "kind",
        "request",
        "client_reference",
        "operation_id",
        "max_wait",
        "consumer",
        "reason",
        "task",
        "",
        "\x00",
    ]
)
# Arguments with the fields a tool reads, of any type; or not an object at all.
_ARGUMENTS = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=6),
    st.fixed_dictionaries(
        {"provider": st.just("sim"), "kind": _HOSTILE_TEXT},
        optional={"request": _VALUES, "client_reference": _VALUES},
    ),
    st.fixed_dictionaries(  # a start the tool reads through, its request of any content
        {
            "provider": st.just("sim"),
            "kind": st.just("export"),
            "request": st.fixed_dictionaries(
                {"body": _VALUES}, optional={"method": _VALUES, "target": _VALUES}
            ),
        },
        optional={"client_reference": _VALUES},
    ),
    st.fixed_dictionaries(
        {"operation_id": st.one_of(st.just(UNKNOWN_OP), _HOSTILE_TEXT)},
        optional={"max_wait": _VALUES, "consumer": _VALUES, "reason": _VALUES},
    ),
    _VALUES,
)
_NAMES = st.one_of(st.sampled_from(TOOLS), _HOSTILE_TEXT, _VALUES)


def _a_use_of_a_sane_start(name: Any, arguments: Any) -> bool:
    """Whether this call may rightly create an operation: `start` on the
    simulator with a string kind, an object request and a fitting reference."""
    if name != "start" or not isinstance(arguments, dict):
        return False
    request = arguments.get("request")
    kind = arguments.get("kind")
    return (
        arguments.get("provider") == "sim"
        and isinstance(kind, str)
        and bool(kind)
        and isinstance(request, dict)
    )


def check_logs(logs: LogLines) -> None:
    for record in logs.records:
        assert record.exc_info is None, (record.name, record.getMessage())
        assert record.levelno < logging.ERROR, (record.name, record.getMessage())
    logs.records.clear()


# ---------------------------------------------------------------------- tests


@FUZZ
@given(name=_NAMES, arguments=_ARGUMENTS)
async def test_a_hostile_tool_call_is_a_clear_error_and_creates_nothing(
    session: Session, logs: LogLines, name: Any, arguments: Any
) -> None:
    before = await session.operations()
    answer = await session.call(name, arguments)
    created = await session.operations() - before
    if "refused" in answer:
        assert created == 0
    elif "error" in answer:
        assert answer["error"]["code"] in ERROR_CODES, answer
        assert isinstance(answer["error"]["message"], str) and answer["error"]["message"]
        assert created == 0
    else:
        result = answer["result"]
        assert isinstance(result.get("content"), list) and result["content"], result
        named = (result.get("structuredContent") or {}).get("operation_id")
        if result.get("isError"):
            assert created == 0, result
        elif created:
            assert _a_use_of_a_sane_start(name, arguments), (name, arguments)
            assert created == 1 and isinstance(named, str), result
    check_logs(logs)


_METHODS = st.one_of(
    st.sampled_from(
        [
            "tools/call",
            "tools/list",
            "resources/read",
            "resources/list",
            "tasks/get",
            "tasks/result",
            "tasks/list",
            "tasks/cancel",
            "ping",
            "initialize",
            "notifications/cancelled",
            "nonsense",
            "",
        ]
    ),
    _HOSTILE_TEXT,
)
_IDS = st.one_of(
    st.integers(min_value=1000, max_value=10**6),
    st.text(max_size=8),
    st.sampled_from([Raw("null"), Raw("1.5"), Raw("1e400"), Raw("9" * 60), Raw("{}"), Raw("[]")]),
)


@st.composite
def messages(draw: st.DrawFn) -> str:
    """A JSON-RPC message, perhaps malformed at any level, as text."""
    kind = draw(st.integers(0, 9))
    if kind == 0:  # not JSON, or not an object
        return draw(
            st.one_of(
                st.text(max_size=40),
                st.sampled_from(["", "[]", "null", "[" * 5000, '{"jsonrpc":"2.0"', "\ufeff{}"]),
            )
        )
    message: dict[str, Any] = {
        "jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", Raw("2")])),
        "id": draw(_IDS),
        "method": draw(_METHODS),
    }
    if draw(st.booleans()):
        del message["id"]
    params = draw(
        st.one_of(
            st.fixed_dictionaries(
                {"name": _NAMES, "arguments": _ARGUMENTS},
                optional={"task": _VALUES, "_meta": _VALUES},
            ),
            st.fixed_dictionaries(
                {},
                optional={
                    "uri": _HOSTILE_TEXT,
                    "taskId": _HOSTILE_TEXT,
                    "cursor": _HOSTILE_TEXT,
                    "requestId": _VALUES,
                },
            ),
            _VALUES,
        )
    )
    if draw(st.integers(0, 5)):
        message["params"] = params
    text = encode(message)
    if kind == 1:  # a duplicate key: which one counts is the parser's choice
        text = text[:-1] + ',"method":"tools/call"}'
    return text


@FUZZ
@given(text=messages())
async def test_any_message_is_answered_in_time_never_a_server_error(
    session: Session, logs: LogLines, text: str
) -> None:
    if "tasks/result" in text and "op_" in text:
        return  # tasks/result waits for the task by design; covered with no task below
    before = await session.operations()
    status, answers = await session.send(text)
    assert status < 500, (status, answers)
    for answer in answers:
        if "error" in answer:
            assert isinstance(answer["error"].get("code"), int), answer
    assert await session.operations() == before  # no raw message here can be a sane start
    check_logs(logs)
    # and the session still works
    plain = await session.call("check", {"operation_id": UNKNOWN_OP})
    assert plain["result"]["structuredContent"]["status"] == "not_found"


# --------------------------------------------- regressions the fuzzing found

SANE_START = {"provider": "sim", "kind": "export", "request": {"body": {"m": 2}}}


@pytest.mark.parametrize("max_wait", ["NaN", "-Infinity", "-0", "1e-400"])
async def test_a_max_wait_that_is_no_positive_number_is_refused(
    session: Session, logs: LogLines, max_wait: str
) -> None:
    """NaN passed `<= 0` and `min`: the await on a running job waited without bound."""
    started = await session.call("start", SANE_START)
    op_id = started["result"]["structuredContent"]["operation_id"]
    answer = await session.call("await", {"operation_id": op_id, "max_wait": Raw(max_wait)})
    result = answer["result"]
    assert result["isError"], result
    assert "max_wait must be a positive number" in result["content"][0]["text"]
    check_logs(logs)


async def test_a_notification_named_tools_call_starts_nothing(
    session: Session, logs: LogLines
) -> None:
    """A notification has no id, so no answer: a task-augmented `start` sent as
    one started a job its sender was never told of."""
    note = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "params": {"name": "start", "arguments": SANE_START, "task": {"ttl": 60_000}},
    }
    runner = logging.getLogger("mcp.server.runner")
    level = runner.level
    runner.setLevel(logging.DEBUG)
    try:
        status, answers = await session.send(json.dumps(note))
        # the SDK's word that it dropped it: the notification was seen through
        await logs.until("no handler for notification tools/call")
    finally:
        runner.setLevel(level)
    assert (status, answers) == (202, [])
    assert await session.operations() == 0
    check_logs(logs)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("where", ["body", "target", "task"])
async def test_a_request_holding_no_json_number_is_refused_as_such(
    session: Session, logs: LogLines, number: str, where: str
) -> None:
    """The call to the API could not be written: a JSON-RPC error with code 0 and
    a traceback in the log, where the model should read what to fix."""
    request: dict[str, Any] = {"body": {"n": Raw(number)}}
    if where == "target":
        request = {"body": {}, "target": {"n": Raw(number)}}
    arguments = {"provider": "sim", "kind": "export", "request": request}
    if where == "task":
        session.next_id += 1
        message = {
            "jsonrpc": "2.0",
            "id": session.next_id,
            "method": "tools/call",
            "params": {"name": "start", "arguments": arguments, "task": {"ttl": 60_000}},
        }
        status, [answer] = await session.send(encode(message))
        assert (status, answer["error"]["code"]) == (200, -32602), answer
        text = answer["error"]["message"]
    else:
        result = (await session.call("start", arguments))["result"]
        assert result["isError"], result
        text = result["content"][0]["text"]
    assert "request must be JSON" in text
    assert await session.operations() == 0
    check_logs(logs)


@pytest.mark.parametrize("text", ["a\x00b", "r" * 501])
async def test_a_reason_the_api_would_refuse_is_a_tool_error_not_an_unknown_state(
    session: Session, logs: LogLines, db: Any, text: str
) -> None:
    """The API's refusal came back as "state unknown, try again later": the
    model would retry, with the same reason, for ever."""
    started = await session.call("start", SANE_START)
    op_id = started["result"]["structuredContent"]["operation_id"]
    await advance(db, op_id, S.OBSERVING)
    result = (await session.call("cancel", {"operation_id": op_id, "reason": text}))["result"]
    assert result["isError"], result
    assert result["content"][0]["text"] == (
        "reason must be at most 500 characters, none of them NUL"
    )
    check = (await session.call("check", {"operation_id": op_id}))["result"]
    assert check["structuredContent"]["status"] == "running"  # no cancel was recorded
    check_logs(logs)


@pytest.mark.parametrize("text", ["a\x00b", "c" * 100_000])
async def test_a_consumer_the_api_would_refuse_is_a_tool_error_not_a_lost_claim(
    session: Session, logs: LogLines, db: Any, text: str
) -> None:
    """The API's refusal read as "the service did not answer, call again later",
    and the whole consumer was echoed in the answer."""
    started = await session.call("start", SANE_START)
    op_id = started["result"]["structuredContent"]["operation_id"]
    await finish_with_result(db, op_id, total=1)
    arguments = {"operation_id": op_id, "consumer": text, "max_wait": 1}
    result = (await session.call("await", arguments))["result"]
    assert result["isError"], result
    assert result["content"][0]["text"] == (
        "consumer must be at most 200 characters, none of them NUL"
    )
    check_logs(logs)
