"""Rotating the checkpoint signing key keeps the log's consistency chain.

The reconciler holds each checkpoint it signs to the one it last published.
Before `log_previous_key_files`, that one was read with the current key
only: after a rotation the old key's `checkpoint` stopped all signing, and
README told operators to move it aside, so the new key's first checkpoint
was checked against nothing the old key signed. Named as a previous public
key, the old key's checkpoint is opened and extended by a consistency proof
(real reconciler processes, their sequencer children, real PostgreSQL).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.sequencer import LogKeeper
from shared.ledger import log
from shared.ledger.log_audit import open_checkpoint
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from shared.tlog import Checkpoint, Signer, Verifier, generate_key
from tests.integration.test_evidence_log import _reorder_leaves, superuser
from tests.integration.test_reconciler_crashes import submit, wait_for
from tests.integration.test_sequencer_process import alive, queue_drained, sequencer_of
from tests.processes import kill9, start_reconciler, write_config
from tests.support import jobwarden

NAME = "jobwarden.test/rotation"


class Key:
    """A signing key as `audit keygen` leaves it: NAME.key (0600) and NAME.pub."""

    def __init__(self, directory: Path, stem: str) -> None:
        private, public = generate_key(NAME)
        directory.mkdir(parents=True, exist_ok=True)
        self.key_file = directory / f"{stem}.key"
        self.pub_file = directory / f"{stem}.pub"
        self.key_file.write_text(private + "\n", "utf-8")
        self.key_file.chmod(0o600)
        self.pub_file.write_text(public + "\n", "utf-8")
        self.private, self.public = private, public
        self.signer = Signer.from_key(private)
        self.verifier = Verifier.from_key(public)


@pytest.fixture
async def sim_url() -> Any:
    async with serve_app(build_app(SimulatorSettings())) as url:
        yield url


def _reconciler(
    db_url: str, config: Path, tmp_path: Path, name: str, key: Key, **env: str
) -> subprocess.Popen[bytes]:
    return start_reconciler(
        db_url,
        config,
        tmp_path,
        name,
        JW_LOG_SIGNING_KEY_FILE=str(key.key_file),
        JW_LOG_INTERVAL="0.05",
        JW_LOG_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
        **env,
    )


def _signed_by(note: str, key: Key) -> Checkpoint | None:
    try:
        return open_checkpoint(note, [key.verifier])
    except ValueError:
        return None


async def _old_key_signed(
    pool: Any, tmp_path: Path, db_url: str, config: Path, old: Key
) -> Checkpoint:
    """A reconciler signing with `old` until a checkpoint is published, then gone;
    one more operation submitted for the next key's checkpoint to cover."""
    latest = tmp_path / "checkpoints" / "checkpoint"
    await submit(pool, "success", duration=0.1)
    daemon = _reconciler(db_url, config, tmp_path, "old", old)
    try:

        async def signed() -> Checkpoint | None:
            if not latest.exists() or not await queue_drained(pool):
                return None
            return _signed_by(latest.read_text(), old)

        checkpoint: Checkpoint = await wait_for(signed, 30, "the old key's checkpoint")
        child = sequencer_of(daemon)
    finally:
        kill9(daemon)
    if child is not None:  # it dies with its parent (PR_SET_PDEATHSIG)
        await wait_for(lambda: _gone(child), 10, "the old sequencer child to go with its daemon")
    await submit(pool, "success", duration=0.1)
    assert checkpoint.size > 0
    return checkpoint


async def _gone(pid: int) -> bool:
    return not alive(pid)


