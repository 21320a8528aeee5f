"""Excerpts of Anthropic's OpenAPI document: Message Batches, as its contract tests read it.

Source: Anthropic's document as published for its SDKs (the Stainless-hosted
file named by anthropics/anthropic-sdk-typescript's .stats.yml); the copy read
is github.com/tryAGI/Anthropic, file src/libs/Anthropic/openapi.yaml (JSON
despite its name), commit 8b42a21e6aa7fc9b521cc0c1581f586480b5cad3
(2026-08-18; the file was last downloaded there on 2026-05-06, commit
ebea3ea4; its generate.sh adds only a `Ping` stream-event schema, outside
these excerpts). OpenAPI 3.1.0; `info` has a title and no version; server
https://api.anthropic.com; the API version travels in the `anthropic-version`
header, "2023-06-01" in the preset.

Copied as printed, $refs resolved by hand; `description`, `title`,
`examples` and `discriminator` keys are left out. Two abridgements, said
where they are made: the Messages request (`params`) keeps its required
properties, and a succeeded result's `message` stays an object.
"""

from __future__ import annotations

from typing import Any

from tests.contract.support import Operation

DOCUMENT = (
    "Anthropic openapi (tryAGI/Anthropic @ 8b42a21e, no info.version; anthropic-version 2023-06-01)"
)
SERVER = "https://api.anthropic.com"

# #/paths: message batches (the ?beta=true twins left out)
OPERATIONS = (
    Operation("POST", "/v1/messages/batches", "message_batches_post"),
    Operation("GET", "/v1/messages/batches", "message_batches_list"),
    Operation("GET", "/v1/messages/batches/{message_batch_id}", "message_batches_retrieve"),
    Operation("DELETE", "/v1/messages/batches/{message_batch_id}", "message_batches_delete"),
    Operation("POST", "/v1/messages/batches/{message_batch_id}/cancel", "message_batches_cancel"),
    Operation("GET", "/v1/messages/batches/{message_batch_id}/results", "message_batches_results"),
)

# #/components/schemas/CreateMessageBatchParams (MessageBatchIndividualRequestParams inlined;
# CreateMessageParams abridged to its required properties, and closed as printed: its other
# optional properties are left out, so the tests' bodies use none of them. Model is an anyOf
# of `string` and string consts, i.e. any string; InputMessage.content an anyOf of a string and
# an array of content blocks, whose items are left out.)
CREATE_MESSAGE_BATCH_PARAMS: dict[str, Any] = {
    "additionalProperties": False,
    "properties": {
        "requests": {
            "items": {
                "additionalProperties": False,
                "properties": {
                    "custom_id": {
                        "maxLength": 64,
                        "minLength": 1,
                        "pattern": "^[a-zA-Z0-9_-]{1,64}$",
                        "type": "string",
                    },
                    "params": {
                        "additionalProperties": False,
                        "properties": {
                            "model": {"type": "string"},
                            "max_tokens": {"minimum": 0, "type": "integer"},
                            "messages": {
                                "items": {
                                    "additionalProperties": False,
                                    "properties": {
                                        "content": {
                                            "anyOf": [{"type": "string"}, {"type": "array"}]
                                        },
                                        "role": {"enum": ["user", "assistant"], "type": "string"},
                                    },
                                    "required": ["content", "role"],
                                    "type": "object",
                                },
                                "type": "array",
                            },
                        },
                        "required": ["model", "messages", "max_tokens"],
                        "type": "object",
                    },
                },
                "required": ["custom_id", "params"],
                "type": "object",
            },
            "maxItems": 100000,
            "minItems": 1,
            "type": "array",
        }
    },
    "required": ["requests"],
    "type": "object",
}

# #/components/schemas/MessageBatch/properties/processing_status
PROCESSING_STATUS: dict[str, Any] = {
    "type": "string",
    "enum": ["in_progress", "canceling", "ended"],
}


def _nullable_time() -> dict[str, Any]:
    return {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]}


