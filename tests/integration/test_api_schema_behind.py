"""The agent API in the upgrade window: a newer receiver on a schema not yet migrated.

Migration 028 grants the receiver role the column a cancel writes. A receiver
of this version started before `jobwarden migrate` reached 028 met
InsufficientPrivilegeError on every cancel and answered 500 "internal", which
an agent takes as final; `/readyz` said `migrations_pending` all along. The
API now answers such a refusal 503 with Retry-After while migrations are
pending (an agent's client retries), and the same cancel goes through once
the schema is migrated.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from receiver.api import operations
from receiver.api.operations import OperationsApi
from shared.db.connect import connect, with_database
from shared.db.migrate import apply_migrations, load_migrations
from shared.ledger.states import LocalState
from tests.conftest import _drop
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.support import drive

JOB = {"provider": "sim", "kind": "export", "request": {"body": {"month": "2025-02"}}}
PROBLEM = "application/problem+json"
# The last migration this receiver's cancel cannot do without.
GRANTS_THE_CANCEL = 28


@pytest_asyncio.fixture
async def behind(pg_server: Any) -> AsyncIterator[tuple[str, Any]]:
    """A database migrated up to, not including, 028; its URL and an owner connection."""
    name = f"jw_api_behind_{os.getpid()}_{secrets.token_hex(3)}"
    admin = await connect(pg_server.admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(pg_server.admin_url, name)
    conn = await connect(url)
    try:
        await apply_migrations(
            conn, [m for m in load_migrations() if m.version < GRANTS_THE_CANCEL]
        )
        yield url, conn
    finally:
        await conn.close()
        await _drop(pg_server.admin_url, name)


async def test_a_cancel_before_migrate_is_503_then_goes_through_once_migrated(
    behind: tuple[str, Any],
) -> None:
    url, owner = behind
    alice = {"Authorization": f"Bearer {await make_token(owner, 'alice')}"}
    async with receiver_pool(url) as pool:
        app = Starlette(routes=OperationsApi(sim_settings(), pool).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            submitted = await http.post("/v1/operations", json=JOB, headers=alice)
            assert submitted.status_code == 202, submitted.text
            op_id = submitted.json()["operation_id"]
            await drive(owner, op_id, LocalState.OBSERVING)  # a job the provider runs
            cancel = f"/v1/operations/{op_id}:cancel"

            refused = await http.post(cancel, json={"reason": "wrong month"}, headers=alice)
            assert refused.status_code == 503, refused.text
            assert refused.headers["content-type"] == PROBLEM
            assert int(refused.headers["retry-after"]) > 0
            assert refused.json()["type"] == "urn:jobwarden:problem:unavailable"
            assert "upgraded" in refused.json()["detail"]

            assert await apply_migrations(owner)  # the rest, 028 included
            accepted = await http.post(cancel, json={"reason": "wrong month"}, headers=alice)
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["metadata"]["state"] == "cancel_requested"


@pytest.mark.parametrize(
    ("pending", "status"), [(True, 503), (False, 500)], ids=["pending", "migrated"]
)
async def test_a_schema_error_is_the_upgrade_window_only_while_migrations_are_pending(
    pending: bool, status: int
) -> None:
    """With nothing pending, a missing column is a real fault: 500, as before."""

    async def handler(_request: Request) -> Response:
        raise asyncpg.UndefinedColumnError("column x does not exist")

    async def migrations_pending() -> bool:
        return pending

    edge = operations._problem_edge(handler, migrations_pending)
    scope = {"type": "http", "method": "POST", "path": "/v1/operations/x:cancel", "headers": []}
    response = await edge(Request(scope))
    assert response.status_code == status
    assert (response.headers.get("retry-after") is not None) == pending


async def test_a_migrations_check_that_fails_leaves_the_refusal_a_500_problem(
    behind: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is a diagnosis: if it cannot tell, the answer stays what it was."""
    url, owner = behind

    async def cannot_tell(_conn: Any) -> list[str]:
        raise RuntimeError("the check itself failed")

    monkeypatch.setattr(operations, "pending_migrations", cannot_tell)
    alice = {"Authorization": f"Bearer {await make_token(owner, 'alice')}"}
    async with receiver_pool(url) as pool:
        app = Starlette(routes=OperationsApi(sim_settings(), pool).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            submitted = await http.post("/v1/operations", json=JOB, headers=alice)
            op_id = submitted.json()["operation_id"]
            await drive(owner, op_id, LocalState.OBSERVING)
            refused = await http.post(
                f"/v1/operations/{op_id}:cancel", json={"reason": "x"}, headers=alice
            )
    assert refused.status_code == 500 and refused.headers["content-type"] == PROBLEM
    assert refused.json()["type"] == "urn:jobwarden:problem:internal"
