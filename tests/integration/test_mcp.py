"""`jobwarden mcp` over stdio, driven by the official SDK's own client.

The server is a real subprocess (`python -m shared.agents.mcp`), the API a real
uvicorn server on loopback over a real PostgreSQL; the job's life is driven
through the ledger with real evidence. One server serves the module's tests
(`agent`), each test with its own API and database behind it; the tests that
need a server of their own (another token, no settings, the 2026 revision)
start one. Waiting is measured with signals: the
first progress notification says an `await` is following the job, and the
API tracker says when the stream it held has closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import mcp_types as types
import pytest
import pytest_asyncio
from mcp import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_PROTOCOL_VERSION

from shared.agents.mcp.catalog import TOOLS_BY_NAME
from shared.agents.mcp.schemas import TOOL_RESULT_SCHEMA
from shared.ledger.states import LocalState as S
from tests.integration.agent_support import advance, finish_with_result, make_token
from tests.integration.mcp_support import (
    EXPORT,
    SIGNAL_TIMEOUT_SECONDS,
    Api,
    Connected,
    SharedServer,
    awaiting,
    call,
    plugged_api,
    shared_stdio_server,
    stdio_session,
    structured,
)

UNKNOWN_OP = "op_00000000000000000000000000"
# Every hint stated, per tool: (readOnly, destructive, idempotent, openWorld).
HINTS = {
    "start": (False, False, False, True),
    "check": (True, False, True, False),
    "await": (False, False, True, False),
    "cancel": (False, True, True, True),
    "pending": (True, False, True, False),
}


@pytest_asyncio.fixture(scope="module")
async def shared() -> AsyncIterator[SharedServer]:
    async with shared_stdio_server() as server:
        yield server


@pytest_asyncio.fixture
async def api(shared: SharedServer, db: Any, db_url: str) -> AsyncIterator[Api]:
    async with plugged_api(shared, db, db_url) as plugged:
        yield plugged


@pytest.fixture
def token(shared: SharedServer, api: Api) -> str:
    """The agent "claude"'s token, valid in this test's database."""
    return shared.token.secret


@pytest.fixture
def agent(shared: SharedServer, api: Api) -> Connected:
    """The module's stdio server, connected, answering from this test's API as "claude"."""
    return shared.agent


async def test_handshake_is_the_newest_revision_and_2026_works_too(
    agent: Connected, api: Api, token: str
) -> None:
    init = agent.session.initialize_result
    assert init is not None and init.protocol_version == LATEST_HANDSHAKE_VERSION
    assert init.server_info.name == "jobwarden"
    assert init.instructions is not None and "NOT completion" in init.instructions
    assert init.capabilities.tasks is not None and init.capabilities.resources is not None
    async with stdio_session(api.url, token, modern=True) as modern:  # a server of its own
        assert modern.session.protocol_version == LATEST_PROTOCOL_VERSION == "2026-07-28"
        answer = await call(modern, "check", operation_id=UNKNOWN_OP)
        assert answer["status"] == "not_found"


async def test_every_tool_has_annotations_and_an_output_schema(agent: Connected) -> None:
    tools = {t.name: t for t in (await agent.session.list_tools()).tools}
    assert set(tools) == set(HINTS)
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None
        assert HINTS[name] == (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ), name
        assert tool.description == TOOLS_BY_NAME[name].description
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema["type"] == "object"
        assert tool.execution is not None
    assert "STARTED IS NOT DONE" in (tools["start"].description or "")
    assert "does NOT mean the job is cancelled" in (tools["cancel"].description or "")
    assert tools["await"].input_schema["required"] == ["operation_id"]
    assert tools["check"].output_schema == TOOL_RESULT_SCHEMA
    task_support = {n: t.execution.task_support for n, t in tools.items() if t.execution}
    assert task_support == {
        "start": "optional",
        "await": "optional",
        "check": "forbidden",
        "cancel": "forbidden",
        "pending": "forbidden",
    }


async def test_start_then_await_a_job_that_finishes(agent: Connected, db: Any) -> None:
    started = await call(agent, "start", **EXPORT, client_reference="r1")
    assert started["status"] == "running" and started["message"].startswith("STARTED and NOT")
    op_id = started["operation_id"]
    await finish_with_result(db, op_id, total=3)
    waited = await call(agent, "await", operation_id=op_id, max_wait=10)
    assert waited["status"] == "succeeded" and waited["counts"]["total"] == 3
    assert waited["result"] == {"rows": 3}
    assert waited["result_uri"] == f"jobwarden://operations/{op_id}/result"
    assert "result_ref" not in waited  # a path on the reconciler's host means nothing here
    assert await call(agent, "pending") == {"operations": [], "count": 0}


async def test_check_is_answered_while_an_await_waits(agent: Connected, db: Any) -> None:
    op_id = (await call(agent, "start", **EXPORT))["operation_id"]
    log, waiting = awaiting(agent, op_id)
    await log.until(bool)  # the await is following the job
    checked = await call(agent, "check", operation_id=op_id)
    assert checked["status"] == "running" and not waiting.done()
    await finish_with_result(db, op_id, total=2)
    async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
        waited = structured(await waiting)
    assert waited["status"] == "succeeded"


async def test_cancelling_an_await_ends_it_at_once(agent: Connected, api: Api) -> None:
    op_id = (await call(agent, "start", **EXPORT))["operation_id"]
    log, waiting = awaiting(agent, op_id)
    await log.until(bool)
    assert api.tracker.waits_in_flight == 1
    waiting.cancel()  # the SDK sends notifications/cancelled
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    # Without the cancel the server would hold the stream for up to 600 s.
    await api.tracker.until(lambda: api.tracker.waits_in_flight == 0)
    assert (await call(agent, "check", operation_id=op_id))["status"] == "running"


async def test_await_reports_each_transition_as_progress(agent: Connected, db: Any) -> None:
    op_id = (await call(agent, "start", **EXPORT))["operation_id"]
    log, waiting = awaiting(agent, op_id)
    await log.until(bool)
    await advance(db, op_id, S.OBSERVING)
    await log.until(lambda seen: any("-> observing" in (m or "") for _, m in seen))
    await finish_with_result(db, op_id, total=1)
    async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
        assert structured(await waiting)["status"] == "succeeded"
    # The SDK runs progress callbacks in their own tasks: wait, do not assume.
    await log.until(lambda seen: any("-> succeeded" in (m or "") for _, m in seen))
    values = [progress for progress, _ in log.seen]
    assert values == sorted(values) and len(set(values)) == len(values)


async def test_unknown_operation_is_not_found_never_failed(
    agent: Connected, api: Api, db: Any
) -> None:
    other = await make_token(db, "someone-else")
    async with stdio_session(api.url, other) as stranger:
        theirs = (await call(stranger, "start", **EXPORT))["operation_id"]
    for op_id in (UNKNOWN_OP, theirs):  # never started, or not ours to see
        checked = await call(agent, "check", operation_id=op_id)
        assert checked["status"] == "not_found" and checked["done"] is False
        assert "Do NOT start a new job" in checked["message"]
        waited = await call(agent, "await", operation_id=op_id, max_wait=600)
        assert waited["status"] == "not_found"
        cancelled = await call(agent, "cancel", operation_id=op_id, reason="x")
        assert cancelled["status"] == "not_found"


async def test_results_are_resources_read_through_the_protocol(agent: Connected, db: Any) -> None:
    session = agent.session
    done = (await call(agent, "start", **EXPORT))["operation_id"]
    running = (await call(agent, "start", **EXPORT, client_reference="r2"))["operation_id"]
    failures = [("row-7", "bad_email", "not an address")]
    await finish_with_result(db, done, total=10, failed_items=failures)
    waited = await call(agent, "await", operation_id=done, max_wait=5)
    assert waited["status"] == "completed_with_errors"
    result = await session.read_resource(waited["result_uri"])
    body = json.loads(_text_of(result))
    assert body["result"] == {"rows": 10} and body["counts"]["failed"] == 1
    items = json.loads(_text_of(await session.read_resource(waited["failed_items_uri"])))
    assert [i["item_key"] for i in items["items"]] == ["row-7"]
    operation = json.loads(
        _text_of(await session.read_resource(f"jobwarden://operations/{running}"))
    )
    assert operation["done"] is False and operation["operation_id"] == running
    listed = {r.uri for r in (await session.list_resources()).resources}
    assert {waited["result_uri"], f"jobwarden://operations/{running}"} <= listed
    assert f"jobwarden://operations/{running}/result" not in listed
    templates = (await session.list_resource_templates()).resource_templates
    assert {t.name for t in templates} == {"operation", "result", "failed-items"}
    for uri in (
        f"jobwarden://operations/{running}/result",  # no verified result yet
        f"jobwarden://operations/{UNKNOWN_OP}",
        "file:///etc/passwd",
    ):
        with pytest.raises(MCPError) as refused:
            await session.read_resource(uri)
        assert refused.value.error.code == INVALID_PARAMS


async def test_await_times_out_with_the_ids(agent: Connected, db: Any) -> None:
    op_id = (await call(agent, "start", **EXPORT))["operation_id"]
    await advance(db, op_id, S.OBSERVING)
    waited = await call(agent, "await", operation_id=op_id, max_wait=0.5)
    assert waited["status"] == "timed_out" and waited["operation_id"] == op_id
    assert waited["job_id"] == f"job_{op_id[-8:]}"
    assert "continues in the background" in waited["message"]
    cancelled = await call(agent, "cancel", operation_id=op_id, reason="not needed")
    assert cancelled["status"] == "running" and "NOT yet confirmed" in cancelled["message"]
    listed = await call(agent, "pending")
    assert [o["operation_id"] for o in listed["operations"]] == [op_id]


async def test_bad_arguments_are_tool_errors(agent: Connected) -> None:
    session = agent.session
    result = await session.call_tool("check", {})
    assert result.is_error and "operation_id is required" in _text_of_tool(result)
    result = await session.call_tool("await", {"operation_id": "op_x", "max_wait": -1})
    assert result.is_error and "max_wait" in _text_of_tool(result)
    result = await session.call_tool("start", {"provider": "sim", "kind": "x"})
    assert result.is_error and "request must be an object" in _text_of_tool(result)
    with pytest.raises(MCPError) as unknown:
        await session.call_tool("teleport", {})
    assert unknown.value.error.code == INVALID_PARAMS


async def test_without_api_settings_tools_say_what_is_missing() -> None:
    async with stdio_session(None, None) as agent:
        assert len((await agent.session.list_tools()).tools) == 5
        result = await agent.session.call_tool("pending", {})
    assert result.is_error and "JW_API_URL" in _text_of_tool(result)


def _text_of(result: types.ReadResourceResult) -> str:
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.mime_type == "application/json"
    return content.text


def _text_of_tool(result: types.CallToolResult) -> str:
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return text.text
