"""The state machine is enforced by the database, whoever writes."""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from shared import ledger
from shared.db.connect import connect, with_database
from shared.db.queries import all_queries, q
from shared.ledger import webhooks
from shared.ledger.errors import (
    ForbiddenTransition,
    ImmutableFact,
    MissingEvidence,
    OperatorOnly,
    StaleTransition,
)
from shared.ledger.states import (
    EDGES,
    INBOX,
    POLLED,
    STATE_SETS,
    TERMINAL,
    WAITS_FOR_HUMAN,
    Evidence,
    LocalState,
)
from tests.conftest import _drop, clone_database
from tests.support import call, drive, observe, prepare_and_evidence, submit

S = LocalState
ALL_PAIRS = [(a, b) for a in LocalState for b in LocalState]


@pytest_asyncio.fixture(scope="module")
async def matrix_db(pg_server: Any, template_db: str) -> AsyncIterator[Any]:
    """One database for the 256-case matrix: each case uses its own operation."""
    name = await clone_database(pg_server, template_db)
    conn = await connect(with_database(pg_server.admin_url, name))
    yield conn
    await conn.close()
    await _drop(pg_server.admin_url, name)


async def test_python_mirror_matches_sql_edge_table(db: Any) -> None:
    in_db = await ledger.state_edges_in_db(db)
    mirror = {(a.value, b.value): frozenset(e.value for e in ev) for (a, b), ev in EDGES.items()}
    assert in_db == mirror


async def test_python_state_enum_matches_sql_enum(db: Any) -> None:
    labels = await db.fetchval("SELECT enum_range(NULL::jw_state)::text[]")
    assert labels == [s.value for s in LocalState]


@pytest.mark.parametrize(("src", "dst"), ALL_PAIRS, ids=[f"{a}->{b}" for a, b in ALL_PAIRS])
async def test_transition_matrix(matrix_db: Any, src: LocalState, dst: LocalState) -> None:
    op_id = await submit(matrix_db)
    await drive(matrix_db, op_id, src)
    if (src, dst) in EDGES:
        evidence = await prepare_and_evidence(matrix_db, op_id, src, dst)
        actor = "operator:t" if src is S.NEEDS_ATTENTION else "reconciler:t"
        await ledger.transition(
            matrix_db, op_id, src, dst, actor=actor, cause="t", evidence=evidence
        )
        assert (await ledger.load_operation(matrix_db, op_id)).state is dst
    else:
        with pytest.raises(ForbiddenTransition):
            await ledger.transition(matrix_db, op_id, src, dst, actor="operator:t", cause="t")
        assert (await ledger.load_operation(matrix_db, op_id)).state is src


REMOTE_FACT_EDGES = [(a, b) for (a, b), ev in EDGES.items() if ev and Evidence.DECISION not in ev]


@pytest.mark.parametrize(
    ("src", "dst"), REMOTE_FACT_EDGES, ids=[f"{a}->{b}" for a, b in REMOTE_FACT_EDGES]
)
async def test_remote_fact_edge_without_evidence_is_rejected(
    matrix_db: Any, src: LocalState, dst: LocalState
) -> None:
    op_id = await submit(matrix_db)
    await drive(matrix_db, op_id, src)
    await prepare_and_evidence(matrix_db, op_id, src, dst)  # columns set, evidence not cited
    with pytest.raises(MissingEvidence):
        await ledger.transition(matrix_db, op_id, src, dst, actor="reconciler:t", cause="guess")


