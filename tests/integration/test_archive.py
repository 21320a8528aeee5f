"""Retention without losing proof: old evidence leaves the database, provably.

Operations run for real; `jobwarden audit archive` (as the operator role)
writes their evidence to an archive directory and removes it from the
database. Verification keeps proving everything: against the archive's files
(every row recomputed into its signed leaf), and, without them, says what it
cannot prove. Editing an archive, hiding a deletion as an archived row, and a
crash between writing the archive and the database commit are each caught or
lose nothing.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from shared.ledger import archive as archive_mod
from shared.ledger.states import LocalState
from tests.harness import rig
from tests.integration.test_evidence_log import superuser
from tests.support import jobwarden

S = LocalState
DONE = {S.SUCCEEDED, S.FAILED, S.CANCELLED}
SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "verify-receipt.py"


async def _finished(pool: Any, tmp_path: Path) -> list[str]:
    async with rig(pool, tmp_path) as r:
        ops = [
            await r.submit("partial", duration=0.05, total=4, failed=2),
            await r.submit("success", duration=0.05),
        ]
        for op_id in ops:
            await r.settle(op_id, DONE)
    return ops


@pytest.fixture
async def setup(
    pool: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Two finished operations, a signing key, the operator's connection for the CLI."""
    ops = await _finished(pool, tmp_path)
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    keys = tmp_path / "keys"
    assert await jobwarden("audit", "keygen", "jobwarden.test/log", "--out", str(keys)) == 0
    monkeypatch.setenv("JW_LOG_SIGNING_KEY_FILE", str(keys / "jobwarden.test_log.key"))
    monkeypatch.setenv("JW_LOG_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    return {
        "ops": ops,
        "root": tmp_path / "archives",
        "public": str(keys / "jobwarden.test_log.pub"),
        "checkpoint": str(tmp_path / "checkpoints" / "checkpoint"),
    }


async def _verify(
    setup: dict[str, Any], capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, Any]:
    capsys.readouterr()
    argv = ["audit", "verify", "--checkpoint", setup["checkpoint"], "--key", setup["public"]]
    status = await jobwarden(*argv, *extra, "--json")
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert (status == 0) == report["ok"]
    return report


async def _archive(*extra: str, root: Path) -> int:
    return await jobwarden("audit", "archive", "--to", str(root), *extra)


async def _hot_rows(pool: Any, op_id: str) -> dict[str, int]:
    counts = await pool.fetchrow(
        """SELECT (SELECT count(*) FROM history WHERE operation_id = $1) AS history,
                  (SELECT count(*) FROM provider_calls WHERE operation_id = $1) AS calls,
                  (SELECT count(*) FROM observations WHERE operation_id = $1) AS observations,
                  (SELECT count(*) FROM result_item_failures f JOIN results r USING (result_id)
                   WHERE r.operation_id = $1) AS failures,
                  (SELECT count(*) FROM results WHERE operation_id = $1) AS results,
                  (SELECT count(*) FROM operations WHERE operation_id = $1) AS operations""",
        op_id,
    )
    return dict(counts)


