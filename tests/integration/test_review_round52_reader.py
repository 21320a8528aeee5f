"""Round 52 second read (reader): faults the round's authors did not try against
the every-item-failed verdict and the one-shot download retried after a 429,
through the real reconciler against Together's fake on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from shared.ledger import audit, log
from shared.ledger.states import LocalState
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.unseen_round52 import TOGETHER_KEY, TogetherFixture
from tests.support import jobwarden

S = LocalState
BATCH = {"input_file_id": "file-input123abc456def", "endpoint": "/v1/chat/completions"}
ONE_SHOT = {"side_effects": True, "file_ids": ["/output_file_id"]}


def together(pool: Any, tmp_path: Path, fx: TogetherFixture, **over: Any) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="together",
        env={"TOGETHER_API_KEY": TOGETHER_KEY},
        overrides=described("together", **over),
    )


class ConsumedOnThrottle(TogetherFixture):
    """A gateway that throttles the answer after the origin served the document:
    the 429 arrives, and the one-shot file is gone all the same."""

    async def content(self, request: Request) -> Response:
        throttled = bool(self.throttled_files)
        answer = await super().content(request)
        if throttled:
            self.files.pop(request.path_params["fid"], None)
        return answer


async def test_a_one_shot_download_consumed_by_a_throttled_answer_is_never_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """The 429 that did consume the document: the fetch after its Retry-After finds
    nothing (404). The operation is result_unavailable for a human, never
    succeeded nor failed, fetched twice and no more, its evidence whole."""
    fx = ConsumedOnThrottle()
    fx.throttled_files = 1
    async with together(pool, tmp_path, fx, result=ONE_SHOT) as r:
        op_id = await r.submit(BATCH)
        end = await r.settle(op_id, ENDS)
        history = await r.history(op_id)
        assert end is S.RESULT_UNAVAILABLE, history
        assert [c["status_code"] for c in await r.calls(op_id, "result")] == [429, 404]
        reason = await r.pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1",
            op_id,
        )
        print("REASON", reason)
        async with r.pool.acquire() as conn:
            assert (await audit.verify(conn, op_id))[1] == []


async def test_every_item_failed_keeps_the_log_and_the_agent_views_whole(
    pool: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Together's COMPLETED with an error file alone ends failed: `jobwarden audit
    verify` holds over the new observation and move (the log sequenced), and the
    agent view says FAILED with the first failure, no result_ref, the failures at
    errors_ref, never "Finished"."""
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "allfail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        view = await r.pool.fetchrow(
            "SELECT state, done, outcome, message, result_ref, errors_ref, error, items_total,"
            " items_succeeded, items_failed FROM agent_operations WHERE operation_id = $1",
            op_id,
        )
        assert view["state"] == "failed" and view["done"], dict(view)
        assert view["message"].startswith("FAILED: "), view["message"]
        assert "every item failed (1 of 1)" in view["message"], view["message"]
        assert view["result_ref"] is None and view["errors_ref"] is not None, dict(view)
        assert (view["items_total"], view["items_succeeded"], view["items_failed"]) == (1, 0, 1)
        async with r.pool.acquire() as conn:
            await log.sequence_all(conn)
    (tmp_path / "jobwarden.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    monkeypatch.setenv("JW_CONFIG", str(tmp_path / "jobwarden.toml"))
    assert await jobwarden("audit", "verify") == 0


class EmptyErrorOnSuccess(TogetherFixture):
    """Output lines that carry `"error": ""` beside their response, as APIs that
    write every key on every line do: an empty error names none (as a status
    read's does), and the lines are successes."""

    async def content(self, request: Request) -> Response:
        answer = await super().content(request)
        if answer.status_code != 200:
            return answer
        lines = [json.loads(line) for line in bytes(answer.body).splitlines() if line.strip()]
        body = "".join(
            json.dumps({**line, "error": line.get("error") or ""}) + "\n" for line in lines
        )
        return Response(body.encode(), media_type="application/octet-stream")


async def test_success_lines_with_an_empty_error_are_a_success_not_every_item_failed(
    pool: Any, tmp_path: Path
) -> None:
    """Every line a success with `"error": ""`: the batch succeeded, 3 of 3. Before,
    an empty error marked each line failed, and the every-item-failed verdict
    (93e2b2c) ended the batch `failed`, its outputs kept from the agent."""
    fx = EmptyErrorOnSuccess()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_succeeded"], summary["items_failed"]) == (3, 0), summary


class CodedThrottle(TogetherFixture):
    """The file download's throttle told by its code alone, AWS's way: 400
    `{"__type": "ThrottlingException"}`, no 429, nothing served."""

    def __init__(self) -> None:
        super().__init__()
        self.coded_throttles = 1

    async def content(self, request: Request) -> Response:
        if self.coded_throttles and request.path_params["fid"] in self.files:
            self.coded_throttles -= 1
            return Response(
                json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}),
                status_code=400,
                media_type="application/json",
            )
        return await super().content(request)


async def test_a_one_shot_download_throttled_by_its_code_is_fetched_again_once(
    pool: Any, tmp_path: Path
) -> None:
    """01f32f7 let a 429 on a `side_effects` download be fetched again (it served
    nothing); its query says a 4xx a throttle code marks is exempt as well, but a
    result fetch's such answer was recorded `http_4xx`, not `back_pressure`: the
    collection retried it (as a throttle) and then gave up, "an earlier fetch may
    already have consumed it", the document waiting, never fetched."""
    fx = CodedThrottle()
    status = {"throttle_codes": {"/__type": ["ThrottlingException"]}}
    async with together(pool, tmp_path, fx, result=ONE_SHOT, status=status) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert [c["status_code"] for c in await r.calls(op_id, "result")] == [400, 200]
