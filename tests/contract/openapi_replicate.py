"""Excerpts of Replicate's OpenAPI document: predictions, as the replicate contract tests use them.

Source: Replicate's own document, served at api.replicate.com/openapi.json; the
copy read is github.com/tryAGI/Replicate, file src/libs/Replicate/openapi.json,
commit 6c8ab8eafafd63aea2a114ea70079c19c88882c9 (2026-04-09; the file was last
downloaded there on 2026-03-16, commit 1625ee75, by its generate.sh, unchanged),
info.version "1.0.0-a1", OpenAPI 3.1.0, server https://api.replicate.com/v1.
Replicate keeps no public repository of the document itself.

Copied as printed, $refs resolved by hand, `description` and `example` keys
left out; `"nullable": true` (an OpenAPI 3.0 keyword the 3.1 document still
uses on `error`) is written as `"type": [..., "null"]`.
"""

from __future__ import annotations

import re
from typing import Any

from tests.contract.support import Operation

DOCUMENT = "Replicate openapi.json (tryAGI/Replicate @ 6c8ab8ea, info.version 1.0.0-a1)"
SERVER = "https://api.replicate.com/v1"

# #/paths: predictions
OPERATIONS = (
    Operation("POST", "/predictions", "predictions.create"),
    Operation("GET", "/predictions", "predictions.list"),
    Operation("GET", "/predictions/{prediction_id}", "predictions.get"),
    Operation("POST", "/predictions/{prediction_id}/cancel", "predictions.cancel"),
    Operation(
        "POST", "/models/{model_owner}/{model_name}/predictions", "models.predictions.create"
    ),
    Operation(
        "POST",
        "/deployments/{deployment_owner}/{deployment_name}/predictions",
        "deployments.predictions.create",
    ),
)

# #/components/parameters/parameters_cancel_after_header: a string; its description: "The
# duration can be specified as string with an optional unit suffix: s [...] m [...] h [...]
# defaults to seconds if no unit suffix is provided [...] You can combine units [...]
# (e.g., 1h30m45s). The minimum allowed duration is 5 seconds."
CANCEL_AFTER_HEADER: dict[str, Any] = {"type": "string"}
CANCEL_AFTER_SYNTAX = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?$")
CANCEL_AFTER_MINIMUM_SECONDS = 5

# #/components/schemas/schemas_version_prediction_request
VERSION_PREDICTION_REQUEST: dict[str, Any] = {
    "additionalProperties": False,
    "properties": {
        "input": {"type": "object"},
        "stream": {"type": "boolean"},
        "version": {"type": "string"},
        "webhook": {"type": "string"},
        "webhook_events_filter": {
            "items": {"enum": ["start", "output", "logs", "completed"], "type": "string"},
            "type": "array",
        },
    },
    "required": ["version", "input"],
    "type": "object",
}

# #/components/schemas/schemas_prediction_response/properties/status
PREDICTION_STATUS: dict[str, Any] = {
    "enum": ["starting", "processing", "succeeded", "failed", "canceled", "aborted"],
    "type": "string",
}

# #/components/schemas/schemas_prediction_response; also the body of every webhook ("the request
# body is the same as the response body of the get prediction operation", says the description
# of #/components/schemas/schemas_version_prediction_request/properties/webhook)
PREDICTION_RESPONSE: dict[str, Any] = {
    "properties": {
        "completed_at": {"format": "date-time", "type": "string"},
        "created_at": {"format": "date-time", "type": "string"},
        "data_removed": {"type": "boolean"},
        "deadline": {"format": "date-time", "type": "string"},
        "deployment": {"type": "string"},
        "error": {"type": ["string", "null"]},
        "id": {"type": "string"},
        "input": {"additionalProperties": True, "type": "object"},
        "logs": {"type": "string"},
        "metrics": {
            "additionalProperties": True,
            "properties": {"total_time": {"type": "number"}},
            "type": "object",
        },
        "model": {"type": "string"},
        "output": {},
        "source": {"enum": ["web", "api"], "type": "string"},
        "started_at": {"format": "date-time", "type": "string"},
        "status": PREDICTION_STATUS,
        "urls": {
            "properties": {
                "cancel": {"format": "uri", "type": "string"},
                "get": {"format": "uri", "type": "string"},
                "stream": {"format": "uri", "type": "string"},
                "web": {"format": "uri", "type": "string"},
            },
            "required": ["web", "get", "cancel"],
            "type": "object",
        },
        "version": {"oneOf": [{"type": "string"}, {"enum": ["hidden"], "type": "string"}]},
    },
    "required": [
        "id",
        "model",
        "version",
        "input",
        "output",
        "data_removed",
        "error",
        "status",
        "created_at",
        "urls",
    ],
    "type": "object",
}

# #/paths/~1predictions~1{prediction_id}/get/description: its example prediction, as printed
PREDICTION_EXAMPLE: dict[str, Any] = {
    "id": "gm3qorzdhgbfurvjtvhg6dckhu",
    "model": "replicate/hello-world",
    "version": "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa",
    "input": {"text": "Alice"},
    "logs": "",
    "output": "hello Alice",
    "error": None,
    "status": "succeeded",
    "created_at": "2023-09-08T16:19:34.765994Z",
    "source": "api",
    "data_removed": False,
    "started_at": "2023-09-08T16:19:34.779176Z",
    "completed_at": "2023-09-08T16:19:34.791859Z",
    "metrics": {"predict_time": 0.012683},
    "urls": {
        "web": "https://replicate.com/p/gm3qorzdhgbfurvjtvhg6dckhu",
        "get": "https://api.replicate.com/v1/predictions/gm3qorzdhgbfurvjtvhg6dckhu",
        "cancel": "https://api.replicate.com/v1/predictions/gm3qorzdhgbfurvjtvhg6dckhu/cancel",
    },
}

# #/paths/~1files~1{file_id}/get/responses/404 (application/problem+json): the document's
# problem-document schema; its prediction operations list no error answers
PROBLEM: dict[str, Any] = {"properties": {"detail": {"type": "string"}}, "type": "object"}
