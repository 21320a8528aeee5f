"""Applying the numbered migrations in `sql/migrations/`.

All pending files are applied in one transaction under an advisory lock, so two
processes starting at once cannot interleave and a failure leaves nothing half
done. Each applied file is recorded with its sha256; a file changed after it was
applied is refused, because the database would no longer match the code that
describes it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from shared.db.queries import q, sql_root

# Any fixed number works; it only has to be the same for every jobwarden process.
ADVISORY_LOCK_KEY = 0x6A6F6277  # "jobw"
# A pending file's explicit table lock, taken before any pending file runs.
_TABLE_LOCK = re.compile(r"^LOCK TABLE (\w+) IN ([A-Z ]+) MODE;$", re.MULTILINE)
_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


class MigrationError(RuntimeError):
    pass


class NewerSchema(MigrationError):
    """The database was migrated by a newer jobwarden (a rollback of the code, say).

    The reconciler and the command line refuse it: their state machine may be
    older than the schema's rules. The receiver only warns (during a rolling
    upgrade the schema moves first and older receivers keep taking webhooks).
    """


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()


def load_migrations(folder: Path | None = None) -> list[Migration]:
    folder = folder or sql_root() / "migrations"
    found: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        match = _NAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNN_description.sql")
        found.append(Migration(int(match.group(1)), path.name, path.read_text("utf-8")))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migration files share a number")
    return found


async def apply_migrations(
    conn: asyncpg.Connection,
    migrations: list[Migration] | None = None,
    *,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """Apply what is pending; returns the names applied (empty = already current).

    `warn` is told what a migration says with RAISE WARNING (data it migrated
    but wants a person to look at: 035's operations sharing a job), its
    message, detail and hint in one line."""
    migrations = load_migrations() if migrations is None else migrations

    def heard(_: object, notice: asyncpg.PostgresLogMessage) -> None:
        if warn is not None and notice.severity == "WARNING":
            said = [notice.message, notice.detail, notice.hint]
            warn("; ".join(part for part in said if part))

    conn.add_log_listener(heard)
    try:
        return await _apply(conn, migrations)
    finally:
        conn.remove_log_listener(heard)


async def _apply(conn: asyncpg.Connection, migrations: list[Migration]) -> list[str]:
    applied_now: list[str] = []
    async with conn.transaction():
        await conn.execute(q("migrations_lock"), ADVISORY_LOCK_KEY)
        await conn.execute(q("migrations_create_table"))
        recorded = {r["version"]: r for r in await conn.fetch(q("migrations_applied"))}
        known = {m.version for m in migrations}
        for version, row in recorded.items():
            if version not in known:
                raise MigrationError(
                    f"the database has migration {row['name']} which this code does not know: "
                    "it was written by a newer jobwarden"
                )
        pending = [m for m in migrations if m.version not in recorded]
        await _take_declared_locks(conn, pending)
        for migration in migrations:
            row = recorded.get(migration.version)
            if row is not None:
                if row["checksum"] != migration.checksum:
                    raise MigrationError(
                        f"{migration.name} was changed after it was applied "
                        f"(recorded sha256 {row['checksum'][:12]}…, file "
                        f"{migration.checksum[:12]}…); add a new migration instead"
                    )
                continue
            try:
                await conn.execute(migration.sql)
            except asyncpg.RaiseError as exc:  # the file refused the data it found
                raise MigrationError(_refusal(migration, exc)) from exc
            await conn.execute(
                q("migrations_record"), migration.version, migration.name, migration.checksum
            )
            applied_now.append(migration.name)
    return applied_now


async def _take_declared_locks(conn: asyncpg.Connection, pending: list[Migration]) -> None:
    """The table locks pending files declare (`LOCK TABLE operations IN ACCESS
    EXCLUSIVE MODE;`, as 029 and 035 do), taken first, before any file runs.

    All pending files run in one transaction: a file's lock taken after an
    earlier file has locked other tables (034's observations) is taken while
    holding those, and a daemon holding the first and wanting the others
    deadlocks with it. Taken first, the migration waits for the daemon's
    transaction holding nothing it needs. A table that does not exist yet (a
    new database) needs no lock."""
    for migration in pending:
        for declared in _TABLE_LOCK.finditer(migration.sql):
            if await conn.fetchval(q("migrations_table_exists"), declared.group(1)):
                await conn.execute(declared.group(0))  # the file's own statement


def _refusal(migration: Migration, exc: asyncpg.RaiseError) -> str:
    """What a migration's RAISE EXCEPTION says, whole: message, detail and hint.

    A migration raises one to refuse data it cannot migrate without a human
    deciding; the whole run is rolled back, and the command line says this
    (migration_refused) instead of a traceback.
    """
    said = [f"{migration.name} refused: {exc.message}"]
    said += [part for part in (exc.detail, exc.hint) if part]
    return "; ".join(said)


async def pending_migrations(conn: asyncpg.Connection) -> list[str]:
    """Names of migrations not yet applied (for /readyz); MigrationError on a changed
    file, NewerSchema when the database holds a migration this code does not know."""
    exists = await conn.fetchval(q("migrations_table_exists"), "public.schema_migrations")
    migrations = load_migrations()
    if not exists:
        return [m.name for m in migrations]
    rows = await conn.fetch(q("migrations_applied"))
    recorded = {r["version"]: r["checksum"] for r in rows}
    known = {m.version for m in migrations}
    newer = [r["name"] for r in rows if r["version"] not in known]
    if newer:
        raise NewerSchema(
            f"the database has migration {newer[0]} which this code does not know: "
            "it was migrated by a newer jobwarden"
        )
    pending = []
    for m in migrations:
        if m.version not in recorded:
            pending.append(m.name)
        elif recorded[m.version] != m.checksum:
            raise MigrationError(f"{m.name} was changed after it was applied")
    return pending
