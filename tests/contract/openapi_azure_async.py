"""Excerpts of Azure documents: long-running operations, as the azure_async contract tests use them.

Two documents, because the preset is generic:

- The status monitor every Azure data-plane LRO returns, from the Azure REST
  API Guidelines: github.com/microsoft/api-guidelines, azure/Guidelines.md at
  commit 011dd3c9d806e06230870151f2d1edcfec87a03d (2024-03-21), section
  "Obtaining status and results of long-running operations" (OperationStatus:
  id, status NotStarted | Running | Succeeded | Failed | Canceled, error,
  result; additional properties allowed) and "POST or DELETE LRO pattern"
  (Operation-Id request header, 202 Accepted, Operation-Location header). A
  table, not a schema: STATUS_MONITOR writes it as one.
- The service the preset's header configures as its example, Document
  Translation: github.com/Azure/azure-rest-api-specs, file
  specification/translation/data-plane/Azure.AI.DocumentTranslation/stable/2024-05-01/openapi.json
  at commit 00874be62d1b63bf91a217287743feaaa6bf5a65, info.version
  "2024-05-01", Swagger 2.0, host template "{endpoint}/translator".

Copied as printed, $refs resolved by hand; `description`, `x-ms-*` and
`readOnly` keys are left out; the recursive `innerError` is cut after one
level (left open: `{"type": "object"}`).
"""

from __future__ import annotations

from typing import Any

from tests.contract.support import Operation

DOCUMENT = (
    "Azure REST API Guidelines @ 011dd3c9 + Azure.AI.DocumentTranslation 2024-05-01 @ 00874be6"
)
ENDPOINT = "https://my-resource.cognitiveservices.azure.com"
SERVER = ENDPOINT + "/translator"
API_VERSION = "2024-05-01"

# #/paths of Document Translation 2024-05-01: batches (each takes the required query parameter
# api-version, #/parameters/Azure.Core.Foundations.ApiVersionParameter)
OPERATIONS = (
    Operation("POST", "/document/batches", "DocumentTranslationOperations_StartTranslation"),
    Operation("GET", "/document/batches", "DocumentTranslationOperations_GetTranslationsStatus"),
    Operation(
        "GET", "/document/batches/{id}", "DocumentTranslationOperations_GetTranslationStatus"
    ),
    Operation(
        "DELETE", "/document/batches/{id}", "DocumentTranslationOperations_CancelTranslation"
    ),
)
# #/paths/~1document~1batches/post/responses/202/headers
START_RESPONSE_HEADERS = ("location",)

# #/definitions/Azure.Core.Foundations.Error (innererror cut, see the module docstring); the
# guidelines' ErrorDetail has the same shape
ERROR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string"},
        "message": {"type": "string"},
        "target": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}},
        "innererror": {"type": "object"},
    },
    "required": ["code", "message"],
}

# #/definitions/Azure.Core.Foundations.ErrorResponse
ERROR_RESPONSE: dict[str, Any] = {
    "type": "object",
    "properties": {"error": ERROR},
    "required": ["error"],
}

# Guidelines, "OperationStatus : Object" (the table), as JSON Schema
STATUS_MONITOR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "status": {
            "type": "string",
            "enum": ["NotStarted", "Running", "Succeeded", "Failed", "Canceled"],
        },
        "error": ERROR,
        "result": {"type": "object"},
    },
    "required": ["id", "status"],
}

# #/definitions/StartTranslationDetails (BatchRequest, SourceInput, DocumentFilter, TargetInput,
# Glossary, StorageSource, StorageInputType inlined)
_STORAGE_SOURCE: dict[str, Any] = {"type": "string", "enum": ["AzureBlob"]}
START_TRANSLATION_DETAILS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inputs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {
                        "type": "object",
                        "properties": {
                            "sourceUrl": {"type": "string"},
                            "filter": {
                                "type": "object",
                                "properties": {
                                    "prefix": {"type": "string"},
                                    "suffix": {"type": "string"},
                                },
                            },
                            "language": {"type": "string"},
                            "storageSource": _STORAGE_SOURCE,
                        },
                        "required": ["sourceUrl"],
                    },
                    "targets": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "targetUrl": {"type": "string"},
                                "category": {"type": "string"},
                                "language": {"type": "string"},
                                "glossaries": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "glossaryUrl": {"type": "string"},
                                            "format": {"type": "string"},
                                            "version": {"type": "string"},
                                            "storageSource": _STORAGE_SOURCE,
                                        },
                                        "required": ["glossaryUrl", "format"],
                                    },
                                },
                                "storageSource": _STORAGE_SOURCE,
                            },
                            "required": ["targetUrl", "language"],
                        },
                    },
                    "storageType": {"type": "string", "enum": ["Folder", "File"]},
                },
                "required": ["source", "targets"],
            },
        }
    },
    "required": ["inputs"],
}