def _log_lines(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    lines = []
    for line in (tmp_path / f"{name}.log").read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


async def test_a_new_key_extends_the_old_keys_checkpoint_when_its_public_key_is_named(
    pool: Any, db_url: str, tmp_path: Path, sim_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = Key(tmp_path / "keys", "old"), Key(tmp_path / "keys", "new")
    config = write_config(tmp_path / "jw.toml", sim_url)
    before = await _old_key_signed(pool, tmp_path, db_url, config, old)
    checkpoints = tmp_path / "checkpoints"
    old_note = (checkpoints / "checkpoint").read_text()
    daemon = _reconciler(
        db_url, config, tmp_path, "new", new, JW_LOG_PREVIOUS_KEY_FILES=str(old.pub_file)
    )
    try:

        async def signed_by_the_new_key() -> Checkpoint | None:
            found = _signed_by((checkpoints / "checkpoint").read_text(), new)
            return found if found is not None and found.size > before.size else None

        after = await wait_for(signed_by_the_new_key, 30, "the new key's first checkpoint")
        await wait_for(lambda: _all_settled(pool), 30, "both operations to finish and be logged")
        # An auditor given both public keys verifies the log against either checkpoint
        # (the daemon still running: its sequencer logs what changes meanwhile).
        sep = "&" if "?" in db_url else "?"
        monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
        keys = ["--key", str(old.pub_file), "--key", str(new.pub_file)]
        for note in (checkpoints / "checkpoint", checkpoints / f"checkpoint.{before.size}"):
            assert await jobwarden("audit", "verify", "--checkpoint", str(note), *keys) == 0
    finally:
        kill9(daemon)
    problems = [line for line in _log_lines(tmp_path, "new") if "NOT signed" in line.get("msg", "")]
    assert problems == []
    assert _signed_by((checkpoints / "checkpoint").read_text(), old) is None  # the new key's
    assert after.origin == before.origin == NAME
    async with pool.acquire() as conn:  # the database proves the new tree extends the old
        assert await log.consistency_problem(conn, before, after) is None
    # The old checkpoint stays published under its size, as the old key signed it.
    assert (checkpoints / f"checkpoint.{before.size}").read_text() == old_note


async def _all_settled(pool: Any) -> bool:
    done = await pool.fetchval("SELECT bool_and(state = 'succeeded') FROM operations")
    return bool(done) and await queue_drained(pool)


async def test_without_the_previous_key_a_rotated_signer_still_refuses(
    pool: Any, db_url: str, tmp_path: Path, sim_url: str
) -> None:
    """Today's behaviour, unchanged: the old key's checkpoint is no fresh start."""
    old, new = Key(tmp_path / "keys", "old"), Key(tmp_path / "keys", "new")
    config = write_config(tmp_path / "jw.toml", sim_url)
    await _old_key_signed(pool, tmp_path, db_url, config, old)
    latest = tmp_path / "checkpoints" / "checkpoint"
    old_note = latest.read_text()
    daemon = _reconciler(db_url, config, tmp_path, "new", new)
    try:

        async def refused() -> list[dict[str, Any]]:
            lines = _log_lines(tmp_path, "new")
            return [line for line in lines if line.get("msg") == "checkpoint NOT signed"]

        lines = await wait_for(refused, 30, "the sequencer to refuse the old key's checkpoint")
    finally:
        kill9(daemon)
    assert "note has no signature by a known key" in json.dumps(lines[0])
    assert latest.read_text() == old_note


async def _one_checkpoint_by(pool: Any, key: Key, directory: Path) -> Checkpoint:
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        note = await log.checkpoint(conn, key.signer)
    log.publish(note, directory)
    return open_checkpoint(note, [key.verifier])


async def test_a_checkpoint_no_named_key_signed_is_still_refused(pool: Any, tmp_path: Path) -> None:
    """A previous key is one more key to open the published checkpoint with, not a
    fresh start: a checkpoint by a third key stops signing as before."""
    old, new, other = (Key(tmp_path / "keys", n) for n in ("old", "new", "other"))
    await submit(pool, "success", duration=0.1)
    await _one_checkpoint_by(pool, other, tmp_path / "checkpoints")
    await submit(pool, "success", duration=0.1)
    keeper = LogKeeper(new.signer, tmp_path / "checkpoints", [old.verifier])
    async with pool.acquire() as conn:
        await keeper.pass_once(conn)
    note = (tmp_path / "checkpoints" / "checkpoint").read_text()
    assert _signed_by(note, other) is not None and _signed_by(note, new) is None


async def test_a_rewrite_after_the_old_keys_last_checkpoint_is_refused_by_the_new_key(
    pool: Any, tmp_path: Path
) -> None:
    """The published copy lost (or moved aside, as README once said): the database's
    own copy of the old key's last checkpoint still holds the new key to it (before,
    a log rewritten between the old key's last checkpoint and the new key's first
    was signed)."""
    old, new = Key(tmp_path / "keys", "old"), Key(tmp_path / "keys", "new")
    ops = [await submit(pool, "success", duration=0.1) for _ in range(3)]
    assert (await _one_checkpoint_by(pool, old, tmp_path / "lost")).size >= 5
    async with superuser(pool) as conn:
        await _reorder_leaves(conn, ops)
    await submit(pool, "success", duration=0.1)  # the tree grows past the old checkpoint
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        with pytest.raises(log.LogForked, match="does not prove the new checkpoint extends"):
            await log.checkpoint(conn, new.signer, None, [old.verifier])


async def test_a_garbage_previous_key_file_stops_the_reconciler_and_audit_sequence(
    db_url: str,
    tmp_path: Path,
    sim_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A configuration error (exit 2) naming the setting and the file, at start: not
    a sequencer child failing every pass. The file's text is never repeated."""
    new = Key(tmp_path / "keys", "new")
    garbage = tmp_path / "keys" / "old.pub"
    garbage.write_text(new.private + "\n", "utf-8")  # the private key, by mistake
    daemon = start_reconciler(
        db_url,
        write_config(tmp_path / "jw.toml", sim_url),
        tmp_path,
        "bad",
        pipe=True,
        JW_LOG_SIGNING_KEY_FILE=str(new.key_file),
        JW_LOG_PREVIOUS_KEY_FILES=str(garbage),
    )
    try:
        out, _ = daemon.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill9(daemon)
        out, _ = daemon.communicate()
    said = out.decode()
    assert daemon.returncode == 2, said
    assert (
        "configuration error: previous checkpoint keys (log_previous_key_files,"
        f" JW_LOG_PREVIOUS_KEY_FILES): {garbage}: a private signer key" in said
    )
    assert new.private.split("+", 4)[4] not in said  # PRIVATE+KEY+name+id+material
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("JW_LOG_SIGNING_KEY_FILE", str(new.key_file))
    monkeypatch.setenv("JW_LOG_PREVIOUS_KEY_FILES", str(garbage))
    monkeypatch.setenv("JW_LOG_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    assert await jobwarden("audit", "sequence") == 2
    err = capsys.readouterr().err
    assert f"{garbage}: a private signer key" in err and new.private not in err
    assert not (tmp_path / "checkpoints").exists()
