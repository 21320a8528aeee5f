"""`python -m shared.agents.mcp`: the stdio server, as `jobwarden mcp` runs it."""

import sys

from shared.agents.mcp.stdio import main

sys.exit(main())
