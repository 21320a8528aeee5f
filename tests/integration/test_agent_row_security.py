"""An agent's SQL session sees only its own operations (migration 011).

Two agents get login roles of their own (named uniquely per run: the server
is shared), members of jobwarden_agent, and log in as themselves. Their
operations are submitted the way agents submit them: through the HTTP API
with a token of the same name, and through the ledger with that requested_by.
Each then reads every relation it may read, and must find its own rows and
no one else's; the daemons' and operators' roles, and the owner, still see
every row.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest.mock import ANY

import asyncpg
import httpx
import pytest
import pytest_asyncio

from reconciler.wakeups import Sender, SenderFilter
from shared import ledger
from shared.db.connect import ResolvedDatabase, connect, with_database
from shared.db.migrate import apply_migrations
from shared.ledger import RequestSpec
from shared.ledger.tokens import requested_by
from shared.serve import serve_app
from tests.integration.agent_support import (
    api_app,
    finish_with_result,
    make_token,
    receiver_pool,
    sim_settings,
)
from tests.integration.console_support import as_login

# Relations an agent may read that hold no operation data: the test clock
# (installed in test databases only, sql/testing/test_clock.sql).
NOT_OPERATION_DATA = {"jw_test_clock"}
AGENT_VIEWS = {"agent_operations", "agent_failed_items"}
WAKEUP_CHANNEL = "jobwarden_wakeup"  # the reconciler's (reconciler/daemon.py)


@dataclass(frozen=True)
class Agent:
    login: str  # its login role, which is its name
    operations: frozenset[str]  # what it submitted

    @property
    def requested_by(self) -> str:
        return requested_by(self.login, "agent")


@asynccontextmanager
async def logged_in(db_url: str, role: str) -> AsyncIterator[Any]:
    conn = await connect(as_login(db_url, role))
    try:
        yield conn
    finally:
        await conn.close()


async def _require_superuser(admin: Any) -> None:
    if not await admin.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        pytest.skip("the test server's admin role is not a superuser: cannot create roles")


@pytest_asyncio.fixture
async def logins(pg_server: ResolvedDatabase) -> AsyncIterator[tuple[str, str]]:
    """Two agent login roles, unique to this run, dropped afterwards."""
    suffix = uuid.uuid4().hex[:12]
    names = (f"jwrls_{suffix}_a", f"jwrls_{suffix}_b")
    admin = await connect(pg_server.admin_url)
    try:
        await _require_superuser(admin)
        for name in names:
            await admin.execute(f'CREATE ROLE "{name}" LOGIN')
            await admin.execute(f'GRANT jobwarden_agent TO "{name}"')
        yield names
    finally:
        for name in names:
            await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        await admin.close()


async def _through_the_api(db: Any, db_url: str, login: str, reference: str) -> str:
    """Submit as the agent does over HTTP, with a token named like its login role."""
    token = await make_token(db, login)
    job = {
        "provider": "sim",
        "kind": "export",
        "request": {"body": {"agent": login}},
        "client_reference": reference,
    }
    async with (
        receiver_pool(db_url) as pool,
        serve_app(api_app(sim_settings(), pool)) as url,
        httpx.AsyncClient(base_url=url) as http,
    ):
        response = await http.post(
            "/v1/operations", json=job, headers={"Authorization": f"Bearer {token}"}
        )
    assert response.status_code == 202, response.text
    operation_id: str = response.json()["operation_id"]
    return operation_id


async def _through_the_ledger(db: Any, who: str, reference: str) -> str:
    submitted = await ledger.submit_operation(
        db,
        provider="sim",
        kind="export",
        request=RequestSpec("POST", "/v1/jobs", {"ref": reference}),
        requested_by=who,
        client_reference=reference,
    )
    return submitted.operation_id


async def _agent(db: Any, db_url: str, login: str, references: tuple[str, str, str]) -> Agent:
    """Three operations: one over the API, two through the ledger, one with failed items.

    The references and failure codes are the agent's own text, so a test can
    tell whose value an error would quote.
    """
    api_op = await _through_the_api(db, db_url, login, references[0])
    who = requested_by(login, "agent")
    plain = await _through_the_ledger(db, who, references[1])
    batch = await _through_the_ledger(db, who, references[2])
    failures = [(f"{login}-item-{i}", references[2], f"item {i} refused") for i in range(3)]
    await finish_with_result(db, batch, total=10, failed_items=failures)
    return Agent(login, frozenset({api_op, plain, batch}))


@pytest_asyncio.fixture
async def agents(db: Any, db_url: str, logins: tuple[str, str]) -> tuple[Agent, Agent, str]:
    """Agent a (numeric references), agent b (words), and an operator's operation."""
    a = await _agent(db, db_url, logins[0], ("101", "102", "103"))
    b = await _agent(db, db_url, logins[1], ("b-secret-one", "b-secret-two", "b-secret-three"))
    operator_op = await _through_the_ledger(db, "operator:ops", "op-ref")
    return a, b, operator_op


