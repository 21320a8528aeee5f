"""Receipts stand on a checkpoint that agrees with the log, whatever else log_checkpoints holds.

A login that may insert into log_checkpoints (the operator's, the
reconciler's) could add a row that claims a size the log never reached, or
whose note is not the row's: the receipt builder trusted the newest row, so
from then on every receipt failed (a traceback from `audit proof`). Each case
forges rows as the database's owner, over a log signed for real, and shows the
receipt falls back to the newest row that agrees, or fails in one line when
none does; the forged content is never repeated back.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.ledger import log, receipts
from shared.ledger.log import HashCache, with_hashes
from shared.ledger.receipts import NoUsableCheckpoint, ReceiptError, build_receipt, check_receipt
from shared.tlog import Checkpoint, Signer, generate_key, sign, tree_hash
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.integration.test_receipts import SIGNER_KEY, VERIFIER, _finished, _signed

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"
# What each forged row carries, so a test can tell whether it was echoed anywhere.
GARBAGE = "garbage-note-content"
# A size no test log reaches, far past every stored hash.
HUGE = 999_999_999


async def _log_size(pool: Any) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval("SELECT coalesce(max(leaf_index) + 1, 0) FROM log_leaves"))


async def _log_root(pool: Any, size: int) -> bytes:
    """The log's own root at `size`, from its stored hashes."""
    async with pool.acquire() as conn:
        cache = HashCache()
        return await with_hashes(conn, cache, lambda: tree_hash(size, cache.read))


async def _forge(pool: Any, size: int, root: bytes, note: str) -> None:
    """A checkpoint row inserted as the database's owner: no check of ours stands in the way."""
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO log_checkpoints (tree_size, root_hash, note) VALUES ($1, $2, $3)",
            size,
            root,
            note,
        )


async def _sequenced(pool: Any) -> int:
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
    return await _log_size(pool)


async def _receipt(pool: Any, op_id: str) -> dict[str, Any]:
    async with pool.acquire() as conn:
        return (await build_receipt(conn, op_id)).to_json()


