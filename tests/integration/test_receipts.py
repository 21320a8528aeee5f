"""Receipts, key rotation and witnesses: proof of one operation with only public keys.

An operation runs for real; its evidence is logged and a checkpoint signed.
The receipt (from the CLI and from the API, as the receiver's role) verifies
offline in-process and with the standalone script shipped for auditors, and
stops verifying after any one-byte change of what it proves.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.ledger import log
from shared.ledger.log_audit import open_checkpoint, verify_log
from shared.ledger.receipts import ReceiptError, build_receipt, check_receipt
from shared.ledger.states import LocalState
from shared.tlog import (
    Checkpoint,
    NoteError,
    Signer,
    Verifier,
    generate_cosignature_key,
    generate_key,
    sign,
)
from tests.harness import rig
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.integration.test_evidence_log import _reorder_leaves as reorder_leaves
from tests.integration.test_evidence_log import superuser
from tests.support import jobwarden

S = LocalState
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "verify-receipt.py"


def _key_with_a_plus() -> tuple[str, str]:
    """A key pair whose public half's base64 holds '+', the key string's separator too."""
    while True:
        private, public = generate_key("jobwarden.test/log")
        if "+" in public.split("+", 2)[2]:
            return private, public


SIGNER_KEY, VERIFIER_KEY = _key_with_a_plus()
VERIFIER = Verifier.from_key(VERIFIER_KEY)


async def _finished(pool: Any, tmp_path: Path) -> str:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("partial", duration=0.05, total=4, failed=1)
        await r.settle(op_id, {S.SUCCEEDED})
    return op_id


async def _signed(pool: Any, signer_key: str = SIGNER_KEY) -> str:
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        return await log.checkpoint(conn, Signer.from_key(signer_key))


@pytest.fixture
async def receipt(pool: Any, tmp_path: Path) -> dict[str, Any]:
    op_id = await _finished(pool, tmp_path)
    await _signed(pool)
    async with pool.acquire() as conn:
        built = await build_receipt(conn, op_id)
    assert built.unproven == []
    return built.to_json()


def test_a_receipt_proves_every_row_of_the_operation(receipt: dict[str, Any]) -> None:
    checked = check_receipt(receipt, [VERIFIER])
    kinds = {kind for kind, _, _ in checked.rows}
    assert {"operation", "history", "call", "observation", "result", "failure"} <= kinds
    transitions = [row["to_state"] for kind, _, row in checked.rows if kind == "history"]
    assert transitions[-1] == "succeeded"


def _flipped(text: str, position: int) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[position] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def _variants(receipt: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The receipt with one byte of what it proves changed: every byte of one leaf, of
    the row document it names, of its audit path and of the checkpoint text."""
    variants = []
    leaf = receipt["leaves"][0]
    for field in ("leaf", "row"):
        for i in range(len(base64.b64decode(leaf[field]))):
            changed = {**leaf, field: _flipped(leaf[field], i)}
            variants.append((f"{field}[{i}]", {**receipt, "leaves": [changed]}))
    for p, value in enumerate(leaf["path"]):
        for i in range(32):
            path = [*leaf["path"][:p], _flipped(value, i), *leaf["path"][p + 1 :]]
            variants.append((f"path[{p}][{i}]", {**receipt, "leaves": [{**leaf, "path": path}]}))
    note = receipt["checkpoint"]
    for i, char in enumerate(note):
        if char != "\n":
            changed_note = note[:i] + chr(ord(char) ^ 0x01) + note[i + 1 :]
            variants.append((f"checkpoint[{i}]", {**receipt, "checkpoint": changed_note}))
    variants.append(("index", {**receipt, "leaves": [{**leaf, "index": leaf["index"] + 1}]}))
    variants.append(("negative", {**receipt, "leaves": [{**leaf, "index": -1}]}))
    variants.append(("no leaf", {**receipt, "leaves": []}))
    return variants


