"""MCP Tasks (protocol 2025-11-25) kept in the ledger: a task is an operation.

A task-augmented `tools/call` (`start`, or `await` on an existing operation)
answers with a task whose id is the operation id; `tasks/get`, `tasks/result`,
`tasks/list` and `tasks/cancel` read and write the operation through the API.
Nothing about a task lives in this process, so a task survives a restart of
the MCP server and of the client: any server reached with the same token
answers for the same id.

The SDK (2.x) ships the 2025-11-25 task types but no task machinery (its
experimental in-memory task store was removed with the move of Tasks to an
extension), so `LedgerTasks` is the task store here: create, get, result,
list and cancel, each one API call away from the ledger.

State mapping (the README draws it as a table): the task status never says
`completed` before the result is verified, nor `cancelled` before the
provider confirmed the stop. A requested cancel stays `working`, and its
status message says the cancel is not confirmed. Operations waiting for an
operator stay `working` too: `failed` would invite a resubmit of a job that
may have run, and `input_required` would ask the client for input that only
an operator can give. The status message is always the agent view's message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND

from shared.agents import tools
from shared.agents.client import (
    ApiProblem,
    AsyncJobwardenClient,
    JobwardenError,
)
from shared.agents.mcp import view
from shared.agents.mcp.calls import ToolInputError, required_text, start
from shared.agents.mcp.catalog import TASKS_PROTOCOL_VERSION, TOOLS_BY_NAME
from shared.agents.mcp.sources import ClientSource
from shared.agents.tools import BACKOFF_CAP_SECONDS, next_delay
from shared.ids import is_operation_id

RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
LIST_PAGE_SIZE = 50
CANCEL_REASON = "cancelled through MCP tasks/cancel"
_OUTCOME_STATUS: dict[str, types.TaskStatus] = {
    "succeeded": "completed",
    "completed_with_errors": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}
TERMINAL_TASK = frozenset({"completed", "failed", "cancelled"})


def task_status(resource: Mapping[str, Any]) -> types.TaskStatus:
    """The task status of an operation resource (see the module docstring)."""
    outcome = resource.get("metadata", {}).get("outcome")
    if not resource.get("done") or outcome is None:
        return "working"
    return _OUTCOME_STATUS.get(str(outcome), "working")  # timed_out, needs_attention


def task_of(resource: Mapping[str, Any]) -> types.Task:
    meta = resource.get("metadata", {})
    poll = meta.get("poll_after_seconds")
    return types.Task(
        task_id=str(resource.get("operation_id")),
        status=task_status(resource),
        status_message=resource.get("message"),
        created_at=str(meta.get("created_at")),
        last_updated_at=str(meta.get("updated_at")),
        ttl=None,  # the ledger keeps operations; no expiry to announce
        poll_interval=int(poll * 1000) if isinstance(poll, int | float) and poll > 0 else None,
    )


def wire(task: types.Task) -> dict[str, Any]:
    """A task as sent: `ttl` is required on the wire even when null (unlimited)."""
    return {**task.model_dump(by_alias=True, mode="json", exclude_none=True), "ttl": task.ttl}


def _related(task_id: str) -> dict[str, Any]:
    return {RELATED_TASK: {"taskId": task_id}}


def _unknown_task(task_id: str) -> MCPError:
    if not is_operation_id(task_id):  # not repeated: it may be hostile
        return MCPError(
            code=INVALID_PARAMS,
            message="No such task: a task id here is an operation id (op_ + 26 characters)",
        )
    return MCPError(
        code=INVALID_PARAMS,
        message=f"No task {task_id}: no operation with that id is visible to this token",
        data={"taskId": task_id},
    )


def _unreadable(error: JobwardenError) -> MCPError:
    return MCPError(code=INTERNAL_ERROR, message=f"jobwarden could not be read: {error}")


class LedgerTasks:
    """The task store: every call goes to the API with the caller's own token."""

    def __init__(self, source: ClientSource) -> None:
        self._source = source

    async def _read(self, client: AsyncJobwardenClient, task_id: str) -> dict[str, Any]:
        """The operation behind `task_id`; an id that is not an operation id is never sent
        (it goes into a URL path: "../openapi.json" read the API's document)."""
        if not is_operation_id(task_id):
            raise _unknown_task(task_id)
        try:
            return await client.get(task_id)
        except ApiProblem as exc:
            if exc.status == 404:
                raise _unknown_task(task_id) from None
            raise _unreadable(exc) from None
        except JobwardenError as exc:
            raise _unreadable(exc) from None

    async def create(self, params: types.CallToolRequestParams) -> dict[str, Any]:
        """Run a task-augmented `tools/call`; the answer is a CreateTaskResult (wire dict)."""
        spec = TOOLS_BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        if spec.task_support == "forbidden":
            raise MCPError(
                code=METHOD_NOT_FOUND,
                message=f"Tool {params.name!r} does not run as a task; call it without `task`.",
            )
        args = params.arguments or {}
        client = self._client()
        try:
            if spec.name == "start":
                resource = await self._started(client, args)
            else:
                if args.get("consumer") is not None:
                    raise ToolInputError(
                        "a task cannot carry a consumer: once the task is completed, call "
                        "await with the consumer to claim the result"
                    )
                resource = await self._read(client, required_text(args, "operation_id"))
        except ToolInputError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return {
            "task": wire(task_of(resource)),
            "_meta": {IMMEDIATE_RESPONSE: resource.get("message")},
        }

    async def _started(self, client: AsyncJobwardenClient, args: Mapping[str, Any]) -> Any:
        """Submit; a task exists only once the ledger holds the operation."""
        result = await start(client, args)
        if result.operation_id is None:
            code = INVALID_PARAMS if result.status == "failed" else INTERNAL_ERROR
            raise MCPError(code=code, message=result.message, data=view.structured(result))
        return await self._read(client, result.operation_id)

    async def get(self, task_id: str) -> dict[str, Any]:
        """A GetTaskResult (wire dict)."""
        return wire(task_of(await self._read(self._client(), task_id)))

    async def result(self, task_id: str) -> types.CallToolResult:
        """The task's final tool result; blocks while the task is not terminal (the spec's rule)."""
        client = self._client()
        resource = await _until_final(client, task_id, await self._read(client, task_id))
        final = tools.from_resource(resource)
        answer = view.tool_result(final, is_error=task_status(resource) == "failed")
        return answer.model_copy(update={"meta": _related(task_id)})

    async def list(self, cursor: str | None) -> dict[str, Any]:
        """A ListTasksResult (wire dict), the caller's operations newest first."""
        client = self._client()
        try:
            page = await client.list_operations(
                mine=True, page_size=LIST_PAGE_SIZE, page_token=cursor
            )
        except ApiProblem as exc:
            if exc.status in (400, 422):
                raise MCPError(code=INVALID_PARAMS, message="Invalid cursor") from None
            raise _unreadable(exc) from None
        except JobwardenError as exc:
            raise _unreadable(exc) from None
        listed: dict[str, Any] = {"tasks": [wire(task_of(op)) for op in page["operations"]]}
        if page.get("next_page_token"):
            listed["nextCursor"] = page["next_page_token"]
        return listed

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """Ask for the stop; the task stays `working` until the provider confirms it.

        The answer is a CancelTaskResult (wire dict).
        """
        client = self._client()
        resource = await self._read(client, task_id)
        if task_status(resource) in TERMINAL_TASK:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Task {task_id} is already {task_status(resource)}: nothing to cancel",
            )
        try:
            resource = await client.cancel(task_id, CANCEL_REASON)
        except ApiProblem as exc:
            if exc.status == 404:
                raise _unknown_task(task_id) from None
            raise _unreadable(exc) from None
        except JobwardenError as exc:
            raise _unreadable(exc) from None
        task = task_of(resource)
        note = resource.get("cancel", {}).get("message")
        if note and task.status == "working":
            task = task.model_copy(update={"status_message": note})
        return wire(task)

    def _client(self) -> AsyncJobwardenClient:
        try:
            return self._source.client()
        except JobwardenError as exc:
            raise MCPError(
                code=INTERNAL_ERROR, message=f"jobwarden is not configured: {exc}"
            ) from None


