"""Test helpers that drive operations through the real ledger.

Evidence is recorded the way the reconciler records it (calls, observations,
results, decisions) so the database's checks apply in full.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from shared import ledger
from shared.db.connect import connect, with_database
from shared.db.migrate import apply_migrations, load_migrations
from shared.ledger import RequestSpec, evidence
from shared.ledger.states import EDGES, Evidence, LocalState

S = LocalState


async def submit(
    db: Any, *, ref: str | None = None, body: Any = None, who: str = "agent:test"
) -> str:
    spec = RequestSpec("POST", "/v1/jobs", body if body is not None else {"n": 1})
    sub = await ledger.submit_operation(
        db, provider="sim", kind="export", request=spec, requested_by=who, client_reference=ref
    )
    return sub.operation_id


def path_to(
    dst: LocalState, src: LocalState = S.CREATE_PENDING
) -> list[tuple[LocalState, LocalState]]:
    """Shortest chain of allowed edges from src (default create_pending) to dst."""
    prev: dict[LocalState, LocalState | None] = {src: None}
    queue = deque([src])
    while queue:
        cur = queue.popleft()
        for src, nxt in EDGES:
            if src is cur and nxt not in prev:
                prev[nxt] = cur
                queue.append(nxt)
    edges: list[tuple[LocalState, LocalState]] = []
    node = dst
    while prev[node] is not None:
        parent = prev[node]
        assert parent is not None
        edges.append((parent, node))
        node = parent
    return list(reversed(edges))


async def call(db: Any, op_id: str, kind: str, status: int, job: str | None = None) -> int:
    call_id = await evidence.start_call(
        db, evidence.CallStart(op_id, kind, 1, "test", "POST", "http://sim/v1/jobs", {})
    )
    await evidence.finish_call(
        db, call_id, evidence.CallAnswer(duration_ms=1, status_code=status), remote_job_id=job
    )
    return call_id


async def observe(
    db: Any,
    op_id: str,
    remote_state: str,
    *,
    error: tuple[str, str] | None = None,
    progress: tuple[int | None, int | None, float | None] = (None, None, None),
) -> int:
    """A status read showing `remote_state` (the provider's error code and message, and
    its progress: completed, total, percent), recorded the way the reconciler records one."""
    read = evidence.StatusRead(
        operation_id=op_id,
        fence=None,
        worker="test",
        attempt=1,
        method="GET",
        url="http://sim/v1/jobs/x",
        request_headers={},
        answer=evidence.CallAnswer(duration_ms=1, status_code=200, body=b"{}"),
        observed=evidence.Observed(
            remote_state=remote_state,
            error_code=error[0] if error else None,
            error_message=error[1] if error else None,
            progress_completed=progress[0],
            progress_total=progress[1],
            progress_percent=progress[2],
        ),
    )
    written = await evidence.record_status_read(db, read)
    assert written.observation_id is not None
    return written.observation_id


async def _columns(db: Any, op_id: str) -> Any:
    """The columns these helpers read, by name: a schema an upgrade test left
    behind (tests/integration/test_api_schema_behind.py) lacks later ones."""
    return await db.fetchrow(
        "SELECT state, cancel_requested_at, remote_job_id FROM operations WHERE operation_id = $1",
        op_id,
    )


async def prepare_and_evidence(
    db: Any, op_id: str, src: LocalState, dst: LocalState
) -> tuple[Evidence, int] | None:
    """Set the columns dst needs and record evidence that proves src -> dst."""
    op = await _columns(db, op_id)
    if dst in (S.CANCEL_REQUESTED,) or (
        dst in (S.CANCELLING, S.CANCELLATION_UNCONFIRMED) and op["cancel_requested_at"] is None
    ):
        await db.execute(
            "UPDATE operations SET cancel_requested_at = now(), cancel_requested_by = 'agent:test',"
            " cancel_reason = 'test', cancel_deadline = now() + interval '1 hour'"
            " WHERE operation_id = $1 AND cancel_requested_at IS NULL",
            op_id,
        )
    needs_job = dst not in (
        S.CREATE_UNKNOWN,
        S.CANCEL_REQUESTED,
        S.FAILED,
        S.NEEDS_ATTENTION,
        S.ABANDONED,
        S.CREATE_PENDING,
    )
    if needs_job and op["remote_job_id"] is None:
        await ledger.record_remote_job(db, op_id, f"job_{op_id[-8:]}", create_mode="async")
    if dst is S.CANCELLING:
        await ledger.record_cancel_sent(db, op_id, fence=None)
    kinds = EDGES[(src, dst)]
    if not kinds:
        return None
    if Evidence.DECISION in kinds:
        decision = await ledger.record_decision(
            db, op_id, actor="operator:test", decision=f"move to {dst}", reason="test decision"
        )
        return (Evidence.DECISION, decision)
    if Evidence.RESULT in kinds:
        result_id = await evidence.record_result(
            db, evidence.ResultRecord(op_id, True, sha256="0" * 64, inline={"ok": True})
        )
        await ledger.attach_result(db, op_id, result_id, result_ref=None, summary=None, fence=None)
        return (Evidence.RESULT, result_id)
    create_failure = dst is S.FAILED and src in (S.CREATE_PENDING, S.CREATE_UNKNOWN)
    if Evidence.CALL in kinds and (Evidence.OBSERVATION not in kinds or create_failure):
        if dst is S.CANCELLING:
            return (Evidence.CALL, await call(db, op_id, "cancel", 202))
        if dst is S.FAILED:
            return (Evidence.CALL, await call(db, op_id, "create", 422))
        job = (await _columns(db, op_id))["remote_job_id"] or "job_x"
        return (Evidence.CALL, await call(db, op_id, "create", 202, job))
    remote = {
        S.RESULT_COLLECTING: "succeeded",
        S.FAILED: "failed",
        S.CANCELLED: "cancelled",
    }[dst]
    return (Evidence.OBSERVATION, await observe(db, op_id, remote))


def actor_for(src: LocalState) -> str:
    return "operator:test" if src is S.NEEDS_ATTENTION else "reconciler:test"


async def drive(db: Any, op_id: str, dst: LocalState) -> None:
    """Move an operation from wherever it is to dst along allowed edges, with real evidence."""
    current = S((await _columns(db, op_id))["state"])
    for src, nxt in path_to(dst, current):
        evidence = await prepare_and_evidence(db, op_id, src, nxt)
        await ledger.transition(
            db,
            op_id,
            src,
            nxt,
            actor=actor_for(src),
            cause=f"test: {src} -> {nxt}",
            evidence=evidence,
        )


async def history_states(db: Any, op_id: str) -> list[str]:
    """The states an operation went through, from its history, in order."""
    rows = await db.fetch(
        "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
    )
    return [r["to_state"] for r in rows]


async def jobwarden(*argv: str) -> int:
    """The `jobwarden` command line, run inside the test's event loop."""
    from shared.cli.main import build_parser

    args = build_parser().parse_args(list(argv))
    status: int = await args.handler(args)
    return status


