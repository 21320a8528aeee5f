"""A hostile database superuser against the evidence log (README, *The evidence log*).

Each test plays whoever administers PostgreSQL: triggers off, constraints
dropped, rows, leaves, hashes and checkpoint rows rewritten, the database
rolled back. A tampering the README says is caught must fail
`audit verify` against a checkpoint kept off the host (exit 1, naming it),
never pass and never end in a traceback; one the README says it cannot
prove is shown passing, so the documentation and the code stay in step.
The attacks test_evidence_log.py and test_evidence_log_queue.py already
make (a consistent rewrite, re-ordered or truncated leaves, a queue entry
kept from the sequencer) are not repeated here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.ledger import audit, log
from shared.ledger.leaves import KINDS, Digests, leaf_data
from shared.tlog import leaf_hash
from tests.integration.test_evidence_log import (
    _kept_off_the_host,
    _verify,
    signed,
    superuser,
)
from tests.support import jobwarden

__all__ = ["signed"]  # the fixture, shared with test_evidence_log


async def _append_transition(conn: Any, op_id: str, to_state: str, cause: str) -> Any:
    """A history row appended by hand, chained with the database's own hash function,
    the operation moved to it: a chain `audit.verify` finds intact."""
    head = await conn.fetchrow(
        "SELECT state::text, history_seq, history_head, remote_job_id FROM operations"
        " WHERE operation_id = $1",
        op_id,
    )
    seq, at = head["history_seq"] + 1, await conn.fetchval("SELECT clock_timestamp()")
    row_hash = await conn.fetchval(
        "SELECT jw_history_hash($1, $2, $3, $4, 'reconciler:w1', $5::jw_state, $6::jw_state,"
        " $7, NULL, NULL, $8)",
        head["history_head"],
        op_id,
        seq,
        at,
        head["state"],
        to_state,
        cause,
        head["remote_job_id"],
    )
    row = await conn.fetchrow(
        "INSERT INTO history (operation_id, seq, at, actor, from_state, to_state, cause,"
        " remote_job_id, prev_hash, row_hash) VALUES ($1, $2, $3, 'reconciler:w1',"
        " $4::jw_state, $5::jw_state, $6, $7, $8, $9) RETURNING *",
        op_id,
        seq,
        at,
        head["state"],
        to_state,
        cause,
        head["remote_job_id"],
        head["history_head"],
        row_hash,
    )
    await conn.execute(
        "UPDATE operations SET state = $2::jw_state, history_seq = $3, history_head = $4"
        " WHERE operation_id = $1",
        op_id,
        to_state,
        seq,
        row_hash,
    )
    return row


async def _leaf_for(conn: Any, kind: str, row: Any, index: int) -> None:
    """A leaf for `row` written by hand at `index`, with its true digests."""
    row_id = KINDS[kind].row_id(row)
    digests = Digests.of(KINDS[kind], row)
    await conn.execute(
        "INSERT INTO log_leaves (leaf_index, kind, row_id, leaf_hash, deleted, row_sha256,"
        " fixed_sha256, settled_sha256) VALUES ($1, $2, $3, $4, false, $5, $6, $7)",
        index,
        kind,
        row_id,
        leaf_hash(leaf_data(kind, row_id, digests)),
        digests.row,
        digests.fixed,
        digests.settled,
    )


async def test_a_forged_row_behind_a_leaf_outside_the_tree_is_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """An operator's decision fabricated (dated last month), its leaf written at
    index -1 (the owner may drop the CHECK that forbids it): the row has a leaf,
    so it was not "outside the log", and the tree, streamed from 0, never saw it.
    It passed against every checkpoint."""
    ops, note = signed
    async with superuser(pool) as conn:
        await conn.execute("ALTER TABLE log_leaves DROP CONSTRAINT log_leaves_leaf_index_check")
        row = await conn.fetchrow(
            "INSERT INTO decisions (operation_id, actor, decided_at, decision, reason)"
            " VALUES ($1, 'operator:alice', clock_timestamp() - interval '30 days', 'failed',"
            " 'approved: bill the customer anyway') RETURNING *",
            ops[2],
        )
        await _leaf_for(conn, "decision", row, -1)
    for report in (await _verify(pool, note), await _verify(pool, None)):
        assert not report.ok
        assert [p for p in report.problems if "leaf -1" in p] == [
            f"leaf -1 (decision {row['decision_id']}): an index below 0, in no tree: written "
            "beside the log, it proves nothing"
        ], report.problems


async def _append_leaf(conn: Any, kind: str | None, row_id: str | None, digests: Digests) -> int:
    """A leaf appended by hand at the log's end, with the stored hashes it completes
    (as a careful attacker writes one: the tree still hashes)."""
    index = int(await conn.fetchval("SELECT max(leaf_index) + 1 FROM log_leaves"))
    hashed = leaf_hash(leaf_data(kind or "", row_id or "", digests))
    cache = log.HashCache()
    await log._store(conn, cache, index, hashed)
    await conn.execute(
        "INSERT INTO log_leaves (leaf_index, kind, row_id, leaf_hash, deleted, row_sha256,"
        " fixed_sha256, settled_sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        index,
        kind,
        row_id,
        hashed,
        digests.row is None,
        digests.row,
        digests.fixed,
        digests.settled,
    )
    await conn.execute(
        "INSERT INTO log_hashes SELECT * FROM unnest($1::bigint[], $2::bytea[])",
        list(cache.new),
        list(cache.new.values()),
    )
    return index


async def _verify_on_the_command_line(
    tmp_path: Path, note: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    checkpoint, key = _kept_off_the_host(tmp_path, note)
    code = await jobwarden(
        "audit", "verify", "--checkpoint", str(checkpoint), "--key", str(key), "--no-record",
        "--settle", "0",
    )  # fmt: skip
    return code, capsys.readouterr().out


async def test_a_version_without_its_fixed_digest_is_reported_not_a_traceback(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The schema lets a live leaf omit its fixed digest (only `deleted` is tied to
    the row digest), so no trigger or constraint need be touched: a second version
    of a logged call without one made the version rules raise TypeError."""
    _, note = signed
    monkeypatch.setenv("DATABASE_URL", db_url)
    async with pool.acquire() as conn:
        last = await conn.fetchrow(
            "SELECT row_id, row_sha256, settled_sha256 FROM log_leaves WHERE kind = 'call'"
            " ORDER BY leaf_index DESC LIMIT 1"
        )
        await _append_leaf(
            conn,
            "call",
            last["row_id"],
            Digests(bytes(last["row_sha256"]), None, last["settled_sha256"]),
        )
    code, out = await _verify_on_the_command_line(tmp_path, note, capsys)
    assert code == 1, out
    assert f"TAMPERED provider_calls {last['row_id']}" in out and "fixed digest" in out, out


