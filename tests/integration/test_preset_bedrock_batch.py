"""The `bedrock_batch` preset against a batch inference fake that checks every
call's Signature Version 4 with botocore, end to end through the real reconciler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.providers import describe_guarantees, load_preset
from tests.fixtures_providers.bedrock import KEYS, BedrockFixture
from tests.fixtures_providers.rig import preset_rig

S = LocalState
KEY_ID = next(iter(KEYS))
ENV = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": KEYS[KEY_ID]}
ENDS = {
    S.SUCCEEDED,
    S.FAILED,
    S.CANCELLED,
    S.NEEDS_ATTENTION,
    S.RESULT_TIMED_OUT,
    S.RESULT_UNAVAILABLE,
    S.RESULT_VALIDATION_FAILED,
    S.CANCELLATION_UNCONFIRMED,
}
OUTPUT = {"s3OutputDataConfig": {"s3Uri": "s3://my-bucket/out/"}}


def job(name: str) -> dict[str, Any]:
    return {
        "jobName": name,
        "roleArn": "arn:aws:iam::123456789012:role/BedrockBatch",
        "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://my-bucket/in/records.jsonl"}},
        "outputDataConfig": OUTPUT,
    }


async def stored(r: Any, op_id: str) -> Any:
    """The stored result document, parsed."""
    return json.loads(await r.result_bytes(op_id))


def rig(pool: Any, tmp_path: Path, fx: BedrockFixture) -> Any:
    return preset_rig(pool, tmp_path, fx.app(), preset="bedrock_batch", name="bedrock", env=ENV)


async def test_a_batch_is_created_signed_read_by_its_arn_and_its_output_location_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = BedrockFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(job("done-invoices"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        [arn] = fx.jobs
        assert op.remote_job_id == arn
        assert await stored(r, op_id) == OUTPUT
        assert (op.progress_completed, op.progress_total) == (3, 3)
    # every read named the ARN whole (its ':' and '/' encoded in the path segment)
    assert set(fx.read_ids) == {arn}
    assert fx.signed_by and set(fx.signed_by) == {KEY_ID}
    assert fx.jobs[arn]["request"]["clientRequestToken"]


async def test_a_lost_create_is_sent_again_with_its_token_and_one_job_runs(
    pool: Any, tmp_path: Path
) -> None:
    fx = BedrockFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(job("lost-a"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
    assert fx.creates == 2 and len(fx.jobs) == 1


async def test_a_create_over_the_concurrent_job_quota_is_sent_again_not_failed(
    pool: Any, tmp_path: Path
) -> None:
    """The account's cap of concurrent batch jobs answers 400
    ServiceQuotaExceededException (with x-amzn-ErrorType's URI suffix): no job
    was made. It is back-pressure, not a rejection that failed the operation."""
    fx = BedrockFixture()
    fx.over_quota = 2
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(job("done-later"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        creates = await r.calls(op_id, "create")
    assert [c["status_code"] for c in creates] == [400, 400, 200]
    assert fx.creates == 3 and len(fx.jobs) == 1


async def test_a_partial_batch_is_partially_succeeded_with_its_counts(
    pool: Any, tmp_path: Path
) -> None:
    fx = BedrockFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(job("partial-a"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
    assert op.remote_state == "partially_succeeded"


async def test_a_failed_batch_is_failed_in_bedrocks_words(pool: Any, tmp_path: Path) -> None:
    fx = BedrockFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(job("fail-a"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
    assert "not valid JSONL" in str(op.last_error)


async def test_a_stop_is_confirmed_by_a_read_showing_stopped(pool: Any, tmp_path: Path) -> None:
    fx = BedrockFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(job("slow-a"))
        assert await r.settle(op_id, {S.OBSERVING, *ENDS}) is S.OBSERVING
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert (await r.history(op_id))[-2:] == ["cancelling", "cancelled"]
    assert fx.stops == 1


def test_guarantees() -> None:
    desc = load_preset("bedrock_batch", ENV)
    report = {name: holds for name, holds, _why in describe_guarantees(desc)}
    assert report["at-most-once create"] is True
    assert report["cancellable"] is True


def test_the_deadline_outlasts_the_longest_timeout_a_job_may_be_given() -> None:
    """Bedrock ends a job by its timeoutDurationInHours (at most 168 h, botocore's
    model): jobwarden's result deadline must not give up on it sooner."""
    import gzip
    import os

    import botocore

    model = Path(os.path.dirname(botocore.__file__)) / "data/bedrock/2023-04-20/service-2.json.gz"
    shapes = json.loads(gzip.decompress(model.read_bytes()))["shapes"]
    longest_hours = shapes["ModelInvocationJobTimeoutDurationInHours"]["max"]
    desc = load_preset("bedrock_batch", ENV)
    assert desc.limits.result_deadline_seconds > longest_hours * 3600
