"""The agent interface under faults a hostile tester reaches for (round 52).

Everything is real: uvicorn on loopback, PostgreSQL, the receiver's database
role. The tests wait on the server's own signals (its wait slots), never on
sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.agents.client import ApiProblem, AsyncJobwardenClient
from shared.ledger import tokens
from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.integration.agent_support import (
    advance,
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)
from tests.integration.mcp_support import SIGNAL_TIMEOUT_SECONDS

S = LocalState
JOB = {"provider": "sim", "kind": "export", "request": {"body": {"month": "2025-02"}}}


@dataclass
class Served:
    url: str
    ops: OperationsApi


@contextlib.asynccontextmanager
async def served(db_url: str) -> AsyncIterator[Served]:
    async with receiver_pool(db_url) as pool:
        ops = OperationsApi(sim_settings(), pool)
        async with serve_app(Starlette(routes=ops.routes())) as url:
            yield Served(url, ops)


async def submit(url: str, token: str) -> str:
    async with httpx.AsyncClient(base_url=url) as http:
        response = await http.post(
            "/v1/operations", json=JOB, headers={"Authorization": f"Bearer {token}"}
        )
    assert response.status_code == 202, response.text
    return str(response.json()["operation_id"])


async def token_id_of(db: Any, caller: str) -> str:
    return str(await db.fetchval("SELECT token_id FROM api_tokens WHERE caller = $1", caller))


# ------------------------------------------------------- a token revoked mid-wait


async def test_a_long_poll_whose_token_is_revoked_answers_401_not_the_operation(
    db: Any, db_url: str
) -> None:
    """Before: the token was checked once, when the long-poll began; revoked while
    it waited (up to 300 s), the wait still answered the operation, result and
    all, to a caller the service no longer recognised."""
    token = await make_token(db, "bot")
    async with served(db_url) as api:
        op_id = await submit(api.url, token)
        async with httpx.AsyncClient(base_url=api.url, timeout=60) as http:
            waiting = http.get(
                f"/v1/operations/{op_id}:wait",
                params={"max_wait": "60"},
                headers={"Authorization": f"Bearer {token}"},
            )
            task = asyncio.ensure_future(waiting)
            async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                await api.ops.wait_slots.until(lambda n: n >= 1)  # authenticated, waiting
            await tokens.revoke_token(db, await token_id_of(db, "bot"))
            await finish_with_result(db, op_id, total=3, inline={"secret": "the result"})
            async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                response = await task
    assert response.status_code == 401, response.text
    assert "the result" not in response.text


async def test_an_event_stream_whose_token_is_revoked_ends_with_a_401_error(
    db: Any, db_url: str
) -> None:
    """Before: an event stream (open for hours on a long job) kept sending every
    transition, and the final resource, to a token revoked after it opened."""
    token = await make_token(db, "bot")
    async with served(db_url) as api:
        op_id = await submit(api.url, token)
        after = int(
            await db.fetchval("SELECT max(seq) FROM history WHERE operation_id = $1", op_id)
        )
        seen: list[str] = []

        async def follow() -> None:
            async with (
                AsyncJobwardenClient(api.url, token) as client,
                contextlib.aclosing(client.events(op_id, after=after)) as events,
            ):
                async for event in events:
                    seen.append(event.name)

        task = asyncio.ensure_future(follow())
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            await api.ops.wait_slots.until(lambda n: n >= 1)
        await tokens.revoke_token(db, await token_id_of(db, "bot"))
        await advance(db, op_id, S.OBSERVING)
        await finish_with_result(db, op_id, total=3)
        with pytest.raises(ApiProblem) as raised:
            async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
                await task
    assert raised.value.status == 401
    assert seen == []  # not one transition after the revocation
