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
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette

from bench.pgproxy import Fault, PgProxy
from receiver.api.operations import OperationsApi
from shared.db.connect import _init_connection
from shared.db.errors import DATABASE_DOWN
from shared.ledger import archive as archive_mod
from shared.ledger import log
from shared.ledger.states import LocalState
from tests.harness import rig
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
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


def _archives(root: Path) -> list[Path]:
    """The archive directories under a root (beside them: the tiles and their checkpoint)."""
    return sorted(p for p in root.iterdir() if p.name.startswith("archive-"))


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
    assert before["observations"] > 0 and before["failures"] == 2
    seen_by_agents = await pool.fetchrow(
        "SELECT * FROM operations_overview WHERE operation_id = $1", partial
    )

    assert await _archive("--older-than", "30", root=root) == 0  # finished seconds ago
    assert "nothing to archive" in capsys.readouterr().out
    assert await _hot_rows(pool, partial) == before

    assert await _archive("--older-than", "0", root=root) == 0
    printed = capsys.readouterr().out
    assert "archived" in printed and "tiles of the tree at size" in printed
    [made] = _archives(root)
    # Beside the archives, the tree their receipts prove against, as C2SP tiles.
    assert {p.name for p in root.iterdir()} == {made.name, "tile", "checkpoint"}
    assert await jobwarden("audit", "check-tiles", str(root), "--key", setup["public"]) == 0
    assert "OK: the tiles give the checkpoint's root" in capsys.readouterr().out
    assert {p.name for p in made.iterdir()} == {
        "manifest",
        "rows.jsonl",
        "receipts",
        "archive.json",
    }
    after = await _hot_rows(pool, partial)
    # the operation, its history, its result and the call that fetched it stay
    fetched_by = await pool.fetchval(
        "SELECT count(call_id) FROM results WHERE operation_id = $1", partial
    )
    assert after == {**before, "calls": fetched_by, "observations": 0, "failures": 0}
    # agents read exactly what they read before
    assert seen_by_agents == await pool.fetchrow(
        "SELECT * FROM operations_overview WHERE operation_id = $1", partial
    )
    assert seen_by_agents["outcome"] == "completed_with_errors"

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
    assert {"call", "observation", "failure"} <= kinds
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
    [made] = _archives(root)
    change(made)
    report = await _verify(setup, capsys, "--archive", str(root))
    assert not report["ok"]
    assert any(expected in p for p in report["problems"]), report["problems"]


async def _an_observation(conn: Any, op_id: str) -> tuple[int, int]:
    """One observation of the operation and its newest leaf."""
    row = await conn.fetchrow(
        "SELECT b.observation_id, max(l.leaf_index) FROM observations b JOIN log_leaves l"
        " ON l.kind = 'observation' AND l.row_id = b.observation_id::text"
        " WHERE b.operation_id = $1 GROUP BY b.observation_id ORDER BY 1 DESC LIMIT 1",
        op_id,
    )
    return int(row[0]), int(row[1])


