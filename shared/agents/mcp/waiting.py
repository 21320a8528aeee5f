"""The `await` tool: wait on the operation's event stream, reporting each transition.

The API's event stream is woken by the same NOTIFY as its long-poll, so the
wait costs no polling and each transition arrives as it is committed; each one
becomes a progress notification. Waiting on the stream (rather than on the
long-poll) also means a cancelled tool call closes the one request it holds,
and the API stops following the operation at once: a plain long-poll handler
is not told that its client went away.

If the stream fails, the rest of the wait falls back to the long-poll wrapper
(`tools.await_operation_async`), so an `await` answers exactly as the Python
tool wrapper does: the same five statuses, the same claim, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from shared.agents import tools
from shared.agents.client import ApiUnreachable, AsyncJobwardenClient, JobwardenError
from shared.agents.tools import ToolResult
from shared.ledger.states import INBOX, TERMINAL

# Progress so far (a count of transitions seen) and what happened, for the client.
Reporter = Callable[[float, str], Awaitable[None]]
# States whose row has an outcome, i.e. `done` in the agent view: after a
# transition into one, re-read the operation to see whether the wait is over.
DONE_STATES = frozenset(state.value for state in TERMINAL | INBOX)


async def _ignore(_progress: float, _message: str) -> None:
    return None


def progress_message(transition: Mapping[str, Any]) -> str:
    before = transition.get("from_state") or "recorded"
    cause = transition.get("cause")
    words = f"{before} -> {transition.get('to_state')}"
    return f"{words}: {cause}" if cause else words


async def follow(
    client: AsyncJobwardenClient, operation_id: str, report: Reporter
) -> dict[str, Any]:
    """Follow the event stream until the operation is done; returns its resource.

    The stream starts at the operation's first transition, so one that
    happened before we subscribed is replayed rather than missed.
    """
    seen = 0
    async with contextlib.aclosing(client.events(operation_id)) as events:
        async for event in events:
            if event.name == "end":
                return event.data
            if event.name != "transition":
                continue
            seen += 1
            await report(seen, progress_message(event.data))
            if event.data.get("to_state") in DONE_STATES:
                resource = await client.get(operation_id)
                if resource.get("done"):
                    return resource
    raise ApiUnreachable("the event stream ended before the operation was done")


async def await_operation(
    client: AsyncJobwardenClient,
    operation_id: str,
    max_wait: float,
    *,
    consumer: str | None = None,
    report: Reporter = _ignore,
) -> ToolResult:
    """Wait up to max_wait; exactly one of the wrapper's statuses, never an exception."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + max_wait
    try:
        last = await client.get(operation_id, within=tools.time_left(deadline, loop.time()))
    except JobwardenError as exc:
        return tools.read_failed(operation_id, exc)
    if not last.get("done"):
        try:
            last = await _until_done_or(client, operation_id, deadline, report)
        except JobwardenError as exc:
            remaining = deadline - loop.time()
            if remaining <= 0:  # a 401 then is a refused token, not lost contact
                return tools.wait_ended_by(operation_id, last, loop.time() - started, exc)
            return await tools.await_operation_async(
                client, operation_id, remaining, consumer=consumer, first=last
            )
    result = tools.from_resource(last, gave_up_after=loop.time() - started)
    within = tools.claim_time(deadline, loop.time())
    return await tools.claim_if_succeeded_async(client, result, consumer, within=within)


async def _until_done_or(
    client: AsyncJobwardenClient,
    operation_id: str,
    deadline: float,
    report: Reporter,
) -> dict[str, Any]:
    """The done resource, or the operation as it stands when the deadline (the
    loop's time) passes; that last read has the grace alone, never 10 s more."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout_at(deadline):
            return await follow(client, operation_id, report)
    return await client.get(operation_id, within=tools.time_left(deadline, loop.time()))
