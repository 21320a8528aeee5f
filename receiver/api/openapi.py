"""The OpenAPI 3.1 description of the agent API, written by hand.

Hand-written because the descriptions are part of the contract with models:
they say, in the words an agent will read, that 202 is not completion.
"""

from __future__ import annotations

from typing import Any

_PROBLEM = {"$ref": "#/components/responses/Problem"}
_ID = {
    "name": "operation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^op_[0-9A-HJKMNP-TV-Z]{26}$"},
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _op_ref() -> dict[str, Any]:
    return {"$ref": "#/components/schemas/Operation"}


def _schemas() -> dict[str, Any]:
    nullable_int = {"type": ["integer", "null"]}
    outcome = {
        "type": ["string", "null"],
        "enum": [
            "succeeded",
            "completed_with_errors",
            "failed",
            "cancelled",
            "timed_out",
            "needs_attention",
            None,
        ],
        "description": "null while the operation is running.",
    }
    return {
        "Operation": {
            "type": "object",
            "description": (
                "A long-running operation (AIP-151). done=false means NOT complete: do not "
                "report success. done=true with `response` is a success (read "
                "response.outcome: completed_with_errors means some items failed); done=true "
                "with `error` is not."
            ),
            "required": ["name", "operation_id", "done", "message", "metadata"],
            "properties": {
                "name": {"type": "string", "examples": ["operations/op_01J..."]},
                "operation_id": {"type": "string"},
                "done": {"type": "boolean"},
                "message": {"type": "string", "description": "Plain words; read it."},
                "metadata": {
                    "type": "object",
                    "properties": {
                        "state": {"type": "string"},
                        "remote_state": {"type": ["string", "null"]},
                        "remote_job_id": {"type": ["string", "null"]},
                        "outcome": outcome,
                        "final": {
                            "type": "boolean",
                            "description": "true once the outcome can never change.",
                        },
                        "message": {"type": "string"},
                        "poll_after_seconds": nullable_int,
                        "progress": {
                            "type": "object",
                            "properties": {
                                "completed": nullable_int,
                                "total": nullable_int,
                                "percent": {"type": ["number", "null"]},
                            },
                        },
                    },
                },
                "response": {
                    "type": "object",
                    "properties": {
                        "outcome": {"enum": ["succeeded", "completed_with_errors"]},
                        "result_ref": {"type": ["string", "null"]},
                        "result": {},
                        "summary": {
                            "type": "object",
                            "properties": {
                                "total": nullable_int,
                                "succeeded": nullable_int,
                                "failed": nullable_int,
                            },
                        },
                        "errors_ref": {"type": ["string", "null"]},
                    },
                },
                "error": {
                    "type": "object",
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                },
                "links": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "SubmitRequest": {
            "type": "object",
            "required": ["provider", "kind", "request"],
            "additionalProperties": False,
            "properties": {
                "provider": {"type": "string"},
                "kind": {"type": "string", "maxLength": 100},
                "request": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "method": {"type": "string"},
                        "target": {"type": "string"},
                        "body": {},
                    },
                },
                "client_reference": {
                    "type": "string",
                    "maxLength": 200,
                    "description": (
                        "Your idempotency key: the same reference with the same request "
                        "returns the same operation; with a different request, 409."
                    ),
                },
                "approval_ref": {"type": "string", "maxLength": 200},
                "create_deadline_seconds": {"type": "number", "exclusiveMinimum": 0},
                "result_deadline_seconds": {"type": "number", "exclusiveMinimum": 0},
            },
        },
        "Problem": {
            "type": "object",
            "description": "RFC 9457 problem details.",
            "required": ["type", "title", "status", "detail"],
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "instance": {"type": "string"},
            },
        },
    }


