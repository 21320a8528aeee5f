"""The agent interface under faults a hostile tester reaches for (round 52).

Everything is real: uvicorn on loopback, PostgreSQL, the receiver's database
role. The tests wait on the server's own signals (its wait slots), never on
sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from receiver.api.operations import OperationsApi
from shared.agents import tools as agent_tools
from shared.agents.client import ApiProblem, AsyncJobwardenClient, JobwardenClient
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
        listen = ops.hub.ensure_listening

        async def announced():  # the test's signal: a long-poll's LISTEN is held
            await listen()
            print("listening", flush=True)

        ops.hub.ensure_listening = announced
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


# ------------------------------------------------------- max_wait at its edges


def closed_port_url() -> str:
    """A loopback port nothing listens on: every connection is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_a_nan_max_wait_is_refused_not_a_submit_retried_for_ever() -> None:
    """Before: NaN compares false with everything, so `remaining <= 0` never held
    and a submit that got no answer was retried for ever (the tool never
    returned); the MCP layer refused NaN, the Python wrapper did not."""
    async with AsyncJobwardenClient(closed_port_url(), "jw_x") as client:
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            result = await agent_tools.start_and_await_async(client, "sim", JOB, math.nan)
    assert result.status == "failed" and result.operation_id is None
    assert "NOT started" in result.message and result.error
    assert result.error["code"] == "invalid_argument"


@pytest.mark.parametrize("max_wait", ["30", None, math.nan, True, [30]])
def test_a_max_wait_that_is_not_seconds_is_a_result_never_an_exception(
    max_wait: Any,
) -> None:
    """Before: `"30"` (what a model passing tool arguments often sends) raised
    TypeError out of start_and_await and await_operation."""
    with JobwardenClient(closed_port_url(), "jw_x") as client:
        started = agent_tools.start_and_await(client, "sim", JOB, max_wait)
        waited = agent_tools.await_operation(client, "op_" + "0" * 26, max_wait)
    assert started.status == "failed" and "NOT started" in started.message
    assert waited.status == "unknown" and waited.operation_id == "op_" + "0" * 26
    for result in (started, waited):
        assert result.error and result.error["code"] == "invalid_argument"


async def test_a_max_wait_beyond_a_double_waits_instead_of_raising(db: Any, db_url: str) -> None:
    """Before: an int too large for a double (10**400) raised OverflowError out of
    the wrapper. It is a wait as long as it takes, as `math.inf` is."""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:

        async def finish() -> None:
            await api.ops.wait_slots.until(lambda n: n >= 1)
            op_id = str(await db.fetchval("SELECT operation_id FROM operations"))
            await finish_with_result(db, op_id, total=3)

        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            result, _ = await asyncio.gather(
                agent_tools.start_and_await_async(client, "sim", JOB["request"], 10**400),
                finish(),
            )
    assert result.status == "succeeded" and result.operation_id


async def test_a_zero_or_negative_max_wait_starts_the_job_and_says_it_is_running(
    db: Any, db_url: str
) -> None:
    """max_wait 0 or below: the job is started once, and the answer is an honest
    timed_out with its ids (sound before this round; held here)."""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:
        for max_wait in (0, -5):
            result = await agent_tools.start_and_await_async(
                client, "sim", JOB["request"], max_wait
            )
            assert result.status == "timed_out" and result.operation_id and not result.done
            assert "Do not report success" in result.message


# ------------------------------------------ a 200 that is not the API's answer


def portal_app(body: bytes, media_type: str) -> Starlette:
    """What answers in the API's place: a captive portal, a proxy's maintenance
    page, a load balancer's health page, all with 200 and no API answer."""

    async def page(_request: Request) -> Response:
        return Response(body, media_type=media_type)

    return Starlette(routes=[Route("/{path:path}", page, methods=["GET", "POST"])])


