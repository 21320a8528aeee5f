"""The OpenAPI 3.1 description of the agent API.

The prose is written by hand because it is part of the contract with models:
it says, in the words an agent will read, that 202 is not completion. The
limits are not: request bodies' schemas are generated from the pydantic models
that validate them (`models.py`), query parameters and headers from the
objects that parse them (`params.py`), so the document cannot state a limit
the server does not keep. Response schemas are written here and held to the
behaviour by `tests/integration/test_api_schemathesis.py`: every status,
header and body the server answers must conform.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic.json_schema import models_json_schema

from receiver.api import bodies, params
from receiver.api.models import BODY_MODELS, JSON_VALUE_MARKER, NO_NUL, any_case
from receiver.api.problems import PROBLEM_MEDIA_TYPE
from shared.ids import OPERATION_ID_PATTERN
from shared.ledger.states import LocalState
from shared.providers.description import ProviderDescription

# The deployment's providers: their descriptions (the served document, exact
# about each create call) or only their names.
Providers = Sequence[str] | Mapping[str, ProviderDescription] | None

_OPERATIONS_TAG = "operations"
_AUDIT_TAG = "audit"


def _ref(kind: str, name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/{kind}/{name}"}


def _json(schema: dict[str, Any], description: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema}},
        **extra,
    }


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


# ------------------------------------------------------------------ errors

# status -> (component name, description, headers)
_PROBLEMS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "A query parameter, header or the body's JSON is malformed."),
    401: ("Unauthenticated", "No bearer token, or an unknown or revoked one."),
    404: ("NotFound", "No such operation visible to this token."),
    409: ("Conflict", "Refused by the ledger's state machine or idempotency rules."),
    410: ("Archived", "Moved to an evidence archive (jobwarden audit archive); ask an operator."),
    413: ("TooLarge", "The body is larger than the server's limit (JW_MAX_BODY_BYTES)."),
    422: ("Invalid", "The body is JSON but a field is missing, unknown or out of bounds."),
    429: (
        "TooManyWaits",
        "This token holds all the long-polls and event streams it may; retry after Retry-After.",
    ),
    503: ("Unavailable", "The database is unavailable or busy; retry after Retry-After."),
}
_HEADERS = {
    401: {"WWW-Authenticate": _ref("headers", "WWWAuthenticate")},
    429: {"Retry-After": _ref("headers", "RetryAfter")},
    503: {"Retry-After": _ref("headers", "RetryAfter")},
}


def _problem_component(status: int) -> dict[str, Any]:
    _name, description = _PROBLEMS[status]
    response: dict[str, Any] = {
        "description": description,
        "content": {PROBLEM_MEDIA_TYPE: {"schema": _ref("schemas", "Problem")}},
    }
    if status in _HEADERS:
        response["headers"] = _HEADERS[status]
    return response


def _problems(*statuses: int) -> dict[str, Any]:
    """Error responses of an operation; every operation may answer 401 and 503."""
    return {
        str(status): _ref("responses", _PROBLEMS[status][0])
        for status in sorted({401, 503, *statuses})
    }


# ------------------------------------------------------------------ schemas


def _operation_schema() -> dict[str, Any]:
    nullable_int = {"type": ["integer", "null"]}
    nullable_text = {"type": ["string", "null"]}
    timestamp = {"type": ["string", "null"], "format": "date-time"}
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
    metadata = {
        "type": "object",
        "required": ["provider", "kind", "state", "final", "message", "created_at"],
        "properties": {
            "provider": {"type": "string"},
            "kind": {"type": "string"},
            "client_reference": nullable_text,
            "requested_by": {"type": "string"},
            "state": {"type": "string", "enum": [s.value for s in LocalState]},
            "remote_state": nullable_text,
            "remote_job_id": nullable_text,
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
            "cancel_requested_at": timestamp,
            "result_deadline": timestamp,
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": timestamp,
            "finished_at": timestamp,
        },
    }
    summary = {
        "type": "object",
        "properties": {"total": nullable_int, "succeeded": nullable_int, "failed": nullable_int},
    }
    return {
        "type": "object",
        "description": (
            "A long-running operation (AIP-151). done=false means NOT complete: do not "
            "report success. done=true with `response` is a success (read "
            "response.outcome: completed_with_errors means some items failed); done=true "
            "with `error` is not."
        ),
        "required": ["name", "operation_id", "done", "message", "metadata", "links"],
        "properties": {
            "name": {"type": "string", "examples": ["operations/op_01J..."]},
            "operation_id": {"type": "string", "pattern": OPERATION_ID_PATTERN},
            "done": {"type": "boolean"},
            "message": {"type": "string", "description": "Plain words; read it."},
            "metadata": metadata,
            "response": {
                "type": "object",
                "required": ["outcome"],
                "properties": {
                    "outcome": {"enum": ["succeeded", "completed_with_errors"]},
                    "result_ref": nullable_text,
                    "result": {},
                    "summary": summary,
                    "errors_ref": nullable_text,
                },
            },
            "error": {
                "type": ["object", "null"],
                "properties": {"code": nullable_text, "message": nullable_text},
            },
            "partial_output": {
                "type": "object",
                "description": (
                    "A cancelled job's output, kept as it was when it stopped, or a "
                    "failed job's failed items (errors_ref): NOT a complete result."
                ),
                "properties": {
                    "result_ref": nullable_text,
                    "result": {},
                    "summary": summary,
                    "errors_ref": nullable_text,
                },
            },
            "links": {"type": "object", "additionalProperties": {"type": "string"}},
            "replayed": {
                "type": "boolean",
                "description": "Submit only: true when client_reference named an existing one.",
            },
            "cancel": {
                "type": "object",
                "description": "Cancel only: what the request achieved, in words.",
                "required": ["state", "recorded", "message"],
                "properties": {
                    "state": {"type": "string"},
                    "recorded": {
                        "type": "boolean",
                        "description": (
                            "Whether this request's intent (who, why) is the one on record: "
                            "false when the operation had ended, when a cancel was already "
                            "under way (the earlier request's intent acts), or when an "
                            "earlier intent waiting for an operator stands."
                        ),
                    },
                    "message": {"type": "string"},
                },
            },
        },
    }


def _json_value_schema() -> dict[str, Any]:
    """Any JSON PostgreSQL's jsonb can store (no U+0000 in a string or a key)."""
    value = _ref("schemas", "JsonValue")
    return {
        "description": (
            f"Any JSON value, nested at most {bodies.MAX_JSON_DEPTH} levels, with no "
            "U+0000 in any string or key."
        ),
        "anyOf": [
            {"type": ["null", "boolean", "number"]},
            {"type": "string", "pattern": NO_NUL},
            {"type": "array", "items": value},
            {
                "type": "object",
                "propertyNames": {"pattern": NO_NUL},
                "additionalProperties": value,
            },
        ],
    }