def _cli(db_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real `jobwarden` in a subprocess, as the operator's role: what an operator sees."""
    sep = "&" if "?" in db_url else "?"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": f"{db_url}{sep}role=jobwarden_operator",
    }
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_a_row_beyond_the_log_is_skipped_and_the_receipt_verifies_as_before(
    pool: Any, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    op_id = await _finished(pool, tmp_path)
    note = await _signed(pool)
    before = await _receipt(pool, op_id)
    await _forge(pool, HUGE, os.urandom(32), GARBAGE)
    with caplog.at_level(logging.WARNING, logger="jobwarden.receipts"):
        after = await _receipt(pool, op_id)
    assert after == before and after["checkpoint"] == note
    assert check_receipt(after, [VERIFIER]).operation_id == op_id
    (warning,) = [r for r in caplog.records if r.name == "jobwarden.receipts"]
    assert warning.ctx["skipped"] == {"beyond the log's size": 1}  # type: ignore[attr-defined]
    assert GARBAGE not in caplog.text and str(HUGE) not in caplog.text
    # the reviewer's case: the operator's command line, which died with LogCorrupt
    out = tmp_path / "receipt.json"
    done = _cli(db_url, "audit", "proof", op_id, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert check_receipt(json.loads(out.read_text()), [VERIFIER]).operation_id == op_id


async def test_rows_whose_note_is_not_theirs_or_not_the_logs_are_skipped(
    pool: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every forged row is newer than the good checkpoint and within the log's size: the
    receipt reaches the good one only if each check refuses its row."""
    op_id = await _finished(pool, tmp_path)
    note = await _signed(pool)
    good = Checkpoint.parse(note[: note.rfind("\n\n") + 1])
    before = await _receipt(pool, op_id)
    await _finished(pool, tmp_path)  # more leaves, not signed: room for rows above the good one
    size = await _sequenced(pool)
    assert size - good.size >= 4
    other_signer = Signer.from_key(generate_key(good.origin)[0])  # same name, not the log's key
    stranger = os.urandom(32)
    forged = {
        # a signed checkpoint of the log, stored under another size and root
        size: (await _log_root(pool, size), note),
        # note and row agree with each other, but on a root the log never had
        size - 1: (
            stranger,
            sign(Checkpoint(good.origin, size - 1, stranger).text(), [other_signer]),
        ),
        # the log's root at that size, but no signed note at all
        size - 2: (await _log_root(pool, size - 2), GARBAGE),
        # a signed note, of something other than a checkpoint
        size - 3: (await _log_root(pool, size - 3), sign(f"{GARBAGE}\n", [other_signer])),
    }
    for tree_size, (root, text) in forged.items():
        await _forge(pool, tree_size, root, text)
    with caplog.at_level(logging.WARNING, logger="jobwarden.receipts"):
        after = await _receipt(pool, op_id)
    assert after == before and after["checkpoint"] == note
    assert check_receipt(after, [VERIFIER]).operation_id == op_id
    (warning,) = [r for r in caplog.records if r.name == "jobwarden.receipts"]
    assert warning.ctx == {  # type: ignore[attr-defined]
        "tree_size": good.size,
        "skipped": {
            "note disagreeing with its row": 1,
            "root not the log's at its size": 1,
            "not a signed note": 1,
            "not a checkpoint note": 1,
        },
    }
    assert GARBAGE not in caplog.text


async def test_only_bad_rows_is_one_clear_error_not_a_traceback(
    pool: Any, db_url: str, tmp_path: Path
) -> None:
    op_id = await _finished(pool, tmp_path)
    size = await _sequenced(pool)  # logged, never signed: only forged rows exist
    await _forge(pool, HUGE, os.urandom(32), GARBAGE)
    await _forge(pool, size - 1, await _log_root(pool, size - 1), GARBAGE)
    async with pool.acquire() as conn:
        with pytest.raises(NoUsableCheckpoint, match="no usable signed checkpoint") as caught:
            await build_receipt(conn, op_id)
    assert isinstance(caught.value, ReceiptError) and GARBAGE not in str(caught.value)
    assert "1 beyond the log's size" in str(caught.value)
    assert "1 not a signed note" in str(caught.value)
    done = _cli(db_url, "audit", "proof", op_id, "--out", str(tmp_path / "receipt.json"))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and GARBAGE not in done.stderr + done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("jobwarden audit: no usable signed checkpoint"), line
    assert not (tmp_path / "receipt.json").exists()


async def test_the_forged_rows_looked_at_are_bounded(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More forged rows above the good one than a receipt looks at: an error, not a scan."""
    op_id = await _finished(pool, tmp_path)
    note = await _signed(pool)
    await _finished(pool, tmp_path)
    size = await _sequenced(pool)
    monkeypatch.setattr(receipts, "MAX_CHECKPOINT_CANDIDATES", 2)
    await _forge(pool, size, await _log_root(pool, size), GARBAGE)
    await _forge(pool, size - 1, await _log_root(pool, size - 1), GARBAGE)
    async with pool.acquire() as conn:
        with pytest.raises(NoUsableCheckpoint, match="2 not a signed note"):
            await build_receipt(conn, op_id)
    monkeypatch.setattr(receipts, "MAX_CHECKPOINT_CANDIDATES", 3)
    assert (await _receipt(pool, op_id))["checkpoint"] == note


async def test_the_api_answers_a_problem_then_recovers_with_a_new_checkpoint(
    pool: Any, db: Any, db_url: str, tmp_path: Path
) -> None:
    op_id = await _finished(pool, tmp_path)  # submitted as agent:test
    size = await _sequenced(pool)
    await _forge(pool, HUGE, os.urandom(32), GARBAGE)
    # within the log's size, and what a reader trusting the newest row would serve
    await _forge(pool, size - 1, os.urandom(32), GARBAGE)
    alice = {"Authorization": f"Bearer {await make_token(db, 'test')}"}
    async with receiver_pool(db_url) as receiver:  # the receiver's own role and grants
        app = Starlette(routes=OperationsApi(sim_settings(), receiver).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            served = await http.get("/v1/audit/checkpoint", headers=alice)
            assert served.status_code == 503 and GARBAGE not in served.text, served.text
            refused = await http.get(f"/v1/operations/{op_id}/receipt", headers=alice)
            assert refused.status_code == 503, refused.text
            assert refused.headers["content-type"] == PROBLEM
            assert int(refused.headers["retry-after"]) > 0
            assert refused.json()["type"].endswith("log-inconsistent")
            assert GARBAGE not in refused.text
            await _signed(pool, SIGNER_KEY)  # the reconciler signs the log as it is
            answer = await http.get(f"/v1/operations/{op_id}/receipt", headers=alice)
            assert answer.status_code == 200, answer.text
            served = await http.get("/v1/audit/checkpoint", headers=alice)
            assert served.text == answer.json()["checkpoint"]  # the note the receipt stands on
            assert check_receipt(answer.json(), [VERIFIER]).operation_id == op_id
