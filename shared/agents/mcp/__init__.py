"""The agent tools as a Model Context Protocol server, on the official SDK.

Two transports, one server (`server.build_server`):

- stdio (`jobwarden mcp`, `stdio.main`): one agent, named by JW_API_TOKEN,
  talking to the API at JW_API_URL;
- Streamable HTTP (`http.mcp_endpoint`), mounted in the receiver at /mcp,
  for remote agents, each authenticated by its own agent token.

Both reach the ledger only through the agent API, so a model sees over MCP
exactly what its token sees over HTTP. Modules: `catalog` (tools, words,
hints), `schemas` (output schemas), `calls` (one tool call), `waiting` (the
`await` tool and its progress), `resources`, `tasks` (MCP Tasks kept in the
ledger), `view` (a result as MCP content), `sources` (where a request's API
client comes from).
"""

from shared.agents.mcp.stdio import main, run_stdio

__all__ = ["main", "run_stdio"]