async def test_progress_or_running_observation_does_not_prove_success(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    running = await observe(db, op_id, "running")
    with pytest.raises(MissingEvidence):
        await ledger.transition(
            db,
            op_id,
            S.OBSERVING,
            S.RESULT_COLLECTING,
            actor="r",
            cause="100%",
            evidence=(Evidence.OBSERVATION, running),
        )


async def test_webhook_observation_cannot_declare_success_without_our_own_read(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    # A verified "succeeded" webhook for this operation, stored the receiver's way.
    await webhooks.store_events(
        db,
        {
            "provider": ["sim"],
            "event_id": ["evt_1"],
            "scheme": ["standard_webhooks"],
            "id_signed": [True],
            "remote_job_id": [None],
            "operation_ref": [op_id],
            "client_reference": [None],
            "remote_state": ["succeeded"],
            "remote_state_raw": ["succeeded"],
            "payload": ["{}"],
            "extra": [0],
        },
    )
    obs = await db.fetchval(
        "SELECT observation_id FROM observations WHERE operation_id = $1 AND source = 'webhook'",
        op_id,
    )
    with pytest.raises(MissingEvidence):
        await ledger.transition(
            db,
            op_id,
            S.OBSERVING,
            S.RESULT_COLLECTING,
            actor="r",
            cause="webhook",
            evidence=(Evidence.OBSERVATION, obs),
        )


async def test_evidence_of_another_operation_is_rejected(db: Any) -> None:
    first, second = await submit(db), await submit(db)
    await drive(db, first, S.OBSERVING)
    await drive(db, second, S.OBSERVING)
    foreign = await observe(db, first, "succeeded")
    with pytest.raises(MissingEvidence):
        await ledger.transition(
            db,
            second,
            S.OBSERVING,
            S.RESULT_COLLECTING,
            actor="r",
            cause="borrowed",
            evidence=(Evidence.OBSERVATION, foreign),
        )


async def test_sending_a_cancel_does_not_prove_cancelled(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.CANCELLING)
    sent = await db.fetchval(
        "SELECT call_id FROM provider_calls WHERE operation_id = $1 AND call_kind = 'cancel'", op_id
    )
    with pytest.raises(MissingEvidence):
        await ledger.transition(
            db,
            op_id,
            S.CANCELLING,
            S.CANCELLED,
            actor="r",
            cause="DELETE sent",
            evidence=(Evidence.CALL, sent),
        )


async def test_direct_state_update_is_refused_even_for_superuser(db: Any) -> None:
    op_id = await submit(db)
    assert await db.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    with pytest.raises(asyncpg.PostgresError) as info:
        await db.execute("UPDATE operations SET state = 'succeeded' WHERE operation_id = $1", op_id)
    assert info.value.sqlstate == "JW002"


async def test_operation_cannot_be_born_in_a_later_state(db: Any) -> None:
    with pytest.raises(asyncpg.PostgresError) as info:
        await db.execute(
            "INSERT INTO operations (operation_id, provider, kind, client_reference, request,"
            " request_fingerprint, idempotency_token, trace_id, requested_by, create_deadline,"
            " result_deadline, state) VALUES ('op_01HZZZZZZZZZZZZZZZZZZZZZZZ', 'sim', 'k', 'r',"
            " '{}', 'sha256:' || repeat('0', 64), 'idem_' || repeat('0', 32), repeat('0', 32), 'a',"
            " now() + interval '1h', now() + interval '1h', 'succeeded')"
        )
    assert info.value.sqlstate == "JW002"


async def test_leaving_needs_attention_requires_an_operator(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.NEEDS_ATTENTION)
    decision = await ledger.record_decision(
        db, op_id, actor="operator:ann", decision="fail", reason="provider confirmed failure"
    )
    with pytest.raises(OperatorOnly):
        await ledger.transition(
            db,
            op_id,
            S.NEEDS_ATTENTION,
            S.FAILED,
            actor="reconciler:w1",
            cause="auto",
            evidence=(Evidence.DECISION, decision),
        )
    await ledger.transition(
        db,
        op_id,
        S.NEEDS_ATTENTION,
        S.FAILED,
        actor="operator:ann",
        cause="decision",
        evidence=(Evidence.DECISION, decision),
    )
    assert (await ledger.load_operation(db, op_id)).state is S.FAILED


async def test_recorded_remote_job_id_is_never_overwritten(db: Any) -> None:
    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, "job_first")
    with pytest.raises(ImmutableFact):
        await ledger.record_remote_job(db, op_id, "job_second")
    assert (await ledger.load_operation(db, op_id)).remote_job_id == "job_first"


async def test_recorded_intent_is_immutable(db: Any) -> None:
    op_id = await submit(db)
    with pytest.raises(asyncpg.PostgresError) as info:
        await db.execute(
            "UPDATE operations SET request = '{\"x\": 2}' WHERE operation_id = $1", op_id
        )
    assert info.value.sqlstate == "JW005"


async def test_two_concurrent_transitions_from_the_same_state_exactly_one_wins(
    db_url: str, db: Any
) -> None:
    for _ in range(5):
        op_id = await submit(db)
        await drive(db, op_id, S.OBSERVING)
        conns = [await connect(db_url) for _ in range(2)]
        try:

            async def attempt(conn: Any, dst: LocalState, op_id: str = op_id) -> str:
                try:
                    await ledger.transition(conn, op_id, S.OBSERVING, dst, actor="w", cause="race")
                    return "won"
                except StaleTransition:
                    return "lost"

            outcomes = await asyncio.gather(
                attempt(conns[0], S.RESULT_TIMED_OUT), attempt(conns[1], S.NEEDS_ATTENTION)
            )
        finally:
            for c in conns:
                await c.close()
        assert sorted(outcomes) == ["lost", "won"]
        history = await db.fetch(
            "SELECT to_state::text FROM history WHERE operation_id = $1", op_id
        )
        assert [h["to_state"] for h in history].count("observing") == 1
        assert len(history) == 4  # create_pending, accepted, observing, one winner


async def test_terminal_state_has_finished_at_and_no_schedule(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.SUCCEEDED)
    op = await ledger.load_operation(db, op_id)
    assert op.finished_at is not None and op.next_poll_at is None and op.result_id is not None


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500])
async def test_a_not_now_answer_does_not_prove_a_failed_create(db: Any, status: int) -> None:
    op_id = await submit(db)
    busy = await call(db, op_id, "create", status)
    with pytest.raises(MissingEvidence):
        await ledger.transition(
            db,
            op_id,
            S.CREATE_PENDING,
            S.FAILED,
            actor="r",
            cause="429",
            evidence=(Evidence.CALL, busy),
        )


