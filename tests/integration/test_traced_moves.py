"""Transitions made outside the reconciler are span events too (issue 15, OpenTelemetry).

An agent's cancel through the API and an operator's resolution in the console
each get a span under the operation's root, with one `transition` event per
history row they committed, and nothing else. Real API app and receiver on a
real database; spans recorded in memory (the OTLP path is test_otel.py's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.db.connect import ResolvedDatabase
from shared.ledger.states import LocalState
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.integration.console_support import (
    action_form,
    console_login,
    escalated,
    running_receiver,
    sign_in,
)
from tests.spans_support import recording_spans
from tests.support import drive, submit

pytest.importorskip("opentelemetry.sdk")
S = LocalState


@pytest_asyncio.fixture
async def recorded() -> AsyncIterator[Any]:
    with recording_spans() as exporter:
        yield exporter


async def history_since(db: Any, op_id: str, seq: int) -> list[dict[str, str]]:
    rows = await db.fetch(
        "SELECT from_state::text AS f, to_state::text AS t, cause FROM history "
        "WHERE operation_id = $1 AND seq > $2 ORDER BY seq",
        op_id,
        seq,
    )
    return [{"from": r["f"], "to": r["t"], "cause": r["cause"]} for r in rows]


def events_of(span: Any) -> list[dict[str, str]]:
    return [
        {"from": e.attributes["from"], "to": e.attributes["to"], "cause": e.attributes["cause"]}
        for e in span.events
        if e.name == "transition"
    ]


async def trace_of(db: Any, op_id: str) -> int:
    return int(
        await db.fetchval("SELECT trace_id FROM operations WHERE operation_id = $1", op_id), 16
    )


async def test_an_agents_cancel_is_a_span_with_its_committed_transition(
    db: Any, db_url: str, recorded: Any
) -> None:
    op_id = await submit(db, who="agent:carol")
    await drive(db, op_id, S.OBSERVING)
    seq = await db.fetchval("SELECT history_seq FROM operations WHERE operation_id = $1", op_id)
    token = await make_token(db, "carol")
    async with receiver_pool(db_url) as pool:
        app = Starlette(routes=OperationsApi(sim_settings(), pool).routes())
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api"
        ) as http:
            answer = await http.post(
                f"/v1/operations/{op_id}:cancel",
                json={"reason": "wrong month"},
                headers={"Authorization": f"Bearer {token}"},
            )
    assert answer.status_code == 202, answer.text
    (span,) = [s for s in recorded.get_finished_spans() if s.name == "cancel request"]
    assert span.context.trace_id == await trace_of(db, op_id)
    expected = await history_since(db, op_id, seq)
    assert expected and expected[-1]["to"] == "cancel_requested"
    assert events_of(span) == expected


async def test_an_operators_resolution_in_the_console_is_a_span(
    pg_server: ResolvedDatabase, db_url: str, db: Any, recorded: Any
) -> None:
    op_id = await escalated(db)
    seq = await db.fetchval("SELECT history_seq FROM operations WHERE operation_id = $1", op_id)
    operator = await make_token(db, "dana", "operator")
    async with (
        console_login(pg_server.admin_url, db_url) as console_url,
        running_receiver(db_url, console_url) as receiver,
        httpx.AsyncClient(timeout=10.0) as client,
    ):
        assert (await sign_in(client, receiver, operator)).status_code == 303
        page = await client.get(receiver.url(f"/console/operations/{op_id}"))
        done = await client.post(
            receiver.url(f"/console/operations/{op_id}/resolve"),
            data={**action_form(page.text), "target": "failed", "reason": "provider says so"},
            headers={"Origin": receiver.base},
        )
        assert done.status_code == 303, done.text
        refused = await client.post(  # refused: commits nothing, so no span
            receiver.url(f"/console/operations/{op_id}/resolve"),
            data={**action_form(page.text), "target": "observing", "reason": "again"},
            headers={"Origin": receiver.base},
        )
        assert refused.status_code == 409
    (span,) = [s for s in recorded.get_finished_spans() if s.name == "operator resolve"]
    assert span.context.trace_id == await trace_of(db, op_id)
    assert span.attributes["jobwarden.actor"] == "operator:dana"
    assert events_of(span) == await history_since(db, op_id, seq)
    assert events_of(span)[-1]["to"] == "failed"
