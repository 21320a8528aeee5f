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

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.db.connect import create_pool, with_database
from shared.ledger import audit, log, receipts, webhooks
from shared.ledger.leaves import KINDS, Digests, leaf_data
from shared.ledger.log_audit import LogReport, open_checkpoint, verify_log
from shared.tlog import Signer, Verifier, generate_key, leaf_hash
from tests.conftest import _drop
from tests.integration.test_evidence_log import (
    SIGNER_KEY,
    VERIFIER_KEY,
    _as_the_auditor,
    _kept_off_the_host,
    _recompute_stored_hashes,
    _rewrite_consistently,
    _truncate_newest,
    _unmatched_events,
    _verify,
    signed,
    superuser,
)
from tests.integration.test_evidence_log_queue import _verify_while_sequencing
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


@contextlib.asynccontextmanager
async def triggers_off(pool: Any, *tables: str) -> AsyncIterator[Any]:
    """`ALTER TABLE … DISABLE TRIGGER ALL` (the owner's way, not replica mode), in a
    transaction that enables them again: no log_queue entry, no append-only guard."""
    async with pool.acquire() as conn, conn.transaction():
        for table in tables:
            await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        yield conn
        for table in tables:
            await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")


TIMESTAMPS = {
    # table, its time column, how the row is picked (of the newest operation)
    "history_at": ("history", "at", "history_id = (SELECT max(history_id) FROM history)"),
    "observation_fetched_at": (
        "observations",
        "fetched_at",
        "observation_id = (SELECT max(observation_id) FROM observations)",
    ),
    "call_started_at": (
        "provider_calls",
        "started_at",
        "call_id = (SELECT min(call_id) FROM provider_calls)",
    ),
    "result_fetched_at": (
        "results",
        "fetched_at",
        "result_id = (SELECT min(result_id) FROM results)",
    ),
}


@pytest.mark.parametrize("case", sorted(TIMESTAMPS))
async def test_a_timestamp_moved_with_triggers_disabled_is_caught(
    pool: Any, signed: tuple[list[str], str], case: str
) -> None:
    """Evidence back-dated an hour: altered, with or without a checkpoint."""
    _, note = signed
    table, column, where = TIMESTAMPS[case]
    async with triggers_off(pool, table) as conn:
        assert (
            await conn.execute(
                f"UPDATE {table} SET {column} = {column} - interval '1 hour' WHERE {where}"
            )
            == "UPDATE 1"
        )
    for report in (await _verify(pool, note), await _verify(pool, None)):
        assert any(p.startswith(table) and "altered" in p for p in report.problems), report.problems
    assert (await _verify(pool, note)).extends is True


async def test_a_leaf_rewritten_with_triggers_disabled_is_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """An observation and its leaf rewritten together, the stored hashes left alone:
    even a plain verify sees the tree and its stored hashes disagree."""
    _, note = signed
    async with triggers_off(pool, "observations", "log_leaves") as conn:
        row = await conn.fetchrow(
            "UPDATE observations SET remote_state = 'succeeded', error = NULL"
            " WHERE observation_id = (SELECT max(observation_id) FROM observations) RETURNING *"
        )
        digests = Digests.of(KINDS["observation"], row)
        row_id = str(row["observation_id"])
        await conn.execute(
            "UPDATE log_leaves SET leaf_hash = $2, row_sha256 = $3, fixed_sha256 = $4"
            " WHERE kind = 'observation' AND row_id = $1",
            row_id,
            leaf_hash(leaf_data("observation", row_id, digests)),
            digests.row,
            digests.fixed,
        )
    plain = await _verify(pool, None)
    tree = [p for p in plain.problems if not p.startswith("operations ")]
    assert tree == ["the stored hashes disagree with the leaves: proofs would not verify"]
    # and the operation still shows the state and error the rewritten read replaced
    assert len(plain.problems) == 3, plain.problems
    against = await _verify(pool, note)
    assert against.extends is False and not against.ok


async def test_newest_entries_replaced_past_the_checkpoints_size_are_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """The tail cut (the newest operation's rows, leaves and hashes) and different
    evidence logged in its place, more of it than was cut: the log is longer than
    the checkpoint again, consistent with itself, and not the log that was signed."""
    ops, note = signed
    async with superuser(pool) as conn:
        await _truncate_newest(conn, ops)
        size = await conn.fetchval("SELECT count(*) FROM log_leaves")
    async with pool.acquire() as conn:
        await webhooks.store_events(conn, _unmatched_events("replacement", 40))
        assert await log.sequence_all(conn) == 40
    checkpoint = open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)])
    assert size + 40 > checkpoint.size
    plain = await _verify(pool, None)
    assert plain.ok, plain.problems
    against = await _verify(pool, note)
    assert against.extends is False
    assert any("do not hash to the checkpoint's root" in p for p in against.problems)


