"""Excerpts of OpenAI's OpenAPI document: the Batch API, as the openai_batch contract tests use it.

Source: github.com/openai/openai-openapi, file openapi.json, commit
f85dbe223d40e1a31cba812ab2d755c7e98a92a3 (2026-08-21), info.version "2.3.0",
OpenAPI 3.1.0, server https://api.openai.com/v1.

RESULT_LINE alone comes from an earlier revision of the same repository
(openapi.yaml at commit 498c71ddf6f1c45b983f972ccabca795da211a3e, 2025-04-29,
info.version "2.3.0", OpenAPI 3.0.0): the current document no longer
describes the lines of a batch's output file. Its `nullable: true` is written
as `"type": [..., "null"]`, the 3.1 spelling.

Copied as printed, $refs resolved by hand; `description`, `title`, `x-oai*`
and `x-stainless-*` keys are left out. The JSON pointer of each excerpt is on
the line above it.
"""

from __future__ import annotations

from typing import Any

from tests.contract.support import Operation

DOCUMENT = "openai/openai-openapi openapi.json @ f85dbe22 (info.version 2.3.0)"
SERVER = "https://api.openai.com/v1"

# #/paths: the batch operations (and the file download the results come from)
OPERATIONS = (
    Operation("POST", "/batches", "createBatch"),
    Operation("GET", "/batches", "listBatches"),
    Operation("GET", "/batches/{batch_id}", "retrieveBatch"),
    Operation("POST", "/batches/{batch_id}/cancel", "cancelBatch"),
    Operation("GET", "/files/{file_id}/content", "downloadFile"),
)

# #/paths/~1batches/get/parameters ("Limit can range between 1 and 100", says its description)
LIST_PARAMETERS: dict[str, Any] = {
    "after": {"type": "string"},
    "limit": {"type": "integer", "default": 20},
}
LIST_LIMIT_RANGE = (1, 100)

# #/components/schemas/Metadata ("Set of 16 key-value pairs [...] Keys are strings with a
# maximum length of 64 characters. Values are strings with a maximum length of 512
# characters.", says its description)
METADATA: dict[str, Any] = {
    "anyOf": [
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "null"},
    ]
}
METADATA_LIMITS = {"pairs": 16, "key_length": 64, "value_length": 512}

# #/components/schemas/CreateBatchRequest (Metadata, BatchFileExpirationAfter inlined)
CREATE_BATCH_REQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["input_file_id", "endpoint", "completion_window"],
    "properties": {
        "input_file_id": {"type": "string"},
        "endpoint": {
            "type": "string",
            "enum": [
                "/v1/responses",
                "/v1/chat/completions",
                "/v1/embeddings",
                "/v1/completions",
                "/v1/moderations",
                "/v1/images/generations",
                "/v1/images/edits",
                "/v1/videos",
            ],
        },
        "completion_window": {"type": "string", "enum": ["24h"]},
        "metadata": METADATA,
        "output_expires_after": {
            "type": "object",
            "properties": {
                "anchor": {"type": "string", "enum": ["created_at"]},
                "seconds": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 3600,
                    "maximum": 2592000,
                },
            },
            "required": ["anchor", "seconds"],
        },
    },
}

# #/components/schemas/Batch (BatchError, BatchRequestCounts, Metadata inlined)
BATCH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "object": {"type": "string", "enum": ["batch"]},
        "endpoint": {"type": "string"},
        "model": {"type": "string"},
        "errors": {
            "type": "object",
            "properties": {
                "object": {"type": "string"},
                "data": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "code": {"type": "string"},
                            "message": {"type": "string"},
                            "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                            "line": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                        },
                    },
                },
            },
        },
        "input_file_id": {"type": "string"},
        "completion_window": {"type": "string"},
        "status": {
            "type": "string",
            "enum": [
                "validating",
                "failed",
                "in_progress",
                "finalizing",
                "completed",
                "expired",
                "cancelling",
                "cancelled",
            ],
        },
        "output_file_id": {"type": "string"},
        "error_file_id": {"type": "string"},
        "created_at": {"type": "integer", "format": "unixtime"},
        "in_progress_at": {"type": "integer", "format": "unixtime"},
        "expires_at": {"type": "integer", "format": "unixtime"},
        "finalizing_at": {"type": "integer", "format": "unixtime"},
        "completed_at": {"type": "integer", "format": "unixtime"},
        "failed_at": {"type": "integer", "format": "unixtime"},
        "expired_at": {"type": "integer", "format": "unixtime"},
        "cancelling_at": {"type": "integer", "format": "unixtime"},
        "cancelled_at": {"type": "integer", "format": "unixtime"},
        "request_counts": {
            "type": "object",
            "properties": {
                "total": {"type": "integer"},
                "completed": {"type": "integer"},
                "failed": {"type": "integer"},
            },
            "required": ["total", "completed", "failed"],
        },
        "usage": {
            "type": "object",
            "properties": {
                "input_tokens": {"type": "integer"},
                "input_tokens_details": {
                    "type": "object",
                    "properties": {"cached_tokens": {"type": "integer"}},
                    "required": ["cached_tokens"],
                },
                "output_tokens": {"type": "integer"},
                "output_tokens_details": {
                    "type": "object",
                    "properties": {"reasoning_tokens": {"type": "integer"}},
                    "required": ["reasoning_tokens"],
                },
                "total_tokens": {"type": "integer"},
            },
            "required": [
                "input_tokens",
                "input_tokens_details",
                "output_tokens",
                "output_tokens_details",
                "total_tokens",
            ],
        },
        "metadata": METADATA,
    },
    "required": [
        "id",
        "object",
        "endpoint",
        "input_file_id",
        "completion_window",
        "status",
        "created_at",
    ],
}