def test_any_one_byte_change_breaks_the_receipt(receipt: dict[str, Any]) -> None:
    variants = _variants(receipt)
    assert len(variants) > 300
    for where, variant in variants:
        with pytest.raises(ReceiptError):
            check_receipt(variant, [VERIFIER])
            pytest.fail(f"a change at {where} still verified")


def _standalone(path: Path, key: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(path), key],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_standalone_verifier_agrees(receipt: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    done = _standalone(path, VERIFIER_KEY)
    assert done.returncode == 0, done.stderr
    assert f"VERIFIED: {len(receipt['leaves'])} evidence row(s)" in done.stdout
    # a sample of one-byte changes, through the auditor's own script
    variants = _variants(receipt)
    for where, variant in [*variants[:: max(1, len(variants) // 12)], *variants[-3:]]:
        path.write_text(json.dumps(variant))
        refused = _standalone(path, VERIFIER_KEY)
        assert refused.returncode != 0, f"the script accepted a change at {where}"
        assert "NOT VERIFIED" in refused.stderr
    path.write_text(json.dumps(receipt))
    assert _standalone(path, generate_key("jobwarden.test/log")[1]).returncode != 0


def test_the_standalone_verifier_says_a_key_file_name_is_not_a_key(
    receipt: dict[str, Any], tmp_path: Path
) -> None:
    # `jobwarden audit check-proof --key` takes a file; the script takes the
    # key's text, and given a file name it said "not enough values to unpack"
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    refused = _standalone(path, str(tmp_path / "log.pub"))
    assert refused.returncode == 1
    assert "not a file name" in refused.stderr


def test_the_readme_shows_the_shipped_verifier() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    assert SCRIPT.read_text() in blocks


async def test_the_cli_writes_and_checks_a_receipt(
    pool: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    op_id = await _finished(pool, tmp_path)
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    out = tmp_path / "receipt.json"
    assert await jobwarden("audit", "proof", op_id, "--out", str(out)) == 2  # nothing signed yet
    assert "no signed checkpoint yet" in capsys.readouterr().err
    key_dir = tmp_path / "keys"
    assert await jobwarden("audit", "keygen", "jobwarden.test/log", "--out", str(key_dir)) == 0
    monkeypatch.setenv("JW_LOG_SIGNING_KEY_FILE", str(key_dir / "jobwarden.test_log.key"))
    monkeypatch.setenv("JW_LOG_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    assert await jobwarden("audit", "sequence") == 0
    assert (tmp_path / "checkpoints" / "checkpoint").exists()
    assert await jobwarden("audit", "proof", op_id, "--out", str(out)) == 0
    public = str(key_dir / "jobwarden.test_log.pub")
    capsys.readouterr()
    assert await jobwarden("audit", "check-proof", str(out), "--key", public) == 0
    assert "VERIFIED" in capsys.readouterr().out
    assert await jobwarden("audit", "check-proof", str(out), "--key", VERIFIER_KEY) == 1
    assert (key_dir / "jobwarden.test_log.key").stat().st_mode & 0o077 == 0


async def test_the_api_serves_the_receipt_and_the_checkpoint(
    pool: Any, db: Any, db_url: str, tmp_path: Path
) -> None:
    op_id = await _finished(pool, tmp_path)  # submitted as agent:test
    note = await _signed(pool)
    alice = {"Authorization": f"Bearer {await make_token(db, 'test')}"}
    bob = {"Authorization": f"Bearer {await make_token(db, 'bob')}"}
    async with receiver_pool(db_url) as receiver:  # the receiver's own role and grants
        app = Starlette(routes=OperationsApi(sim_settings(), receiver).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            served = await http.get("/v1/audit/checkpoint", headers=alice)
            assert served.status_code == 200 and served.text == note
            answer = await http.get(f"/v1/operations/{op_id}/receipt", headers=alice)
            assert answer.status_code == 200, answer.text
            assert check_receipt(answer.json(), [VERIFIER]).operation_id == op_id
            # another agent's operation does not exist for bob
            other = await http.get(f"/v1/operations/{op_id}/receipt", headers=bob)
            assert other.status_code == 404
            assert (await http.get("/v1/audit/checkpoint")).status_code == 401


async def test_a_rotated_key_keeps_old_checkpoints_verifiable(pool: Any, tmp_path: Path) -> None:
    await _finished(pool, tmp_path)
    old_note = await _signed(pool)
    new_signer, new_verifier = generate_key("jobwarden.test/log")  # same log, new key
    await _finished(pool, tmp_path)
    new_note = await _signed(pool, new_signer)
    both = [VERIFIER, Verifier.from_key(new_verifier)]
    old, new = open_checkpoint(old_note, both), open_checkpoint(new_note, both)
    assert new.size > old.size
    with pytest.raises(NoteError):
        open_checkpoint(new_note, [VERIFIER])  # the old key alone does not vouch for it
    async with pool.acquire() as conn:
        assert (await verify_log(conn, old)).ok and (await verify_log(conn, new)).ok


async def cosign(checkpoint: Path, key_file: Path, previous: Path | None = None) -> int:
    argv = ["audit", "cosign", str(checkpoint), "--log-key", VERIFIER_KEY]
    argv += ["--witness-key-file", str(key_file)]
    return await jobwarden(*argv, *(["--previous", str(previous)] if previous else []))


async def test_a_witness_cosigns_only_a_log_that_extends_what_it_saw(
    pool: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    witness_key, witness_public = generate_cosignature_key("witness.example.org")
    key_file = tmp_path / "witness.key"
    key_file.write_text(witness_key)
    await _finished(pool, tmp_path)
    first = tmp_path / "first"
    first.write_text(await _signed(pool))
    assert await cosign(first, key_file) == 0
    await _finished(pool, tmp_path)
    second = tmp_path / "second"
    second.write_text(await _signed(pool))
    assert await cosign(second, key_file, first) == 0
    witness = Verifier.from_key(witness_public)
    assert open_checkpoint(second.read_text(), [VERIFIER], [witness]).size > 0
    with pytest.raises(NoteError, match="witness"):
        open_checkpoint(await _signed(pool), [VERIFIER], [witness])  # never cosigned
    # the host is compromised: its log rewritten consistently, and signed with its own key
    async with superuser(pool) as conn:
        await reorder_leaves(conn, [])
    forked = tmp_path / "forked"
    async with pool.acquire() as conn:  # the key holder signs the head directly, no checks
        size, root = await log.head(conn)
    signer = Signer.from_key(SIGNER_KEY)
    forked.write_text(sign(Checkpoint(signer.name, size, root).text(), [signer]))
    capsys.readouterr()
    assert await cosign(forked, key_file, second) == 2
    assert "not cosigned" in capsys.readouterr().err
    assert "witness.example.org" not in forked.read_text()


async def test_a_receipt_cannot_borrow_another_operations_rows(pool: Any, tmp_path: Path) -> None:
    """Failed items carry no operation id: they are the operation's only through its result."""
    mine = await _finished(pool, tmp_path)
    other = await _finished(pool, tmp_path)
    await _signed(pool)
    async with pool.acquire() as conn:
        receipt = (await build_receipt(conn, mine)).to_json()
        foreign = (await build_receipt(conn, other)).to_json()
    borrowed = [leaf for leaf in foreign["leaves"] if leaf["kind"] == "failure"]
    assert borrowed
    forged = {**receipt, "leaves": [*receipt["leaves"], *borrowed]}
    with pytest.raises(ReceiptError, match="not proven to belong"):
        check_receipt(forged, [VERIFIER])
    alone = {**receipt, "leaves": borrowed}
    with pytest.raises(ReceiptError, match="not proven to belong"):
        check_receipt(alone, [VERIFIER])
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    refused = _standalone(path, VERIFIER_KEY)
    assert refused.returncode != 0 and "not shown to belong" in refused.stderr
