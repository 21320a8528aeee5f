"""The log's queue cannot excuse a change for ever (a tester's attacks, with the real ledger).

`audit verify` let a row disagree with its newest leaf, or have none, while
a change to it was queued for the sequencer, as one is for a few seconds
after any write. A database administrator kept one queue entry from the
sequencer (a BEFORE DELETE trigger on log_queue returning NULL) and kept its
`queued_at` young: a provider call deleted, or a fabricated success, then
verified OK against every checkpoint, for ever. Now the check waits for the
sequencer to log each row a queued change excuses, and judges what it
logged; nothing stored in the database stands in for that.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shared.ledger import log, log_audit
from shared.ledger.log_audit import LogReport, open_checkpoint, verify_log
from shared.tlog import Verifier
from tests.integration.test_evidence_log import VERIFIER_KEY, signed
from tests.support import submit

__all__ = ["signed"]  # the fixture, shared with test_evidence_log

# Long enough for the sequencer started after the check's snapshot; a row it
# cannot log is reported once this has passed.
SETTLE_SECONDS = 3.0

HIDE_FROM_THE_SEQUENCER = """
CREATE FUNCTION jw_test_keep_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.kind = 'call' AND OLD.row_id = '{call_id}' THEN RETURN NULL; END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER keep_queued BEFORE DELETE ON log_queue
    FOR EACH ROW EXECUTE FUNCTION jw_test_keep_queued();
"""


async def _create_call(pool: Any, op_id: str) -> int:
    call_id: int = await pool.fetchval(
        "SELECT call_id FROM provider_calls WHERE operation_id = $1 AND call_kind = 'create'",
        op_id,
    )
    return call_id


async def _verify_while_sequencing(
    pool: Any, note: str, monkeypatch: pytest.MonkeyPatch
) -> LogReport:
    """verify_log, with the sequencer run once its snapshot is taken (as the
    reconciler's would, every few seconds): so a change it finds queued is
    logged while it waits, never before it looked."""
    looked = asyncio.Event()
    settle = log_audit._settle_excused

    async def after_the_snapshot(conn: Any, report: LogReport, seconds: float) -> None:
        looked.set()
        await settle(conn, report, seconds)

    monkeypatch.setattr(log_audit, "_settle_excused", after_the_snapshot)
    checkpoint = open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)])
    async with pool.acquire() as conn:
        check = asyncio.ensure_future(verify_log(conn, checkpoint, settle_seconds=SETTLE_SECONDS))
        waiter = asyncio.ensure_future(looked.wait())
        await asyncio.wait({check, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if looked.is_set():
            async with pool.acquire() as sequencer:
                await log.sequence_all(sequencer)
        return await check


async def test_a_queue_entry_kept_from_the_sequencer_no_longer_hides_a_deleted_call(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ops, note = signed
    call_id = await _create_call(pool, ops[0])
    async with pool.acquire() as conn:
        await conn.execute(HIDE_FROM_THE_SEQUENCER.format(call_id=call_id))
        await conn.execute("DELETE FROM provider_calls WHERE call_id = $1", call_id)
        async with pool.acquire() as sequencer:
            await log.sequence_all(sequencer)  # the sequencer runs on; the entry stays
        await conn.execute("UPDATE log_queue SET queued_at = clock_timestamp()")
    report = await _verify_while_sequencing(pool, note, monkeypatch)
    assert report.excused == [("call", str(call_id))]
    assert not report.ok and report.extends is True
    assert any(
        p.startswith(f"provider_calls {call_id}:") and "was not logged within" in p
        for p in report.problems
    ), report.problems


async def test_a_deletion_the_sequencer_logs_while_the_check_waits_is_judged(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry not hidden: the sequencer logs the deletion during the wait, and
    the deletion itself is the problem (only the ledger's deletions are allowed)."""
    ops, note = signed
    call_id = await _create_call(pool, ops[0])
    await pool.execute("DELETE FROM provider_calls WHERE call_id = $1", call_id)
    report = await _verify_while_sequencing(pool, note, monkeypatch)
    assert report.excused == [("call", str(call_id))] and report.settled == 1
    assert any(
        p.startswith(f"provider_calls {call_id}:") and "only archived rows" in p
        for p in report.problems
    ), report.problems


async def test_changes_the_sequencer_logs_while_the_check_waits_pass(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a live system always has: rows written since the last batch."""
    _, note = signed
    await submit(pool)  # its operation and history rows: queued, not yet logged
    report = await _verify_while_sequencing(pool, note, monkeypatch)
    assert report.ok, report.problems
    assert len(report.excused) >= 2 and report.settled == len(report.excused)


async def test_a_change_nobody_logs_is_a_problem_once_the_wait_is_over(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """No sequencer running: the check cannot prove the queued rows, and says so."""
    _, note = signed
    await submit(pool)
    checkpoint = open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)])
    async with pool.acquire() as conn:
        report = await verify_log(conn, checkpoint, settle_seconds=0.0)
    assert not report.ok and report.settled == 0
    assert all("the sequencer is not running" in p for p in report.problems), report.problems


async def test_a_backlog_too_large_to_wait_for_is_one_problem(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows excused past the bound are not held in memory; one problem says why."""
    _, note = signed
    monkeypatch.setattr(log_audit, "MAX_EXCUSED", 1)
    await submit(pool)  # two rows not yet logged: one past the bound
    checkpoint = open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)])
    async with pool.acquire() as conn:
        report = await verify_log(conn, checkpoint, settle_seconds=0.0)
    assert len(report.excused) == 1 and report.excused_beyond >= 1
    assert sum("a backlog this check does not wait for" in p for p in report.problems) == 1