async def test_a_rewrite_served_under_a_checkpoint_row_signed_with_another_key(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """A consistent rewrite, then a checkpoint row for the new tree signed with a key
    the attacker made under the log's name, replacing the real row (append-only
    guard off): the API would serve receipts built on it, and every reader holding
    the log's public key refuses them; verify never reads checkpoint rows."""
    ops, note = signed
    forger, _ = generate_key("jobwarden.test/log")
    async with superuser(pool) as conn:
        await _rewrite_consistently(conn, ops)
        await conn.execute("DELETE FROM log_checkpoints")
        await log.checkpoint(conn, Signer.from_key(forger))
    async with pool.acquire() as conn:
        receipt = await receipts.build_receipt(conn, ops[2])
    document = json.loads(json.dumps(receipt.to_json()))
    with pytest.raises(receipts.ReceiptError, match="does not verify"):
        receipts.check_receipt(document, [Verifier.from_key(VERIFIER_KEY)])
    assert (await _verify(pool, note)).extends is False


async def _pg_tools(pool: Any) -> Path:
    """The directory of a pg_dump and pg_restore of the server's own major version:
    the system's, or the embedded server's (pgserver ships its own); skipped when
    neither matches (a dump of a newer server is refused, a restore of a newer
    dump may not load)."""
    major = int(await pool.fetchval("SHOW server_version_num")) // 10000
    candidates = [Path(found).parent for found in [shutil.which("pg_dump")] if found]
    spec = importlib.util.find_spec("pgserver")
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "pginstall" / "bin")
    for directory in candidates:
        tool = directory / "pg_dump"
        if not (tool.exists() and (directory / "pg_restore").exists()):
            continue
        process = await asyncio.create_subprocess_exec(
            str(tool), "--version", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
        version = out.decode().rsplit(" ", 1)[-1].split(".")[0]
        if version.isdigit() and int(version) == major:
            return directory
    pytest.skip(f"no pg_dump/pg_restore of PostgreSQL {major} here")


async def _command(*argv: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, (argv[0], out.decode(), err.decode())


async def _verify_at(url: str, note: str) -> LogReport:
    restored = await create_pool(url, min_size=1, max_size=2)
    try:
        async with restored.acquire() as conn:
            return await verify_log(
                conn, open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)]), settle_seconds=0
            )
    finally:
        await restored.close()


async def test_a_database_rolled_back_to_a_backup_is_caught_by_the_newer_checkpoint(
    pool: Any, db_url: str, signed: tuple[list[str], str], tmp_path: Path
) -> None:
    """The whole database restored from a real `pg_dump` taken before the newest
    checkpoint (a fork): verify against that checkpoint finds the newest entries
    gone; evidence appended since, past its size, does not hide it; the signer
    holding its published checkpoint refuses to sign the restored log. Against
    the checkpoint the backup already held it passes: evidence is only as safe
    as the newest checkpoint shipped off the host."""
    _, old_note = signed
    tools = await _pg_tools(pool)
    dump = tmp_path / "before.dump"
    await _command(
        str(tools / "pg_dump"), "--format=custom", f"--file={dump}", f"--dbname={db_url}"
    )
    async with pool.acquire() as conn:
        await webhooks.store_events(conn, _unmatched_events("after_the_backup", 10))
        await log.sequence_all(conn)
        new_note = await log.checkpoint(conn, Signer.from_key(SIGNER_KEY))
    published = log.publish(new_note, tmp_path / "checkpoints")
    admin = with_database(db_url, "postgres")
    name = f"jw_t_{os.getpid()}_restored"
    await _drop(admin, name)
    admin_conn = await create_pool(admin, min_size=1, max_size=1)
    try:
        await admin_conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin_conn.close()
    restored = with_database(db_url, name)
    try:
        await _command(str(tools / "pg_restore"), f"--dbname={restored}", str(dump))
        assert (await _verify_at(restored, old_note)).ok
        gone = await _verify_at(restored, new_note)
        assert gone.extends is False
        assert any("the newest entries were removed" in p for p in gone.problems)
        other = await create_pool(restored, min_size=1, max_size=2)
        try:
            async with other.acquire() as conn:
                previous = log.published(published.path.parent, Signer.from_key(SIGNER_KEY))
                with pytest.raises(log.LogForked, match="smaller than the previous"):
                    await log.checkpoint(conn, Signer.from_key(SIGNER_KEY), previous)
                await webhooks.store_events(conn, _unmatched_events("on_the_fork", 30))
                await log.sequence_all(conn)
        finally:
            await other.close()
        forked = await _verify_at(restored, new_note)
        assert forked.extends is False
        assert any("do not hash to the checkpoint's root" in p for p in forked.problems)
    finally:
        await _drop(admin, name)