@pytest.mark.parametrize(
    ("body", "media_type"),
    [
        (b"<html><body>Maintenance</body></html>", "text/html"),
        (b'["not", "an", "operation"]', "application/json"),
        (b'{"operation_id": ', "application/json"),
    ],
)
async def test_a_200_that_is_not_an_api_answer_is_no_answer_never_an_exception(
    body: bytes, media_type: str
) -> None:
    """Before: the client decoded any 2xx as the API's JSON object, so an HTML
    page raised JSONDecodeError and a JSON list TypeError out of start_and_await
    and check (opaque exceptions). It is no answer: the submit is retried under
    its client_reference and then said unanswered; a check is `unknown`."""
    async with serve_app(portal_app(body, media_type)) as url:
        async with AsyncJobwardenClient(url, "jw_x") as client:
            started = await agent_tools.start_and_await_async(
                client, "sim", JOB["request"], 0.5, client_reference="ref-portal"
            )
            checked = await agent_tools.check_async(client, "op_" + "0" * 26)
        with JobwardenClient(url, "jw_x") as sync_client:  # in a thread: the server runs here
            started_sync = await asyncio.to_thread(
                agent_tools.start_and_await,
                sync_client,
                "sim",
                JOB["request"],
                0.5,
                client_reference="ref-portal",
            )
    for result in (started, started_sync):
        assert result.status == "timed_out" and result.operation_id is None
        assert result.client_reference == "ref-portal" and "Do not report success" in result.message
    assert checked.status == "unknown"


# ------------------------- a refusal after a submit whose answer was lost


class LoseFirstSubmitAnswer:
    """The API, except that the first submit's answer is replaced by a 503 after
    the operation was recorded (what a proxy says when the receiver died between
    its COMMIT and its answer), and `meanwhile` runs before that 503 is sent."""

    def __init__(self, app: Any, meanwhile: Any) -> None:
        self.app = app
        self.meanwhile = meanwhile
        self.lost = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or self.lost:
            await self.app(scope, receive, send)
            return
        self.lost += 1
        sent: list[int] = []

        async def swallow(message: Any) -> None:
            if message["type"] == "http.response.start":
                sent.append(message["status"])

        await self.app(scope, receive, swallow)
        assert sent == [202]  # recorded
        await self.meanwhile()
        await Response(
            b'{"type": "about:blank", "title": "Service Unavailable", "status": 503}',
            status_code=503,
            media_type="application/problem+json",
            headers={"Retry-After": "0"},
        )(scope, receive, send)


@pytest.mark.parametrize("blocking", [False, True])
async def test_a_refusal_after_an_unanswered_submit_never_says_not_started(
    db: Any, db_url: str, blocking: bool
) -> None:
    """The first submit was recorded, but its answer was lost (a 503 after the
    COMMIT); before the retry under the same client_reference, the token was
    revoked, so the retry is refused with 401. Before: start_and_await said
    `failed`, "The job was NOT started", with no operation id, while the
    operation was recorded and would run: the agent, told nothing started,
    submits again (with another token) and the job runs twice. After an
    unanswered attempt a refusal proves nothing about the first one: the
    answer is `timed_out` with the client_reference, never "NOT started"."""
    token = await make_token(db, "bot")
    async with receiver_pool(db_url) as pool:

        async def revoke() -> None:  # the test's own connection: the receiver may not
            await tokens.revoke_token(db, await token_id_of(db, "bot"))

        ops = OperationsApi(sim_settings(), pool)
        app = LoseFirstSubmitAnswer(Starlette(routes=ops.routes()), revoke)
        async with serve_app(app) as url, asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            if blocking:  # in a thread: the server runs on this loop
                with JobwardenClient(url, token) as sync_client:
                    result = await asyncio.to_thread(
                        agent_tools.start_and_await,
                        sync_client,
                        "sim",
                        JOB["request"],
                        5,
                        client_reference="ref-lost",
                    )
            else:
                async with AsyncJobwardenClient(url, token) as client:
                    result = await agent_tools.start_and_await_async(
                        client, "sim", JOB["request"], 5, client_reference="ref-lost"
                    )
    recorded = await db.fetchval(
        "SELECT count(*) FROM operations WHERE client_reference = 'ref-lost'"
    )
    assert app.lost == 1 and recorded == 1
    assert result.status != "failed" and "NOT started" not in result.message
    assert result.status == "timed_out" and result.client_reference == "ref-lost"
    assert "Do not report success" in result.message


# ------------------------------- the API server SIGKILLed in the middle of a wait