async def test_an_error_answer_naming_a_job_does_not_prove_acceptance(db: Any) -> None:
    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, "job_x")
    broken = await call(db, op_id, "create", 500, "job_x")
    with pytest.raises(MissingEvidence):
        await ledger.transition(
            db,
            op_id,
            S.CREATE_PENDING,
            S.ACCEPTED,
            actor="r",
            cause="500",
            evidence=(Evidence.CALL, broken),
        )


# ------------------------------------------------------------------ named sets, once

# Three or more state names in one literal list is a set spelled out again:
# the named sets exist once in SQL (jw_state_set) and once in Python.
_STATE_NAMES = "|".join(sorted((s.value for s in LocalState), key=len, reverse=True))
# 'a', 'b'::jw_state, 'c'::text ... (an IN list or ARRAY[...]), three or more
_LITERAL_LIST = re.compile(rf"(?:'(?:{_STATE_NAMES})'(?:::\w+)?\s*,\s*){{2,}}'(?:{_STATE_NAMES})'")
# '{a,b,c}' array literals
_ARRAY_LITERAL = re.compile(rf"'\{{\s*(?:(?:{_STATE_NAMES})\s*,\s*){{2,}}(?:{_STATE_NAMES})\s*\}}'")


def spells_a_set(sql: str) -> bool:
    return bool(_LITERAL_LIST.search(sql) or _ARRAY_LITERAL.search(sql))


def test_the_set_patterns_catch_the_ways_sql_spells_states() -> None:
    assert spells_a_set("state IN ('failed', 'cancelled', 'abandoned')")
    assert spells_a_set("ARRAY['failed'::jw_state, 'cancelled'::jw_state, 'abandoned'::text]")
    assert spells_a_set("state = ANY ('{failed,cancelled,abandoned}'::jw_state[])")
    assert not spells_a_set("state IN ('cancelled', 'abandoned')")  # two is a pair, not a set


async def test_every_named_set_equals_its_sql_twin(db: Any) -> None:
    for name, states in STATE_SETS.items():
        in_sql = await db.fetchval(q("state_set"), name)
        assert set(in_sql) == {s.value for s in states}, name


async def test_an_unknown_set_name_is_an_error_not_an_empty_set(db: Any) -> None:
    with pytest.raises(asyncpg.PostgresError, match="no state set named termnal"):
        await db.fetchval(q("state_set"), "termnal")


def test_the_sets_partition_the_states_as_documented() -> None:
    everything = set(LocalState)
    assert STATE_SETS["scheduled"] == everything - TERMINAL - WAITS_FOR_HUMAN
    assert WAITS_FOR_HUMAN < INBOX and STATE_SETS["scheduled"] > POLLED
    assert not TERMINAL & INBOX


async def test_no_sql_definition_spells_a_set_out(db: Any) -> None:
    definitions = await db.fetch(
        """
        SELECT 'function ' || p.proname AS what, pg_get_functiondef(p.oid) AS sql
        FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
          AND p.proname <> 'jw_state_set' AND p.prokind = 'f'
        UNION ALL
        SELECT 'view ' || viewname, definition FROM pg_views WHERE schemaname = 'public'
        UNION ALL
        SELECT 'constraint ' || conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace
        UNION ALL
        SELECT 'trigger ' || tgname, pg_get_triggerdef(oid) FROM pg_trigger
        WHERE NOT tgisinternal
        UNION ALL
        SELECT 'index ' || indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
        """
    )
    spelled = [d["what"] for d in definitions if spells_a_set(d["sql"])]
    queries = [name for name, sql in all_queries().items() if spells_a_set(sql)]
    assert spelled == [] and queries == []


async def test_every_sql_set_name_has_a_python_twin(db: Any) -> None:
    body = await db.fetchval("SELECT pg_get_functiondef('jw_state_set(text)'::regprocedure)")
    assert set(re.findall(r"WHEN '(\w+)' THEN", body)) == set(STATE_SETS)


def test_no_python_module_spells_a_set_out() -> None:
    root = Path(__file__).resolve().parents[2]
    offenders = []
    for top in ("shared", "receiver", "reconciler"):
        for path in sorted((root / top).rglob("*.py")):
            if path.name == "states.py":
                continue
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.Set | ast.Tuple | ast.List):
                    members = [
                        e
                        for e in node.elts
                        if isinstance(e, ast.Attribute) and e.attr in LocalState.__members__
                    ]
                    if len(members) >= 3:
                        offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []
