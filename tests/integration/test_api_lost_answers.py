"""The agent API when its database connection drops mid-request.

A PostgreSQL wire proxy (bench/pgproxy.py) sits between the API's pool and
the server and cuts one statement's connection. What must hold: a request
answered with an error left nothing behind that a retry would duplicate, and
a claim made without its caller hearing it is still the caller's.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bench.pgproxy import Fault, PgProxy
from shared import ledger
from shared.agents.client import AsyncJobwardenClient
from shared.agents.tools import ToolResult, claim_if_succeeded_async
from shared.db.connect import connect
from shared.serve import serve_app
from tests.integration.agent_support import (
    api_app,
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)
from tests.support import lock_waits

SUBMIT = {"provider": "sim", "kind": "export", "request": {"body": {"rows": 3}}}
CLAIM_INSERT = re.compile(r"INSERT INTO completion_claims")
OPERATION_INSERT = re.compile(r"INSERT INTO operations")
COMMIT = re.compile(r"^\s*COMMIT", re.IGNORECASE)
# asyncpg's reset when a connection goes back to the pool.
POOL_RESET = re.compile(r"RESET ALL")
# The read of the operation the API answers with.
OPERATION_READ = re.compile(r"FROM operations_overview")


@dataclass
class Api:
    url: str
    token: str
    proxy: PgProxy

    def client(self) -> AsyncJobwardenClient:
        return AsyncJobwardenClient(self.url, self.token)

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url) as http:
            return await http.post(
                path, json=body, headers={"Authorization": f"Bearer {self.token}"}
            )


@pytest_asyncio.fixture
async def api(db: Any, db_url: str) -> AsyncIterator[Api]:
    async with (
        PgProxy.from_url(db_url) as proxy,
        receiver_pool(proxy.url_for(db_url)) as pool,
        serve_app(api_app(sim_settings(), pool)) as url,
    ):
        yield Api(url, await make_token(db, "agent1"), proxy)


async def succeeded_operation(db: Any, api: Api) -> str:
    created = await api.post("/v1/operations", {**SUBMIT, "client_reference": "claimed-op"})
    assert created.status_code == 202, created.text
    op_id: str = created.json()["operation_id"]
    await finish_with_result(db, op_id, total=3)
    return op_id


SUCCESS = "Finished successfully."


async def test_a_claim_whose_commit_answer_was_lost_is_still_the_callers(db: Any, api: Api) -> None:
    op_id = await succeeded_operation(db, api)
    # the COMMIT runs, its answer never arrives: the claim is made, unheard
    api.proxy.arm(Fault(action="drop_after", match=COMMIT, after_match=CLAIM_INSERT))
    result = ToolResult(
        status="succeeded", operation_id=op_id, job_id="job-1", done=True, message=SUCCESS
    )
    async with api.client() as client:
        first = await claim_if_succeeded_async(client, result, "billing")
        assert api.proxy.fired.is_set()
        assert first.claimed is True, first.message
        # another claimer (its own token) of the same consumer name: not twice
        again = await claim_if_succeeded_async(client, result, "billing")
        assert again.claimed is False, again.message
    claims = await db.fetch("SELECT consumer FROM completion_claims WHERE operation_id = $1", op_id)
    assert [c["consumer"] for c in claims] == ["billing"]


async def test_a_claim_cut_before_its_commit_left_no_claim_behind(db: Any, api: Api) -> None:
    op_id = await succeeded_operation(db, api)
    api.proxy.arm(Fault(action="drop_after", match=CLAIM_INSERT))
    answer = await api.post(f"/v1/operations/{op_id}:claim", {"consumer": "billing"})
    assert api.proxy.fired.is_set()
    assert answer.status_code == 503, answer.text
    assert await db.fetchval("SELECT count(*) FROM completion_claims") == 0
    # so the caller's plain retry (no token) wins it
    retry = await api.post(f"/v1/operations/{op_id}:claim", {"consumer": "billing"})
    assert retry.json()["claimed"] is True


async def test_a_claim_token_names_one_claim_not_a_consumer(db: Any, api: Api) -> None:
    """The same token is the same claim (True again); no token, or another, is not."""
    op_id = await succeeded_operation(db, api)
    path = f"/v1/operations/{op_id}:claim"
    won = await api.post(path, {"consumer": "billing", "claim_token": "t-1"})
    assert won.json()["claimed"] is True
    resent = await api.post(path, {"consumer": "billing", "claim_token": "t-1"})
    assert resent.json()["claimed"] is True
    for body in ({"consumer": "billing"}, {"consumer": "billing", "claim_token": "t-2"}):
        other = (await api.post(path, body)).json()
        assert (other["claimed"], other["reason"]) == (False, "already_claimed")
    # a token is per consumer: another consumer's claim with it is its own
    assert (await api.post(path, {"consumer": "audit", "claim_token": "t-1"})).json()["claimed"]


@pytest.mark.parametrize("cut", ["drop_after", "drop_before"])
async def test_a_submit_answered_503_made_no_operation(db: Any, api: Api, cut: str) -> None:
    """No client_reference: a 503 must mean nothing was recorded, or the retry
    it invites starts a second job."""
    api.proxy.arm(Fault(action=cut, match=OPERATION_READ, after_match=OPERATION_INSERT))
    answer = await api.post("/v1/operations", SUBMIT)
    assert api.proxy.fired.is_set()
    assert answer.status_code == 503, answer.text
    assert await db.fetchval("SELECT count(*) FROM operations") == 0
    retry = await api.post("/v1/operations", SUBMIT)
    assert retry.status_code == 202, retry.text
    assert await db.fetchval("SELECT count(*) FROM operations") == 1


async def test_a_connection_that_cannot_be_reset_does_not_undo_the_answer(
    db: Any, api: Api
) -> None:
    """The submit committed; the pool's reset afterwards failed: that is the
    pool's business (it opens another connection), not a 503."""
    api.proxy.arm(Fault(action="drop_before", match=POOL_RESET, after_match=OPERATION_INSERT))
    answer = await api.post("/v1/operations", SUBMIT)
    assert api.proxy.fired.is_set()
    assert answer.status_code == 202, answer.text
    assert await db.fetchval("SELECT count(*) FROM operations") == 1
    # and the API goes on with a fresh connection
    listed = await api.post("/v1/operations", {**SUBMIT, "client_reference": "next"})
    assert listed.status_code == 202, listed.text


async def test_a_resent_claim_waiting_on_the_first_ones_commit_is_still_the_callers(
    db: Any, db_url: str, api: Api
) -> None:
    """The resend arrives while the first claim's transaction has not committed
    (the client gave up waiting): its INSERT waits, then finds the row; the
    token must be read in a statement of its own, whose snapshot sees it."""
    op_id = await succeeded_operation(db, api)
    first, resend = await connect(db_url), await connect(db_url)
    waits = await lock_waits(resend)
    try:
        async with first.transaction():
            assert await ledger.claim_completion(first, op_id, "billing", "tok-1")
            waiting = asyncio.ensure_future(
                ledger.claim_completion(resend, op_id, "billing", "tok-1")
            )
            await asyncio.wait_for(waits.get(), 10)  # the resend waits for the claim's row
        assert await asyncio.wait_for(waiting, 10) is True
        assert not await ledger.claim_completion(db, op_id, "billing", "tok-2")
    finally:
        await first.close()
        await resend.close()