MALFORMED_LEAVES = {
    "no_kind": ("kind", "UPDATE log_leaves SET kind = NULL WHERE leaf_index = 3"),
    "no_row_id": ("row_id", "UPDATE log_leaves SET row_id = NULL WHERE leaf_index = 3"),
    "no_leaf_hash": ("leaf_hash", "UPDATE log_leaves SET leaf_hash = NULL WHERE leaf_index = 3"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_LEAVES))
async def test_a_leaf_missing_what_it_records_is_reported_not_a_traceback(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    """NOT NULL dropped, a leaf's column emptied (triggers off): verify reports it."""
    _, note = signed
    column, sql = MALFORMED_LEAVES[case]
    monkeypatch.setenv("DATABASE_URL", db_url)
    async with superuser(pool) as conn:
        await conn.execute(f"ALTER TABLE log_leaves ALTER COLUMN {column} DROP NOT NULL")
        await conn.execute(sql)
    code, out = await _verify_on_the_command_line(tmp_path, note, capsys)
    assert code == 1, out
    assert "TAMPERED leaf 3:" in out, out
    # the tree is recomputed from what leaves record, never from their stored hash
    verdict = "extends it, but" if column == "leaf_hash" else "does NOT extend it"
    assert verdict in out, out


MALFORMED_HISTORY = {
    "no_actor": "ALTER TABLE history ALTER COLUMN actor DROP NOT NULL;"
    " UPDATE history SET actor = NULL WHERE history_id = {id}",
    "no_time": "ALTER TABLE history ALTER COLUMN at DROP NOT NULL;"
    " UPDATE history SET at = NULL WHERE history_id = {id}",
    "time_as_text": "ALTER TABLE history ALTER COLUMN at TYPE text USING at::text",
    "no_operation": "ALTER TABLE history ALTER COLUMN operation_id DROP NOT NULL;"
    " UPDATE history SET operation_id = NULL WHERE history_id = {id}",
}


@pytest.mark.parametrize("case", sorted(MALFORMED_HISTORY))
async def test_a_history_row_that_cannot_be_hashed_is_a_break_not_a_traceback(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    ops, note = signed
    monkeypatch.setenv("DATABASE_URL", db_url)
    async with superuser(pool) as conn:
        history_id = await conn.fetchval(
            "SELECT min(history_id) FROM history WHERE operation_id = $1", ops[0]
        )
        await conn.execute(MALFORMED_HISTORY[case].format(id=history_id))
    code, out = await _verify_on_the_command_line(tmp_path, note, capsys)
    assert code == 1, out
    assert "BROKEN" in out and "FAILED" in out, out


async def test_a_finished_operation_moved_on_after_the_checkpoint_is_a_broken_chain(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A `failed` operation made `cancelled` by a transition appended by hand, chained
    with the database's own hash and logged by the sequencer like any other: after
    the newest checkpoint, so the log cannot refuse it (README: evidence added since
    is only as safe as the database). A transition the state machine forbids is
    refused by the chain check, which replays the machine: a terminal state is never
    left, whenever the row was written."""
    ops, note = signed
    monkeypatch.setenv("DATABASE_URL", db_url)
    async with superuser(pool) as conn:
        row = await _append_transition(conn, ops[2], "cancelled", "cancelled at our request")
        await conn.execute(
            "INSERT INTO log_queue (kind, row_id) VALUES ('history', $1)", str(row["history_id"])
        )
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1
    assert (await _verify(pool, note)).ok  # the log holds it, after the checkpoint
    code, out = await _verify_on_the_command_line(tmp_path, note, capsys)
    assert code == 1, out
    assert (
        f"BROKEN {ops[2]} seq {row['seq']}: failed -> cancelled is not a transition the "
        "state machine allows" in out
    ), out


CHAIN_OF_TRANSITIONS = {
    # (what the attacker rewrites, with the row's hash recomputed to match) -> the break
    "skips_a_state": (
        "UPDATE history SET from_state = 'create_pending' WHERE operation_id = $1 AND seq = 3",
        "starts from create_pending, but the previous transition ended in accepted",
    ),
    "a_second_genesis": (
        "UPDATE history SET from_state = NULL WHERE operation_id = $1 AND seq = 3",
        "only the first transition starts from nothing",
    ),
    "evidence_dropped": (
        "UPDATE history SET evidence_kind = NULL, evidence_id = NULL"
        " WHERE operation_id = $1 AND to_state = 'succeeded'",
        "result_collecting -> succeeded cites no result",
    ),
}


@pytest.mark.parametrize("case", sorted(CHAIN_OF_TRANSITIONS))
async def test_a_chain_rehashed_around_an_impossible_transition_is_broken(
    pool: Any, signed: tuple[list[str], str], case: str
) -> None:
    """Rows rewritten and every hash after them recomputed (the chain alone is then
    fooled, as issue 12 found): the replayed state machine still refuses them."""
    ops, _ = signed
    sql, problem = CHAIN_OF_TRANSITIONS[case]
    async with superuser(pool) as conn:
        await conn.execute(sql, ops[0])
        await _rehash_chain(conn, ops[0])
    async with pool.acquire() as conn:
        _, breaks = await audit.verify(conn)
    assert [b.operation_id for b in breaks] == [ops[0]]
    assert problem in breaks[0].problem, breaks


async def _rehash_chain(conn: Any, op_id: str) -> None:
    """Every row_hash and prev_hash of the operation's chain recomputed, the head too."""
    prev = audit.genesis_hash(op_id)
    for row in await conn.fetch(
        "SELECT * FROM history WHERE operation_id = $1 ORDER BY seq", op_id
    ):
        row_hash = audit.row_hash({**dict(row), "prev_hash": prev})
        await conn.execute(
            "UPDATE history SET prev_hash = $2, row_hash = $3 WHERE history_id = $1",
            row["history_id"],
            prev,
            row_hash,
        )
        prev = row_hash
    await conn.execute(
        "UPDATE operations SET history_head = $2 WHERE operation_id = $1", op_id, prev
    )
