"""Google long-running operations written as JSON Schema, as the google_lro contract tests use them.

Google publishes no OpenAPI document for google.longrunning: its documents are
protocol buffers, read over HTTP through their proto3 JSON mapping. These
excerpts transcribe them:

- OPERATION, STATUS, ANY, RPC_CODES and OPERATIONS: github.com/googleapis/googleapis
  at commit f8291d2b89f0017ab078a4c7378069bae5686f6f (2026-08-22):
  google/longrunning/operations.proto (last changed at 1b141494, 2025-10-06),
  messages Operation and service Operations with its google.api.http rules;
  google/rpc/status.proto and google/rpc/code.proto (last changed at
  ebd1d23a, 2026-03-31). Proto files carry no version; the package is
  google.longrunning (HTTP paths /v1).
- REQUEST_ID: AIP-155 (github.com/aip-dev/google.aip.dev, aip/general/0155.md
  at commit 0fd63b2b): "string request_id [...] Restricted to 36 ASCII
  characters. A random UUID is recommended."; `requestId` is its JSON name.
- ERROR_RESPONSE_EXAMPLE: AIP-193 (same repository, aip/general/0193.md at
  commit 007186fb), its JSON error response.

How the transcription reads the proto: every proto3 field is optional and a
field at its default value (false, 0, "") is left out of the JSON, so `done`
absent means false and an `error` without `code` has code 0 (OK); int32 is an
integer in [-2**31, 2**31 - 1]; google.protobuf.Any is an object with "@type";
`oneof result` means never both `error` and `response`.
"""

from __future__ import annotations

from typing import Any

from tests.contract.support import Operation

DOCUMENT = (
    "googleapis/googleapis google/longrunning/operations.proto @ f8291d2b (+ AIP-155, AIP-193)"
)

# google/longrunning/operations.proto, service Operations: the google.api.http rules
# (GetOperation: get "/v1/{name=operations/**}"; CancelOperation: post
# "/v1/{name=operations/**}:cancel", body "*"). The proto notes that services may bind
# other names (e.g. "projects/*/locations/*/operations/*").
OPERATIONS = (
    Operation("GET", "/v1/{name=operations}", "ListOperations"),
    Operation("GET", "/v1/{name=operations/**}", "GetOperation"),
    Operation("DELETE", "/v1/{name=operations/**}", "DeleteOperation"),
    Operation("POST", "/v1/{name=operations/**}:cancel", "CancelOperation"),
)

# google/protobuf/any.proto, in its JSON mapping
ANY: dict[str, Any] = {
    "type": "object",
    "properties": {"@type": {"type": "string"}},
    "required": ["@type"],
}

# google/rpc/code.proto, enum Code
RPC_CODES = {
    "OK": 0,
    "CANCELLED": 1,
    "UNKNOWN": 2,
    "INVALID_ARGUMENT": 3,
    "DEADLINE_EXCEEDED": 4,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "ABORTED": 10,
    "OUT_OF_RANGE": 11,
    "UNIMPLEMENTED": 12,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
    "DATA_LOSS": 15,
    "UNAUTHENTICATED": 16,
}

# google/rpc/status.proto, message Status {int32 code = 1; string message = 2;
# repeated google.protobuf.Any details = 3;}
STATUS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "integer", "format": "int32"},
        "message": {"type": "string"},
        "details": {"type": "array", "items": ANY},
    },
}

# google/longrunning/operations.proto, message Operation {string name = 1;
# google.protobuf.Any metadata = 2; bool done = 3; oneof result {google.rpc.Status error = 4;
# google.protobuf.Any response = 5;}}
OPERATION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "metadata": ANY,
        "done": {"type": "boolean"},
        "error": STATUS,
        "response": ANY,
    },
    "not": {"required": ["error", "response"]},
}

# AIP-155: the request_id field of a request message, by its JSON name
REQUEST_ID: dict[str, Any] = {
    "type": "object",
    "properties": {"requestId": {"type": "string", "format": "uuid", "maxLength": 36}},
    "required": ["requestId"],
}

# AIP-193, "JSON representation" (the details past the first left out)
ERROR_RESPONSE_EXAMPLE: dict[str, Any] = {
    "error": {
        "code": 429,
        "message": (
            "The zone 'us-east1-a' does not have enough resources available to fulfill the "
            "request. Try a different zone, or try again later."
        ),
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "RESOURCE_AVAILABILITY",
                "domain": "compute.googleapis.com",
                "metadata": {"zone": "us-east1-a", "vmType": "e2-medium"},
            }
        ],
    }
}
# The same error as a schema: google.rpc.Status plus the code's name (AIP-193's "status")
ERROR_RESPONSE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                **STATUS["properties"],
                "status": {"type": "string", "enum": list(RPC_CODES)},
            },
        }
    },
    "required": ["error"],
}
