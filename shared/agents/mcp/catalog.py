"""What the MCP server offers models: the tools, their words, schemas and hints.

The descriptions and the instructions are the valuable part: they are written
for a model that will otherwise report success for a job that only started,
or resubmit a job it lost track of. They are kept as they were before the move
to the SDK; the sentences added since (not_found, result_uri, tasks) are
appended, never rewritten into them.

Annotations are stated for every hint, true or false, rather than left to the
spec's defaults (which assume a destructive, open-world tool): a client
deciding whether to ask the user first should not have to know the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

import mcp_types as types

from shared.agents.mcp.schemas import PENDING_SCHEMA, TOOL_RESULT_SCHEMA

SERVER_NAME = "jobwarden"
# Default and ceiling of the `await` tool: long enough for most exports, short
# enough that a tool call does not hang a conversation (seed: 2-10 minutes).
DEFAULT_AWAIT_SECONDS = 120.0
MAX_AWAIT_SECONDS = 600.0
# What the API records of a cancel's reason and a claim's consumer, at most
# (receiver/api/models.py, which this package does not import).
MAX_REASON = 500
MAX_CONSUMER = 200
# The protocol revision that carries Tasks (removed from the core protocol
# in 2026-07-28, where they continue as an extension this server does not
# speak yet).
TASKS_PROTOCOL_VERSION = "2025-11-25"

INSTRUCTIONS = (
    "Long-running jobs: `start` returns at once and is NOT completion. Use "
    "`await` to wait (bounded) and `check` to read. Never report success "
    "unless the status is succeeded (or completed_with_errors, after "
    "reviewing the counts). Call `pending` at the start of every run."
    " A verified result is an MCP resource: read the result_uri a tool returns."
)

TaskSupport = Literal["forbidden", "optional", "required"]


def server_version() -> str:
    try:
        return metadata.version("jobwarden")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0.0.0"


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    # Task-augmented calls (2025-11-25): only the tools whose answer is an
    # operation that outlives the call.
    task_support: TaskSupport = "forbidden"

    def definition(self, protocol_version: str) -> types.Tool:
        execution = (
            types.ToolExecution(task_support=self.task_support)
            if protocol_version == TASKS_PROTOCOL_VERSION
            else None
        )
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            execution=execution,
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=self.open_world,
            ),
        )


_OPERATION_ID = {
    "type": "string",
    "description": "The operation_id returned by `start` (op_...).",
}

START = ToolSpec(
    name="start",
    title="Start a long-running job",
    description=(
        "Start a long-running job at a provider and return immediately. STARTED IS NOT "
        "DONE: the answer has status 'running' and you must not report success from it. "
        "Save the operation_id, then call `await` (blocks up to max_wait seconds) or "
        "`check` later. Reusing the same client_reference with the same request returns "
        "the same operation instead of starting a second job."
    ),
    input_schema={
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
    output_schema=TOOL_RESULT_SCHEMA,
    read_only=False,
    # Additive: it records an operation and starts a job; it removes nothing.
    destructive=False,
    # Only with a client_reference; without one, a second call starts a second job.
    idempotent=False,
    open_world=True,  # the job runs at a third-party provider
    task_support="optional",
)

CHECK = ToolSpec(
    name="check",
    title="Check a job once",
    description=(
        "Read an operation once, without waiting. status 'running' means NOT complete: do "
        "not report success; check again after poll_after_seconds or call `await`. Final "
        "statuses: succeeded, completed_with_errors (some items failed: read counts), "
        "failed, cancelled, timed_out (not finished; do not resubmit)."
        " not_found means no operation with that id is visible to you: it is NOT a failure; "
        "check the id against `pending` before starting anything."
    ),
    input_schema={
        "type": "object",
        "properties": {"operation_id": _OPERATION_ID},
        "required": ["operation_id"],
    },
    output_schema=TOOL_RESULT_SCHEMA,
    read_only=True,
    destructive=False,
    idempotent=True,
    open_world=False,  # reads jobwarden's ledger, never the provider
)

AWAIT = ToolSpec(
    name="await",
    title="Wait for a job",
    description=(
        "Wait until the operation finishes or max_wait seconds pass, then return exactly "
        "one of: succeeded, completed_with_errors, failed, cancelled, timed_out. "
        "timed_out means the job may STILL BE RUNNING: do not report success and do not "
        "start it again; keep the operation_id and check later. Pass `consumer` to claim "
        "the completion: act on a success only when claimed is true."
        " Progress notifications report each state change while you wait."
    ),
    input_schema={
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
                "maxLength": MAX_CONSUMER,
            },
        },
        "required": ["operation_id"],
    },
    output_schema=TOOL_RESULT_SCHEMA,
    # With a consumer it records the claim of a completion: a write, if a harmless one.
    read_only=False,
    destructive=False,
    idempotent=True,  # a second claim by the same consumer changes nothing
    open_world=False,
    task_support="optional",
)

CANCEL = ToolSpec(
    name="cancel",
    title="Request cancellation",
    description=(
        "Ask for a job to be cancelled. This records the request; it does NOT mean the job "
        "is cancelled. Only the provider can confirm that: call `check` or `await` until "
        "the status is cancelled (or another final status: the job may still finish)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "operation_id": _OPERATION_ID,
            "reason": {
                "type": "string",
                "description": "Why, for the audit trail.",
                "maxLength": MAX_REASON,
            },
        },
        "required": ["operation_id", "reason"],
    },
    output_schema=TOOL_RESULT_SCHEMA,
    read_only=False,
    destructive=True,  # the provider stops the job; work in progress may be lost
    idempotent=True,  # asking twice records nothing more
    open_world=True,  # jobwarden then calls the provider's cancel endpoint
)

PENDING = ToolSpec(
    name="pending",
    title="List my unfinished jobs",
    description=(
        "List the jobs you started that are not over yet (including those waiting for a "
        "human). Call this at the start of every run instead of trusting job ids "
        "remembered in the conversation."
    ),
    input_schema={"type": "object", "properties": {}},
    output_schema=PENDING_SCHEMA,
    read_only=True,
    destructive=False,
    idempotent=True,
    open_world=False,
)

TOOLS: tuple[ToolSpec, ...] = (START, CHECK, AWAIT, CANCEL, PENDING)
TOOLS_BY_NAME: dict[str, ToolSpec] = {tool.name: tool for tool in TOOLS}