@contextlib.asynccontextmanager
async def dropped_afterwards(admin_url: str, prefix: str) -> AsyncIterator[str]:
    """A database name of this run (a prefix and the pid), dropped after the block
    if something created it: for tests whose command under test creates it."""
    name = f"{prefix}_{os.getpid()}"
    try:
        yield name
    finally:
        admin = await connect(admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def partly_migrated(admin_url: str, name: str, migrations: int) -> str:
    """Database `name` created holding the first `migrations` migrations (0: empty);
    its URL."""
    admin = await connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(admin_url, name)
    if migrations:
        conn = await connect(url)
        try:
            await apply_migrations(conn, load_migrations()[:migrations])
        finally:
            await conn.close()
    return url


@contextlib.asynccontextmanager
async def as_role(pool: Any, role: str) -> AsyncIterator[Any]:
    """A connection acting as `role` (SET LOCAL ROLE) for one transaction."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {role}")
        yield conn


async def lock_waits(conn: Any) -> asyncio.Queue[str]:
    """What `conn`'s backend reports of each lock it waits for, as it waits.

    PostgreSQL logs a lock wait that outlasts deadlock_timeout
    (`log_lock_waits`): "process N still waiting for <mode> on <object>".
    Sent to this client as well (client_min_messages), it is the event the
    test waits on.
    """
    waits: asyncio.Queue[str] = asyncio.Queue()

    def heard(_conn: Any, message: Any) -> None:
        if "still waiting for" in message.message:
            waits.put_nowait(message.message)

    conn.add_log_listener(heard)
    await conn.execute(
        "SET log_lock_waits = on; SET deadlock_timeout = '10ms'; SET client_min_messages = log"
    )
    return waits
