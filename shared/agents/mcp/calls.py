"""One `tools/call`: arguments checked, the tool run, its answer shaped for MCP.

Argument errors are tool results with isError (the model reads them and can
correct its call), worded as before the move to the SDK. Everything about the
job itself is an ordinary result whose `status` says what happened: a failed
job is not an error of the tool.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from shared.agents import tools
from shared.agents.client import AsyncJobwardenClient, JobwardenError
from shared.agents.mcp import view
from shared.agents.mcp.catalog import (
    DEFAULT_AWAIT_SECONDS,
    MAX_AWAIT_SECONDS,
    MAX_CONSUMER,
    MAX_REASON,
)
from shared.agents.mcp.waiting import Reporter, await_operation
from shared.agents.tools import ToolResult


class ToolInputError(ValueError):
    """Arguments a tool cannot use; reported to the model as a tool error."""


def optional_text(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ToolInputError(f"{key} must be a non-empty string")
    return value


def required_text(args: Mapping[str, Any], key: str) -> str:
    value = optional_text(args, key)
    if value is None:
        raise ToolInputError(f"{key} is required")
    return value


def recorded_text(args: Mapping[str, Any], key: str, max_chars: int) -> str | None:
    """Text the API records (a cancel's reason, a claim's consumer), held to its rules.

    Checked here because the tool could not tell the API's refusal of such a
    text from an outage: a NUL or an overlong reason came back as "state
    unknown, try again later", which the model would do, with the same text,
    for ever; an overlong consumer was echoed whole in the answer.
    """
    value = optional_text(args, key)
    if value is not None and ("\x00" in value or len(value) > max_chars):
        raise ToolInputError(f"{key} must be at most {max_chars} characters, none of them NUL")
    return value


def max_wait(args: Mapping[str, Any]) -> float:
    """The wait asked for, capped; NaN is refused like any other non-number.

    The SDK reads `NaN` in a message as a float, and NaN compares false with
    everything: it passed `<= 0`, survived `min` and made the wait unbounded.
    """
    value = args.get("max_wait", DEFAULT_AWAIT_SECONDS)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and math.isnan(value))
        or value <= 0
    ):
        raise ToolInputError("max_wait must be a positive number of seconds")
    return float(min(value, MAX_AWAIT_SECONDS))


def request_of(args: Mapping[str, Any]) -> dict[str, Any]:
    """The request to submit, as JSON can carry it to the API.

    The SDK reads `NaN` and `Infinity` (and `1e400`, read as infinity) in a
    message; JSON has no such numbers, so the call to the API could not be
    written and the tool raised (a JSON-RPC error with code 0, a traceback
    in the log) instead of telling the model what to fix.
    """
    request = args.get("request")
    if not isinstance(request, dict):
        raise ToolInputError("request must be an object: {body, method?, target?}")
    try:
        json.dumps(request, allow_nan=False)
    except ValueError:
        raise ToolInputError(
            "request must be JSON: NaN and Infinity (or a number too large for a double, "
            "read as Infinity) are not JSON numbers"
        ) from None
    return request


async def start(client: AsyncJobwardenClient, args: Mapping[str, Any]) -> ToolResult:
    return await tools.start_async(
        client,
        required_text(args, "provider"),
        request_of(args),
        kind=required_text(args, "kind"),
        client_reference=optional_text(args, "client_reference"),
    )


async def run(
    name: str, args: Mapping[str, Any], client: AsyncJobwardenClient, report: Reporter
) -> types.CallToolResult:
    """Run tool `name` (already known to exist) and shape its answer."""
    try:
        if name == "pending":
            return view.pending_result(await tools.pending_async(client))
        return view.tool_result(await _run_one(name, args, client, report))
    except ToolInputError as exc:
        return view.error_result(str(exc))
    except JobwardenError as exc:  # e.g. JW_API_URL / JW_API_TOKEN missing
        return view.error_result(f"jobwarden is not reachable or not configured: {exc}")


async def _run_one(
    name: str, args: Mapping[str, Any], client: AsyncJobwardenClient, report: Reporter
) -> ToolResult:
    if name == "start":
        return await start(client, args)
    if name == "check":
        return await tools.check_async(client, required_text(args, "operation_id"))
    if name == "await":
        return await await_operation(
            client,
            required_text(args, "operation_id"),
            max_wait(args),
            consumer=recorded_text(args, "consumer", MAX_CONSUMER),
            report=report,
        )
    if name == "cancel":
        operation_id = required_text(args, "operation_id")
        reason = required_text(args, "reason")
        recorded_text(args, "reason", MAX_REASON)
        return await tools.cancel_async(client, operation_id, reason)
    raise ToolInputError(f"unknown tool {name!r}")
