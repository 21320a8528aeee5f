"""The evidence log against a database superuser: every tampering is caught by a checkpoint.

Real jobs run through the simulator and the reconciler to fill every kind of
evidence; the sequencer logs it; a checkpoint is signed with a key the
database never sees. Then the tests play the administrator of issue 12:
triggers off (`session_replication_role = replica`), rows rewritten with the
database's own hash functions, whole operations deleted, the newest entries
truncated, leaves re-ordered, stored hashes recomputed to match. Each is
detected against the exported checkpoint; the ones a consistent rewrite can
hide are shown to pass a plain `audit verify` that says what it cannot prove.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bench.evidence_log import seed_log_bulk
from shared.db.queries import q
from shared.ledger import audit, log, webhooks
from shared.ledger.leaves import KINDS, Digests, leaf_data
from shared.ledger.log_audit import LogReport, open_checkpoint, verify_log
from shared.ledger.states import LocalState
from shared.tlog import (
    NoteError,
    Signer,
    Verifier,
    generate_key,
    leaf_hash,
    stored_hash_index,
    stored_hashes,
)
from tests.harness import rig
from tests.support import jobwarden

S = LocalState
DONE = {S.SUCCEEDED, S.FAILED, S.RESULT_VALIDATION_FAILED}
SIGNER_KEY, VERIFIER_KEY = generate_key("jobwarden.test/log")


@contextlib.asynccontextmanager
async def superuser(pool: Any) -> AsyncIterator[Any]:
    """A connection whose writes no trigger sees, as a database owner's can be."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        yield conn


async def _jobs(pool: Any, tmp_path: Path) -> list[str]:
    """Three finished operations; the last one's evidence is the newest of the log."""
    async with rig(pool, tmp_path) as r:
        ops = [
            await r.submit("success", duration=0.05),
            await r.submit("partial", duration=0.05, total=5, failed=2),
        ]
        for op_id in ops:
            await r.settle(op_id, DONE)
        async with pool.acquire() as conn:
            await log.sequence_all(conn)
        # what follows is the newest of the log: the third operation's evidence alone
        ops.append(await r.submit("late_failure", duration=0.05))
        await r.settle(ops[2], DONE)
    return ops


async def _sequence_and_sign(pool: Any) -> str:
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        return await log.checkpoint(conn, Signer.from_key(SIGNER_KEY))


async def _verify(pool: Any, note: str | None) -> LogReport:
    checkpoint = open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)]) if note else None
    async with pool.acquire() as conn:
        return await verify_log(conn, checkpoint)


@pytest.fixture
async def signed(pool: Any, tmp_path: Path) -> tuple[list[str], str]:
    ops = await _jobs(pool, tmp_path)
    return ops, await _sequence_and_sign(pool)


