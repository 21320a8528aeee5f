"""`jobwarden mcp`: the MCP server on stdin/stdout, for one agent named by its token.

The tools reach the jobwarden API with `JW_API_URL` and `JW_API_TOKEN`; the
token names the agent, so `pending`, `tasks/list` and resources list this
agent's operations only. stdout carries protocol messages only (the SDK points
fd 1 at stderr while serving); diagnostics go to stderr.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Mapping

from mcp.server.stdio import stdio_server

from shared.agents.client import JobwardenError
from shared.agents.mcp.server import build_server
from shared.agents.mcp.sources import EnvClientSource

log = logging.getLogger(__name__)


async def run_stdio(env: Mapping[str, str] | None = None) -> int:
    """Serve until stdin closes; 0 on a clean end."""
    source = EnvClientSource(env)
    _say_if_unreachable(source)
    server = build_server(source)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await source.aclose()
    return 0


def _say_if_unreachable(source: EnvClientSource) -> None:
    """Without JW_API_URL / JW_API_TOKEN the server still starts (an MCP client
    launches it and lists its tools), but every tool call will fail: say so on
    stderr now, where whoever wired it up looks, not at the agent's first call."""
    try:
        source.client()
    except JobwardenError as exc:
        log.warning("%s: the server starts, and every tool call will fail until then", exc)


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        return asyncio.run(run_stdio())
    except KeyboardInterrupt:
        return 130
