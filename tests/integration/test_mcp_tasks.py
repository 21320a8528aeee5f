"""MCP Tasks (2025-11-25) kept in the ledger, over stdio with the SDK's client.

A task is an operation: its id is the operation id, its status is read from
the ledger, so it survives the MCP server being killed. The state mapping
never runs ahead of the evidence: no `completed` before a verified result, no
`cancelled` before the provider confirmed the stop.

One server serves the module's tests (`agent`), each test with its own API
and database behind it; the killed server and the 2026 revision's are their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import pytest
import pytest_asyncio
from mcp import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND

from shared import ledger
from shared.agents.mcp.schemas import TOOL_RESULT_SCHEMA
from shared.ledger.states import LocalState as S
from tests.integration.agent_support import advance, fail_remotely, finish_with_result
from tests.integration.mcp_support import (
    EXPORT,
    SIGNAL_TIMEOUT_SECONDS,
    Api,
    Connected,
    SharedServer,
    cancel_task,
    create_task,
    get_task,
    kill_server_processes,
    list_tasks,
    new_tag,
    plugged_api,
    shared_stdio_server,
    stdio_session,
    structured,
    task_result,
)

RELATED_TASK = "io.modelcontextprotocol/related-task"


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


async def test_a_task_augmented_start_is_the_operation(agent: Connected, db: Any) -> None:
    created = await create_task(agent, "start", {**EXPORT, "client_reference": "t1"})
    task = created.task
    stored = await db.fetchrow(
        "SELECT operation_id, requested_by FROM operations WHERE client_reference = 't1'"
    )
    assert task.task_id == stored["operation_id"] and stored["requested_by"] == "agent:claude"
    assert task.status == "working" and task.ttl is None
    assert (task.status_message or "").startswith("STARTED and NOT")
    assert (await get_task(agent, task.task_id)).status == "working"
    listed = await list_tasks(agent)
    assert [t.task_id for t in listed.tasks] == [task.task_id]
    again = await create_task(agent, "await", {"operation_id": task.task_id})
    assert again.task.task_id == task.task_id  # one operation, one task id


async def test_tasks_survive_a_killed_server(api: Api, token: str, db: Any) -> None:
    tag = new_tag()
    async with stdio_session(api.url, token, tag=tag) as agent:  # a server of its own
        task_id = (await create_task(agent, "start", EXPORT)).task.task_id
        assert kill_server_processes(tag) == 1  # SIGKILL: nothing kept in it can survive
    await finish_with_result(db, task_id, total=4)
    async with stdio_session(api.url, token) as agent:  # a new server, a new client session
        task = await get_task(agent, task_id)
        assert task.status == "completed" and "verified" in (task.status_message or "")
        result = await task_result(agent, task_id)
        assert result.meta == {RELATED_TASK: {"taskId": task_id}}
        payload = structured(result)
        jsonschema.validate(payload, TOOL_RESULT_SCHEMA)
        assert payload["status"] == "succeeded" and payload["counts"]["total"] == 4
        assert not result.is_error


# Each state an operation can rest in, the task status it shows, words of its message.
MAPPING = [
    (S.ACCEPTED, "working", "STARTED and NOT"),
    (S.RESULT_COLLECTING, "working", "NOT complete"),  # done remotely, not yet verified
    (S.CANCEL_REQUESTED, "working", "NOT yet confirmed"),
    (S.NEEDS_ATTENTION, "working", "Needs a human decision"),
    (S.RESULT_TIMED_OUT, "working", "may still be running"),
    (S.RESULT_UNAVAILABLE, "working", "could not be"),
    (S.RESULT_VALIDATION_FAILED, "working", "failed our checks"),
    (S.CANCELLATION_UNCONFIRMED, "working", "NOT confirmed"),
    (S.CANCELLED, "cancelled", "provider confirmed"),
    (S.ABANDONED, "cancelled", "no job was created"),
]


async def test_the_task_status_never_runs_ahead_of_the_ledger(agent: Connected, db: Any) -> None:
    shown = []
    for state, _, _ in MAPPING:
        task_id = await create_task(agent, "start", {**EXPORT, "client_reference": state})
        await advance(db, task_id.task.task_id, state)
        task = await get_task(agent, task_id.task.task_id)
        shown.append((state, task.status, task.status_message or ""))
    assert [(state, status) for state, status, _ in shown] == [(s, t) for s, t, _ in MAPPING]
    for (state, _, message), (_, _, words) in zip(shown, MAPPING, strict=True):
        assert words in message, (state, message)


async def test_failed_and_succeeded_map_to_failed_and_completed(agent: Connected, db: Any) -> None:
    failed = (await create_task(agent, "start", EXPORT)).task.task_id
    succeeded = (await create_task(agent, "start", {**EXPORT, "client_reference": "s"})).task
    await fail_remotely(db, failed, "worker_crashed", "the worker died")
    await finish_with_result(db, succeeded.task_id, total=1)
    assert (await get_task(agent, failed)).status == "failed"
    assert (await get_task(agent, succeeded.task_id)).status == "completed"
    answer = await task_result(agent, failed)
    assert answer.is_error and structured(answer)["status"] == "failed"
    assert structured(answer)["error"]["code"] == "worker_crashed"


async def test_a_requested_cancel_stays_working_until_confirmed(agent: Connected, db: Any) -> None:
    task_id = (await create_task(agent, "start", EXPORT)).task.task_id
    await advance(db, task_id, S.OBSERVING)
    cancelled = await cancel_task(agent, task_id)
    assert cancelled.status == "working"
    assert "NOT yet confirmed" in (cancelled.status_message or "")
    assert (await ledger.load_operation(db, task_id)).state is S.CANCEL_REQUESTED
    assert (await get_task(agent, task_id)).status == "working"
    await advance(db, task_id, S.CANCELLED)  # the provider's confirmation, recorded
    assert (await get_task(agent, task_id)).status == "cancelled"
    with pytest.raises(MCPError) as terminal:
        await cancel_task(agent, task_id)
    assert terminal.value.error.code == INVALID_PARAMS


async def test_tasks_result_waits_for_a_terminal_state(agent: Connected, api: Api, db: Any) -> None:
    task_id = (await create_task(agent, "start", EXPORT)).task.task_id
    pending = asyncio.create_task(task_result(agent, task_id))
    await api.tracker.until(lambda: api.tracker.waits_in_flight == 1)
    assert not pending.done()
    await finish_with_result(db, task_id, total=2)
    async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
        result = await pending
    assert structured(result)["status"] == "succeeded"


async def test_task_errors_are_protocol_errors(agent: Connected, api: Api, token: str) -> None:
    with pytest.raises(MCPError) as unknown:
        await get_task(agent, "op_00000000000000000000000000")
    assert unknown.value.error.code == INVALID_PARAMS
    with pytest.raises(MCPError) as forbidden:
        await create_task(agent, "check", {"operation_id": "op_00000000000000000000000000"})
    assert forbidden.value.error.code == METHOD_NOT_FOUND
    with pytest.raises(MCPError) as refused:  # nothing started: no task to hand out
        await create_task(agent, "start", {**EXPORT, "provider": "nope"})
    assert refused.value.error.code == INVALID_PARAMS
    assert "NOT started" in refused.value.error.message
    async with stdio_session(api.url, token, modern=True) as modern:  # tasks left the core
        with pytest.raises(MCPError) as gone:
            await list_tasks(modern)
        assert gone.value.error.code == METHOD_NOT_FOUND