# #/components/schemas/Batch/x-oaiMeta/example, as printed except one trailing comma (after
# "batch_description") that is not JSON. Its nulls are not in the schema: the document's own
# example prints absent fields as null, so the tests send such bodies too.
BATCH_EXAMPLE: dict[str, Any] = {
    "id": "batch_abc123",
    "object": "batch",
    "endpoint": "/v1/completions",
    "model": "gpt-5-2025-08-07",
    "errors": None,
    "input_file_id": "file-abc123",
    "completion_window": "24h",
    "status": "completed",
    "output_file_id": "file-cvaTdG",
    "error_file_id": "file-HOWS94",
    "created_at": 1711471533,
    "in_progress_at": 1711471538,
    "expires_at": 1711557933,
    "finalizing_at": 1711493133,
    "completed_at": 1711493163,
    "failed_at": None,
    "expired_at": None,
    "cancelling_at": None,
    "cancelled_at": None,
    "request_counts": {"total": 100, "completed": 95, "failed": 5},
    "usage": {
        "input_tokens": 1500,
        "input_tokens_details": {"cached_tokens": 1024},
        "output_tokens": 500,
        "output_tokens_details": {"reasoning_tokens": 300},
        "total_tokens": 2000,
    },
    "metadata": {"customer_id": "user_123456789", "batch_description": "Nightly eval job"},
}

# #/components/schemas/ListBatchesResponse (Batch inlined)
LIST_BATCHES_RESPONSE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "data": {"type": "array", "items": BATCH},
        "first_id": {"type": "string"},
        "last_id": {"type": "string"},
        "has_more": {"type": "boolean"},
        "object": {"type": "string", "enum": ["list"]},
    },
    "required": ["object", "data", "has_more"],
}

# #/components/schemas/ErrorResponse (Error inlined)
ERROR_RESPONSE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "message": {"type": "string"},
                "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "type": {"type": "string"},
            },
            "required": ["type", "message", "param", "code"],
        }
    },
    "required": ["error"],
}


def webhook_event(event_type: str) -> dict[str, Any]:
    """#/components/schemas/WebhookBatch{Completed,Failed,Expired,Cancelled}: one shape, a type."""
    return {
        "type": "object",
        "required": ["created_at", "id", "data", "type"],
        "properties": {
            "created_at": {"type": "integer", "format": "unixtime"},
            "id": {"type": "string"},
            "data": {
                "type": "object",
                "required": ["id"],
                "properties": {"id": {"type": "string"}},
            },
            "object": {"type": "string", "enum": ["event"]},
            "type": {"type": "string", "enum": [event_type]},
        },
    }


# #/webhooks: batch_completed, batch_failed, batch_expired, batch_cancelled
WEBHOOK_TYPES = ("batch.completed", "batch.failed", "batch.expired", "batch.cancelled")

# openapi.yaml @ 498c71dd: #/components/schemas/BatchRequestOutput
RESULT_LINE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "custom_id": {"type": "string"},
        "response": {
            "type": ["object", "null"],
            "properties": {
                "status_code": {"type": "integer"},
                "request_id": {"type": "string"},
                "body": {"type": "object"},
            },
        },
        "error": {
            "type": ["object", "null"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        },
    },
}
