"""Two APIs no preset covers, described in TOML as a user would, docs open
(tests/fixtures_providers/unseen/*.toml, checked by `jobwarden providers check`),
driven through the real reconciler against faithful fakes on loopback:
Cohere's embed jobs (tests/fixtures_providers/cohere_embed.py) and Amazon
Textract's asynchronous text detection on the AWS JSON 1.1 protocol
(tests/fixtures_providers/textract.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared import secret as secret_module
from shared.ledger.states import LocalState
from shared.secret import RECHECK_SECONDS
from tests.fixtures_providers.cohere_embed import COHERE_KEY, EmbedJobsFixture
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.textract import KEYS, TextractFixture

S = LocalState


def cohere(pool: Any, tmp_path: Path, fx: EmbedJobsFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="cohere_embed",
        env={"CO_API_KEY": COHERE_KEY},
        overrides=described("cohere"),
    )


FIRST_KEY, SECOND_KEY = KEYS
AWS_ENV = {"AWS_ACCESS_KEY_ID": FIRST_KEY, "AWS_SECRET_ACCESS_KEY": KEYS[FIRST_KEY]}


def textract(
    pool: Any,
    tmp_path: Path,
    fx: TextractFixture,
    env: dict[str, str] | None = None,
    **auth: Any,
) -> Any:
    overrides = described("textract")
    overrides["auth"] = {**overrides["auth"], **auth}
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="textract",
        env=env if env is not None else AWS_ENV,
        overrides=overrides,
    )


EMBED = {"model": "embed-english-v3.0", "dataset_id": "ds-1", "input_type": "search_document"}


def document(name: str) -> dict[str, Any]:
    return {"DocumentLocation": {"S3Object": {"Bucket": "docs", "Name": name}}}


async def stored(r: Any, op_id: str) -> Any:
    """The stored result document, parsed."""
    return json.loads(await r.result_bytes(op_id))


# --- Cohere embed jobs ---------------------------------------------------------


async def test_cohere_an_embed_job_is_created_read_and_its_dataset_collected(
    pool: Any, tmp_path: Path
) -> None:
    fx = EmbedJobsFixture()
    async with cohere(pool, tmp_path, fx) as r:
        op_id = await r.submit(EMBED)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.named(op_id) == [(await r.op(op_id)).remote_job_id]
        dataset = (await stored(r, op_id))["dataset"]
        assert dataset["dataset_type"] == "embed-result"
        # What a TOML description cannot reach: the embeddings are the parts
        # behind the dataset's signed URLs, a second hop no description names.
        assert fx.part_fetches == 0
        assert "X-Amz-Signature" in dataset["dataset_parts"][0]["url"]


async def test_cohere_a_lost_create_is_found_by_its_name_and_never_sent_again(
    pool: Any, tmp_path: Path
) -> None:
    fx = EmbedJobsFixture(lose_first_create=True)
    async with cohere(pool, tmp_path, fx) as r:
        op_id = await r.submit(EMBED)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.named(op_id) == [(await r.op(op_id)).remote_job_id]
        assert "create_unknown" in await r.history(op_id)


async def test_cohere_a_lost_create_that_made_nothing_is_sent_once_more(
    pool: Any, tmp_path: Path
) -> None:
    """The whole list (Cohere's is not paged) holds no job of ours: one re-send."""
    fx = EmbedJobsFixture(lose_first_create=True, keep_lost=False)
    async with cohere(pool, tmp_path, fx) as r:
        op_id = await r.submit(EMBED)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 2
        assert fx.named(op_id) == [(await r.op(op_id)).remote_job_id]


async def test_cohere_a_failed_embed_job_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = EmbedJobsFixture()
    async with cohere(pool, tmp_path, fx) as r:
        op_id = await r.submit({**EMBED, "dataset_id": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).result_id is None


async def test_cohere_a_cancel_goes_through_cancelling_to_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    fx = EmbedJobsFixture()
    async with cohere(pool, tmp_path, fx) as r:
        op_id = await r.submit({**EMBED, "dataset_id": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == 1
        assert fx.jobs[(await r.op(op_id)).remote_job_id]["status"] == "cancelled"


async def test_cohere_a_job_done_before_the_cancel_is_collected_not_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    fx = EmbedJobsFixture()
    async with cohere(pool, tmp_path, fx) as r:
        op_id = await r.submit({**EMBED, "dataset_id": "race"})
        await r.settle(op_id, {S.OBSERVING, S.RESULT_COLLECTING, S.SUCCEEDED})
        await r.cancel(op_id)
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, (end, await r.history(op_id))


# --- Amazon Textract -------------------------------------------------------------


async def test_textract_a_document_is_started_read_and_its_blocks_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (job,) = fx.jobs.values()
        assert job["request"]["JobTag"] == op_id
        assert job["request"]["ClientRequestToken"]
        assert all(g["JobId"] == job["JobId"] for g in fx.gets)
        assert len((await stored(r, op_id))["Blocks"]) == 3
        # two reads running, the final read, and the result's first (only) page:
        # a paged result is fetched, not taken from the final read
        assert len(fx.gets) == 4


async def test_textract_a_lost_start_is_sent_again_with_its_token_and_one_job_runs(
    pool: Any, tmp_path: Path
) -> None:
    fx = TextractFixture(lose_first_create=True)
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.starts == 2 and len(fx.jobs) == 1


async def test_textract_a_start_over_the_concurrent_job_limit_is_sent_again(
    pool: Any, tmp_path: Path
) -> None:
    fx = TextractFixture(limit_first=True)
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.starts == 2 and len(fx.jobs) == 1


async def test_textract_a_failed_document_is_failed_with_its_status_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("fail.pdf"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "unsupported document format" in json.dumps((await r.op(op_id)).last_error)


async def test_textract_a_partial_success_is_partial(pool: Any, tmp_path: Path) -> None:
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("partial.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_state == "partially_succeeded"


async def test_textract_a_cancel_is_not_sent_and_the_job_is_read_to_its_end(
    pool: Any, tmp_path: Path
) -> None:
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, (end, await r.history(op_id))
        assert fx.starts == 1


async def test_textract_throttled_reads_are_read_past(pool: Any, tmp_path: Path) -> None:
    """Three GetDocumentTextDetection answers of 400 ProvisionedThroughputExceededException."""
    fx = TextractFixture(throttled_reads=3)
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)


async def test_textract_a_sustained_throttle_is_back_pressure_not_a_refused_read(
    pool: Any, tmp_path: Path
) -> None:
    """AWS throttles with 400 and `__type` ProvisionedThroughputExceededException, no
    Retry-After: twelve in a row were ten "refused reads", and the operation went to
    a human told to check its credential while the job ran on. Described by
    `[status.throttle_codes]`, they are back-pressure, read past at the backoff."""
    fx = TextractFixture(throttled_reads=12)
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        end = await r.settle(op_id, ENDS, timeout=30)
        assert end is S.SUCCEEDED, (end, await r.history(op_id), await r.escalation(op_id))
        reads = await r.calls(op_id, "status")
        assert sum(c["error_category"] == "back_pressure" for c in reads) == 12


async def test_textract_a_job_id_past_its_seven_days_goes_to_a_human_in_awss_words(
    pool: Any, tmp_path: Path
) -> None:
    """A JobId is valid 7 days; then every Get answers 400 InvalidJobIdException.
    Ten such refusals go to a human, as any lasting 4xx does, and the reason quotes
    the provider: before, it said only "HTTP 400" and sent the human to the
    credential."""
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("a.pdf"))
        await r.settle(op_id, {S.OBSERVING})
        fx.jobs.clear()
        assert await r.settle(op_id, ENDS, timeout=30) is S.NEEDS_ATTENTION
        reason = (await r.escalation(op_id))["reason"]
        assert "HTTP 400 (" in reason and "InvalidJobIdException" in reason, reason


async def test_textract_a_result_of_several_pages_is_kept_whole(pool: Any, tmp_path: Path) -> None:
    """2,500 blocks: each Get answers 1,000 and a NextToken, sent back in the POST's
    body (`result.method`, `result.body`, `result.pages.page_token_body_field`).
    Before, no description could ask for page 2: described inline, 1,000 of the
    2,500 blocks were kept and called a success."""
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("big.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        pages = await stored(r, op_id)
        assert [len(page["Blocks"]) for page in pages] == [1000, 1000, 500]
        assert [b["Id"] for page in pages for b in page["Blocks"]] == [f"b{i}" for i in range(2500)]
        assert [g.get("NextToken") for g in fx.gets[-3:]] == [None, "1000", "2000"]


async def test_textract_a_throttled_page_of_the_result_is_fetched_again(
    pool: Any, tmp_path: Path
) -> None:
    """Page 2 of the blocks answers 400 ProvisionedThroughputExceededException twice
    (Get's quota is a few calls a second, and a large document is many pages): a
    throttle, fetched again, never the result's end. Before, the 400 was judged as
    the result and the operation ended result_unavailable."""
    fx = TextractFixture(throttled_pages=2)
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("big.pdf"))
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, (end, await r.history(op_id), await r.escalation(op_id))
        assert sum(len(page["Blocks"]) for page in await stored(r, op_id)) == 2500
    # each attempt went on from the page the throttle refused, after reading page 1
    # again to find the result unchanged: no page past the first was read twice
    # but the one refused
    tokens = [g.get("NextToken") for g in fx.gets if g.get("MaxResults") == 1000]
    assert tokens == [None, "1000", None, "1000", None, "1000", "2000"], fx.gets


def first_pages(fx: TextractFixture) -> int:
    """How many times the result's first page was fetched (the reads ask for one block)."""
    return sum(1 for g in fx.gets if g.get("MaxResults") == 1000 and not g.get("NextToken"))


async def test_textract_a_token_refused_where_the_last_attempt_stopped_reads_from_page_1(
    pool: Any, tmp_path: Path
) -> None:
    """The attempt after a throttle goes on with the token it was refused; a token
    that expired meanwhile answers 400 InvalidParameterException, which is no
    verdict on the result: the pages are read again from the first, at once."""
    fx = TextractFixture(throttled_pages=1, refused_tokens=1)
    async with textract(pool, tmp_path, fx) as r:
        op_id = await r.submit(document("big.pdf"))
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, (end, await r.history(op_id), await r.escalation(op_id))
        pages = await stored(r, op_id)
    assert [b["Id"] for page in pages for b in page["Blocks"]] == [f"b{i}" for i in range(2500)]
    assert first_pages(fx) == 2, fx.gets


async def test_textract_every_call_is_signed_and_a_rotated_key_file_signs_the_next(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS takes no static credential: every call is signed (Signature Version 4),
    checked by the fake with botocore, AWS's own signer. The credentials come from
    a credential_process file that a timer rewrites (STS keys last an hour): the
    calls after the rewrite are signed with the new key, without a restart."""
    creds = tmp_path / "aws.json"
    creds.write_text(
        json.dumps({"Version": 1, "AccessKeyId": FIRST_KEY, "SecretAccessKey": KEYS[FIRST_KEY]})
    )
    moved = [1000.0]
    monkeypatch.setattr(secret_module, "clock", lambda: moved[0])
    fx = TextractFixture()
    async with textract(pool, tmp_path, fx, env={}, credentials_file=str(creds)) as r:
        op_id = await r.submit(document("a.pdf"))
        assert await r.settle(op_id, {S.OBSERVING, *ENDS}) is S.OBSERVING, await r.history(op_id)
        replaced = tmp_path / "aws.json.new"
        replaced.write_text(
            json.dumps(
                {"Version": 1, "AccessKeyId": SECOND_KEY, "SecretAccessKey": KEYS[SECOND_KEY]}
            )
        )
        replaced.replace(creds)
        moved[0] += RECHECK_SECONDS
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        forged = await _forged_call(r.url)
    first_calls = fx.signed_by.index(SECOND_KEY)
    assert first_calls >= 2  # the start and a read, signed with the first key
    assert set(fx.signed_by[:first_calls]) == {FIRST_KEY}
    assert set(fx.signed_by[first_calls:]) == {SECOND_KEY}
    # and a signature that does not match is refused as AWS refuses it
    assert forged.status_code == 403
    assert forged.json()["__type"] == "InvalidSignatureException"


async def _forged_call(url: str) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(
            url + "/",
            content=b"{}",
            headers={
                "Content-Type": "application/x-amz-json-1.1",
                "X-Amz-Target": "Textract.GetDocumentTextDetection",
                "X-Amz-Date": "20261205T091011Z",
                "Authorization": (
                    f"AWS4-HMAC-SHA256 Credential={FIRST_KEY}/20261205/us-east-1/textract/"
                    "aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "0" * 64
                ),
            },
        )