async def test_archive_moves_old_evidence_and_verify_still_proves_it(
    pool: Any, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    root: Path = setup["root"]
    partial = setup["ops"][0]
    before = await _hot_rows(pool, partial)
    assert before["history"] > 0 and before["failures"] == 2

    assert await _archive("--older-than", "30", root=root) == 0  # finished seconds ago
    assert "nothing to archive" in capsys.readouterr().out
    assert await _hot_rows(pool, partial) == before

    assert await _archive("--older-than", "0", root=root) == 0
    assert "archived" in capsys.readouterr().out
    [made] = list(root.iterdir())
    assert {p.name for p in made.iterdir()} == {
        "manifest",
        "rows.jsonl",
        "receipts",
        "archive.json",
    }
    after = await _hot_rows(pool, partial)
    # the operation, its result and the call that fetched it stay: agents still read them
    fetched_by = await pool.fetchval(
        "SELECT count(call_id) FROM results WHERE operation_id = $1", partial
    )
    assert after == {**before, "history": 0, "calls": fetched_by, "observations": 0, "failures": 0}
    outcome = await pool.fetchval(
        "SELECT outcome FROM agent_operations WHERE operation_id = $1", partial
    )
    assert outcome == "completed_with_errors"

    report = await _verify(setup, capsys, "--archive", str(root))
    assert report["ok"], report["problems"]
    assert report["chain_breaks"] == [] and report["archived_rows"] > 0
    assert report["archives_unchecked"] is None
    blind = await _verify(setup, capsys)
    assert blind["ok"] and "--archive ROOT" in blind["archives_unchecked"]


async def test_an_archived_receipt_verifies_offline(
    pool: Any, setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root: Path = setup["root"]
    partial = setup["ops"][0]
    assert await _archive("--older-than", "0", root=root) == 0
    out = tmp_path / "receipt.json"
    assert (
        await jobwarden("audit", "proof", partial, "--archive", str(root), "--out", str(out)) == 0
    )
    capsys.readouterr()
    assert await jobwarden("audit", "check-proof", str(out), "--key", setup["public"]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    kinds = {leaf["kind"] for leaf in json.loads(out.read_text())["leaves"]}
    assert {"history", "call", "observation", "failure"} <= kinds
    public = Path(setup["public"]).read_text().strip()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), public],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # the database's own receipt now says where the rest went
    assert await jobwarden("audit", "proof", partial, "--out", str(tmp_path / "hot.json")) == 0
    assert "moved to archive archive-" in capsys.readouterr().err


def _rewrite_line(path: Path, change: Any) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(change(lines)))


def _flip_a_document_byte(lines: list[bytes]) -> list[bytes]:
    entry = json.loads(lines[0])
    document = bytearray(base64.b64decode(entry["row"]))
    digit = next(i for i, b in enumerate(document) if chr(b).isdigit())
    document[digit] = ord("1") if document[digit] != ord("1") else ord("2")  # still valid JSON
    entry["row"] = base64.b64encode(bytes(document)).decode()
    return [json.dumps(entry).encode() + b"\n", *lines[1:]]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: _rewrite_line(d / "rows.jsonl", _flip_a_document_byte),
            "altered in the archive",
        ),
        (lambda d: _rewrite_line(d / "rows.jsonl", lambda ls: ls[:-1]), "missing from the archive"),
        (lambda d: _rewrite_line(d / "rows.jsonl", lambda ls: ls[1:]), "out of step"),
        (lambda d: _rewrite_line(d / "manifest", lambda ls: ls[:-1]), "manifest file is not"),
        (lambda d: shutil.rmtree(d), "not under the archive root"),
    ],
    ids=["one-byte", "truncated", "first-row-removed", "manifest", "archive-withheld"],
)
async def test_a_changed_or_missing_archive_fails_verification(
    setup: dict[str, Any], capsys: pytest.CaptureFixture[str], change: Any, expected: str
) -> None:
    root: Path = setup["root"]
    assert await _archive("--older-than", "0", root=root) == 0
    [made] = list(root.iterdir())
    change(made)
    report = await _verify(setup, capsys, "--archive", str(root))
    assert not report["ok"]
    assert any(expected in p for p in report["problems"]), report["problems"]


