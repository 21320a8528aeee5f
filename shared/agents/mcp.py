"""`jobwarden mcp`: the agent tools as a Model Context Protocol server on stdio.

Minimal and hand-written: JSON-RPC 2.0, one message per line on stdin/stdout
(`initialize`, `notifications/initialized`, `ping`, `tools/list`,
`tools/call`). stdout carries protocol messages only; diagnostics go to
stderr. Requests are served one at a time, so a long `await` delays the next
call: models call tools sequentially, and a bounded max_wait keeps it short.

The tools talk to the jobwarden API with `JW_API_URL` and `JW_API_TOKEN`; the
token names the agent, so `pending` lists this agent's operations only.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from shared.agents import tools as agent_tools
from shared.agents.client import JobwardenClient, JobwardenError
from shared.agents.tools import ToolResult

log = logging.getLogger("jobwarden.mcp")

SERVER_NAME = "jobwarden"
SERVER_VERSION = "0.1.0"
# Newest first; we answer with the client's version when we know it.
PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
# Default and ceiling of the `await` tool: long enough for most exports, short
# enough that a tool call does not hang a conversation (seed: 2-10 minutes).
DEFAULT_AWAIT_SECONDS = 120.0
MAX_AWAIT_SECONDS = 600.0

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

_OPERATION_ID = {
    "type": "string",
    "description": "The operation_id returned by `start` (op_...).",
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "start",
        "title": "Start a long-running job",
        "description": (
            "Start a long-running job at a provider and return immediately. STARTED IS NOT "
            "DONE: the answer has status 'running' and you must not report success from it. "
            "Save the operation_id, then call `await` (blocks up to max_wait seconds) or "
            "`check` later. Reusing the same client_reference with the same request returns "
            "the same operation instead of starting a second job."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "provider": {"type": "string", "description": "Configured provider name."},
                "kind": {"type": "string", "description": "What the job is, e.g. 'export'."},
                "request": {
                    "type": "object",
                    "description": "{body, method?, target?}: what to send to the provider.",
                    "properties": {
                        "method": {"type": "string"},
                        "target": {"type": "string"},
                        "body": {},
                    },
                    "required": ["body"],
                },
                "client_reference": {
                    "type": "string",
                    "description": "Your idempotency key for this job (recommended).",
                },
            },
            "required": ["provider", "kind", "request"],
        },
    },
    {
        "name": "check",
        "title": "Check a job once",
        "description": (
            "Read an operation once, without waiting. status 'running' means NOT complete: do "
            "not report success; check again after poll_after_seconds or call `await`. Final "
            "statuses: succeeded, completed_with_errors (some items failed: read counts), "
            "failed, cancelled, timed_out (not finished; do not resubmit)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"operation_id": _OPERATION_ID},
            "required": ["operation_id"],
        },
    },
    {
        "name": "await",
        "title": "Wait for a job",
        "description": (
            "Wait until the operation finishes or max_wait seconds pass, then return exactly "
            "one of: succeeded, completed_with_errors, failed, cancelled, timed_out. "
            "timed_out means the job may STILL BE RUNNING: do not report success and do not "
            "start it again; keep the operation_id and check later. Pass `consumer` to claim "
            "the completion: act on a success only when claimed is true."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "operation_id": _OPERATION_ID,
                "max_wait": {
                    "type": "number",
                    "description": f"Seconds to wait (default {DEFAULT_AWAIT_SECONDS:.0f}, "
                    f"max {MAX_AWAIT_SECONDS:.0f}).",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_AWAIT_SECONDS,
                },
                "consumer": {
                    "type": "string",
                    "description": "Name of the next step that acts on the result.",
                },
            },
            "required": ["operation_id"],
        },
    },
    {
        "name": "cancel",
        "title": "Request cancellation",
        "description": (
            "Ask for a job to be cancelled. This records the request; it does NOT mean the job "
            "is cancelled. Only the provider can confirm that: call `check` or `await` until "
            "the status is cancelled (or another final status: the job may still finish)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "operation_id": _OPERATION_ID,
                "reason": {"type": "string", "description": "Why, for the audit trail."},
            },
            "required": ["operation_id", "reason"],
        },
    },
    {
        "name": "pending",
        "title": "List my unfinished jobs",
        "description": (
            "List the jobs you started that are not over yet (including those waiting for a "
            "human). Call this at the start of every run instead of trusting job ids "
            "remembered in the conversation."
        ),
        "inputSchema": {"type": "object", "properties": {}},
    },
]


class ToolInputError(ValueError):
    """Arguments a tool cannot use; reported to the model as a tool error."""


def _optional(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ToolInputError(f"{key} must be a non-empty string")
    return value


def _required(args: Mapping[str, Any], key: str) -> str:
    value = _optional(args, key)
    if value is None:
        raise ToolInputError(f"{key} is required")
    return value


def _max_wait(args: Mapping[str, Any]) -> float:
    value = args.get("max_wait", DEFAULT_AWAIT_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolInputError("max_wait must be a positive number of seconds")
    return float(min(value, MAX_AWAIT_SECONDS))


class ToolServer:
    """The JSON-RPC dispatcher; `client_factory` is called once, on first tool use."""

    def __init__(self, client_factory: Callable[[], JobwardenClient]) -> None:
        self._client_factory = client_factory
        self._client: JobwardenClient | None = None

    def client(self) -> JobwardenClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -------------------------------------------------------------- tools

    def call_tool(self, name: str, args: Mapping[str, Any]) -> Any:
        client = self.client()
        if name == "start":
            request = args.get("request")
            if not isinstance(request, dict):
                raise ToolInputError("request must be an object: {body, method?, target?}")
            return agent_tools.start(
                client,
                _required(args, "provider"),
                request,
                kind=_required(args, "kind"),
                client_reference=_optional(args, "client_reference"),
            )
        if name == "check":
            return agent_tools.check(client, _required(args, "operation_id"))
        if name == "await":
            return agent_tools.await_operation(
                client,
                _required(args, "operation_id"),
                _max_wait(args),
                consumer=_optional(args, "consumer"),
            )
        if name == "cancel":
            return agent_tools.cancel(
                client, _required(args, "operation_id"), _required(args, "reason")
            )
        if name == "pending":
            return agent_tools.pending(client)
        raise ToolInputError(f"unknown tool {name!r}")

    def _tools_call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise ToolInputError("tools/call needs a tool name and an arguments object")
        try:
            outcome = self.call_tool(name, args)
        except ToolInputError as exc:
            return _tool_error(str(exc))
        except JobwardenError as exc:  # e.g. JW_API_URL / JW_API_TOKEN missing
            return _tool_error(f"jobwarden is not reachable or not configured: {exc}")
        if isinstance(outcome, ToolResult):
            payload: Any = outcome.to_dict()
        else:
            payload = {"operations": [r.to_dict() for r in outcome], "count": len(outcome)}
        text = json.dumps(payload, ensure_ascii=False, default=str)
        structured = payload if isinstance(payload, dict) else {"result": payload}
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": False,
        }

    # -------------------------------------------------------------- protocol

    def handle(self, message: Any) -> dict[str, Any] | None:
        """One JSON-RPC message in, its response out (None for notifications)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method = message.get("method")
        msg_id = message.get("id")
        is_notification = "id" not in message
        if not isinstance(method, str):
            return None if is_notification else _error(msg_id, INVALID_REQUEST, "no method")
        params = message.get("params") or {}
        try:
            result = self._dispatch(method, params)
        except _RpcError as exc:
            return None if is_notification else _error(msg_id, exc.code, str(exc))
        except ToolInputError as exc:
            return None if is_notification else _error(msg_id, INVALID_PARAMS, str(exc))
        except Exception:
            log.exception("error handling %s", method)
            return None if is_notification else _error(msg_id, INTERNAL_ERROR, "internal error")
        if is_notification:
            return None
        return {"jsonrpc": "2.0", "id": msg_id, "result": result}

    def _dispatch(self, method: str, params: Any) -> Any:
        if method == "initialize":
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
            return {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
                "instructions": (
                    "Long-running jobs: `start` returns at once and is NOT completion. Use "
                    "`await` to wait (bounded) and `check` to read. Never report success "
                    "unless the status is succeeded (or completed_with_errors, after "
                    "reviewing the counts). Call `pending` at the start of every run."
                ),
            }
        if method.startswith("notifications/"):
            return None
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": TOOLS}
        if method == "tools/call":
            if not isinstance(params, dict):
                raise ToolInputError("params must be an object")
            return self._tools_call(params)
        raise _RpcError(METHOD_NOT_FOUND, f"method {method!r} not found")


class _RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def serve(server: ToolServer, stdin: TextIO, stdout: TextIO) -> None:
    """Read messages line by line until EOF; write one response line per request."""
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            response: dict[str, Any] | None = _error(None, PARSE_ERROR, "invalid JSON")
        else:
            if isinstance(message, list):  # batches were removed from MCP in 2025-06-18
                response = _error(None, INVALID_REQUEST, "batches are not supported")
            else:
                response = server.handle(message)
        if response is not None:
            stdout.write(json.dumps(response, ensure_ascii=False, default=str) + "\n")
            stdout.flush()


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = ToolServer(JobwardenClient.from_env)
    try:
        serve(server, sys.stdin, sys.stdout)
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
