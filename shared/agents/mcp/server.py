"""The MCP server itself, on the SDK's low-level `Server`, for any transport.

The low-level server (not `MCPServer`) because every schema here is written
by hand for models to read, and the answers are shaped by hand: structured
content, resource links, and task results the SDK's tool layer does not make.

The SDK runs each request in its own task, so a `check` is answered while an
`await` waits, and `notifications/cancelled` cancels the waiting task at once
(the event stream it holds is closed on the way out).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from shared.agents.client import AsyncJobwardenClient, JobwardenError
from shared.agents.mcp import calls, resources, tasks, view
from shared.agents.mcp.catalog import (
    INSTRUCTIONS,
    SERVER_NAME,
    TOOLS,
    TOOLS_BY_NAME,
    server_version,
)
from shared.agents.mcp.sources import ClientSource

Context = ServerRequestContext[Any, Any]


def build_server(source: ClientSource) -> Server[Any]:
    """The jobwarden MCP server; `source` gives each request its API client."""

    async def list_tools(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[t.definition(ctx.protocol_version) for t in TOOLS])

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS_BY_NAME:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            client = source.client()
        except JobwardenError as exc:  # e.g. JW_API_URL / JW_API_TOKEN missing
            return view.error_result(f"jobwarden is not reachable or not configured: {exc}")

        async def report(progress: float, message: str) -> None:
            await ctx.session.report_progress(progress, None, message)

        return await calls.run(params.name, params.arguments or {}, client, report)

    async def list_resources(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await resources.list_resources(_client(source), params.cursor if params else None)

    async def list_templates(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resources.TEMPLATES)

    async def read_resource(
        ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await resources.read_resource(_client(source), params.uri)

    server: Server[Any] = Server(
        SERVER_NAME,
        version=server_version(),
        title="jobwarden",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    tasks.register(server, tasks.LedgerTasks(source))
    return server


def _client(source: ClientSource) -> AsyncJobwardenClient:
    try:
        return source.client()
    except JobwardenError as exc:
        raise MCPError(code=INTERNAL_ERROR, message=f"jobwarden is not configured: {exc}") from None