# #/components/schemas/MessageBatch (RequestCounts inlined)
MESSAGE_BATCH: dict[str, Any] = {
    "properties": {
        "archived_at": _nullable_time(),
        "cancel_initiated_at": _nullable_time(),
        "created_at": {"type": "string", "format": "date-time"},
        "ended_at": _nullable_time(),
        "expires_at": {"type": "string", "format": "date-time"},
        "id": {"type": "string"},
        "processing_status": PROCESSING_STATUS,
        "request_counts": {
            "properties": {
                "canceled": {"type": "integer", "default": 0},
                "errored": {"type": "integer", "default": 0},
                "expired": {"type": "integer", "default": 0},
                "processing": {"type": "integer", "default": 0},
                "succeeded": {"type": "integer", "default": 0},
            },
            "type": "object",
            "required": ["canceled", "errored", "expired", "processing", "succeeded"],
        },
        "results_url": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "type": {"type": "string", "const": "message_batch", "default": "message_batch"},
    },
    "type": "object",
    "required": [
        "archived_at",
        "cancel_initiated_at",
        "created_at",
        "ended_at",
        "expires_at",
        "id",
        "processing_status",
        "request_counts",
        "results_url",
        "type",
    ],
}

# Built from the `examples` the document gives each property of MessageBatch and RequestCounts.
MESSAGE_BATCH_EXAMPLE: dict[str, Any] = {
    "archived_at": "2024-08-20T18:37:24.100435Z",
    "cancel_initiated_at": "2024-08-20T18:37:24.100435Z",
    "created_at": "2024-08-20T18:37:24.100435Z",
    "ended_at": "2024-08-20T18:37:24.100435Z",
    "expires_at": "2024-08-20T18:37:24.100435Z",
    "id": "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF",
    "processing_status": "in_progress",
    "request_counts": {
        "canceled": 10,
        "errored": 30,
        "expired": 10,
        "processing": 100,
        "succeeded": 50,
    },
    "results_url": (
        "https://api.anthropic.com/v1/messages/batches/msgbatch_013Zva2CMHLNnXjNJJKqJ2EF/results"
    ),
    "type": "message_batch",
}

# #/components/schemas/ErrorResponse/properties/error: oneOf InvalidRequestError,
# AuthenticationError, BillingError, PermissionError, NotFoundError, RateLimitError,
# GatewayTimeoutError, APIError, OverloadedError -- each {message (default: the text below),
# type (const)}, both required
ERROR_TYPES = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "Authentication error",
    "billing_error": "Billing error",
    "permission_error": "Permission denied",
    "not_found_error": "Not found",
    "rate_limit_error": "Rate limited",
    "timeout_error": "Request timeout",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}
ERROR_RESPONSE: dict[str, Any] = {
    "properties": {
        "error": {
            "oneOf": [
                {
                    "properties": {
                        "message": {"default": message, "type": "string"},
                        "type": {"const": error_type, "default": error_type, "type": "string"},
                    },
                    "required": ["message", "type"],
                    "type": "object",
                }
                for error_type, message in ERROR_TYPES.items()
            ]
        },
        "request_id": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "type": {"const": "error", "default": "error", "type": "string"},
    },
    "required": ["error", "request_id", "type"],
    "type": "object",
}

# #/components/schemas/MessageBatchIndividualResponse: one line of the results (JSONL);
# `result` is a oneOf of SucceededResult, ErroredResult, CanceledResult, ExpiredResult
# (SucceededResult.message, a Message, abridged to an object)
RESULT_LINE: dict[str, Any] = {
    "properties": {
        "custom_id": {"type": "string"},
        "result": {
            "oneOf": [
                {
                    "properties": {
                        "message": {"type": "object"},
                        "type": {"const": "succeeded", "default": "succeeded", "type": "string"},
                    },
                    "required": ["message", "type"],
                    "type": "object",
                },
                {
                    "properties": {
                        "error": ERROR_RESPONSE,
                        "type": {"const": "errored", "default": "errored", "type": "string"},
                    },
                    "required": ["error", "type"],
                    "type": "object",
                },
                {
                    "properties": {
                        "type": {"const": "canceled", "default": "canceled", "type": "string"}
                    },
                    "required": ["type"],
                    "type": "object",
                },
                {
                    "properties": {
                        "type": {"const": "expired", "default": "expired", "type": "string"}
                    },
                    "required": ["type"],
                    "type": "object",
                },
            ]
        },
    },
    "required": ["custom_id", "result"],
    "type": "object",
}
