"""Spans for the transitions the receiver makes: an agent's cancel, an operator's decision.

The reconciler's transitions are events on its step spans. A move made by the
agent API or the console happens in no step; so, with tracing on, the history
mark is read before the action and the rows it added are read back after its
commit, and each becomes a `transition` event on a span of its own under the
operation's root (shared/telemetry/spans.moved). Only what committed is
reported, and only the rows of this actor (the reconciler, woken by the
commit, may already have added its own). With tracing off this reads nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from shared.ledger import operations
from shared.telemetry import spans

logger = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def traced_moves(conn: Any, operation_id: str, name: str, actor: str) -> AsyncIterator[None]:
    """Run an action; if tracing is on, record the transitions it committed as one span."""
    if not spans.enabled():
        yield
        return
    started = spans.clock()
    mark = await operations.history_mark(conn, operation_id)
    yield
    if mark is None or conn.is_in_transaction():
        return
    try:
        moves = await operations.transitions_after(conn, mark, actor)
    except Exception as exc:  # the action committed; its span is not worth an error page
        logger.warning(
            "could not read back transitions for their span",
            extra={"ctx": {"operation_id": operation_id, "error": type(exc).__name__}},
        )
        return
    spans.moved(name, mark.trace_id, operation_id, actor, moves, start_time=started)
