"""The tools' output schemas: the MCP view of a `ToolResult`, field by field.

Written out rather than generated so each field carries words a model reads;
`tests/unit/test_agent_tools.py` proves the properties are exactly the MCP view
of `ToolResult` (`view.structured`), so the schema cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

from shared.agents.tools import STATUSES

_NULLABLE_STRING = {"type": ["string", "null"]}
_COUNT = {"type": ["integer", "null"], "minimum": 0}

TOOL_RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {
            "type": "string",
            "enum": list(STATUSES),
            "description": (
                "running: started, NOT complete. succeeded / completed_with_errors: verified "
                "result. failed, cancelled: final. timed_out: may still be running, do not "
                "resubmit. unknown: jobwarden could not be read. not_found: no such operation "
                "is visible to you."
            ),
        },
        "operation_id": {**_NULLABLE_STRING, "description": "jobwarden's id (op_...)."},
        "job_id": {**_NULLABLE_STRING, "description": "The provider's job id, once known."},
        "done": {"type": "boolean", "description": "True once the status is final."},
        "message": {"type": "string", "description": "What the status means, in plain words."},
        "outcome": _NULLABLE_STRING,
        "needs_human": {"type": "boolean"},
        "result_uri": {
            **_NULLABLE_STRING,
            "description": "MCP resource holding the verified result (resources/read).",
        },
        "result": {"description": "The verified result itself, when small enough to inline."},
        "counts": {
            "type": ["object", "null"],
            "properties": {"total": _COUNT, "succeeded": _COUNT, "failed": _COUNT},
            "additionalProperties": False,
        },
        "failed_items_uri": {
            **_NULLABLE_STRING,
            "description": "MCP resource listing the items that failed (resources/read).",
        },
        "error": {"type": ["object", "null"]},
        "poll_after_seconds": {"type": ["number", "null"]},
        "client_reference": _NULLABLE_STRING,
        "claimed": {
            "type": ["boolean", "null"],
            "description": "With a consumer: true for the one call that may act on a success.",
        },
    },
    "required": ["status", "operation_id", "job_id", "done", "message"],
    "additionalProperties": False,
}

PENDING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {"type": "array", "items": TOOL_RESULT_SCHEMA},
        "count": {"type": "integer", "minimum": 0},
    },
    "required": ["operations", "count"],
    "additionalProperties": False,
}