# #/definitions/Status
TRANSLATION_STATUS_VALUES: dict[str, Any] = {
    "type": "string",
    "enum": [
        "NotStarted",
        "Running",
        "Succeeded",
        "Failed",
        "Cancelled",
        "Cancelling",
        "ValidationFailed",
    ],
}

# #/definitions/TranslationStatus (Status, TranslationError, TranslationErrorCode,
# InnerTranslationError, StatusSummary inlined)
TRANSLATION_STATUS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "createdDateTimeUtc": {"type": "string", "format": "date-time"},
        "lastActionDateTimeUtc": {"type": "string", "format": "date-time"},
        "status": TRANSLATION_STATUS_VALUES,
        "error": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "enum": [
                        "InvalidRequest",
                        "InvalidArgument",
                        "InternalServerError",
                        "ServiceUnavailable",
                        "ResourceNotFound",
                        "Unauthorized",
                        "RequestRateTooHigh",
                    ],
                },
                "message": {"type": "string"},
                "target": {"type": "string"},
                "innerError": {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "target": {"type": "string"},
                        "innerError": {"type": "object"},
                    },
                    "required": ["code", "message"],
                },
            },
            "required": ["code", "message"],
        },
        "summary": {
            "type": "object",
            "properties": {
                "total": {"type": "integer", "format": "int32"},
                "failed": {"type": "integer", "format": "int32"},
                "success": {"type": "integer", "format": "int32"},
                "inProgress": {"type": "integer", "format": "int32"},
                "notYetStarted": {"type": "integer", "format": "int32"},
                "cancelled": {"type": "integer", "format": "int32"},
                "totalCharacterCharged": {"type": "integer", "format": "int64"},
            },
            "required": [
                "total",
                "failed",
                "success",
                "inProgress",
                "notYetStarted",
                "cancelled",
                "totalCharacterCharged",
            ],
        },
    },
    "required": ["id", "createdDateTimeUtc", "lastActionDateTimeUtc", "status", "summary"],
}

# examples/batch.json (commit 4ab95eb8): the StartTranslation request body, and its 202's headers
# as printed (the query string sits in the middle of both URLs)
START_TRANSLATION_EXAMPLE: dict[str, Any] = {
    "inputs": [
        {
            "source": {
                "sourceUrl": "https://myblob.blob.core.windows.net/sourceContainer",
                "filter": {"prefix": "pre", "suffix": ".txt"},
                "language": "en",
                "storageSource": "AzureBlob",
            },
            "targets": [
                {
                    "targetUrl": "https://myblob.blob.core.windows.net/destinationContainer1",
                    "category": "general",
                    "language": "fr",
                    "glossaries": [
                        {
                            "glossaryUrl": (
                                "https://myblob.blob.core.windows.net/myglossary/en_fr_glossary.xlf"
                            ),
                            "storageSource": "AzureBlob",
                            "format": "XLIFF",
                        }
                    ],
                    "storageSource": "AzureBlob",
                },
                {
                    "targetUrl": "https://myblob.blob.core.windows.net/destinationContainer2",
                    "category": "general",
                    "language": "es",
                    "storageSource": "AzureBlob",
                },
            ],
            "storageType": "Folder",
        }
    ]
}
_EXAMPLE_MONITOR_URL = (
    "https://westus.cognitiveservices.azure.com/translator/document/batches"
    "?api-version=2024-05-01/0FA2822F-4C2A-4317-9C20-658C801E0E55"
)
START_RESPONSE_EXAMPLE_HEADERS = {
    "location": _EXAMPLE_MONITOR_URL,
    "Azure-AsyncOperation": _EXAMPLE_MONITOR_URL,
}

# examples/cancel.json (commit 73fac042): a TranslationStatus as printed -- its id is spelled
# `translationId`, so the schema's required `id` is missing
TRANSLATION_STATUS_EXAMPLE: dict[str, Any] = {
    "translationId": "727bf148-f327-47a0-9481-abae6362f11e",
    "createdDateTimeUtc": "2020-03-26T00:00:00Z",
    "lastActionDateTimeUtc": "2020-03-26T01:00:00Z",
    "status": "Succeeded",
    "summary": {
        "total": 10,
        "failed": 1,
        "success": 9,
        "inProgress": 0,
        "notYetStarted": 0,
        "cancelled": 0,
        "totalCharacterCharged": 0,
    },
}