async def _readable(conn: Any) -> set[str]:
    """Every table or view of the schema the session may SELECT from."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class c"
        " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
        "   AND has_table_privilege(c.oid, 'SELECT')"
    )
    return {r["relname"] for r in rows}


async def _operation_ids(conn: Any, relation: str) -> set[str]:
    rows = await conn.fetch(f"SELECT operation_id FROM {relation}")  # a catalog name
    return {r["operation_id"] for r in rows}


async def test_each_agent_sees_only_its_own_operations_in_every_view(
    db: Any, db_url: str, agents: tuple[Agent, Agent, str]
) -> None:
    a, b, _ = agents
    for me, other in ((a, b), (b, a)):
        async with logged_in(db_url, me.login) as conn:
            readable = await _readable(conn)
            assert readable - NOT_OPERATION_DATA == AGENT_VIEWS
            assert await _operation_ids(conn, "agent_operations") == me.operations
            requesters = await conn.fetch("SELECT DISTINCT requested_by FROM agent_operations")
            assert [r[0] for r in requesters] == [me.requested_by]
            items = await conn.fetch("SELECT operation_id, item_key FROM agent_failed_items")
            assert len(items) == 3 and {r["operation_id"] for r in items} <= me.operations
            assert all(r["item_key"].startswith(me.login) for r in items)
            # asking for the other's rows by id finds nothing either
            for op_id in other.operations:
                assert (
                    await conn.fetchrow(
                        "SELECT * FROM agent_operations WHERE operation_id = $1", op_id
                    )
                    is None
                )
                assert (
                    await conn.fetch(
                        "SELECT * FROM agent_failed_items WHERE operation_id = $1", op_id
                    )
                    == []
                )


async def test_the_views_filter_before_an_agents_own_conditions(
    db_url: str, agents: tuple[Agent, Agent, str]
) -> None:
    # Agent a's references and failure codes are numbers, b's are words: a
    # cast that reached one of b's rows would fail and quote b's text.
    a, _, _ = agents
    async with logged_in(db_url, a.login) as conn:
        mine = await conn.fetchval(
            "SELECT count(*) FROM agent_operations WHERE client_reference::int > 0"
        )
        items = await conn.fetchval("SELECT count(*) FROM agent_failed_items WHERE code::int > 0")
    assert (mine, items) == (3, 3)


async def test_the_agent_views_are_security_barriers(db: Any) -> None:
    rows = await db.fetch(
        "SELECT relname, reloptions FROM pg_class"
        " WHERE relname = ANY ($1) AND relnamespace = 'public'::regnamespace",
        sorted(AGENT_VIEWS),
    )
    options = {r["relname"]: r["reloptions"] for r in rows}
    assert options == {view: ["security_barrier=true"] for view in AGENT_VIEWS}


@pytest.mark.parametrize("role", ["jobwarden_receiver", "jobwarden_operator"])
async def test_the_receiver_and_operators_see_every_operation_through_the_views(
    db: Any, agents: tuple[Agent, Agent, str], role: str
) -> None:
    a, b, operator_op = agents
    everything = a.operations | b.operations | {operator_op}
    async with db.transaction():
        await db.execute(f"SET LOCAL ROLE {role}")
        for view in ("agent_operations", "operations_overview"):
            assert await _operation_ids(db, view) == everything
        for view in ("agent_failed_items", "failed_items_overview"):
            assert await db.fetchval(f"SELECT count(*) FROM {view}") == 6


async def test_the_reconciler_and_a_superuser_see_every_operation(
    db: Any, agents: tuple[Agent, Agent, str]
) -> None:
    a, b, operator_op = agents
    everything = a.operations | b.operations | {operator_op}
    assert await _operation_ids(db, "agent_operations") == everything  # superuser
    async with db.transaction():
        await db.execute("SET LOCAL ROLE jobwarden_reconciler")
        assert await _operation_ids(db, "operations") == everything
        assert await db.fetchval("SELECT count(*) FROM result_item_failures") == 6


async def test_agents_may_not_read_the_unfiltered_views(
    db_url: str, agents: tuple[Agent, Agent, str]
) -> None:
    a, _, _ = agents
    async with logged_in(db_url, a.login) as conn:
        for view in ("operations_overview", "failed_items_overview", "operations"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.fetch(f"SELECT * FROM {view}")


# ------------------------------------------------------------------- wake-ups


async def test_an_agent_cannot_call_pg_notify_or_the_wake_functions(
    db: Any, db_url: str, agents: tuple[Agent, Agent, str]
) -> None:
    a, b, _ = agents
    victim = sorted(b.operations)[0]
    heard: list[str] = []

    def hear(*args: Any) -> None:
        heard.append(args[3])

    await db.add_listener(WAKEUP_CHANNEL, hear)
    async with logged_in(db_url, a.login) as conn:
        for statement in (
            f"SELECT pg_notify('{WAKEUP_CHANNEL}', '{victim}')",
            f"SELECT jw_request_wake('{victim}')",
            f"SELECT jw_request_wakes(ARRAY['{victim}'])",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(statement)
    # A round trip on the listening connection delivers anything already sent.
    await db.execute("SELECT 1")
    await db.remove_listener(WAKEUP_CHANNEL, hear)
    assert heard == []


async def test_the_daemons_and_operators_keep_pg_notify(db: Any) -> None:
    granted = await db.fetch(
        "SELECT r, has_function_privilege(r, 'pg_notify(text, text)', 'EXECUTE') AS can"
        " FROM unnest($1::text[]) AS r",
        ["jobwarden_receiver", "jobwarden_reconciler", "jobwarden_operator", "jobwarden_agent"],
    )
    assert {row["r"]: row["can"] for row in granted} == {
        "jobwarden_receiver": True,
        "jobwarden_reconciler": True,
        "jobwarden_operator": True,
        "jobwarden_agent": False,
    }


async def test_a_notify_statement_from_an_agent_moves_nothing(
    db: Any, db_url: str, agents: tuple[Agent, Agent, str]
) -> None:
    """PostgreSQL has no privilege on the NOTIFY statement (migration 011 says
    so): an agent can still send one. It carries no authority: the wake-up
    marks nothing due, so the reconciler's sweep it causes finds nothing new.
    This pins that residual: if PostgreSQL ever refuses it, this test says so."""
    a, b, _ = agents
    victim = sorted(b.operations)[0]
    before = await db.fetchrow("SELECT * FROM operations WHERE operation_id = $1", victim)
    async with logged_in(db_url, a.login) as conn:
        await conn.execute(f"NOTIFY {WAKEUP_CHANNEL}, '{victim}'")
    after = await db.fetchrow("SELECT * FROM operations WHERE operation_id = $1", victim)
    assert dict(after) == dict(before)


# ------------------------------------------------------- an unprivileged owner


@contextmanager
def _warnings_of(conn: Any) -> Iterator[list[str]]:
    messages: list[str] = []

    def listener(_: Any, message: Any) -> None:
        messages.append(str(message))

    conn.add_log_listener(listener)
    try:
        yield messages
    finally:
        conn.remove_log_listener(listener)


async def test_with_an_unprivileged_owner_the_owner_sees_all_and_agents_their_own(
    pg_server: ResolvedDatabase, logins: tuple[str, str]
) -> None:
    """The documented install: migrations run by the database owner, no superuser."""
    suffix = uuid.uuid4().hex[:12]
    owner, database = f"jwrls_{suffix}_owner", f"jwrls_{suffix}_db"
    admin = await connect(pg_server.admin_url)
    try:
        await admin.execute(f'CREATE ROLE "{owner}" LOGIN')
        await admin.execute(f'CREATE DATABASE "{database}" OWNER "{owner}"')
        conn = await connect(with_database(as_login(pg_server.admin_url, owner), database))
        try:
            with _warnings_of(conn) as warnings:
                assert await apply_migrations(conn)
            mine = await _through_the_ledger(conn, requested_by(logins[0], "agent"), "r1")
            theirs = await _through_the_ledger(conn, requested_by(logins[1], "agent"), "r2")
            assert await _operation_ids(conn, "agent_operations") == {mine, theirs}
        finally:
            await conn.close()
        agent_url = with_database(as_login(pg_server.admin_url, logins[0]), database)
        async with logged_in(agent_url, logins[0]) as agent:
            assert await _operation_ids(agent, "agent_operations") == {mine}
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.execute(f'DROP ROLE IF EXISTS "{owner}"')
        await admin.close()
    # without a superuser pg_notify cannot be revoked: the migration says so
    assert any("pg_notify() stays executable" in w for w in warnings)


async def test_the_reconciler_ignores_a_wake_up_an_agent_sent(
    pool: Any, db_url: str, logins: tuple[str, str]
) -> None:
    """What PostgreSQL cannot refuse, the reconciler does not act on: a wake-up's
    sender pid is looked up, and an agent's login (no right to read operations)
    is not trusted, while the receiver's role is (reconciler/wakeups.py)."""
    senders = SenderFilter(pool)
    heard: asyncio.Queue[int] = asyncio.Queue()
    listener = await connect(db_url)
    await listener.add_listener(WAKEUP_CHANNEL, lambda _c, pid, _ch, _p: heard.put_nowait(pid))
    try:
        async with logged_in(db_url, logins[0]) as agent:
            await agent.execute(f"NOTIFY {WAKEUP_CHANNEL}, 'op_x'")
            agent_pid = await asyncio.wait_for(heard.get(), 10)
            assert agent_pid == await agent.fetchval("SELECT pg_backend_pid()")
            assert (await senders.look(agent_pid)) == Sender(agent_pid, False, ANY, ANY)
        async with receiver_pool(db_url) as receiver, receiver.acquire() as conn:
            await conn.execute(f"NOTIFY {WAKEUP_CHANNEL}, 'op_x'")
            receiver_pid = await asyncio.wait_for(heard.get(), 10)
            assert (await senders.look(receiver_pid)) == Sender(receiver_pid, True, ANY, ANY)
            assert senders.cached(receiver_pid) is True  # no query for its next wake-ups
    finally:
        await listener.close()
    assert await senders.look(2**30) is None  # a sender already gone: unknown
