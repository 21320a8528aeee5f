"""Every connection of ours starts with SERVER_SETTINGS (shared/db/connect.py)."""

from __future__ import annotations

from typing import Any

from bench.harness import FILL_SQL
from shared.db import pgjson
from shared.db.connect import SERVER_SETTINGS, connect, create_pool, refresh_plans
from shared.db.queries import q
from shared.ledger.evidence import record_polls


async def test_a_connection_compiles_no_query_just_in_time(db_url: str) -> None:
    assert SERVER_SETTINGS["jit"] == "off"
    conn = await connect(db_url)
    try:
        assert await conn.fetchval("SHOW jit") == "off"
    finally:
        await conn.close()


async def test_a_pools_own_settings_add_to_ours(db_url: str) -> None:
    pool = await create_pool(db_url, server_settings={"application_name": "jw-settings-test"})
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW jit") == "off"
            assert await conn.fetchval("SHOW application_name") == "jw-settings-test"
    finally:
        await pool.close()


# One status read's record as record_polls takes it (the shape status_row
# writes), for an operation whose lease this writer does not hold: the
# statement runs whole and changes nothing but a call row.
def _status_read(operation_id: str) -> dict[str, Any]:
    return {
        "operation_id": operation_id, "fence": -1, "call_id": None, "attempt": 1,
        "worker": "reconciler:plans", "method": "GET", "url": "https://api.example/jobs/1",
        "request_headers": {}, "traceparent": None, "duration_ms": 20, "status_code": 200,
        "provider_request_id": None, "remote_state": "running", "remote_state_raw": "running",
        "progress_completed": None, "progress_total": None, "progress_percent": None,
        "poll_after_seconds": None, "error": None, "response_headers": {},
        "error_category": None, "response_sha256": "0" * 64, "response_size": 2,
        "response_body": "{}", "provider_updated_at": None, "result_url": None,
        "errors_url": None, "counts": None, "not_before_seconds": None, "anomalies": None,
        "observe": True, "release": True, "release_after": 5.0,
    }  # fmt: skip


async def _operations_read_by_its_plan(pool: Any, rows: list[str]) -> int:
    """Runs record_polls as the reconciler does (enough times for PostgreSQL to settle
    on a plan), then EXPLAINs the connection's own prepared statement: the operation
    rows its plan reads."""
    async with pool.acquire() as conn:
        for _ in range(8):
            await record_polls(conn, rows)
        name = await conn.fetchval(
            "SELECT name FROM pg_prepared_statements WHERE statement = $1", q("record_polls")
        )
        batch = "[" + ",".join(rows) + "]"
        literal = "'" + batch.replace("'", "''") + "'"  # EXPLAIN takes no parameters
        explained = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({literal})")
    return _rows_read(explained[0]["Plan"], "operations")


def _rows_read(plan: dict[str, Any], table: str) -> int:
    own = 0
    if plan.get("Relation Name") == table and "Scan" in plan["Node Type"]:
        read = ("Actual Rows", "Rows Removed by Filter", "Rows Removed by Join Filter")
        own = sum(int(plan.get(k, 0)) for k in read) * int(plan.get("Actual Loops", 1))
    return own + sum(_rows_read(child, table) for child in plan.get("Plans", []))


async def test_refreshed_connections_plan_for_the_tables_as_they_are(db: Any, db_url: str) -> None:
    """A statement's generic plan, made while the operations were few, is kept by
    its connection as they grow (no ANALYZE: autovacuum off); refresh_plans gives
    the pool new connections, which plan afresh."""
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")  # bulk filler rows
        await db.execute(FILL_SQL, 1, 600, 0.0, 0.0)
    rows = [pgjson.dumps(_status_read("op_" + str(n).rjust(26, "0"))) for n in (7, 77, 377)]
    pool = await create_pool(db_url, min_size=1, max_size=1)
    try:
        await _operations_read_by_its_plan(pool, rows)  # planned at 600 operations
        async with db.transaction():
            await db.execute("SET LOCAL session_replication_role = replica")
            await db.execute(FILL_SQL, 601, 30_000, 0.0, 0.0)
        kept = await _operations_read_by_its_plan(pool, rows)
        await refresh_plans(pool)
        fresh = await _operations_read_by_its_plan(pool, rows)
    finally:
        await pool.close()
    assert fresh <= 10 * len(rows), f"a fresh connection's plan read {fresh} operations"
    assert kept > 1000  # the stale plan: what refresh_plans is for (a scan of the table)