async def _until_final(
    client: AsyncJobwardenClient, task_id: str, last: dict[str, Any]
) -> dict[str, Any]:
    """Wait for the stream's `end` (a terminal state); after a failure, back off and retry."""
    delay: float | None = None
    while task_status(last) not in TERMINAL_TASK:
        try:
            async with contextlib.aclosing(client.events(task_id)) as events:
                async for event in events:
                    if event.name == "end":
                        return event.data
        except JobwardenError:
            pass  # the stream broke: say nothing, try again
        hint = last.get("metadata", {}).get("poll_after_seconds")
        delay = next_delay(delay, hint, BACKOFF_CAP_SECONDS)
        await asyncio.sleep(delay)
        with contextlib.suppress(JobwardenError):
            last = await client.get(task_id)
    return last


class TaskMiddleware:
    """Tasks on the handshake revision that defines them, around the SDK's dispatch.

    The SDK validates a `tools/call` result against CallToolResult, which a
    CreateTaskResult is not, so a task-augmented call is answered here before
    the tool handler (a middleware's own answer is sent as it is). The same
    place adds the `tasks` capability to an `initialize` that negotiated
    2025-11-25, and to nothing else.
    """

    def __init__(self, tasks: LedgerTasks) -> None:
        self._tasks = tasks

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize":
            return _with_tasks_capability(await call_next(ctx))
        if ctx.method == "tools/call" and _task_augmented(ctx):
            params = types.CallToolRequestParams.model_validate(ctx.params, by_name=False)
            return await self._tasks.create(params)
        return await call_next(ctx)


