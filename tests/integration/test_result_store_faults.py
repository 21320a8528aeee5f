"""A result our own disk will not take (a review's reproductions, with the real reconciler).

Before: `ResultStore.put` raising (disk full, a read-only filesystem,
results_dir replaced by a file) failed the step, which was tried again every
30 s for ever, downloading the result each time, never counted against the
attempts, never escalated; a one-shot result (`result.side_effects`) then
ended `result_unavailable` "an earlier fetch may already have consumed it",
although the fetch had worked and our disk had failed; a synchronous result
held its operation in `create_pending` past its deadline. Here results_dir
is a regular file, so every write fails as the operating system says
("Not a directory"), without privileges or a full disk.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.harness import TestClock
from reconciler.daemon import check_startup, prepare_results_dir
from reconciler.steps.collect import MAX_RESULT_ATTEMPTS
from shared.ledger.states import LocalState
from shared.providers import ConfigError
from shared.result_store import ResultStore, StoreFailed
from shared.settings import Settings
from tests.fixtures_providers.rig import PresetRig
from tests.integration.test_url_review import Provider, cause, rig

S = LocalState
ROUND_SECONDS = 31.0
MAX_ROUNDS = 60  # past every backoff of MAX_RESULT_ATTEMPTS attempts
NOT_STORED = "the result was fetched and validated, but could not be stored under"


def break_results_dir(tmp_path: Path) -> Path:
    """results_dir (the rig's) as a regular file: every write under it fails."""
    results = tmp_path / "results"
    if results.is_dir():
        results.rmdir()  # nothing stored yet
    results.write_bytes(b"not a directory")
    return results


async def settle(r: PresetRig, op_id: str, clock: TestClock) -> LocalState:
    """Claims on the test clock until the operation leaves result collection."""
    await r.reconciler.run_once()
    for _ in range(MAX_ROUNDS):
        state = await r.state(op_id)
        if state not in (S.CREATE_PENDING, S.ACCEPTED, S.OBSERVING, S.RESULT_COLLECTING):
            return state
        await clock.advance(ROUND_SECONDS)
        await r.reconciler.run_once()
    return await r.state(op_id)


async def test_a_result_our_disk_refuses_is_fetched_again_then_escalated_with_the_cause(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    provider = Provider()
    async with rig(pool, tmp_path, provider, clock) as r:
        provider.result_url = r.url + "/results/job-1"
        break_results_dir(tmp_path)
        op_id = await r.submit({})
        state = await settle(r, op_id, clock)
        why = await cause(r, op_id)
    assert state is S.NEEDS_ATTENTION
    assert why.startswith(NOT_STORED) and "Not a directory" in why
    assert provider.result_reads == MAX_RESULT_ATTEMPTS  # counted, not for ever


async def test_the_result_is_stored_once_the_disk_takes_it_again(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    provider = Provider()
    async with rig(pool, tmp_path, provider, clock) as r:
        provider.result_url = r.url + "/results/job-1"
        results = break_results_dir(tmp_path)
        op_id = await r.submit({})
        await r.reconciler.run_once()
        for _ in range(MAX_ROUNDS):
            if provider.result_reads:
                break
            await clock.advance(ROUND_SECONDS)
            await r.reconciler.run_once()
        assert provider.result_reads == 1 and await r.state(op_id) is S.RESULT_COLLECTING
        results.unlink()  # the operator frees the disk
        state = await settle(r, op_id, clock)
        row = await pool.fetchrow(
            "SELECT sha256, storage_ref FROM results WHERE operation_id=$1 AND valid", op_id
        )
    assert state is S.SUCCEEDED and row is not None
    stored = Path(row["storage_ref"].removeprefix("file:"))
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == row["sha256"]


async def test_a_one_shot_result_our_disk_refuses_goes_to_a_human_saying_so(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    provider = Provider()
    overrides = {"result": {"side_effects": True}}
    async with rig(pool, tmp_path, provider, clock, overrides) as r:
        provider.result_url = r.url + "/results/job-1"
        break_results_dir(tmp_path)
        op_id = await r.submit({})
        state = await settle(r, op_id, clock)
        why = await cause(r, op_id)
    assert (state, provider.result_reads) == (S.NEEDS_ATTENTION, 1)
    assert why.startswith(NOT_STORED) and "side effects, so it is not fetched again" in why


def synchronous_provider(creates: list[int]) -> Starlette:
    """A provider that answers its create with the finished result (200)."""

    async def create(_request: Request) -> JSONResponse:
        creates.append(1)
        return JSONResponse({"job_id": "job-1", "state": "succeeded", "result": {"items": []}})

    return Starlette(routes=[Route("/v1/jobs", create, methods=["POST"])])


async def test_a_synchronous_result_our_disk_refuses_goes_to_a_human_created_once(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    creates: list[int] = []
    async with rig(pool, tmp_path, synchronous_provider(creates), clock) as r:
        break_results_dir(tmp_path)
        op_id = await r.submit({})
        state = await settle(r, op_id, clock)
        why = await cause(r, op_id)
        job = await pool.fetchval(
            "SELECT remote_job_id FROM operations WHERE operation_id=$1", op_id
        )
    assert (state, len(creates), job) == (S.NEEDS_ATTENTION, 1, "job-1")
    assert why.startswith("the synchronous result was validated, but could not be stored")


# --------------------------------------------------------------------- the store


def test_a_damaged_stored_file_is_written_again_not_reused(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    content = os.urandom(100_000)
    digest, ref = store.put(content)
    path = Path(ref.removeprefix("file:"))
    for damage in (b"", content[:-1] + bytes([content[-1] ^ 1])):  # truncated, one bit
        path.write_bytes(damage)
        assert store.put(content) == (digest, ref)
        assert path.read_bytes() == content


def test_a_reference_is_a_full_path_whatever_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, ref = ResultStore(Path("var/results")).put(b"x")
    assert ref == f"file:{tmp_path}/var/results/{hashlib.sha256(b'x').hexdigest()[:2]}/" + (
        hashlib.sha256(b"x").hexdigest()
    )


def test_a_write_the_disk_refuses_is_store_failed_naming_the_cause(tmp_path: Path) -> None:
    (tmp_path / "results").write_bytes(b"")
    with pytest.raises(StoreFailed, match=r"could not be stored under .*: Not a directory"):
        ResultStore(tmp_path / "results").put(b"x")


def test_crashed_writes_temporary_files_are_swept_when_old(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    _, ref = store.put(b"kept")
    shard = Path(ref.removeprefix("file:")).parent
    old, fresh = shard / ".abc-123xyz", shard / ".def-456uvw"
    old.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    long_ago = time.time() - 2 * 3600
    os.utime(old, (long_ago, long_ago))
    assert store.sweep_temporaries() == 1
    assert not old.exists() and fresh.exists() and Path(ref.removeprefix("file:")).exists()


def test_the_reconciler_refuses_to_start_on_a_results_dir_it_cannot_write(
    tmp_path: Path,
) -> None:
    (tmp_path / "results").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"results_dir .*JW_RESULTS_DIR.*cannot write"):
        prepare_results_dir(ResultStore(tmp_path / "results"))


def test_providers_check_leaves_results_dir_alone(tmp_path: Path) -> None:
    """`jobwarden providers check` runs the reconciler's start-up checks, often as root
    before the service first starts: a directory it made would be root's."""
    results = tmp_path / "state" / "results"
    check_startup(Settings(results_dir=results))
    assert not (tmp_path / "state").exists()
    prepare_results_dir(ResultStore(results))  # the daemon's own start makes it
    assert results.is_dir() and list(results.iterdir()) == []  # the probe removed
