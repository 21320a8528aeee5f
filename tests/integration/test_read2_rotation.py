"""`audit archive` across a checkpoint key rotation (second reading of cbe5d0b).

The reconciler's sequencer and `audit sequence` open the published checkpoint
with the current key or a previous public key (log_previous_key_files);
`audit archive` signs its own checkpoints and read the published one with the
current key only: right after a rotation (the old key's checkpoint still the
published one) it failed with a traceback instead of extending it, and a
checkpoint no named key signed was a traceback too, not a refusal. And with
no leaf since the old key's last checkpoint, the new key's note of that same
tree was refused by `publish` as a fork.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.sequencer import LogKeeper
from shared.ledger import log
from shared.ledger.log_audit import open_checkpoint
from shared.tlog import Checkpoint, Verifier, generate_cosignature_key, sign
from tests.integration.test_archive import _archive, _archives, _finished
from tests.integration.test_log_key_rotation import NAME, Key, _one_checkpoint_by
from tests.support import jobwarden


@pytest.fixture
async def rotated(
    pool: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Finished operations; the old key's checkpoint published; the new key configured."""
    await _finished(pool, tmp_path)
    old, new = Key(tmp_path / "keys", "old"), Key(tmp_path / "keys", "new")
    checkpoints = tmp_path / "checkpoints"
    before = await _one_checkpoint_by(pool, old, checkpoints)
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    monkeypatch.setenv("JW_LOG_SIGNING_KEY_FILE", str(new.key_file))
    monkeypatch.setenv("JW_LOG_CHECKPOINT_DIR", str(checkpoints))
    return {"old": old, "new": new, "before": before, "checkpoints": checkpoints}


async def test_archive_extends_the_old_keys_checkpoint_named_as_a_previous_key(
    pool: Any,
    rotated: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    old, new, before = rotated["old"], rotated["new"], rotated["before"]
    monkeypatch.setenv("JW_LOG_PREVIOUS_KEY_FILES", str(old.pub_file))
    root = tmp_path / "archives"
    assert await _archive("--older-than", "0", root=root) == 0, capsys.readouterr()
    assert "archived" in capsys.readouterr().out
    assert len(_archives(root)) == 1
    after = open_checkpoint((rotated["checkpoints"] / "checkpoint").read_text(), [new.verifier])
    assert after.size > before.size
    async with pool.acquire() as conn:
        assert await log.consistency_problem(conn, before, after) is None


async def test_archive_refuses_a_published_checkpoint_no_named_key_signed(
    rotated: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No previous key named: the old key's checkpoint is no fresh start, and the
    operator is told so (exit 2), not shown a traceback; nothing is archived."""
    latest = rotated["checkpoints"] / "checkpoint"
    old_note = latest.read_text()
    root = tmp_path / "archives"
    assert await _archive("--older-than", "0", root=root) == 2
    err = capsys.readouterr().err
    assert "checkpoint NOT signed, nothing archived" in err
    assert "note has no signature by a known key" in err
    assert not root.exists() or _archives(root) == []
    assert latest.read_text() == old_note


async def test_an_idle_log_is_signed_by_the_new_key_at_the_old_keys_last_size(
    pool: Any, tmp_path: Path
) -> None:
    """No leaf since the old key's last checkpoint: the new key signs the same tree.
    Its note differs from the old key's `checkpoint.<size>`, which publish took
    for a fork: every sequencer pass logged "checkpoint NOT signed" until the
    next leaf (an idle system after the rotation README describes)."""
    old, new = Key(tmp_path / "keys", "old"), Key(tmp_path / "keys", "new")
    await _finished(pool, tmp_path)
    checkpoints = tmp_path / "checkpoints"
    before = await _one_checkpoint_by(pool, old, checkpoints)
    old_note = (checkpoints / f"checkpoint.{before.size}").read_text()
    keeper = LogKeeper(new.signer, checkpoints, [old.verifier])
    async with pool.acquire() as conn:
        await keeper.pass_once(conn)
    assert keeper.signed_size == before.size
    after = open_checkpoint((checkpoints / "checkpoint").read_text(), [new.verifier])
    assert (after.size, after.root_hash) == (before.size, before.root_hash)
    # the old key's note stays under its size, as it was published
    assert (checkpoints / f"checkpoint.{before.size}").read_text() == old_note


def test_publish_still_refuses_another_tree_of_the_same_size(tmp_path: Path) -> None:
    """Only the same tree may be signed again under a published size."""
    one, two = Key(tmp_path / "keys", "one"), Key(tmp_path / "keys", "two")
    log.publish(sign(Checkpoint(NAME, 3, b"\x01" * 32).text(), [one.signer]), tmp_path)
    forked = sign(Checkpoint(NAME, 3, b"\x02" * 32).text(), [two.signer])
    with pytest.raises(log.LogForked, match="exists with another note"):
        log.publish(forked, tmp_path)
    again = sign(Checkpoint(NAME, 3, b"\x01" * 32).text(), [two.signer])
    assert log.publish(again, tmp_path).size == 3
    assert (tmp_path / "checkpoint").read_text() == again


async def _witness(tmp_path: Path) -> tuple[Path, Verifier]:
    private, public = generate_cosignature_key("witness.example.org")
    key_file = tmp_path / "witness.key"
    key_file.write_text(private)
    return key_file, Verifier.from_key(public)


async def test_a_witness_cosigns_across_the_logs_key_rotation(
    pool: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last checkpoint a witness cosigned was the old key's: `--previous` was
    opened with `--log-key` (the new key) alone, so no witness could cosign the
    new key's first checkpoint by a consistency proof. `--previous-log-key`
    opens it; the checkpoint cosigned is still the new key's alone."""
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    old, new = Key(tmp_path / "keys", "old"), Key(tmp_path / "keys", "new")
    key_file, witness = await _witness(tmp_path)
    await _finished(pool, tmp_path)
    first = tmp_path / "first"
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        first.write_text(await log.checkpoint(conn, old.signer))
    base = ["audit", "cosign", "--witness-key-file", str(key_file)]
    assert await jobwarden(*base, str(first), "--log-key", str(old.pub_file)) == 0
    await _finished(pool, tmp_path)
    second = tmp_path / "second"
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        second.write_text(await log.checkpoint(conn, new.signer, None, [old.verifier]))
    argv = [*base, str(second), "--log-key", str(new.pub_file), "--previous", str(first)]
    assert await jobwarden(*argv, "--previous-log-key", str(old.pub_file)) == 0, capsys.readouterr()
    assert open_checkpoint(second.read_text(), [new.verifier], [witness]).size > 0
    # a checkpoint the old key signed is never cosigned as the new key's
    third = tmp_path / "third"
    async with pool.acquire() as conn:
        third.write_text(await log.checkpoint(conn, old.signer))
    capsys.readouterr()
    argv = [*base, str(third), "--log-key", str(new.pub_file), "--previous", str(first)]
    assert await jobwarden(*argv, "--previous-log-key", str(old.pub_file)) == 2
    assert "not cosigned" in capsys.readouterr().err
