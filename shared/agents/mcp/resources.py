"""Operations and their verified results as MCP resources, read through the API.

Three URIs per operation (templates below): the operation as the API shows it,
its verified result, and the items that failed. A result resource exists only
for a success, as in the API, where only a success carries a `response`: a
client that reads a result has, by construction, read a success.

The result is the one the reconciler verified and stored inline (JSON up to
64 KiB). A larger result stays on the reconciler's disk, which the API does
not serve; its resource says so instead of pointing at a path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from shared.agents.client import ApiProblem, AsyncJobwardenClient, JobwardenError
from shared.agents.mcp.view import SCHEME, failed_items_uri, operation_uri, result_uri

JSON = "application/json"
LIST_PAGE_SIZE = 50
# A failed-items resource is read in one piece; past this many items the rest
# is left to the API's paginated endpoint (the resource says it was cut).
MAX_FAILED_ITEMS = 1000
FAILED_ITEMS_PAGE = 200
_URI = re.compile(rf"^{SCHEME}://operations/(op_[0-9A-HJKMNP-TV-Z]{{26}})(/result|/failed-items)?$")

TEMPLATES = [
    types.ResourceTemplate(
        name="operation",
        title="An operation",
        uri_template=f"{SCHEME}://operations/{{operation_id}}",
        description="One of your operations as jobwarden records it (state, message, ids).",
        mime_type=JSON,
    ),
    types.ResourceTemplate(
        name="result",
        title="A verified result",
        uri_template=f"{SCHEME}://operations/{{operation_id}}/result",
        description="The result of a succeeded operation, as verified and stored.",
        mime_type=JSON,
    ),
    types.ResourceTemplate(
        name="failed-items",
        title="Items that failed",
        uri_template=f"{SCHEME}://operations/{{operation_id}}/failed-items",
        description="The items of a completed_with_errors operation that were not written.",
        mime_type=JSON,
    ),
]


def not_found(uri: str, why: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=f"Resource not found: {why}", data={"uri": uri})


def unreadable(error: JobwardenError) -> MCPError:
    return MCPError(code=INTERNAL_ERROR, message=f"jobwarden could not be read: {error}")


async def list_resources(
    client: AsyncJobwardenClient, cursor: str | None
) -> types.ListResourcesResult:
    """The caller's operations, newest first, each with its result when it has one."""
    try:
        page = await client.list_operations(mine=True, page_size=LIST_PAGE_SIZE, page_token=cursor)
    except ApiProblem as exc:
        if exc.status in (400, 422):
            raise MCPError(code=INVALID_PARAMS, message="Invalid cursor") from None
        raise unreadable(exc) from None
    except JobwardenError as exc:
        raise unreadable(exc) from None
    found: list[types.Resource] = []
    for operation in page["operations"]:
        found.extend(_resources_of(operation))
    return types.ListResourcesResult(resources=found, next_cursor=page.get("next_page_token"))


def _resources_of(operation: dict[str, Any]) -> list[types.Resource]:
    op_id = operation["operation_id"]
    kind = operation.get("metadata", {}).get("kind", "operation")
    listed = [
        types.Resource(
            uri=operation_uri(op_id),
            name=op_id,
            title=f"{kind} {op_id}",
            description=operation.get("message"),
            mime_type=JSON,
        )
    ]
    if "response" in operation:
        listed.append(
            types.Resource(
                uri=result_uri(op_id),
                name=f"{op_id}/result",
                title=f"Result of {kind} {op_id}",
                description=f"Verified result ({operation['response'].get('outcome')}).",
                mime_type=JSON,
            )
        )
    return listed


async def read_resource(client: AsyncJobwardenClient, uri: str) -> types.ReadResourceResult:
    match = _URI.match(uri)
    if match is None:
        raise not_found(uri, "not a jobwarden operation URI")
    op_id, part = match.group(1), match.group(2)
    try:
        body = await _read(client, uri, op_id, part)
    except ApiProblem as exc:
        if exc.status == 404:
            raise not_found(uri, f"no operation {op_id} is visible to this token") from None
        raise unreadable(exc) from None
    except JobwardenError as exc:
        raise unreadable(exc) from None
    text = json.dumps(body, ensure_ascii=False, default=str)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=JSON, text=text)]
    )


async def _read(
    client: AsyncJobwardenClient, uri: str, op_id: str, part: str | None
) -> dict[str, Any]:
    operation = await client.get(op_id)
    if part is None:
        return {k: v for k, v in operation.items() if k != "links"}  # API paths, not MCP URIs
    response = operation.get("response")
    if part == "/result":
        if response is None:
            raise not_found(uri, f"{op_id} has no verified result: {operation.get('message')}")
        return _result_body(op_id, response)
    # a success's failed items, or those a failed job kept (`partial_output`)
    kept = response or operation.get("partial_output")
    if not kept or not kept.get("errors_ref"):
        raise not_found(uri, f"{op_id} has no failed items")
    return await _failed_items(client, op_id)


def _result_body(op_id: str, response: dict[str, Any]) -> dict[str, Any]:
    body = {
        "operation_id": op_id,
        "outcome": response.get("outcome"),
        "counts": response.get("summary"),
        "result": response.get("result"),
        "failed_items_uri": failed_items_uri(op_id) if response.get("errors_ref") else None,
    }
    if response.get("result") is None:
        body["note"] = (
            "The result is verified but too large to be kept inline; jobwarden stores it on "
            "the reconciler's host and does not serve it over the API."
        )
    return body


async def _failed_items(client: AsyncJobwardenClient, op_id: str) -> dict[str, Any]:
    items: list[Any] = []
    token: str | None = None
    page: dict[str, Any] = {}
    while len(items) < MAX_FAILED_ITEMS:
        page = await client.failed_items(op_id, page_size=FAILED_ITEMS_PAGE, page_token=token)
        items.extend(page["items"])
        token = page.get("next_page_token")
        if not token:
            break
    return {
        "operation_id": op_id,
        "items_failed": page.get("items_failed"),
        "items_total": page.get("items_total"),
        "items": items[:MAX_FAILED_ITEMS],
        "truncated": bool(token) or len(items) > MAX_FAILED_ITEMS,
    }