async def test_a_superuser_cannot_pass_a_deletion_off_as_archived(
    pool: Any, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    root: Path = setup["root"]
    assert await _archive("--older-than", "0", "--max-operations", "1", root=root) == 0
    [kept] = [op for op in setup["ops"] if (await _hot_rows(pool, op))["history"] > 0]
    async with superuser(pool) as conn:
        history_id, leaf = await conn.fetchrow(
            "SELECT h.history_id, max(l.leaf_index) FROM history h JOIN log_leaves l"
            " ON l.kind = 'history' AND l.row_id = h.history_id::text"
            " WHERE h.operation_id = $1 GROUP BY h.history_id ORDER BY h.history_id DESC LIMIT 1",
            kept,
        )
        await conn.execute("DELETE FROM history WHERE history_id = $1", history_id)
        await conn.execute(
            "INSERT INTO log_archived (kind, row_id, archive_id, operation_id, leaf_index)"
            " SELECT 'history', $1, max(archive_id), $2, $3 FROM log_archives",
            str(history_id),
            kept,
            leaf,
        )
    report = await _verify(setup, capsys)  # even without the archive's files
    assert not report["ok"]
    assert any("rows were added to or removed from the list" in p for p in report["problems"])


async def test_the_archive_function_refuses_what_it_must_not_delete(pool: Any, setup: Any) -> None:
    """jw_archive_evidence checks the list itself: a row of another operation, an
    operation not finished before the cutoff, a row whose listed leaf is not its newest."""
    partial, other = setup["ops"]
    async with pool.acquire() as conn:
        from shared.ledger import log

        await log.sequence_all(conn)
        leaf_of = "SELECT max(leaf_index) FROM log_leaves WHERE kind = 'history' AND row_id = $1"
        history = await conn.fetchval(
            "SELECT min(history_id) FROM history WHERE operation_id = $1", other
        )
        leaf = await conn.fetchval(leaf_of, str(history))
        cases = [
            ("2099-01-01", partial, history, leaf, "evidence of its operations"),  # wrong op
            ("2000-01-01", other, history, leaf, "not finished before its cutoff"),
            ("2099-01-01", other, history, leaf - 1 if leaf else 1, "changed since"),
        ]
        for n, (cutoff, listed_op, row_id, leaf_index, expected) in enumerate(cases):
            with pytest.raises(asyncpg.PostgresError, match=expected):
                async with conn.transaction():
                    archive_id = await conn.fetchval(
                        "INSERT INTO log_archives (name, cutoff, checkpoint_size, operations,"
                        " rows, manifest_sha256) VALUES ($1, $2::text::timestamptz, 1, 1, 1,"
                        " repeat('0', 64)) RETURNING archive_id",
                        f"archive-20990101T00000{n}Z-0000000{n}",
                        cutoff,
                    )
                    await conn.execute(
                        "INSERT INTO log_archived VALUES ('history', $1::text, $2, $3, $4)",
                        str(row_id),
                        archive_id,
                        listed_op,
                        leaf_index,
                    )
                    await conn.fetchval("SELECT jw_archive_evidence($1)", archive_id)
        assert await conn.fetchval("SELECT count(*) FROM history WHERE history_id = $1", history)
        with pytest.raises(asyncpg.PostgresError, match="append-only"):
            await conn.execute("DELETE FROM history WHERE history_id = $1", history)


async def test_a_crash_before_the_commit_loses_nothing(
    pool: Any, setup: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """The archive is written, then the process dies before the database commit: the
    evidence is still in the database, the orphan directory is ignored, a rerun works."""
    root: Path = setup["root"]
    original = archive_mod.build_receipt
    real_to_thread = archive_mod.asyncio.to_thread

    async def write_then_die(*args: Any) -> Any:
        await real_to_thread(*args)
        raise KeyboardInterrupt  # as abrupt as it gets inside one process

    monkeypatch.setattr(archive_mod.asyncio, "to_thread", write_then_die)
    with pytest.raises(KeyboardInterrupt):
        await _archive("--older-than", "0", root=root)
    monkeypatch.setattr(archive_mod.asyncio, "to_thread", real_to_thread)
    assert archive_mod.build_receipt is original
    [orphan] = list(root.iterdir())
    assert (await _hot_rows(pool, setup["ops"][0]))["history"] > 0
    report = await _verify(setup, capsys, "--archive", str(root))
    assert report["ok"] and report["archived_rows"] == 0
    assert await _archive("--older-than", "0", root=root) == 0
    assert len(list(root.iterdir())) == 2 and orphan.exists()
    report = await _verify(setup, capsys, "--archive", str(root))
    assert report["ok"] and report["archived_rows"] > 0, report["problems"]
