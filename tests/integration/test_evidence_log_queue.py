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

from collections.abc import Awaitable, Callable
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
    pool: Any,
    note: str,
    monkeypatch: pytest.MonkeyPatch,
    meanwhile: Callable[[Any], Awaitable[None]] = log.sequence_all,
) -> LogReport:
    """verify_log, with `meanwhile` run once its snapshot is taken: the sequencer,
    as the reconciler's runs every few seconds (so a change it finds queued is
    logged while it waits, never before it looked), or an attacker's move."""
    settle = log_audit._settle_excused

    async def after_the_snapshot(conn: Any, report: LogReport, *rest: Any) -> None:
        async with pool.acquire() as other:
            await meanwhile(other)
        await settle(conn, report, *rest)

    monkeypatch.setattr(log_audit, "_settle_excused", after_the_snapshot)
    checkpoint = open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)])
    async with pool.acquire() as conn:
        return await verify_log(conn, checkpoint, settle_seconds=SETTLE_SECONDS)


async def _hide_a_deleted_call(pool: Any, ops: list[str]) -> int:
    """The tester's attack: a logged call deleted, its queue entry kept from the sequencer."""
    call_id = await _create_call(pool, ops[0])
    async with pool.acquire() as conn:
        await conn.execute(HIDE_FROM_THE_SEQUENCER.format(call_id=call_id))
        await conn.execute("DELETE FROM provider_calls WHERE call_id = $1", call_id)
        await log.sequence_all(conn)  # the sequencer runs on; the entry stays
        await conn.execute("UPDATE log_queue SET queued_at = clock_timestamp()")
    return call_id


async def _copy_of_its_last_leaf(conn: Any, call_id: int, index: int | None) -> None:
    """A leaf for the call written by hand (its last version again, not deleted):
    at `index`, or appended at the log's end with the stored hashes it completes."""
    last = await conn.fetchrow(
        "SELECT * FROM log_leaves WHERE kind = 'call' AND row_id = $1"
        " ORDER BY leaf_index DESC LIMIT 1",
        str(call_id),
    )
    cache = log.HashCache()
    if index is None:
        index = int(await conn.fetchval("SELECT max(leaf_index) + 1 FROM log_leaves"))
        await log._store(conn, cache, index, bytes(last["leaf_hash"]))
    await conn.execute(
        "INSERT INTO log_leaves (leaf_index, kind, row_id, leaf_hash, deleted, row_sha256,"
        " fixed_sha256, settled_sha256) VALUES ($1, 'call', $2, $3, false, $4, $5, $6)",
        index,
        str(call_id),
        last["leaf_hash"],
        last["row_sha256"],
        last["fixed_sha256"],
        last["settled_sha256"],
    )
    await conn.execute(
        "INSERT INTO log_hashes SELECT * FROM unnest($1::bigint[], $2::bytea[])",
        list(cache.new),
        list(cache.new.values()),
    )


async def test_a_queue_entry_kept_from_the_sequencer_no_longer_hides_a_deleted_call(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ops, note = signed
    call_id = await _hide_a_deleted_call(pool, ops)
    report = await _verify_while_sequencing(pool, note, monkeypatch)
    assert report.excused == [("call", str(call_id))]
    assert not report.ok and report.extends is True
    assert any(
        p.startswith(f"provider_calls {call_id}:") and "was not logged within" in p
        for p in report.problems
    ), report.problems


@pytest.mark.parametrize("where", ["far", "appended"])
async def test_a_leaf_written_by_hand_while_the_check_waits_does_not_pass_for_the_sequencers(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A second reader's attack on the first version: the key "logged" by a leaf
    the attacker wrote (far off, or appended with its stored hashes, a copy of
    the row's last version) while the row stays deleted. The leaves since the
    first pass are recomputed into the tree, and the row judged against its
    newest leaf again."""
    ops, note = signed
    call_id = await _hide_a_deleted_call(pool, ops)
    far = 10**15

    async def forge(conn: Any) -> None:
        await _copy_of_its_last_leaf(conn, call_id, far if where == "far" else None)

    report = await _verify_while_sequencing(pool, note, monkeypatch, forge)
    assert report.settled == 1 and not report.ok
    expected = "is missing (next is" if where == "far" else f"provider_calls {call_id}: removed"
    assert any(expected in p for p in report.problems), report.problems


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
