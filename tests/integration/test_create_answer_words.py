"""The words a doubtful create answer carried, told to the human as the last answer's.

A create answered 2xx naming an error instead of a job (MiniMax's HTTP 200
{"task_id": "", "base_resp": {"status_code": 1002, ...}}) keeps those words in
last_error, and the human a doubt goes to reads them after "the last create got
HTTP 200". They must be the last answer's own: a later create answered 2xx naming
neither a job nor an error is another answer, whose words are none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig

S = LocalState
ENDS = {S.SUCCEEDED, S.FAILED, S.NEEDS_ATTENTION, S.RESULT_UNAVAILABLE}
RATE_LIMITED = {"task_id": "", "base_resp": {"status_code": 1002, "status_msg": "rate limited"}}
# a 2xx naming no job and no error: a doubt, with nothing in the provider's words
SILENT: dict[str, Any] = {"task_id": ""}


class ScriptedCreates:
    """Creates answered 200 from a script, in order; the last answer repeats."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.creates = 0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/tasks", self.create, methods=["POST"])])

    async def create(self, request: Request) -> Response:
        answer = self.answers[min(self.creates, len(self.answers) - 1)]
        self.creates += 1
        return JSONResponse(answer)


DESCRIBED: dict[str, Any] = {
    "create": {
        "path": "/v1/tasks",
        "idempotency": "header",
        "accepted_statuses": [200],
        "job_id": "/task_id",
        "error_code": "/base_resp/status_code",
        "error_message": "/base_resp/status_msg",
    },
    "status": {
        "path": "/v1/tasks/{job_id}",
        "state": "/status",
        "state_map": {"done": "succeeded"},
    },
    "result": {"source": "none"},
}


async def test_a_silent_last_create_is_not_told_in_an_earlier_answers_words(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The first create got 200 with MiniMax's 1002 "rate limited", the same-token
    retries 200 naming nothing. At the create deadline the human was told "the last
    create got HTTP 200 (1002: rate limited)": the first answer's words, given as
    the last's, as the status codes matched. The last answer said nothing."""
    fx = ScriptedCreates([RATE_LIMITED, SILENT])
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="scripted",
        env={},
        overrides=DESCRIBED,
        clock=clock,
    ) as r:
        op_id = await r.submit({"prompt": "a cat"}, create_deadline_s=120)
        assert await r.settle(op_id, {S.CREATE_UNKNOWN}) is S.CREATE_UNKNOWN
        while fx.creates < 2:
            await clock.advance(5.0)
            await r.reconciler.run_once()
        await clock.advance(600.0)  # past the create deadline
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "; the last create got HTTP 200" in reason, reason
        assert "rate limited" not in reason, reason
        error = (await r.op(op_id)).last_error
        assert error is None or error.get("message") != "rate limited", error


async def test_a_2xx_naming_no_job_tells_the_human_it_named_none(pool: Any, tmp_path: Path) -> None:
    """A provider without idempotency or lookup answers the create 200 with its
    success words and no job id (Fivetran's sync: {"code": "Success", "message":
    "Sync has been successfully triggered ..."}). The human is told the answer
    named no job id where the description reads one; before, only "the last
    create got HTTP 200 (Success: Sync has been successfully triggered ...)", an
    uncertain create that read as a success."""
    triggered = {"code": "Success", "message": "Sync has been successfully triggered"}
    fx = ScriptedCreates([triggered])
    described = DESCRIBED | {
        "create": DESCRIBED["create"]
        | {"idempotency": "none", "error_code": "/code", "error_message": "/message"}
    }
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="scripted", env={}, overrides=described
    ) as r:
        op_id = await r.submit({"prompt": "a cat"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "HTTP 200 (Success: Sync has been successfully triggered)" in reason, reason
        assert "naming no job id (create.job_id: /task_id)" in reason, reason
        assert fx.creates == 1


async def test_a_2xx_owed_a_result_is_not_told_as_naming_no_job(pool: Any, tmp_path: Path) -> None:
    """A 200 is the result inline (`create.sync_result_statuses`), a 202 a job: a
    200 naming its job but carrying no result at `create.sync_result` is uncertain
    for the missing result, and the human is told so. Before, "naming no job id
    (create.job_id: /task_id)", false of an answer that named task t_1."""
    fx = ScriptedCreates([{"task_id": "t_1"}])
    described = DESCRIBED | {
        "create": DESCRIBED["create"]
        | {
            "idempotency": "none",
            "accepted_statuses": [202],
            "sync_result_statuses": [200],
            "sync_result": "/output",
        }
    }
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="scripted", env={}, overrides=described
    ) as r:
        op_id = await r.submit({"prompt": "a cat"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "naming no job id" not in reason, reason
        assert "HTTP 200, carrying no result at create.sync_result (/output)" in reason, reason
        assert fx.creates == 1