SERVER = """
import asyncio, sys
from starlette.applications import Starlette
from receiver.api.operations import OperationsApi
from shared.serve import serve_app
from tests.integration.agent_support import receiver_pool, sim_settings

async def main():
    async with receiver_pool(sys.argv[1]) as pool:
        ops = OperationsApi(sim_settings(), pool)
        listen = ops.hub.ensure_listening

        async def announced():  # the test's signal: a long-poll's LISTEN is held
            await listen()
            print("listening", flush=True)

        ops.hub.ensure_listening = announced
        async with serve_app(Starlette(routes=ops.routes()), port=int(sys.argv[2])):
            print("ready", flush=True)
            await asyncio.Event().wait()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def api_process(db_url: str, port: int) -> AsyncIterator[subprocess.Popen[bytes]]:
    """The agent API in a process of its own, on `port`; SIGKILLed at the end if alive."""
    argv = [sys.executable, "-c", SERVER, db_url, str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == b"ready", line
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


async def test_a_wait_survives_the_api_server_sigkilled_and_restarted(db: Any, db_url: str) -> None:
    """start_and_await with a consumer, the API process SIGKILLed while the
    long-poll is held (its listener open), the job finishing while no server
    runs, a new server on the same port: succeeded, claimed once, one
    operation. (Sound before this round; held here.)"""
    token = await make_token(db, "bot")
    port = free_port()
    async with AsyncJobwardenClient(f"http://127.0.0.1:{port}", token) as client:
        async with api_process(db_url, port) as first:
            op_id = (await client.submit("sim", "export", JOB["request"], client_reference="k1"))[
                "operation_id"
            ]
            waiting = asyncio.ensure_future(
                agent_tools.await_operation_async(client, op_id, 60, consumer="next-step")
            )
            assert first.stdout is not None
            async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):  # the long-poll is held
                line = await asyncio.to_thread(first.stdout.readline)
            assert line.strip() == b"listening", line
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait)
        await advance(db, op_id, S.OBSERVING)
        await finish_with_result(db, op_id, total=3)
        async with api_process(db_url, port), asyncio.timeout(SIGNAL_TIMEOUT_SECONDS * 2):
            result = await waiting
    assert result.status == "succeeded" and result.operation_id == op_id
    assert result.claimed is True
    assert await db.fetchval("SELECT count(*) FROM completion_claims") == 1
    assert await db.fetchval("SELECT count(*) FROM operations") == 1


# ---------------------------------------------------------------- NOTIFY lost


async def test_a_wait_whose_notify_is_lost_ends_at_max_wait_with_the_truth(
    db: Any, db_url: str
) -> None:
    """The job finishes, but no NOTIFY announces it (triggers off for that
    session, as a NOTIFY lost between a commit and the listener is): the
    long-poll still answers by max_wait, and with the operation done, not the
    stale running row it held. (Sound before this round; held here.)"""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:
        op_id = await submit(api.url, token)
        await advance(db, op_id, S.OBSERVING)

        first_read = asyncio.Event()
        reread = api.ops.reread

        async def signalled_reread(operation_id: str, caller: Any) -> Any:
            row = await reread(operation_id, caller)
            first_read.set()  # the long-poll holds a row that is not done
            return row

        api.ops.reread = signalled_reread  # type: ignore[method-assign]

        async def finish_unannounced() -> None:
            await first_read.wait()
            async with db.transaction():
                await db.execute("SET LOCAL session_replication_role = replica")
                await db.execute(
                    "UPDATE operations SET state = 'failed', finished_at = now(),"
                    """ last_error = '{"code": "x", "message": "boom"}'"""
                    " WHERE operation_id = $1",
                    op_id,
                )

        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            t0 = asyncio.get_running_loop().time()
            resource, _ = await asyncio.gather(client.wait(op_id, 2), finish_unannounced())
            waited = asyncio.get_running_loop().time() - t0
    assert resource["done"] is True and resource["metadata"]["outcome"] == "failed"
    assert waited >= 1.9  # no NOTIFY ended it: the read at max_wait did


# ------------------------------- PostgreSQL connections terminated mid-wait


async def test_a_wait_survives_its_database_connections_terminated(db: Any, db_url: str) -> None:
    """pg_terminate_backend on every connection of the API (its LISTEN among
    them) while a wrapper's long-poll is held, then the job finishes: the
    wrapper answers succeeded, claimed once. (Sound before this round; held.)"""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:
        op_id = await submit(api.url, token)

        async def fault() -> None:
            await api.ops.wait_slots.until(lambda n: n >= 1)
            # the long-poll's LISTEN is up: ensure_listening returns once the one
            # shared listener is (started by the long-poll, or here, under its lock)
            await api.ops.hub.ensure_listening()
            assert api.ops.hub.listening
            killed = await db.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            assert killed >= 1
            await advance(db, op_id, S.OBSERVING)
            await finish_with_result(db, op_id, total=3)

        async with asyncio.timeout(SIGNAL_TIMEOUT_SECONDS):
            result, _ = await asyncio.gather(
                agent_tools.await_operation_async(client, op_id, 60, consumer="c1"), fault()
            )
    assert result.status == "succeeded" and result.claimed is True


# ------------------------- a revoked token is not "try again later"


async def test_a_revoked_token_is_said_to_be_refused_not_unreachable(db: Any, db_url: str) -> None:
    """Before: check and await answered a revoked token's 401 as if jobwarden
    could not be reached: error code `unreachable`, "try again later" / "check
    it later", which can never work, so an agent following the advice loops.
    The answers stay `unknown` / `timed_out` (nothing is known of the job) but
    say the token was refused and that retrying will not help."""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:
        op_id = await submit(api.url, token)
        await tokens.revoke_token(db, await token_id_of(db, "bot"))
        checked = await agent_tools.check_async(client, op_id)
        waited = await agent_tools.await_operation_async(client, op_id, 5)
        cancelled = await agent_tools.cancel_async(client, op_id, "stop")
    assert (checked.status, waited.status, cancelled.status) == ("unknown", "timed_out", "unknown")
    for result in (checked, waited, cancelled):
        assert result.operation_id == op_id and result.error
        assert result.error["code"] == "unauthenticated", result.error
        assert "try again later" not in result.message and "Lost contact" not in result.message
        assert "will not help" in result.message and "token" in result.message


async def test_a_refused_claim_is_said_to_be_refused_not_unanswered(db: Any, db_url: str) -> None:
    """A claim the API refuses (a consumer over 200 characters: 422) came back
    as "the service did not answer, even when asked again ... call again
    later": the same call is refused again, for ever, and the agent never acts
    on its success. Nothing was claimed (claimed stays None), and it says why."""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:
        op_id = await submit(api.url, token)
        await finish_with_result(db, op_id, total=1)
        result = await agent_tools.await_operation_async(client, op_id, 5, consumer="c" * 201)
    assert result.status == "succeeded" and result.claimed is None
    assert "did not answer" not in result.message and "refused" in result.message
    assert "c" * 201 not in result.message  # the consumer is not echoed whole
    assert await db.fetchval("SELECT count(*) FROM completion_claims") == 0


async def test_an_await_with_no_time_reads_once_instead_of_claiming_lost_contact(
    db: Any, db_url: str
) -> None:
    """await_operation with max_wait 0 (or one spent before its first call) sent
    nothing, then answered "Lost contact with jobwarden after 0s (no answer).
    Operation ... was recorded and may still be running": contact was never
    tried, and for an id nobody recorded, "was recorded" is false. It reads the
    operation once: running -> timed_out with its ids; unknown -> not_found."""
    token = await make_token(db, "bot")
    async with served(db_url) as api, AsyncJobwardenClient(api.url, token) as client:
        op_id = await submit(api.url, token)
        await advance(db, op_id, S.OBSERVING)
        known = await agent_tools.await_operation_async(client, op_id, 0)
        with JobwardenClient(api.url, token) as sync_client:
            known_sync = await asyncio.to_thread(
                agent_tools.await_operation, sync_client, op_id, -1
            )
        unknown = await agent_tools.await_operation_async(client, "op_" + "0" * 26, 0)
    for result in (known, known_sync):
        assert result.status == "timed_out" and result.operation_id == op_id
        assert result.job_id and result.error is None, result
        assert "Lost contact" not in result.message
    assert unknown.status == "not_found"
