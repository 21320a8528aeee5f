"""Agent-facing tools on top of the HTTP API: the client, the tool wrapper, the MCP server."""