def _paths() -> dict[str, Any]:
    one = "/v1/operations/{operation_id}"
    return {
        "/v1/operations": {
            "post": {
                "summary": "Start an operation. 202 means STARTED, NOT complete.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/SubmitRequest"}
                        }
                    },
                },
                "responses": {
                    "202": _json(_op_ref(), "Recorded; the job is NOT complete."),
                    "401": _PROBLEM,
                    "409": _PROBLEM,
                    "422": _PROBLEM,
                },
            },
            "get": {
                "summary": "List operations (agent tokens: only their own).",
                "parameters": [
                    {"name": n, "in": "query", "schema": {"type": "string"}}
                    for n in (
                        "state",
                        "provider",
                        "done",
                        "final",
                        "mine",
                        "page_size",
                        "page_token",
                    )
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "operations": {"type": "array", "items": _op_ref()},
                                "next_page_token": {"type": ["string", "null"]},
                            },
                        },
                        "A page of operations, newest first.",
                    ),
                    "401": _PROBLEM,
                },
            },
        },
        one: {
            "get": {
                "summary": "Read an operation.",
                "parameters": [_ID],
                "responses": {"200": _json(_op_ref(), "The operation."), "404": _PROBLEM},
            }
        },
        one + ":wait": {
            "get": {
                "summary": (
                    "Block until the operation is done or max_wait seconds (<= 300) pass; "
                    "done=false after max_wait means still running."
                ),
                "parameters": [
                    _ID,
                    {"name": "max_wait", "in": "query", "schema": {"type": "number"}},
                ],
                "responses": {"200": _json(_op_ref(), "The operation."), "404": _PROBLEM},
            }
        },
        one + "/events": {
            "get": {
                "summary": (
                    "Server-Sent Events: every transition in order (event `transition`, "
                    "id = seq; resume with Last-Event-ID), then `end` with the operation."
                ),
                "parameters": [_ID],
                "responses": {
                    "200": {
                        "description": "An event stream.",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "404": _PROBLEM,
                },
            }
        },
        one + ":cancel": {
            "post": {
                "summary": (
                    "Request cancellation. Answers cancel_requested, never cancelled: only "
                    "the provider can confirm a cancellation."
                ),
                "parameters": [_ID],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["reason"],
                                "properties": {"reason": {"type": "string"}},
                            }
                        }
                    },
                },
                "responses": {
                    "202": _json(_op_ref(), "Cancellation requested, not confirmed."),
                    "200": _json(_op_ref(), "Nothing to cancel (see cancel.message)."),
                    "404": _PROBLEM,
                },
            }
        },
        one + ":claim": {
            "post": {
                "summary": (
                    "Claim a succeeded operation's completion: claimed=true exactly once per "
                    "(operation, consumer). Act on the result only when claimed is true."
                ),
                "parameters": [_ID],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["consumer"],
                                "properties": {"consumer": {"type": "string"}},
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "claimed": {"type": "boolean"},
                                "reason": {"enum": ["already_claimed", "not_succeeded", None]},
                            },
                        },
                        "Whether this call won the claim.",
                    ),
                    "404": _PROBLEM,
                },
            }
        },
        one + "/failed-items": {
            "get": {
                "summary": "Failed items of a batch, one page at a time.",
                "parameters": [
                    _ID,
                    {"name": "page_size", "in": "query", "schema": {"type": "integer"}},
                    {"name": "page_token", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "items": {"type": "array"},
                                "next_page_token": {"type": ["string", "null"]},
                            },
                        },
                        "A page of failed items.",
                    ),
                    "404": _PROBLEM,
                },
            }
        },
        one + "/receipt": {
            "get": {
                "summary": "The operation's evidence, provable offline with the log's public key.",
                "description": (
                    "Each evidence row the newest signed checkpoint covers, as its leaf bytes "
                    "with an RFC 9162 audit path, and the checkpoint (a C2SP signed note). "
                    "Verify with `jobwarden audit check-proof` or deploy/verify-receipt.py."
                ),
                "parameters": [_ID],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "format": {"const": "jobwarden-receipt/v1"},
                                "operation_id": {"type": "string"},
                                "checkpoint": {"type": "string"},
                                "leaves": {"type": "array"},
                                "unproven": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                        "The receipt.",
                    ),
                    "404": _PROBLEM,
                    "409": _PROBLEM,
                },
            }
        },
        "/v1/audit/checkpoint": {
            "get": {
                "summary": "The evidence log's newest signed checkpoint (C2SP tlog-checkpoint).",
                "responses": {
                    "200": {
                        "description": "The signed note.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    },
                    "404": _PROBLEM,
                },
            }
        },
    }


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jobwarden agent API",
            "version": "1",
            "description": (
                "Durable long-running operations on third-party APIs. Starting an operation "
                "is not finishing it: read `done` and `message` on every answer."
            ),
        },
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": _schemas(),
            "responses": {
                "Problem": {
                    "description": "An error (RFC 9457).",
                    "content": {
                        "application/problem+json": {
                            "schema": {"$ref": "#/components/schemas/Problem"}
                        }
                    },
                }
            },
        },
    }
