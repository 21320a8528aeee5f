"""The agent-facing HTTP API (`/v1/operations`), mounted in the receiver app."""

from receiver.api.operations import api_routes

__all__ = ["api_routes"]