async def test_every_kind_of_evidence_is_logged_and_verifies(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    _, note = signed
    report = await _verify(pool, note)
    assert report.ok, report.problems
    assert report.pending == 0 and report.unproven is None
    for kind in ("operation", "history", "call", "observation", "result", "failure"):
        assert report.rows_checked[kind] > 0, kind
    leaves = await pool.fetchval("SELECT count(*) FROM log_leaves")
    assert report.tree_size == leaves and report.checkpoint is not None
    assert report.checkpoint.size == leaves
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 0  # nothing left to append


async def test_without_a_checkpoint_it_says_what_it_cannot_prove(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    report = await _verify(pool, None)
    assert report.ok and report.unproven is not None
    assert "rewritten rows and leaves together" in report.unproven


async def _rewrite_history(conn: Any, op_id: str) -> None:
    """Issue 12's first attack: actor and cause rewritten, row_hash and chain head redone."""
    row = await conn.fetchrow(
        "SELECT * FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
    )
    new_hash = await conn.fetchval(
        "SELECT jw_history_hash($1, $2, $3, $4, 'operator:mallory', $5, $6,"
        " 'operator approved: ignore failure', $7, $8, $9)",
        row["prev_hash"],
        op_id,
        row["seq"],
        row["at"],
        row["from_state"],
        row["to_state"],
        row["evidence_kind"],
        row["evidence_id"],
        row["remote_job_id"],
    )
    await conn.execute(
        "UPDATE history SET actor = 'operator:mallory',"
        " cause = 'operator approved: ignore failure', row_hash = $2 WHERE history_id = $1",
        row["history_id"],
        new_hash,
    )
    await conn.execute(
        "UPDATE operations SET history_head = $2 WHERE operation_id = $1", op_id, new_hash
    )


async def _delete_operation(conn: Any, op_id: str) -> None:
    """The second attack: an operation removed with everything it touched."""
    await conn.execute(
        "DELETE FROM result_item_failures WHERE result_id IN"
        " (SELECT result_id FROM results WHERE operation_id = $1)",
        op_id,
    )
    await conn.execute("UPDATE operations SET result_id = NULL WHERE operation_id = $1", op_id)
    for table in ("results", "observations", "escalations", "history", "provider_calls"):
        await conn.execute(f"DELETE FROM {table} WHERE operation_id = $1", op_id)
    await conn.execute("DELETE FROM operations WHERE operation_id = $1", op_id)


async def _alter_evidence(conn: Any, op_id: str) -> None:
    """The third: a provider's answer on record changed."""
    await conn.execute(
        'UPDATE provider_calls SET response_body = \'{"state":"succeeded"}\', status_code = 200'
        " WHERE call_id = (SELECT max(call_id) FROM provider_calls WHERE operation_id = $1)",
        op_id,
    )


ROW_ATTACKS: dict[str, Callable[[Any, str], Awaitable[None]]] = {
    "history_rewritten_with_the_databases_own_hash": _rewrite_history,
    "operation_deleted_with_its_history": _delete_operation,
    "provider_answer_altered": _alter_evidence,
}


@pytest.mark.parametrize("attack", sorted(ROW_ATTACKS))
async def test_a_tampered_row_is_caught_with_or_without_a_checkpoint(
    pool: Any, signed: tuple[list[str], str], attack: str
) -> None:
    ops, note = signed
    async with superuser(pool) as conn:
        await ROW_ATTACKS[attack](conn, ops[2])
    async with pool.acquire() as conn:
        _, breaks = await audit.verify(conn)
    if attack == "history_rewritten_with_the_databases_own_hash":
        assert breaks == []  # the hash chain alone is fooled, as issue 12 found
    for report in (await _verify(pool, note), await _verify(pool, None)):
        assert not report.ok
        expected = "removed" if attack.startswith("operation_deleted") else "altered"
        assert any(expected in p for p in report.problems), report.problems
    # the rows were edited, not the log: it still extends what was signed, and says so
    assert (await _verify(pool, note)).extends is True


async def _recompute_stored_hashes(conn: Any) -> None:
    """What a careful attacker does after editing leaves: make the proofs agree again."""
    await conn.execute("DELETE FROM log_hashes")
    known: dict[int, bytes] = {}
    leaves = await conn.fetch("SELECT leaf_index, leaf_hash FROM log_leaves ORDER BY leaf_index")
    for row in leaves:
        index = row["leaf_index"]
        start = _first_index(index)
        for offset, value in enumerate(
            stored_hashes(index, bytes(row["leaf_hash"]), lambda ids: [known[i] for i in ids])
        ):
            known[start + offset] = value
    await conn.execute(
        "INSERT INTO log_hashes SELECT * FROM unnest($1::bigint[], $2::bytea[])",
        list(known),
        list(known.values()),
    )


def _first_index(n: int) -> int:
    return stored_hash_index(0, n)


async def _rewrite_consistently(conn: Any, ops: list[str]) -> None:
    """Row, its leaf and the whole tree rewritten together: self-consistent again."""
    await _alter_evidence(conn, ops[2])
    call_id = await conn.fetchval(
        "SELECT max(call_id)::text FROM provider_calls WHERE operation_id = $1", ops[2]
    )
    row = await conn.fetchrow("SELECT * FROM provider_calls WHERE call_id = $1", int(call_id))
    digests = Digests.of(KINDS["call"], row)
    await conn.execute(
        "UPDATE log_leaves SET leaf_hash = $2, row_sha256 = $3, fixed_sha256 = $4,"
        " settled_sha256 = $5 WHERE kind = 'call' AND row_id = $1",
        call_id,
        leaf_hash(leaf_data("call", call_id, digests)),
        digests.row,
        digests.fixed,
        digests.settled,
    )
    await _recompute_stored_hashes(conn)


async def _reorder_leaves(conn: Any, _: list[str]) -> None:
    """Two leaves swap places (rows still match their leaves), tree redone to match."""
    for old, new in ((3, 1 << 40), (4, 3), (1 << 40, 4)):
        await conn.execute("UPDATE log_leaves SET leaf_index = $2 WHERE leaf_index = $1", old, new)
    await _recompute_stored_hashes(conn)


async def _truncate_newest(conn: Any, ops: list[str]) -> None:
    """The newest operation's rows and leaves gone, the tree redone: a shorter, tidy log."""
    cut = await conn.fetchval(
        "SELECT min(leaf_index) FROM log_leaves l WHERE"
        " (kind = 'operation' AND row_id = $1) OR (kind = 'history' AND row_id IN"
        "  (SELECT history_id::text FROM history WHERE operation_id = $1))",
        ops[2],
    )
    await _delete_operation(conn, ops[2])
    await conn.execute("DELETE FROM log_leaves WHERE leaf_index >= $1", cut)
    await _recompute_stored_hashes(conn)


LOG_ATTACKS: dict[str, Callable[[Any, list[str]], Awaitable[None]]] = {
    "row_leaf_and_tree_rewritten_together": _rewrite_consistently,
    "leaves_reordered": _reorder_leaves,
    "newest_entries_truncated": _truncate_newest,
}


@pytest.mark.parametrize("attack", sorted(LOG_ATTACKS))
async def test_a_consistent_rewrite_of_the_log_is_caught_only_by_the_checkpoint(
    pool: Any, signed: tuple[list[str], str], attack: str
) -> None:
    ops, note = signed
    async with superuser(pool) as conn:
        await LOG_ATTACKS[attack](conn, ops)
    plain = await _verify(pool, None)
    assert plain.ok and plain.unproven is not None, plain.problems  # self-consistent...
    against = await _verify(pool, note)
    assert not against.ok and against.extends is False  # ...but not the log that was signed
    assert any("checkpoint" in p for p in against.problems), against.problems


@pytest.mark.usefixtures("signed")
async def test_a_checkpoint_signed_with_another_key_is_refused(pool: Any) -> None:
    other_signer, _ = generate_key("jobwarden.test/log")
    async with pool.acquire() as conn:
        forged = await log.checkpoint(conn, Signer.from_key(other_signer))
    with pytest.raises(NoteError):
        open_checkpoint(forged, [Verifier.from_key(VERIFIER_KEY)])


async def test_a_second_version_of_a_write_once_row_is_tampering(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """Masking an edit by queueing it as a change: the sequencer logs it, verify refuses it."""
    ops, note = signed
    async with superuser(pool) as conn:
        await _rewrite_history(conn, ops[0])
        history_id = await conn.fetchval(
            "SELECT max(history_id)::text FROM history WHERE operation_id = $1", ops[0]
        )
        await conn.execute(
            "INSERT INTO log_queue (kind, row_id) VALUES ('history', $1)", history_id
        )
    assert not (await _verify(pool, note)).ok  # queued: a write-once row cannot be pending
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1
    report = await _verify(pool, note)
    assert any("written once" in p for p in report.problems), report.problems


def _as_the_auditor(monkeypatch: pytest.MonkeyPatch, db_url: str, settings: str = "") -> None:
    """`jobwarden` commands from here on log in as the operator role (the auditor's)."""
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator{settings}")


def _kept_off_the_host(tmp_path: Path, note: str) -> tuple[Path, Path]:
    """The checkpoint and the log's public key, as files an auditor keeps."""
    checkpoint, key = tmp_path / "checkpoint", tmp_path / "log.pub"
    checkpoint.write_text(note)
    key.write_text(VERIFIER_KEY + "\n")
    return checkpoint, key


async def test_audit_verify_on_the_command_line(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ops, note = signed
    _as_the_auditor(monkeypatch, db_url)
    checkpoint, key = _kept_off_the_host(tmp_path, note)
    assert (
        await jobwarden("audit", "verify", "--checkpoint", str(checkpoint), "--key", str(key)) == 0
    )
    out = capsys.readouterr().out
    assert "(signature verified): the log extends it" in out and out.rstrip().endswith("OK")
    assert await jobwarden("audit", "verify") == 0
    assert "NOT PROVEN" in capsys.readouterr().out
    async with superuser(pool) as conn:
        await _alter_evidence(conn, ops[1])
    assert (
        await jobwarden("audit", "verify", "--checkpoint", str(checkpoint), "--key", VERIFIER_KEY)
        == 1
    )
    out = capsys.readouterr().out
    assert "TAMPERED provider_calls" in out and "FAILED" in out
    # a row edited, the log intact: the verdict on the checkpoint says which
    assert "the log extends it, but the problems above were found" in out
    # Each full verify was noted for the console; --no-record is not.
    assert await jobwarden("audit", "verify", "--no-record") == 1
    async with pool.acquire() as conn:
        noted = await conn.fetch("SELECT * FROM audit_verifications ORDER BY verification_id")
    assert [(r["ok"], r["checkpoint_size"] is not None) for r in noted] == [
        (True, True),
        (True, False),
        (False, True),
    ]
    assert noted[2]["problems"] > 0 and noted[0]["tree_size"] >= noted[0]["checkpoint_size"]
    assert {r["verified_by"] for r in noted} == {await pool.fetchval("SELECT session_user")}


async def test_a_login_that_may_not_record_still_verifies_and_says_so(
    db_url: str,
    signed: tuple[list[str], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_receiver")
    assert await jobwarden("audit", "verify") == 0
    captured = capsys.readouterr()
    assert "was not recorded" in captured.err and "NOT PROVEN" in captured.out


async def test_history_left_behind_by_a_deleted_operation_is_reported(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    ops, _ = signed
    async with superuser(pool) as conn:
        await conn.execute("DELETE FROM operations WHERE operation_id = $1", ops[1])
    async with pool.acquire() as conn:
        checked, breaks = await audit.verify(conn)
    assert checked == 2
    assert [(b.operation_id, b.problem) for b in breaks] == [(ops[1], "history of no operation")]


# ---------------------------------------------------------------- a reviewer's attacks


async def _requeue(conn: Any, kind: str, row_ids: list[str]) -> None:
    await conn.executemany(
        "INSERT INTO log_queue (kind, row_id) VALUES ($1, $2)", [(kind, r) for r in row_ids]
    )


async def test_deleting_an_operation_and_queueing_its_deletion_is_caught(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    ops, note = signed
    async with superuser(pool) as conn:
        keys = await conn.fetch(
            "SELECT kind, row_id FROM log_leaves l WHERE (kind, row_id) IN ("
            " SELECT 'operation', $1::text UNION ALL"
            " SELECT 'history', history_id::text FROM history WHERE operation_id = $1 UNION ALL"
            " SELECT 'call', call_id::text FROM provider_calls WHERE operation_id = $1)",
            ops[2],
        )
        await _delete_operation(conn, ops[2])
        for key in keys:
            await _requeue(conn, key["kind"], [key["row_id"]])
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) > 0  # deletion leaves, as the attacker wanted
    report = await _verify(pool, note)
    assert any("only archived rows and never-attached webhook events" in p for p in report.problems)


async def test_the_reconciler_role_rewriting_a_recorded_answer_is_caught(
    pool: Any, db_url: str, signed: tuple[list[str], str]
) -> None:
    """No superuser needed: the reconciler may UPDATE provider_calls, and its triggers log it."""
    ops, note = signed
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE jobwarden_reconciler")
        await _alter_evidence(conn, ops[2])
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1  # a new version of the call
    report = await _verify(pool, note)
    assert any("changed its settled part" in p for p in report.problems), report.problems


async def test_relabelling_an_old_leaf_is_caught(pool: Any, signed: tuple[list[str], str]) -> None:
    """Marking a history row's leaf deleted (or another kind) to log a rewrite as new."""
    ops, note = signed
    async with superuser(pool) as conn:
        history_id = await conn.fetchval(
            "SELECT max(history_id)::text FROM history WHERE operation_id = $1", ops[2]
        )
        await conn.execute(
            "UPDATE log_leaves SET kind = 'call' WHERE kind = 'history' AND row_id = $1",
            history_id,
        )
        await _rewrite_history(conn, ops[2])
        await _requeue(conn, "history", [history_id])
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
    report = await _verify(pool, note)
    assert any("is not the hash of what it records" in p for p in report.problems)
    assert any("checkpoint's root" in p for p in report.problems)


async def test_a_poisoned_queue_neither_stops_the_log_nor_excuses_an_edit(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    ops, note = signed
    async with superuser(pool) as conn:
        await _requeue(conn, "history", ["not-an-id"])
        await _requeue(conn, "nonsense", ["1"])
        await _alter_evidence(conn, ops[1])
        call_id = await conn.fetchval(
            "SELECT max(call_id)::text FROM provider_calls WHERE operation_id = $1", ops[1]
        )
        await _requeue(conn, "call", [call_id])
    report = await _verify(pool, note)  # before sequencing: the edit is not "pending"
    assert any("settled part changed" in p for p in report.problems), report.problems
    async with pool.acquire() as conn:
        assert await log.sequence_all(conn) == 1  # the bad entries dropped, the log moves on
        assert await conn.fetchval("SELECT count(*) FROM log_queue") == 0


async def test_a_change_left_queued_too_long_fails_the_check(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    _, note = signed
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO log_queue (kind, row_id, queued_at)"
            " VALUES ('call', '1', clock_timestamp() - interval '1 hour')"
        )
    report = await _verify(pool, note)
    assert any("sequencer is not running" in p for p in report.problems), report.problems


async def test_the_signer_refuses_a_log_that_does_not_extend_what_it_published(
    pool: Any, signed: tuple[list[str], str], tmp_path: Path
) -> None:
    ops, note = signed
    signer = Signer.from_key(SIGNER_KEY)
    numbered = log.publish(note, tmp_path).path
    # named by the size the note states, never by a size read before signing
    assert (
        numbered.name
        == f"checkpoint.{open_checkpoint(note, [Verifier.from_key(VERIFIER_KEY)]).size}"
    )
    async with superuser(pool) as conn:
        await _rewrite_consistently(conn, ops)
    previous = log.published(tmp_path, signer)
    assert previous is not None
    async with pool.acquire() as conn:
        with pytest.raises(log.LogForked, match="two different trees"):
            await log.checkpoint(conn, signer, previous)
    assert (tmp_path / "checkpoint").read_text() == note  # nothing replaced


async def test_a_signer_without_its_published_copy_still_refuses_a_rewritten_log(
    pool: Any, signed: tuple[list[str], str]
) -> None:
    """A new host, or a checkpoint directory lost: nothing published to extend, but
    the database keeps the checkpoint this key signed (a tester's run signed the
    rewrite). Forged rows beside it, which the key does not verify, are skipped."""
    ops, _ = signed
    signer = Signer.from_key(SIGNER_KEY)
    async with superuser(pool) as conn:
        await _rewrite_consistently(conn, ops)
        size = await conn.fetchval("SELECT count(*) FROM log_leaves")
        note = await conn.fetchval("SELECT note FROM log_checkpoints WHERE tree_size = $1", size)
        for extra in range(1, 4):  # newer rows, not signed by this key
            await conn.execute(
                "INSERT INTO log_checkpoints (tree_size, root_hash, note) VALUES ($1, $2, $3)",
                size + extra,
                b"\0" * 32,
                note.replace("jobwarden.test/log", f"forged-{extra}"),
            )
    async with pool.acquire() as conn:
        with pytest.raises(log.LogForked, match="two different trees"):
            await log.checkpoint(conn, signer, None)


async def test_the_verify_benchmarks_bulk_log_is_what_the_ledger_writes(pool: Any) -> None:
    """bench.evidence_log writes its million operations in bulk, triggers off; what
    verify checks must hold of them as of the ledger's rows, or the benchmark measures
    a log verify would refuse: every chain and every leaf verifies against a
    checkpoint, and a one-byte change in one bulk row is caught."""
    async with pool.acquire() as conn:
        await seed_log_bulk(conn, 30)
        assert await conn.fetchval("SELECT count(*) FROM log_queue") == 30 * 7
    note = await _sequence_and_sign(pool)
    report = await _verify(pool, note)
    assert report.ok, report.problems
    assert sum(report.rows_checked.values()) == 30 * 7
    async with pool.acquire() as conn:
        checked, breaks = await audit.verify(conn)
    assert (checked, breaks) == (30, [])
    async with superuser(pool) as conn:
        await conn.execute(
            "UPDATE history SET cause = 'first observation (seeded).' WHERE seq = 3 AND "
            "operation_id = (SELECT min(operation_id) FROM operations)"
        )
    assert not (await _verify(pool, note)).ok


async def test_an_operator_may_not_date_or_sign_a_verification_record(pool: Any) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE jobwarden_operator")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(
                "INSERT INTO audit_verifications (verified_at, ok, tree_size, root_hash, "
                "chains_checked, chain_breaks, rows_checked, problems, pending, seconds) "
                "VALUES (now() + interval '1 year', true, 0, '', 0, 0, 0, 0, 0, 0)"
            )


async def test_tiles_exported_beside_a_checkpoint_give_its_root_without_the_database(
    pool: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`audit tiles` writes C2SP hash tiles (two levels here: 350 leaves) and the
    checkpoint; `audit check-tiles` recomputes the signed root from the files alone,
    and finds a changed byte, a changed higher-level hash and a missing tile."""
    async with pool.acquire() as conn:
        await seed_log_bulk(conn, 50)  # 350 leaves: one full level-0 tile and one of 94
    note = await _sequence_and_sign(pool)
    monkeypatch.setenv("DATABASE_URL", db_url)
    out = tmp_path / "tiles"
    assert await jobwarden("audit", "tiles", "--out", str(out)) == 0
    assert "3 written, 0 full ones already there" in capsys.readouterr().out
    assert (out / "checkpoint").read_text() == note
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "checkpoint",
        "tile/0/000",
        "tile/0/001.p/94",
        "tile/1/000.p/1",
    ]
    # public, as checkpoints are: whoever serves them need not be the reconciler
    assert {(out / "tile/0/000").stat().st_mode & 0o777} == {0o644}
    assert await jobwarden("audit", "check-tiles", str(out), "--key", VERIFIER_KEY) == 0
    assert "OK: the tiles give the checkpoint's root at size 350" in capsys.readouterr().out
    # A second export keeps the full tile: it never changes. A forged checkpoint row
    # beyond the log (an operator's login may insert one) is passed over.
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO log_checkpoints (tree_size, root_hash, note) VALUES ($1, $2, $3)",
            10**9,
            bytes(32),
            "forged",
        )
    assert await jobwarden("audit", "tiles", "--out", str(out)) == 0
    assert "2 written, 1 full ones already there" in capsys.readouterr().out
    assert (out / "checkpoint").read_text() == note

    leaf_tile = out / "tile/0/001.p/94"
    original = leaf_tile.read_bytes()
    leaf_tile.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    assert await jobwarden("audit", "check-tiles", str(out), "--key", VERIFIER_KEY) == 1
    assert "TAMPERED" in capsys.readouterr().err
    leaf_tile.write_bytes(original)
    upper = out / "tile/1/000.p/1"
    upper.write_bytes(bytes(32))
    assert await jobwarden("audit", "check-tiles", str(out), "--key", VERIFIER_KEY) == 1
    assert "not the root of its tile below" in capsys.readouterr().err
    upper.unlink()
    assert await jobwarden("audit", "check-tiles", str(out), "--key", VERIFIER_KEY) == 1
    assert "missing" in capsys.readouterr().err


async def test_the_sequencer_plans_every_batch_for_the_ids_at_hand(pool: Any) -> None:
    """No batch runs on a generic plan: one cached while a table was small scans it
    and tests every row against the whole array of ids (sql/queries/log.sql,
    log_try_lock), a cost that grows with the table times the batch."""
    lookup = "%FROM webhook_events WHERE webhook_event_id = ANY%"
    async with pool.acquire() as conn:
        # a quiet start (PostgreSQL settles on a generic plan after five), then load
        sizes = [2] * 6 + [300] * 4
        for batch, size in enumerate(sizes):
            await webhooks.store_events(conn, _unmatched_events(f"plan_{batch}", size))
            assert await log.sequence_all(conn) == size
        plans = await conn.fetchrow(
            "SELECT sum(generic_plans) AS generic, sum(custom_plans) AS custom"
            " FROM pg_prepared_statements WHERE statement LIKE $1",
            lookup,
        )
    assert (plans["generic"], plans["custom"]) == (0, len(sizes))


async def test_the_sequencers_planning_settings_last_only_its_batch(pool: Any) -> None:
    settings = "SELECT current_setting('plan_cache_mode'), current_setting('random_page_cost')"
    async with pool.acquire() as conn:
        before = tuple(await conn.fetchrow(settings))
        async with conn.transaction():
            assert await conn.fetchval(q("log_try_lock")) is True
            assert tuple(await conn.fetchrow(settings)) == ("force_custom_plan", "1.1")
        assert tuple(await conn.fetchrow(settings)) == before


def _unmatched_events(prefix: str, count: int) -> dict[str, list[Any]]:
    """Verified events naming no known job, as the receiver's batch hands them over."""
    values: dict[str, Any] = dict.fromkeys(webhooks.EVENT_COLUMNS)
    values.update(
        provider="sim", scheme="standard_webhooks", id_signed=True,
        remote_job_id="job_nobody_knows", payload='{"job_id": "job_nobody_knows"}', extra=0,
    )  # fmt: skip
    columns = {name: [value] * count for name, value in values.items()}
    columns["event_id"] = [f"{prefix}_{i}" for i in range(count)]
    return columns


async def test_verify_reads_the_daemons_schema_whatever_search_path_its_login_has(
    pool: Any,
    db_url: str,
    signed: tuple[list[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tester's attack: pristine copies in a schema the auditor's login searches
    first (as ALTER ROLE ... SET search_path would make it), the real rows altered:
    verify said OK. It now pins search_path to the schema the daemons write."""
    ops, note = signed
    async with pool.acquire() as conn:
        await conn.execute("CREATE SCHEMA shadow")
        await conn.execute("CREATE TABLE shadow.provider_calls AS TABLE public.provider_calls")
        await conn.execute("GRANT USAGE ON SCHEMA shadow TO jobwarden_operator")
        await conn.execute("GRANT SELECT ON shadow.provider_calls TO jobwarden_operator")
    async with superuser(pool) as conn:
        await _alter_evidence(conn, ops[1])
    checkpoint, key = _kept_off_the_host(tmp_path, note)
    _as_the_auditor(monkeypatch, db_url, "&search_path=shadow%2Cpublic")
    verify = ("audit", "verify", "--checkpoint", str(checkpoint), "--key", str(key), "--no-record")
    assert await jobwarden(*verify) == 1
    assert "TAMPERED provider_calls" in capsys.readouterr().out