def _task_augmented(ctx: ServerRequestContext[Any, Any]) -> bool:
    """A `tools/call` request (not a notification) that asks for a task.

    Middleware sees notifications too: a notification named `tools/call`
    (no id, so no answer) once started a job nobody was told about.
    """
    params = ctx.params
    return (
        ctx.request_id is not None
        and ctx.protocol_version == TASKS_PROTOCOL_VERSION
        and isinstance(params, Mapping)
        and params.get("task") is not None
    )


def _with_tasks_capability(result: HandlerResult) -> HandlerResult:
    if not isinstance(result, dict) or result.get("protocolVersion") != TASKS_PROTOCOL_VERSION:
        return result
    capabilities = dict(result.get("capabilities") or {})
    capabilities["tasks"] = CAPABILITY
    return {**result, "capabilities": capabilities}


def register(server: Server[Any], tasks: LedgerTasks) -> None:
    """Serve tasks/* (2025-11-25 only) and intercept task-augmented calls on `server`."""

    def gated(ctx: ServerRequestContext[Any, Any]) -> None:
        if ctx.protocol_version != TASKS_PROTOCOL_VERSION:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=ctx.method)

    async def get(
        ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams
    ) -> HandlerResult:
        gated(ctx)
        return await tasks.get(params.task_id)

    async def result(
        ctx: ServerRequestContext[Any, Any], params: types.GetTaskPayloadRequestParams
    ) -> HandlerResult:
        gated(ctx)
        return await tasks.result(params.task_id)

    async def listed(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> HandlerResult:
        gated(ctx)
        return await tasks.list(params.cursor)

    async def cancel(
        ctx: ServerRequestContext[Any, Any], params: types.CancelTaskRequestParams
    ) -> HandlerResult:
        gated(ctx)
        return await tasks.cancel(params.task_id)

    server.add_request_handler("tasks/get", types.GetTaskRequestParams, get)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, result)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, listed)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel)
    server.middleware.append(TaskMiddleware(tasks))