# ------------------------------------------------- what verify cannot see (README says so)

WORKING_STATE = {
    # what agents are shown, or what the reconciler acts on next, written without
    # a history row and determined by no logged evidence: operations' columns
    # outside the submitted intent. (The job id, the remote state, progress, the
    # create and result deadlines, the status URL, a failed operation's error and a
    # cancel intent a transition recorded are checked against their evidence:
    # test_audit_working_state.py.)
    # (the create and result deadlines are logged since migration 040, the status
    # URL since 041; a cancel's deadline is not)
    "the_cancel_deadline": "cancel_deadline = now() + interval '30 days'",
    # an intent where no transition recorded one (as one recorded while stopped for
    # a human is): who asked and why, on an operation nobody asked to cancel
    "an_intent_no_transition_records": (
        "cancel_requested_by = 'agent:someone-else', cancel_reason = 'forged'"
    ),
}


@pytest.mark.parametrize("case", sorted(WORKING_STATE))
async def test_the_operations_working_state_is_not_covered(
    pool: Any, signed: tuple[list[str], str], case: str
) -> None:
    """The operation row's working state is outside the log (README: *Not covered*),
    and some of it reaches agents or the reconciler: the cancel deadline, a
    cancel intent no transition recorded. Of it, the state (the chain's last
    transition), the result (its own, the one its success cites), the job id, the
    remote state, progress, the create and result deadlines, the status URL, a
    failed operation's error and who asked to cancel and why (as the transition
    that recorded it says) are checked."""
    ops, note = signed
    op_id = ops[2]
    async with pool.acquire() as conn:
        before = await conn.fetchrow("SELECT * FROM operations WHERE operation_id = $1", op_id)
    async with superuser(pool) as conn:
        await conn.execute(
            f"UPDATE operations SET {WORKING_STATE[case]} WHERE operation_id = $1", op_id
        )
    async with pool.acquire() as conn:
        after = await conn.fetchrow("SELECT * FROM operations WHERE operation_id = $1", op_id)
        _, breaks = await audit.verify(conn)
    assert dict(after) != dict(before)  # agents or the reconciler read something else
    assert breaks == []
    assert (await _verify(pool, note)).ok  # not detected: documented


