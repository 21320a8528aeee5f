"""References the foreign keys no longer check on insert (migration 039), checked by the audit.

A matched event cites its operation, and its observation cites the event and
the operation. The ledger's writers never make a reference to nothing, and
the purge deletes only events no observation cites; a deletion that left a
row cited (a purge or an archive gone wrong) is a problem `audit verify`
names, where the keys had refused it. The deletion here is the owner's
DELETE with every trigger on, as a buggy purge would run it; the reference
check is read alone (the log's own checks also name an attached event deleted
with no archive listing it, but not one an archive's listing excused).
"""

from __future__ import annotations

from typing import Any

from shared import ledger
from shared.db.queries import q
from shared.ids import new_operation_id
from shared.ledger import webhooks as ledger_webhooks
from shared.ledger.log_audit import LogReport
from shared.ledger.working_state_audit import check_working_state
from tests.support import submit

PROVIDER = "sim"  # tests.support.submit creates operations for this provider


async def _problems(db: Any) -> list[str]:
    """What the reference check names (the other checks judge a job id these
    operations got with no call on record, which is not what is tested here)."""
    report = LogReport()  # what `audit verify` collects them in
    async with db.transaction(isolation="repeatable_read", readonly=True):
        await check_working_state(db, report)
    return [p for p in report.problems if "names no row of" in p]


def _columns(event_id: str, job_id: str, state: str = "succeeded") -> dict[str, list[Any]]:
    return {
        "provider": [PROVIDER],
        "event_id": [event_id],
        "scheme": ["standard"],
        "id_signed": [True],
        "remote_job_id": [job_id],
        "operation_ref": [None],
        "client_reference": [None],
        "remote_state": [state],
        "remote_state_raw": [state],
        "payload": ["{}"],
        "extra": [0],
    }


async def _matched_event(db: Any) -> tuple[str, int, int]:
    """An operation, a webhook event matched to it and the event's observation."""
    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, "job_ref", create_mode="async")
    [row] = await ledger_webhooks.store_events(db, _columns("evt_ref", "job_ref"))
    assert row["operation_id"] == op_id and row["inserted"]
    observation = await db.fetchval(
        "SELECT observation_id FROM observations WHERE webhook_event_id = $1",
        row["webhook_event_id"],
    )
    assert observation is not None
    return op_id, row["webhook_event_id"], observation


async def test_the_ledgers_own_matched_event_leaves_no_dangling_reference(db: Any) -> None:
    await _matched_event(db)
    # a stored event that matched nothing cites nothing
    [unmatched] = await ledger_webhooks.store_events(db, _columns("evt_none", "job_nobody"))
    assert unmatched["operation_id"] is None
    assert await _problems(db) == []


async def test_a_deleted_event_its_observation_still_cites_is_named(db: Any) -> None:
    _, event_id, observation = await _matched_event(db)
    # the foreign key had refused this; nothing now does (migration 039)
    assert await db.execute("DELETE FROM webhook_events WHERE webhook_event_id = $1", event_id) == (
        "DELETE 1"
    )
    assert await _problems(db) == [
        f"observations {observation}: webhook_event_id '{event_id}' names no row of "
        "webhook_events (a deletion left it cited)"
    ]


async def test_an_operation_named_by_no_row_is_named_for_each_reference(db: Any) -> None:
    op_id, event_id, observation = await _matched_event(db)
    renamed = new_operation_id()
    # operations are never deleted (operations_no_delete): only a hand that turns
    # the triggers off renames one, and its evidence then cites nothing
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")
        await db.execute(
            "UPDATE operations SET operation_id = $2 WHERE operation_id = $1", op_id, renamed
        )
        for table in ("history", "operation_schedule", "operation_wakes", "provider_calls"):
            await db.execute(
                f"UPDATE {table} SET operation_id = $2 WHERE operation_id = $1", op_id, renamed
            )
    assert await _problems(db) == [
        f"observations {observation}: operation_id '{op_id}' names no row of operations "
        "(a deletion left it cited)",
        f"webhook_events {event_id}: operation_id '{op_id}' names no row of operations "
        "(a deletion left it cited)",
    ]


async def test_the_check_reads_each_referenced_table_by_its_primary_key(db: Any) -> None:
    """An anti-join per reference: no sort or nested scan of a whole referenced table."""
    await _matched_event(db)
    plan = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + q("audit_dangling_references")))
    assert "Anti Join" in plan, plan


async def test_a_matched_event_that_wakes_nothing_leaves_its_operations_row_untouched(
    db: Any,
) -> None:
    """What migration 039 is for: the foreign keys' checks locked the operation's row
    (FOR KEY SHARE sets the tuple's xmax), a write to the wide row for every matched
    event; news that the job runs now leaves its tuple as it was. An event that
    wakes the operation still locks it once, through the wake-up row's own key
    (operation_wakes), as the second half shows."""
    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, "job_ref", create_mode="async")
    tuple_of = "SELECT ctid::text, xmin::text, xmax::text FROM operations WHERE operation_id = $1"
    before = await db.fetchrow(tuple_of, op_id)
    [row] = await ledger_webhooks.store_events(db, _columns("evt_run", "job_ref", "running"))
    assert row["operation_id"] == op_id and row["inserted"] and not row["woken"]
    assert await db.fetchrow(tuple_of, op_id) == before
    [row] = await ledger_webhooks.store_events(db, _columns("evt_end", "job_ref", "succeeded"))
    assert row["operation_id"] == op_id and row["woken"]
    after = await db.fetchrow(tuple_of, op_id)
    assert after["ctid"] == before["ctid"] and after["xmax"] != before["xmax"]