async def test_a_superuser_cannot_pass_a_deletion_off_as_archived(
    pool: Any, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    root: Path = setup["root"]
    assert await _archive("--older-than", "0", "--max-operations", "1", root=root) == 0
    [kept] = [op for op in setup["ops"] if (await _hot_rows(pool, op))["observations"] > 0]
    async with superuser(pool) as conn:
        observation, leaf = await _an_observation(conn, kept)
        await conn.execute("DELETE FROM observations WHERE observation_id = $1", observation)
        await conn.execute(
            "INSERT INTO log_archived (kind, row_id, archive_id, operation_id, leaf_index)"
            " SELECT 'observation', $1, max(archive_id), $2, $3 FROM log_archives",
            str(observation),
            kept,
            leaf,
        )
    report = await _verify(setup, capsys)  # even without the archive's files
    assert not report["ok"]
    assert any("rows were added to or removed from the list" in p for p in report["problems"])


async def test_an_archive_logged_after_a_deletion_does_not_excuse_it(
    pool: Any, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A row deleted first (caught), then listed by an archive made for it afterwards,
    with a manifest that matches its list: still caught."""
    partial = setup["ops"][0]
    async with pool.acquire() as conn:  # the owner's: no trigger stands in its way
        await log.sequence_all(conn)
        observation, leaf = await _an_observation(conn, partial)
        await conn.execute("DELETE FROM observations WHERE observation_id = $1", observation)
        await log.sequence_all(conn)  # the deletion is logged first
        line = archive_mod.manifest_line(partial, "observation", str(observation), leaf)
        digest = hashlib.sha256(archive_mod.MANIFEST_PREFIX + line).hexdigest()
        archive_id = await conn.fetchval(
            "INSERT INTO log_archives (name, cutoff, checkpoint_size, operations, rows,"
            " manifest_sha256) VALUES ('archive-20261202T000000Z-00000000', jw_now(),"
            " (SELECT max(leaf_index) + 1 FROM log_leaves), 1, 1, $1) RETURNING archive_id",
            digest,
        )
        await conn.execute(
            "INSERT INTO log_archived VALUES ('observation', $1, $2, $3, $4)",
            str(observation),
            archive_id,
            partial,
            leaf,
        )
        await log.sequence_all(conn)
        Path(setup["checkpoint"]).parent.mkdir(parents=True, exist_ok=True)
    assert await jobwarden("audit", "sequence") == 0  # a fresh checkpoint over all of it
    report = await _verify(setup, capsys)
    assert not report["ok"]
    assert any("deleted before its archive was recorded" in p for p in report["problems"]), report[
        "problems"
    ]


async def test_the_archive_function_refuses_what_it_must_not_delete(pool: Any, setup: Any) -> None:
    """jw_archive_evidence checks the list itself: a row of another operation, an
    operation not finished before the cutoff, a row whose listed leaf is not its newest;
    and an archive cannot be recorded with a cutoff in the future."""
    partial, other = setup["ops"]
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        observation, leaf = await _an_observation(conn, other)
        cases = [
            (None, partial, leaf, "evidence of its operations"),  # another operation's row
            ("2000-01-01", other, leaf, "not finished before its cutoff"),
            (None, other, leaf - 1, "changed since"),
            ("2099-01-01", other, leaf, "is in the future"),
        ]
        for n, (cutoff, listed_op, leaf_index, expected) in enumerate(cases):
            with pytest.raises(asyncpg.PostgresError, match=expected):
                async with conn.transaction():
                    archive_id = await conn.fetchval(
                        "INSERT INTO log_archives (name, cutoff, checkpoint_size, operations,"
                        " rows, manifest_sha256) VALUES ($1,"
                        " coalesce($2::text::timestamptz, jw_now()), 1, 1, 1, repeat('0', 64))"
                        " RETURNING archive_id",
                        f"archive-20990101T00000{n}Z-0000000{n}",
                        cutoff,
                    )
                    await conn.execute(
                        "INSERT INTO log_archived VALUES ('observation', $1, $2, $3, $4)",
                        str(observation),
                        archive_id,
                        listed_op,
                        leaf_index,
                    )
                    await conn.fetchval("SELECT jw_archive_evidence($1)", archive_id)
        assert await conn.fetchval(
            "SELECT count(*) FROM observations WHERE observation_id = $1", observation
        )


async def test_archived_failed_items_are_answered_as_moved_not_as_none(
    pool: Any, db: Any, db_url: str, setup: dict[str, Any]
) -> None:
    partial = setup["ops"][0]
    assert await _archive("--older-than", "0", root=setup["root"]) == 0
    headers = {"Authorization": f"Bearer {await make_token(db, 'test')}"}
    async with receiver_pool(db_url) as receiver:
        app = Starlette(routes=OperationsApi(sim_settings(), receiver).routes())
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api"
        ) as client:
            page = await client.get(f"/v1/operations/{partial}/failed-items", headers=headers)
            shown = await client.get(f"/v1/operations/{partial}", headers=headers)
    assert page.status_code == 410, page.text
    assert "archive-" in page.json()["detail"]
    assert shown.status_code == 200
    assert shown.json()["metadata"]["outcome"] == "completed_with_errors"


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
    [orphan] = _archives(root)
    assert (await _hot_rows(pool, setup["ops"][0]))["observations"] > 0
    report = await _verify(setup, capsys, "--archive", str(root))
    assert report["ok"] and report["archived_rows"] == 0
    assert await _archive("--older-than", "0", root=root) == 0
    assert len(_archives(root)) == 2 and orphan.exists()
    report = await _verify(setup, capsys, "--archive", str(root))
    assert report["ok"] and report["archived_rows"] > 0, report["problems"]


async def test_a_connection_lost_after_the_commit_keeps_the_archive_under_its_name(
    pool: Any, db_url: str, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The COMMIT executed, its answer never came (a reviewer's crash point): the rows
    are gone and the log names the archive, so its directory is their only copy.
    It was set aside as `.unrecorded-…` (the connection error is an asyncpg
    PostgresError) and verify then failed; it now stays where the log says."""
    root: Path = setup["root"]
    signer = log.load_signer(os.environ["JW_LOG_SIGNING_KEY_FILE"], {})
    assert signer is not None
    async with PgProxy.from_url(db_url) as proxy:
        conn = await asyncpg.connect(proxy.url_for(db_url))
        await _init_connection(conn)
        proxy.arm(
            Fault(
                action="drop_after",
                match=re.compile(r"^COMMIT"),
                after_match=re.compile("jw_archive_evidence"),
            )
        )
        with pytest.raises(DATABASE_DOWN):
            await archive_mod.archive(conn, root, timedelta(0), signer, tmp_checkpoints(setup))
        await conn.close()
    [kept] = _archives(root)
    assert await pool.fetchval("SELECT name FROM log_archives") == kept.name
    assert (await _hot_rows(pool, setup["ops"][0]))["observations"] == 0  # its only copy
    assert not list(root.glob(".unrecorded-*"))
    assert await _archive("--older-than", "0", root=root) == 0  # signs over the move
    report = await _verify(setup, capsys, "--archive", str(root))
    assert report["ok"] and report["archived_rows"] > 0, report["problems"]


def tmp_checkpoints(setup: dict[str, Any]) -> Path:
    return Path(setup["checkpoint"]).parent
