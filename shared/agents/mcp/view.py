"""A `ToolResult` as an MCP tool result: structured content, text, resource links.

The Python tool wrapper reports `result_ref` (where the reconciler stored the
bytes, a path on its host) and `errors_ref` (an API path). Neither means
anything to an MCP client, so the MCP view replaces them with resource URIs the
client reads through the protocol (`resources/read`), and adds a
`resource_link` content block so a model sees where the result lives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from shared.agents.tools import ToolResult

SCHEME = "jobwarden"
_SUCCESS = frozenset({"succeeded", "completed_with_errors"})


def operation_uri(operation_id: str) -> str:
    return f"{SCHEME}://operations/{operation_id}"


def result_uri(operation_id: str) -> str:
    return f"{SCHEME}://operations/{operation_id}/result"


def failed_items_uri(operation_id: str) -> str:
    return f"{SCHEME}://operations/{operation_id}/failed-items"


def structured(result: ToolResult) -> dict[str, Any]:
    """The fields of the output schema, in its order."""
    op_id = result.operation_id
    has_result = op_id is not None and result.status in _SUCCESS
    return {
        "status": result.status,
        "operation_id": op_id,
        "job_id": result.job_id,
        "done": result.done,
        "message": result.message,
        "outcome": result.outcome,
        "needs_human": result.needs_human,
        "result_uri": result_uri(op_id) if has_result and op_id else None,
        "result": result.result,
        "counts": result.counts,
        "failed_items_uri": failed_items_uri(op_id) if op_id and result.errors_ref else None,
        "error": result.error,
        "poll_after_seconds": result.poll_after_seconds,
        "client_reference": result.client_reference,
        "claimed": result.claimed,
    }


def _text(payload: dict[str, Any]) -> types.TextContent:
    return types.TextContent(text=json.dumps(payload, ensure_ascii=False, default=str))


def tool_result(result: ToolResult, *, is_error: bool = False) -> types.CallToolResult:
    payload = structured(result)
    content: list[types.ContentBlock] = [_text(payload)]
    if payload["result_uri"]:
        content.append(
            types.ResourceLink(
                uri=payload["result_uri"],
                name=f"result of {result.operation_id}",
                description="The verified result (read it with resources/read).",
                mime_type="application/json",
            )
        )
    return types.CallToolResult(content=content, structured_content=payload, is_error=is_error)


def pending_result(results: Sequence[ToolResult]) -> types.CallToolResult:
    payload = {"operations": [structured(r) for r in results], "count": len(results)}
    return types.CallToolResult(content=[_text(payload)], structured_content=payload)


def error_result(message: str) -> types.CallToolResult:
    """Arguments the tool cannot use, or jobwarden not configured: the model can fix these."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