async def test_a_row_shown_to_agents_and_hidden_from_the_auditors_login(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A split view: a failed item fabricated (triggers off: never queued, never
    logged) and a row security policy that hides it from the login `verify` runs
    as. The auditor's verify passes; agents are shown the item; the only witness
    is the agent's receipt, which cannot prove it. `verify` checks the database
    as that database shows it to its login (README)."""
    ops, note = signed
    async with superuser(pool) as conn:
        result_id = await conn.fetchval(
            "SELECT result_id FROM operations WHERE operation_id = $1", ops[1]
        )
        await conn.execute(
            "INSERT INTO result_item_failures (result_id, item_key, code, message)"
            " VALUES ($1, 'forged-1', 'invalid', 'row 1 was never sent')",
            result_id,
        )
    async with pool.acquire() as conn:
        await conn.execute(
            "ALTER TABLE result_item_failures ENABLE ROW LEVEL SECURITY;"
            " ALTER TABLE result_item_failures FORCE ROW LEVEL SECURITY;"
            " CREATE POLICY everyone ON result_item_failures USING (true) WITH CHECK (true);"
            " CREATE POLICY not_the_auditor ON result_item_failures AS RESTRICTIVE FOR SELECT"
            " USING (current_user <> 'jobwarden_operator' OR item_key <> 'forged-1')"
        )
    _as_the_auditor(monkeypatch, db_url)
    code, out = await _verify_on_the_command_line(tmp_path, note, capsys)
    assert code == 0 and out.rstrip().endswith("OK"), out
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE jobwarden_receiver")
        shown = await conn.fetch(
            "SELECT item_key FROM agent_failed_items WHERE operation_id = $1", ops[1]
        )
        receipt = await receipts.build_receipt(conn, ops[1])
    assert "forged-1" in {r["item_key"] for r in shown}
    assert any(f"failure {result_id}/forged-1" in u for u in receipt.unproven), receipt.unproven
    # a login the policy does not name (here the superuser) sees it outside the log
    assert any("forged-1: outside the log" in p for p in (await _verify(pool, note)).problems)


async def test_evidence_edited_before_its_first_leaf_is_logged_as_edited(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """Racing the sequencer: a webhook event's payload rewritten in the seconds
    between its write and its first leaf. The log records the rewritten event as
    the event, and verify has nothing to compare it with (README: evidence is only
    as safe as the database until a checkpoint covering it leaves the host)."""
    _, note = signed
    async with pool.acquire() as conn:
        await webhooks.store_events(conn, _unmatched_events("raced", 1))
    async with superuser(pool) as conn:
        assert (
            await conn.execute(
                'UPDATE webhook_events SET payload = \'{"job_id": "job_forged"}\''
                " WHERE event_id = 'raced_0'"
            )
            == "UPDATE 1"
        )
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1
    assert (await _verify(pool, note)).ok


async def test_a_calls_request_is_fixed_only_once_it_is_recorded_finished(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """A status read recorded before it left (as `call_started` records one) and
    covered by a checkpoint while in flight: the ledger itself completes such a
    row with its request (a chained read, a read recorded as lost), so until it
    is finished its request is not fixed. Rewritten with a forged answer after
    the checkpoint, the call passes; its identity (here its start) does not."""
    ops, _ = signed
    async with pool.acquire() as conn:
        call = await conn.fetchrow(
            "INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, fence,"
            " trace_id, method, url, request_headers) SELECT $1, 'status', 99, 'reconciler:w1',"
            " 1, trace_id, 'GET', 'http://provider.test/v1/jobs/1', '{}' FROM operations"
            " WHERE operation_id = $1 RETURNING call_id",
            ops[0],
        )
        await log.sequence_all(conn)
        note = await log.checkpoint(conn, Signer.from_key(SIGNER_KEY))
    async with superuser(pool) as conn:
        await conn.execute(
            "UPDATE provider_calls SET url = 'http://elsewhere.test/v1/jobs/2',"
            " finished_at = started_at + interval '1 s', status_code = 200,"
            ' response_body = \'{"state": "succeeded"}\' WHERE call_id = $1',
            call["call_id"],
        )
        await conn.execute(
            "INSERT INTO log_queue (kind, row_id) VALUES ('call', $1)", str(call["call_id"])
        )
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1
    assert (await _verify(pool, note)).ok  # the request settled with the answer
    async with superuser(pool) as conn:
        await conn.execute(
            "UPDATE provider_calls SET started_at = started_at - interval '1 day'"
            " WHERE call_id = $1",
            call["call_id"],
        )
        await conn.execute(
            "INSERT INTO log_queue (kind, row_id) VALUES ('call', $1)", str(call["call_id"])
        )
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1
    report = await _verify(pool, note)
    assert any("changed what never changes" in p for p in report.problems), report.problems


async def _a_covered_call(conn: Any, op_id: str) -> Any:
    """The operation's create call, with the index of its newest leaf."""
    return await conn.fetchrow(
        "SELECT c.call_id::text AS id, max(l.leaf_index) AS leaf FROM provider_calls c"
        " JOIN log_leaves l ON l.kind = 'call' AND l.row_id = c.call_id::text"
        " WHERE c.operation_id = $1 AND c.call_kind = 'create' GROUP BY c.call_id",
        op_id,
    )


async def _list_as_archived(conn: Any, call: Any, op_id: str) -> None:
    """`log_archived` names the call under an archive id no `log_archives` row has
    (its foreign key unchecked in replica mode)."""
    await conn.execute(
        "INSERT INTO log_archived (kind, row_id, archive_id, operation_id, leaf_index)"
        " VALUES ('call', $1, 424242, $2, $3)",
        call["id"],
        op_id,
        call["leaf"],
    )


async def _delete_and_queue(conn: Any, call: Any) -> None:
    await conn.execute("DELETE FROM provider_calls WHERE call_id::text = $1", call["id"])
    await conn.execute("INSERT INTO log_queue (kind, row_id) VALUES ('call', $1)", call["id"])


async def test_a_deletion_excused_by_a_listing_in_no_logged_archive_is_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """A covered provider call deleted and listed in `log_archived` under no logged
    archive, its deletion queued and logged: the version rules took the listing
    for an archive's, and the archive check, which walks the logged archives,
    never met it. It passed against the checkpoint ("any other deletion fails")."""
    ops, note = signed
    async with superuser(pool) as conn:
        call = await _a_covered_call(conn, ops[1])
        await _list_as_archived(conn, call, ops[1])
        await _delete_and_queue(conn, call)
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1  # its deletion leaf
    for report in (await _verify(pool, note), await _verify(pool, None)):
        assert report.problems == [
            "1 evidence row(s) listed as archived (log_archived) under no archive the log "
            "records: the deletions they excuse are no archive's"
        ]


async def test_a_listing_slipped_in_while_verify_waits_for_the_sequencer_is_caught(
    pool: Any, signed: tuple[list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, raced: the call deleted and its deletion queued before the check
    (excused while pending), the listing written once its first snapshot was
    taken, then the sequencer logs the deletion while the check waits for it."""
    ops, note = signed
    async with superuser(pool) as conn:
        call = await _a_covered_call(conn, ops[1])
        await _delete_and_queue(conn, call)

    async def meanwhile(_: Any) -> None:
        async with superuser(pool) as conn:
            await _list_as_archived(conn, call, ops[1])
        async with pool.acquire() as conn:
            await log.sequence_all(conn)

    report = await _verify_while_sequencing(pool, note, monkeypatch, meanwhile)
    assert report.settled == 1
    assert report.problems == [
        f"provider_calls {call['id']}: listed as archived only while this check waited"
    ]


MALFORMED_HASHES = {
    "no_hash": "ALTER TABLE log_hashes ALTER COLUMN hash DROP NOT NULL;"
    " UPDATE log_hashes SET hash = NULL"
    " WHERE hash_index = (SELECT max(hash_index) FROM log_hashes)",
    "short_hash": "ALTER TABLE log_hashes DROP CONSTRAINT log_hashes_hash_check;"
    " UPDATE log_hashes SET hash = '\\x0102'"
    " WHERE hash_index = (SELECT max(hash_index) FROM log_hashes)",
}


@pytest.mark.parametrize("case", sorted(MALFORMED_HASHES))
async def test_a_stored_hash_emptied_or_cut_short_is_reported_not_a_traceback(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    """The tree's stored hashes (what proofs are built from) with a constraint dropped:
    the tree itself is recomputed from the leaves and still extends the checkpoint;
    the stored hashes are reported (before: TypeError, ProofError)."""
    _, note = signed
    monkeypatch.setenv("DATABASE_URL", db_url)
    async with superuser(pool) as conn:
        await conn.execute(MALFORMED_HASHES[case])
    code, out = await _verify_on_the_command_line(tmp_path, note, capsys)
    assert code == 1, out
    assert "TAMPERED stored hashes:" in out and "extends it, but" in out, out


async def test_a_stored_hash_no_head_reads_is_not_checked(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """Verify checks the stored hashes the tree head is read from, not every one: a
    superuser who deletes another (leaf 0's) breaks the receipts proven through it
    (a denial, not a forgery: no receipt verifies against the signed root without
    the true hashes) and verify passes. README says which it checks."""
    ops, note = signed
    async with superuser(pool) as conn:
        await conn.execute("DELETE FROM log_hashes WHERE hash_index = 0")
    assert (await _verify(pool, note)).ok
    async with pool.acquire() as conn:
        with pytest.raises(log.LogCorrupt, match="missing from log_hashes"):
            await receipts.build_receipt(conn, ops[0])


@pytest.mark.usefixtures("signed")
async def test_a_fresh_unattached_webhook_event_deleted_passes_as_a_purge(pool: Any) -> None:
    """The retention purge deletes events never attached to an operation, a day old
    at least. Verify holds a deletion to the first rule only: with the row gone it
    cannot read its age, so an event deleted the minute it was received passes
    (README: any never-attached event, whatever its age)."""
    async with pool.acquire() as conn:
        await webhooks.store_events(conn, _unmatched_events("early", 1))
        await log.sequence_all(conn)
        note = await log.checkpoint(conn, Signer.from_key(SIGNER_KEY))
    async with superuser(pool) as conn:
        event_id = await conn.fetchval(
            "DELETE FROM webhook_events WHERE event_id = 'early_0' RETURNING webhook_event_id"
        )
        await conn.execute(
            "INSERT INTO log_queue (kind, row_id) VALUES ('webhook', $1)", str(event_id)
        )
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1
    assert (await _verify(pool, note)).ok


async def test_a_forged_leaf_inserted_in_the_middle_is_caught_by_the_checkpoint(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """A decision fabricated and its leaf slipped in at index 5, every later leaf
    moved up one and the stored hashes recomputed: a log consistent with itself,
    not the one that was signed."""
    ops, note = signed
    async with superuser(pool) as conn:
        row = await conn.fetchrow(
            "INSERT INTO decisions (operation_id, actor, decision, reason) VALUES"
            " ($1, 'operator:alice', 'failed', 'approved: bill the customer anyway') RETURNING *",
            ops[2],
        )
        shift = 1 << 40
        await conn.execute(
            "UPDATE log_leaves SET leaf_index = leaf_index + $1 WHERE leaf_index >= 5", shift
        )
        await conn.execute(
            "UPDATE log_leaves SET leaf_index = leaf_index - $1 + 1 WHERE leaf_index >= $1", shift
        )
        await _leaf_for(conn, "decision", row, 5)
        await _recompute_stored_hashes(conn)
    plain = await _verify(pool, None)
    assert plain.ok, plain.problems
    against = await _verify(pool, note)
    assert against.extends is False
    assert any("do not hash to the checkpoint's root" in p for p in against.problems)


@pytest.mark.usefixtures("signed")
async def test_a_number_changed_below_a_doubles_precision_is_not_caught(pool: Any) -> None:
    """Leaves encode JSON numbers as the jsonb codec decodes them, Python floats: a
    covered document whose number is rewritten to another that rounds to the same
    double has the same digest. The database (and an agent reading the views with
    SQL) shows the new digits; verify passes. A limit of leaf encoding v1 (README)."""
    events = _unmatched_events("amount", 1)
    events["payload"] = ['{"job_id": "job_nobody_knows", "amount": 10000000000000000.0}']
    async with pool.acquire() as conn:
        await webhooks.store_events(conn, events)
        await log.sequence_all(conn)
        note = await log.checkpoint(conn, Signer.from_key(SIGNER_KEY))
    async with superuser(pool) as conn:
        await conn.execute(
            "UPDATE webhook_events SET payload = jsonb_set(payload, '{amount}',"
            " '10000000000000001.0') WHERE event_id = 'amount_0'"
        )
        shown = await conn.fetchval(
            "SELECT payload ->> 'amount' FROM webhook_events WHERE event_id = 'amount_0'"
        )
    assert shown == "10000000000000001.0"
    assert (await _verify(pool, note)).ok


async def test_an_operations_state_rewritten_without_a_transition_is_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """`failed` made `succeeded` on the operation row alone (what agents read): its
    chain's last transition says otherwise."""
    ops, _ = signed
    async with triggers_off(pool, "operations") as conn:
        await conn.execute("ALTER TABLE operations DROP CONSTRAINT succeeded_has_result")
        await conn.execute(
            "UPDATE operations SET state = 'succeeded' WHERE operation_id = $1", ops[2]
        )
    async with pool.acquire() as conn:
        _, breaks = await audit.verify(conn)
    assert [str(b) for b in breaks] == [
        f"{ops[2]} chain head: operation state differs from its last transition"
    ]


async def test_two_observations_swapped_are_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """Two observations' readings exchanged, ids kept: each no longer its leaf."""
    _, note = signed
    async with triggers_off(pool, "observations") as conn:
        first, second = await conn.fetch(
            "SELECT observation_id, remote_state, remote_state_raw FROM observations"
            " WHERE remote_state IS DISTINCT FROM (SELECT remote_state FROM observations"
            " ORDER BY observation_id LIMIT 1) OR observation_id = (SELECT min(observation_id)"
            " FROM observations) ORDER BY observation_id LIMIT 2"
        )
        for mine, theirs in ((first, second), (second, first)):
            await conn.execute(
                "UPDATE observations SET remote_state = $2, remote_state_raw = $3"
                " WHERE observation_id = $1",
                mine["observation_id"],
                theirs["remote_state"],
                theirs["remote_state_raw"],
            )
    report = await _verify(pool, note)
    assert sorted(p for p in report.problems if "altered" in p) == sorted(
        f"observations {r['observation_id']}: altered (its content does not match its leaf)"
        for r in (first, second)
    ), report.problems
