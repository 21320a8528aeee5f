"""The MCP tools' new limits hold no legitimate agent back (a second read).

The reason and consumer limits (500 and 200 characters) count characters as
the API does: one at the limit, of characters outside the BMP (two UTF-16
units, four UTF-8 bytes each), is recorded whole. A request's finite JSON
numbers at a double's edges are sent as they are; only NaN and Infinity
are refused.
"""

from __future__ import annotations

from typing import Any

from shared.ledger.states import LocalState as S
from tests.integration.agent_support import advance, finish_with_result
from tests.integration.test_mcp_fuzz import (
    SANE_START,
    LogLines,
    Raw,
    Session,
    check_logs,
    encode,
    logs,
    session,
)

__all__ = ["logs", "session"]  # the fixtures, shared with test_mcp_fuzz

CLEF = "\U0001d11e"  # MUSICAL SYMBOL G CLEF: 1 character, 2 UTF-16 units, 4 UTF-8 bytes


async def _started(session: Session, request: Any = None) -> str:
    arguments = SANE_START if request is None else {**SANE_START, "request": request}
    result = (await session.call("start", arguments))["result"]
    assert not result.get("isError"), result
    op_id: str = result["structuredContent"]["operation_id"]
    return op_id


async def test_a_reason_of_exactly_500_characters_outside_the_bmp_is_recorded(
    session: Session, logs: LogLines, db: Any
) -> None:
    op_id = await _started(session)
    await advance(db, op_id, S.OBSERVING)
    reason = CLEF * 499 + "é"
    assert len(reason) == 500
    result = (await session.call("cancel", {"operation_id": op_id, "reason": reason}))["result"]
    assert not result.get("isError"), result
    recorded = await db.fetchval(
        "SELECT cancel_reason FROM operations WHERE operation_id = $1", op_id
    )
    assert recorded == reason
    check_logs(logs)


async def test_a_consumer_of_exactly_200_characters_outside_the_bmp_claims(
    session: Session, logs: LogLines, db: Any
) -> None:
    op_id = await _started(session)
    await finish_with_result(db, op_id, total=1)
    consumer = CLEF * 200
    arguments = {"operation_id": op_id, "consumer": consumer, "max_wait": 1}
    result = (await session.call("await", arguments))["result"]
    assert not result.get("isError"), result
    claimed = await db.fetchval(
        "SELECT count(*) FROM completion_claims WHERE consumer = $1", consumer
    )
    assert claimed == 1
    check_logs(logs)


async def test_finite_numbers_at_a_doubles_edges_are_submitted(
    session: Session, logs: LogLines, db: Any
) -> None:
    numbers = {
        "max": Raw("1.7976931348623157e308"),
        "big": Raw("1e308"),
        "min": Raw("-1e308"),
        "tiny": Raw("5e-324"),
        "under": Raw("1e-400"),  # read as 0.0: finite
        "int": Raw("1" + "0" * 400),  # an integer past a double: JSON still
    }
    request = {"body": numbers}
    session.next_id += 1
    message = {
        "jsonrpc": "2.0",
        "id": session.next_id,
        "method": "tools/call",
        "params": {"name": "start", "arguments": {**SANE_START, "request": request}},
    }
    status, messages = await session.send(encode(message))
    assert status == 200, messages
    [answer] = [m for m in messages if m.get("id") == session.next_id]
    result = answer["result"]
    assert not result.get("isError"), result
    assert await session.operations() == 1
    check_logs(logs)
