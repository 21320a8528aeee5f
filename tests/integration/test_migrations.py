"""Migrations: idempotent, locked, checksummed, and producing the expected schema."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from shared.db.connect import connect, with_database
from shared.db.migrate import (
    Migration,
    MigrationError,
    apply_migrations,
    load_migrations,
    pending_migrations,
)
from tests.conftest import _drop
from tests.support import submit

SNAPSHOT = Path(__file__).with_name("schema_snapshot.txt")

# The shape of the schema, from the catalog (pg_dump's text differs between
# server versions; this does not).
CATALOG = """
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' '
       || CASE WHEN is_nullable = 'YES' THEN 'null' ELSE 'not null' END
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || contype::text
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'index ' || indexname || ' on ' || tablename FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'trigger ' || tgrelid::regclass || ' ' || tgname FROM pg_trigger
WHERE NOT tgisinternal AND tgrelid::regclass::text NOT LIKE 'pg_%'
UNION ALL
SELECT 'function ' || proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace
ORDER BY 1
"""


async def _empty_database(pg_server: Any, name: str) -> Any:
    await _drop(pg_server.admin_url, name)
    admin = await connect(pg_server.admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return await connect(with_database(pg_server.admin_url, name))


async def test_applying_all_migrations_gives_the_expected_schema(pg_server: Any) -> None:
    conn = await _empty_database(pg_server, f"jw_mig_schema_{os.getpid()}")
    try:
        applied = await apply_migrations(conn)
        assert applied == [m.name for m in load_migrations()]
        shape = "\n".join(r[0] for r in await conn.fetch(CATALOG)) + "\n"
    finally:
        await conn.close()
        await _drop(pg_server.admin_url, f"jw_mig_schema_{os.getpid()}")
    if os.environ.get("JW_UPDATE_SNAPSHOT") == "1":  # after a new migration; review the diff
        SNAPSHOT.write_text(shape)
    assert shape == SNAPSHOT.read_text(), (
        "schema drifted from tests/integration/schema_snapshot.txt"
    )


async def test_second_run_is_a_no_op(db: Any) -> None:
    assert await apply_migrations(db) == []
    assert await pending_migrations(db) == []


async def test_concurrent_migrate_applies_each_file_once(pg_server: Any) -> None:
    first = await _empty_database(pg_server, f"jw_mig_race_{os.getpid()}")
    second = await connect(with_database(pg_server.admin_url, f"jw_mig_race_{os.getpid()}"))
    try:
        results = await asyncio.gather(apply_migrations(first), apply_migrations(second))
        assert sorted(len(r) for r in results) == [0, len(load_migrations())]
        assert await first.fetchval("SELECT count(*) FROM schema_migrations") == len(
            load_migrations()
        )
    finally:
        await first.close()
        await second.close()
        await _drop(pg_server.admin_url, f"jw_mig_race_{os.getpid()}")


async def test_a_changed_applied_migration_is_refused(db: Any) -> None:
    changed = [
        Migration(m.version, m.name, m.sql + "\n-- edited") if m.version == 1 else m
        for m in load_migrations()
    ]
    with pytest.raises(MigrationError, match=r"001_schema\.sql was changed after it was applied"):
        await apply_migrations(db, changed)


async def test_a_failing_migration_leaves_nothing_applied(db: Any) -> None:
    broken = [
        *load_migrations(),
        Migration(999, "999_broken.sql", "CREATE TABLE x (); SELECT 1/0;"),
    ]
    with pytest.raises(Exception, match="division by zero"):
        await apply_migrations(db, broken)
    assert await db.fetchval("SELECT to_regclass('public.x')") is None
    assert await db.fetchval("SELECT max(version) FROM schema_migrations") == len(load_migrations())


async def test_a_migration_refusing_its_data_is_a_migration_error_saying_all_it_said(
    db: Any,
) -> None:
    refusing = [
        *load_migrations(),
        Migration(
            999,
            "999_refusing.sql",
            "CREATE TABLE x (); DO $$ BEGIN RAISE EXCEPTION 'rows % and %', 1, 2 "
            "USING DETAIL = 'the rows', HINT = 'repair them'; END $$;",
        ),
    ]
    with pytest.raises(MigrationError) as refused:
        await apply_migrations(db, refusing)
    assert str(refused.value) == "999_refusing.sql refused: rows 1 and 2; the rows; repair them"
    assert await db.fetchval("SELECT to_regclass('public.x')") is None


async def test_035_keeps_operations_already_sharing_a_job_and_says_which(
    pg_server: Any,
) -> None:
    """Before the check (7828793), and for a synchronous create's job id after
    it, two operations could record one job. A recorded job id is never
    rewritten, and which one should hold it is a person's call: 035 keeps the
    first holder of each such job under the index, exempts the later ones and
    names them in a warning; the upgrade is not blocked on a repair no command
    makes. A new recording of such a job is refused all the same."""
    name = f"jw_mig_shared_{os.getpid()}"
    conn = await _empty_database(pg_server, name)
    try:
        await apply_migrations(conn, [m for m in load_migrations() if m.version < 35])
        a, b, c, d, e = [await submit(conn, body={"n": n}) for n in range(5)]
        update = "UPDATE operations SET remote_job_id = $2 WHERE operation_id = $1"
        for op_id, job in ((a, "job_twice"), (b, "job_twice"), (c, "job_once"), (d, "job_once")):
            await conn.execute(update, op_id, job)  # as the owner could, before 035
        before = await conn.fetch("SELECT * FROM operations ORDER BY operation_id")
        warned: list[str] = []
        applied = await apply_migrations(conn, warn=warned.append)
        assert applied == [m.name for m in load_migrations() if m.version >= 35]
        (said,) = warned
        assert said.startswith(
            "2 remote job(s) are each recorded by more than one operation: the first (oldest) "
            "holder of each keeps it, the 2 others are exempt"
        ), said
        assert f"sim job 'job_once': {c} (create_pending), {d} (create_pending)" in said
        assert f"sim job 'job_twice': {a} (create_pending), {b} (create_pending)" in said
        after = await conn.fetch("SELECT * FROM operations ORDER BY operation_id")
        assert len(after) == len(before)
        # the rows as they were (columns later migrations add aside)
        kept = [{k: row[k] for k in dict(was)} for row, was in zip(after, before, strict=True)]
        assert kept == [dict(was) for was in before]
        # a lookup by job id does not imply the exemption: the plain index stays
        assert await conn.fetchval("SELECT to_regclass('operations_remote_job')") is not None
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(update, e, "job_twice")  # its first holder is indexed
    finally:
        await conn.close()
        await _drop(pg_server.admin_url, name)


async def test_pending_files_declared_locks_are_taken_before_any_file_runs(
    pg_server: Any,
) -> None:
    """034 locks observations, 035 then operations, in one transaction: a daemon
    holding operations and wanting observations deadlocked with the migrator.
    The migrator takes 035's declared lock first, holding nothing the daemon
    needs, and waits for it instead."""
    name = f"jw_mig_locks_{os.getpid()}"
    conn = await _empty_database(pg_server, name)
    daemon = await connect(with_database(pg_server.admin_url, name))
    try:
        await apply_migrations(conn, [m for m in load_migrations() if m.version < 34])
        # PostgreSQL says when the migrator has waited for a lock: log_lock_waits,
        # sent to the migrator's own client (a notice) once deadlock_timeout passes
        blocked = asyncio.Event()

        def heard(_conn: Any, message: Any) -> None:
            if "still waiting for" in str(message.message) and "on relation" in str(message):
                blocked.set()

        conn.add_log_listener(heard)
        await conn.execute(
            "SET log_lock_waits = on; SET deadlock_timeout = '10ms'; SET client_min_messages = log"
        )
        async with daemon.transaction():
            await daemon.execute("LOCK TABLE operations IN ROW EXCLUSIVE MODE")  # a claim's
            migrating = asyncio.ensure_future(apply_migrations(conn))
            async with asyncio.timeout(60):
                await blocked.wait()  # the migrator waits for the daemon's lock
            waiting = (
                "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE NOT l.granted AND l.pid = $1"
            )
            assert await daemon.fetchval(waiting, conn.get_server_pid()) == "operations"
            # then the daemon records its read: the observations table is free
            await daemon.fetchval("SELECT count(*) FROM observations")
        assert await migrating == [m.name for m in load_migrations() if m.version >= 34]
    finally:
        await daemon.close()
        await conn.close()
        await _drop(pg_server.admin_url, name)
