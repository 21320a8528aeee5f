"""MCP over Streamable HTTP: ids, the bearer header, Host and Origin (a reviewer's findings).

- an operation id went into a URL path unchecked: `check("../openapi.json")`
  read the API's document and failed with JSON-RPC code 0 "'message'",
  `tasks/get("../openapi.json")` with code 0 "'operation_id'", and
  `check("op_...:wait?max_wait=5&")` turned a read into a long-poll;
- `Authorization: Bearer  <token>` (two spaces) was 200 from the API and 401
  from /mcp;
- /mcp checked neither Host nor Origin (DNS rebinding).

The receiver app with the agent API and /mcp, on loopback (uvicorn), and a
real PostgreSQL; the SDK's own client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from shared.agents.client import AsyncJobwardenClient, NotAnOperationId
from shared.agents.mcp.http import transport_security
from shared.settings import Settings
from tests.integration.agent_support import make_token
from tests.integration.mcp_support import (
    EXPORT,
    Mounted,
    call,
    get_task,
    http_session,
    mounted_receiver,
)

ACCEPT = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
NOT_IDS = ["../openapi.json", "op_01ARZ3NDEKTSV4RRFFQ69G5FAV:wait?max_wait=5&", "op_x/../../x"]


@pytest_asyncio.fixture
async def receiver(db_url: str) -> AsyncIterator[Mounted]:
    async with mounted_receiver(db_url) as mounted:
        yield mounted


@pytest_asyncio.fixture
async def token(db: Any) -> str:
    return await make_token(db, "claude")


async def _initialize(url: str, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=INITIALIZE, headers={**ACCEPT, **headers})


# ------------------------------------------------------------------ ids in paths


@pytest.mark.parametrize("not_an_id", NOT_IDS)
async def test_check_with_what_is_not_an_operation_id_is_not_found(
    receiver: Mounted, token: str, not_an_id: str
) -> None:
    async with http_session(receiver.mcp_url, token) as agent:
        answer = await call(agent, "check", operation_id=not_an_id)
    assert answer["status"] == "not_found"
    assert "not an operation id" in answer["message"] and not_an_id not in answer["message"]
    assert receiver.tracker.waits_started == 0  # no long-poll was started for a read


@pytest.mark.parametrize("not_an_id", NOT_IDS)
async def test_tasks_get_with_what_is_not_an_operation_id_is_invalid_params(
    receiver: Mounted, token: str, not_an_id: str
) -> None:
    async with http_session(receiver.mcp_url, token) as agent:
        with pytest.raises(MCPError) as refused:
            await get_task(agent, not_an_id)
    assert refused.value.error.code == INVALID_PARAMS
    assert not_an_id not in refused.value.error.message


async def test_the_client_refuses_an_id_before_sending_it(receiver: Mounted, token: str) -> None:
    async with AsyncJobwardenClient(receiver.url, token) as client:
        for not_an_id in NOT_IDS:
            with pytest.raises(NotAnOperationId) as refused:
                await client.get(not_an_id)
            assert refused.value.status == 404
            with pytest.raises(NotAnOperationId):
                await client.wait(not_an_id, 5)
    assert receiver.tracker.waits_started == 0


async def test_a_real_id_still_reads(receiver: Mounted, token: str) -> None:
    async with http_session(receiver.mcp_url, token) as agent:
        started = await call(agent, "start", **EXPORT, client_reference="r1")
        answer = await call(agent, "check", operation_id=started["operation_id"])
    assert answer["status"] == "running"


# ------------------------------------------------------------------ the bearer header


@pytest.mark.parametrize("spaces", [" ", "  ", "   "])
async def test_api_and_mcp_read_the_bearer_header_alike(
    receiver: Mounted, token: str, spaces: str
) -> None:
    authorization = {"Authorization": f"Bearer{spaces}{token}"}
    async with httpx.AsyncClient(base_url=receiver.url) as http:
        api = await http.get("/v1/operations", headers=authorization)
    mcp = await _initialize(receiver.mcp_url, authorization)
    assert api.status_code == 200, api.text
    assert mcp.status_code == 200, mcp.text


# ------------------------------------------------------------------ Host and Origin


async def test_a_foreign_host_or_origin_is_refused(receiver: Mounted, token: str) -> None:
    bearer = {"Authorization": f"Bearer {token}"}
    rebound = await _initialize(receiver.mcp_url, {**bearer, "Host": "evil.example"})
    assert rebound.status_code == 421
    cross = await _initialize(receiver.mcp_url, {**bearer, "Origin": "https://evil.example"})
    assert cross.status_code == 403
    port = receiver.url.rsplit(":", 1)[-1]
    same = await _initialize(receiver.mcp_url, {**bearer, "Origin": f"http://127.0.0.1:{port}"})
    assert same.status_code == 200, same.text
    # host names are case-insensitive (the SDK compares exactly: 421 before)
    shouted = await _initialize(
        receiver.mcp_url,
        {**bearer, "Host": f"LocalHost:{port}", "Origin": f"http://LOCALHOST:{port}"},
    )
    assert shouted.status_code == 200, shouted.text


def test_allowed_hosts_follow_the_configuration() -> None:
    settings = Settings(
        receiver_host="0.0.0.0",
        public_webhook_url="https://hooks.example.com/webhooks/{provider}",
    )
    security = transport_security(settings, ["jobs.example.internal"])
    assert "hooks.example.com" in security.allowed_hosts
    assert "jobs.example.internal:*" in security.allowed_hosts
    assert "https://hooks.example.com" in security.allowed_origins
    assert "0.0.0.0" not in security.allowed_hosts
    assert security.enable_dns_rebinding_protection
    # a public URL with a port: that host:port, and the bare name a proxy may serve
    ported = transport_security(
        Settings(public_webhook_url="https://hooks.example.com:8443/webhooks/{provider}")
    )
    assert "hooks.example.com:8443" in ported.allowed_hosts
    assert "hooks.example.com" in ported.allowed_hosts