def _body_schemas(providers: Providers) -> dict[str, Any]:
    """The request bodies' schemas, generated from the models that validate them.

    With the deployment's provider descriptions, `request` says what each
    accepts: the create method and path (anything else is a 422), and an
    object body when the create call writes our fields into it.
    """
    _, generated = models_json_schema(
        [(model, "validation") for model in BODY_MODELS],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = _json_value_refs(generated["$defs"])
    if providers is not None:  # this deployment's: any other is a 422
        schemas["SubmitRequest"]["properties"]["provider"]["enum"] = sorted(providers)
    if isinstance(providers, Mapping) and providers:
        _narrow_request(schemas["ProviderRequest"]["properties"], providers)
    return schemas


def _narrow_request(fields: dict[str, Any], providers: Mapping[str, ProviderDescription]) -> None:
    """`request`'s method, target and body as these providers' create calls accept them.

    With several providers, the union: a pairing the document allows may still
    be refused (provider A with provider B's path), and the 422 says which.
    """
    methods = sorted({desc.create.method.upper() for desc in providers.values()})
    paths = sorted({desc.create.path.text for desc in providers.values()})
    method_pattern = "^(?:" + "|".join(any_case(m) for m in methods) + ")$"
    fields["method"] = _nullable(fields["method"], {"type": "string", "pattern": method_pattern})
    fields["target"] = _nullable(fields["target"], {"type": "string", "enum": paths})
    if all(bodies.needs_object_body(name, desc) for name, desc in providers.items()):
        value = _ref("schemas", "JsonValue")
        only_objects = {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": value,
        }
        fields["body"] = {
            "description": "A JSON object: the create call carries our fields in it.",
            "anyOf": [only_objects, {"type": "null"}],
        }


def _nullable(generated: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    narrowed = {"anyOf": [schema, {"type": "null"}]}
    for key in ("description", "default"):
        if key in generated:
            narrowed[key] = generated[key]
    return narrowed


def _json_value_refs(node: Any) -> Any:
    """The models' JSON-value marker replaced by a $ref to the JsonValue schema."""
    if isinstance(node, dict):
        if node.get(JSON_VALUE_MARKER):
            return _ref("schemas", "JsonValue")
        return {key: _json_value_refs(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_json_value_refs(item) for item in node]
    return node


def _transition_event_schema() -> dict[str, Any]:
    nullable_text = {"type": ["string", "null"]}
    return {
        "type": "object",
        "description": "SSE `transition` event data: one history row.",
        "required": ["operation_id", "seq", "at", "to_state"],
        "properties": {
            "operation_id": {"type": "string"},
            "seq": {"type": "integer"},
            "at": {"type": "string", "format": "date-time"},
            "from_state": nullable_text,
            "to_state": {"type": "string"},
            "actor": nullable_text,
            "cause": nullable_text,
            "evidence_kind": nullable_text,
            "remote_job_id": nullable_text,
        },
    }


def _schemas(providers: Providers) -> dict[str, Any]:
    return {
        "Operation": _operation_schema(),
        "JsonValue": _json_value_schema(),
        **_body_schemas(providers),
        "TransitionEvent": _transition_event_schema(),
        "Problem": {
            "type": "object",
            "description": (
                "RFC 9457 problem details. Branch on `type` (a stable URN, "
                "urn:jobwarden:problem:<kind>); `detail` is for people and names the field."
            ),
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


# ------------------------------------------------------------------ paths

_ID = {
    "name": "operation_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": OPERATION_ID_PATTERN},
}


def _op(
    operation_id: str,
    summary: str,
    responses: dict[str, Any],
    *,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    tag: str = _OPERATIONS_TAG,
    description: str | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": operation_id, "tags": [tag], "summary": summary}
    if description:
        op["description"] = description
    if parameters:
        op["parameters"] = parameters
    if body:
        op["requestBody"] = body
    op["responses"] = responses
    return op


def _page(items: dict[str, Any], description: str, **fields: Any) -> dict[str, Any]:
    return _json(
        {
            "type": "object",
            "required": [*fields, "next_page_token"],
            "properties": {**fields, **items, "next_page_token": {"type": ["string", "null"]}},
        },
        description,
    )


def _collection() -> dict[str, Any]:
    state = {
        "name": "state",
        "in": "query",
        "description": "Only operations in these states (repeat it, or separate with commas).",
        "schema": {"type": "array", "items": {"enum": [s.value for s in LocalState]}},
        "style": "form",
        "explode": True,
    }
    return {
        "post": _op(
            "submitOperation",
            "Start an operation. 202 means STARTED, NOT complete.",
            {
                "202": _json(
                    _ref("schemas", "Operation"),
                    "Recorded; the job is NOT complete.",
                    headers={"Location": _ref("headers", "Location")},
                ),
                **_problems(400, 409, 413, 422),
            },
            body=_json_body(_ref("schemas", "SubmitRequest")),
        ),
        "get": _op(
            "listOperations",
            "List operations, newest first (agent tokens: only their own).",
            {
                "200": _page(
                    {"operations": {"type": "array", "items": _ref("schemas", "Operation")}},
                    "A page of operations, newest first.",
                ),
                **_problems(400),
            },
            parameters=[
                state,
                params.PROVIDER.spec(),
                params.DONE.spec(),
                params.FINAL.spec(),
                params.MINE.spec(),
                params.LIST_PAGE_SIZE.spec(),
                params.PAGE_TOKEN.spec(),
            ],
        ),
    }


_EVENTS_DESCRIPTION = """\
Server-Sent Events, one per transition, in order:

- `transition` (id = the transition's `seq`; data: TransitionEvent) for each transition
  after `after` (or after Last-Event-ID, which an EventSource sends on reconnect);
- `end` (data: Operation) once the operation is in a terminal state: the stream then ends;
- `error` (data: Problem) if the database is lost mid-stream: the stream ends, resume
  with Last-Event-ID.

Comment lines (`: keep-alive`) arrive every 15 s while nothing happens."""


def _one() -> dict[str, Any]:
    operation = _ref("schemas", "Operation")
    return {
        "get": _op(
            "getOperation",
            "Read an operation.",
            {"200": _json(operation, "The operation."), **_problems(404)},
            parameters=[_ID],
        )
    }


def _wait() -> dict[str, Any]:
    return {
        "get": _op(
            "waitOperation",
            "Block until the operation is done or max_wait seconds (<= 300) pass; "
            "done=false after max_wait means still running. A token holds at most "
            f"{params.MAX_WAITS_PER_CALLER} long-polls and event streams at once (429 beyond).",
            {
                "200": _json(_ref("schemas", "Operation"), "The operation."),
                **_problems(400, 404, 429),
            },
            parameters=[_ID, params.MAX_WAIT.spec()],
        )
    }


def _events() -> dict[str, Any]:
    return {
        "get": _op(
            "streamOperationEvents",
            "Server-Sent Events: every transition in order, then `end` with the operation. "
            "A stream holds one of the token's "
            f"{params.MAX_WAITS_PER_CALLER} long-poll slots while it is open (429 beyond).",
            {
                "200": {
                    "description": "An event stream (see the operation's description).",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    "x-events": {
                        "transition": _ref("schemas", "TransitionEvent"),
                        "end": _ref("schemas", "Operation"),
                        "error": _ref("schemas", "Problem"),
                    },
                },
                **_problems(400, 404, 429),
            },
            parameters=[_ID, params.AFTER.spec(), params.LAST_EVENT_ID.spec()],
            description=_EVENTS_DESCRIPTION,
        )
    }


def _cancel() -> dict[str, Any]:
    operation = _ref("schemas", "Operation")
    return {
        "post": _op(
            "cancelOperation",
            "Request cancellation. Answers cancel_requested, never cancelled: only the "
            "provider can confirm a cancellation.",
            {
                "200": _json(operation, "Nothing to cancel (see cancel.message)."),
                "202": _json(operation, "Cancellation requested, not confirmed."),
                **_problems(400, 404, 409, 413, 422),
            },
            parameters=[_ID],
            body=_json_body(_ref("schemas", "CancelRequest")),
        )
    }


def _claim() -> dict[str, Any]:
    claim = {
        "type": "object",
        "required": ["operation_id", "consumer", "claimed", "reason", "message", "state"],
        "properties": {
            "operation_id": {"type": "string"},
            "consumer": {"type": "string"},
            "claimed": {"type": "boolean"},
            "reason": {"enum": ["already_claimed", "not_succeeded", None]},
            "message": {"type": "string"},
            "state": {"type": "string"},
        },
    }
    return {
        "post": _op(
            "claimOperation",
            "Claim a succeeded operation's completion: claimed=true exactly once per "
            "(operation, consumer). Act on the result only when claimed is true.",
            {
                "200": _json(claim, "Whether this call won the claim."),
                **_problems(400, 404, 409, 413, 422),
            },
            parameters=[_ID],
            body=_json_body(_ref("schemas", "ClaimRequest")),
        )
    }


def _failed_items() -> dict[str, Any]:
    item = {
        "type": "object",
        "required": ["item_key"],
        "properties": {
            "item_key": {"type": "string"},
            "code": {"type": ["string", "null"]},
            "message": {"type": ["string", "null"]},
        },
    }
    return {
        "get": _op(
            "listFailedItems",
            "Failed items of a batch, one page at a time.",
            {
                "200": _page(
                    {"items": {"type": "array", "items": item}},
                    "A page of failed items.",
                    operation_id={"type": "string"},
                    items_failed={"type": ["integer", "null"]},
                    items_total={"type": ["integer", "null"]},
                ),
                **_problems(400, 404, 410),
            },
            parameters=[_ID, params.ITEMS_PAGE_SIZE.spec(), params.PAGE_TOKEN.spec()],
        )
    }


def _receipt() -> dict[str, Any]:
    receipt = {
        "type": "object",
        "required": ["format", "operation_id", "checkpoint", "leaves", "unproven"],
        "properties": {
            "format": {"const": "jobwarden-receipt/v1"},
            "operation_id": {"type": "string"},
            "checkpoint": {"type": "string"},
            "leaves": {"type": "array", "items": {"type": "object"}},
            "unproven": {"type": "array", "items": {"type": "string"}},
        },
    }
    return {
        "get": _op(
            "getReceipt",
            "The operation's evidence, provable offline with the log's public key.",
            {"200": _json(receipt, "The receipt."), **_problems(404, 409)},
            parameters=[_ID],
            tag=_AUDIT_TAG,
            description=(
                "Each evidence row the newest signed checkpoint covers, as its leaf bytes "
                "with an RFC 9162 audit path, and the checkpoint (a C2SP signed note). "
                "Verify with `jobwarden audit check-proof` or deploy/verify-receipt.py. "
                "409 until a checkpoint is signed; 503 when the log contradicts it."
            ),
        )
    }


def _result_file() -> dict[str, Any]:
    return {
        "get": _op(
            "getResultFile",
            "The operation's stored result file (or kept partial output), byte for byte.",
            {
                "200": {
                    "description": "The file, as stored; `Repr-Digest` is its sha-256.",
                    "headers": {
                        "Repr-Digest": {
                            "schema": {"type": "string"},
                            "description": "sha-256=:<base64>: (RFC 9530)",
                        }
                    },
                    "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                },
                **_problems(404),
            },
            parameters=[_ID],
            description=(
                "Served from this receiver's results_dir, found by the digest the database "
                "holds. 404 `no-result-file` when nothing is stored as a file; 404 "
                "`result-not-on-this-host` when the file is on the reconciler's host only. "
                "A file that no longer matches its digest is cut short (never sent whole)."
            ),
        )
    }


def _checkpoint() -> dict[str, Any]:
    return {
        "get": _op(
            "getCheckpoint",
            "The evidence log's newest signed checkpoint (C2SP tlog-checkpoint).",
            {
                "200": {
                    "description": "The signed note.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                },
                **_problems(404),
            },
            tag=_AUDIT_TAG,
        )
    }


def _paths() -> dict[str, Any]:
    one = "/v1/operations/{operation_id}"
    return {
        "/v1/operations": _collection(),
        one: _one(),
        one + ":wait": _wait(),
        one + "/events": _events(),
        one + ":cancel": _cancel(),
        one + ":claim": _claim(),
        one + "/failed-items": _failed_items(),
        one + "/receipt": _receipt(),
        one + "/result": _result_file(),
        "/v1/audit/checkpoint": _checkpoint(),
    }


def _components(providers: Providers) -> dict[str, Any]:
    header_text = {"schema": {"type": "string"}, "required": True}
    return {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": _schemas(providers),
        "responses": {name: _problem_component(status) for status, (name, _) in _PROBLEMS.items()},
        "headers": {
            "Location": {**header_text, "description": "The operation's URL."},
            "WWWAuthenticate": {**header_text, "description": 'Bearer realm="jobwarden"'},
            "RetryAfter": {
                "schema": {"type": "string", "pattern": "^[0-9]+$"},
                "required": True,
                "description": "Seconds to wait before retrying.",
            },
        },
    }


def openapi_document(providers: Providers = None) -> dict[str, Any]:
    """The document; with `providers`, `provider` is limited to this deployment's, and
    with their descriptions, `request` to what their create calls accept."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jobwarden agent API",
            "version": "1",
            "description": (
                "Durable long-running operations on third-party APIs. Starting an operation "
                "is not finishing it: read `done` and `message` on every answer. Every error "
                "is application/problem+json (RFC 9457) naming the field at fault."
            ),
        },
        "tags": [
            {"name": _OPERATIONS_TAG, "description": "Submit, read, wait for, cancel, claim."},
            {"name": _AUDIT_TAG, "description": "Offline proof of what the ledger recorded."},
        ],
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": _components(providers),
    }
