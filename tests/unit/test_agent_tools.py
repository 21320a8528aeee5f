"""The tool wrapper's decisions, without a server: mapping, pacing, error paths.

Also the MCP layer's pure parts: the output schema against the MCP view, the
task state mapping, the event-stream parser and the in-process transport.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx
import jsonschema
import mcp_types as types
import pytest

from shared.agents import tools as agent_tools
from shared.agents.client import ApiProblem, ApiUnreachable, _sse_events
from shared.agents.inprocess import InProcessTransport
from shared.agents.mcp import tasks, view
from shared.agents.mcp.catalog import TOOLS
from shared.agents.mcp.schemas import TOOL_RESULT_SCHEMA
from shared.agents.mcp.waiting import progress_message
from shared.agents.tools import from_resource, next_delay


def resource(
    *, done: bool, outcome: str | None = None, job: str | None = "job_1", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "operation_id": "op_1",
        "done": done,
        "message": extra.pop("message", "STARTED and NOT complete."),
        "metadata": {
            "remote_job_id": job,
            "outcome": outcome,
            "client_reference": "ref-1",
            "poll_after_seconds": 2,
        },
    }
    body.update(extra)
    return body


class FakeTime:
    """A clock that only moves when the wrapper sleeps (or a wait consumes time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeClient:
    def __init__(self, time: FakeTime, submits: Iterator[Any], waits: Iterator[Any]) -> None:
        self.time = time
        self.submits = submits
        self.waits = waits
        self.references: list[str | None] = []
        self.claims = 0

    def submit(self, provider: str, kind: str, request: Any, **kw: Any) -> Any:
        self.references.append(kw.get("client_reference"))
        return self._next(self.submits)

    def wait(self, operation_id: str, max_wait: float, **_kw: Any) -> Any:
        answer = self._next(self.waits)
        if isinstance(answer, dict) and not answer["done"]:
            self.time.now += max_wait  # the long-poll used its whole budget
        return answer

    def claim_completion(self, operation_id: str, consumer: str, **_kw: Any) -> bool:
        self.claims += 1
        raise ApiUnreachable("connection reset")

    @staticmethod
    def _next(source: Iterator[Any]) -> Any:
        item = next(source)
        if isinstance(item, Exception):
            raise item
        return item


def run(
    submits: list[Any], waits: list[Any], max_wait: float = 60, **kw: Any
) -> tuple[agent_tools.ToolResult, FakeClient, FakeTime]:
    time = FakeTime()
    client = FakeClient(time, iter(submits), iter(waits))
    result = agent_tools.start_and_await(
        client,  # type: ignore[arg-type]
        "sim",
        {"body": {}},
        max_wait,
        clock=time.clock,
        sleep=time.sleep,
        **kw,
    )
    return result, client, time


# ------------------------------------------------------------------ pacing


def test_first_retry_follows_the_servers_hint() -> None:
    assert next_delay(None, 30, remaining=100) == 30


def test_first_retry_without_hint_is_one_second() -> None:
    assert next_delay(None, None, remaining=100) == 1.0


def test_retries_back_off_by_half_and_cap_at_a_minute() -> None:
    assert next_delay(4, 30, remaining=1000) == 6
    assert next_delay(50, None, remaining=1000) == 60


def test_a_retry_never_outlasts_max_wait() -> None:
    assert next_delay(40, None, remaining=3) == 3
    assert next_delay(40, None, remaining=-1) == 0


# ------------------------------------------------------------------ mapping


@pytest.mark.parametrize(
    ("outcome", "status", "needs_human"),
    [
        ("succeeded", "succeeded", False),
        ("completed_with_errors", "completed_with_errors", False),
        ("failed", "failed", False),
        ("cancelled", "cancelled", False),
        ("timed_out", "timed_out", True),
        ("needs_attention", "timed_out", True),
        ("something_new", "timed_out", False),
    ],
)
def test_outcomes_map_to_exactly_one_status(outcome: str, status: str, needs_human: bool) -> None:
    result = from_resource(resource(done=True, outcome=outcome, message="m"))
    assert (result.status, result.needs_human, result.done) == (status, needs_human, True)
    assert result.operation_id == "op_1" and result.job_id == "job_1"


def test_needs_attention_says_not_finished() -> None:
    result = from_resource(resource(done=True, outcome="needs_attention", message="Needs a human."))
    assert result.message.startswith("NOT finished from your point of view.")


def test_success_carries_result_and_counts() -> None:
    response = {
        "result": {"url": "u"},
        "result_ref": "file:/r",
        "summary": {"total": 3, "succeeded": 3, "failed": 0},
        "errors_ref": None,
    }
    result = from_resource(resource(done=True, outcome="succeeded", response=response))
    assert result.result == {"url": "u"} and result.counts == {
        "total": 3,
        "succeeded": 3,
        "failed": 0,
    }


def test_not_done_is_running_for_check_and_timed_out_for_await() -> None:
    assert from_resource(resource(done=False)).status == "running"
    gave_up = from_resource(resource(done=False), gave_up_after=60)
    assert gave_up.status == "timed_out" and not gave_up.done
    assert "operation op_1 (job job_1) continues in the background" in gave_up.message


def test_timeout_before_a_job_id_says_so() -> None:
    gave_up = from_resource(resource(done=False, job=None), gave_up_after=5)
    assert "the provider has not given a job id yet" in gave_up.message


def test_to_dict_has_the_tool_fields() -> None:
    fields = from_resource(resource(done=False)).to_dict()
    for key in ("status", "operation_id", "job_id", "done", "message", "result_ref", "counts"):
        assert key in fields


# ------------------------------------------------------------------ error paths


def test_refused_submit_is_failed_and_not_retried() -> None:
    refused = ApiProblem(422, {"type": "urn:jobwarden:problem:invalid-request", "detail": "bad"})
    result, client, time = run([refused], [])
    assert result.status == "failed" and result.operation_id is None
    assert result.message == "The job was NOT started: the request was refused (bad)."
    assert len(client.references) == 1 and time.sleeps == []


def test_unanswered_submit_is_retried_with_the_same_reference() -> None:
    done = resource(done=True, outcome="succeeded", message="Finished successfully.")
    result, client, time = run(
        [ApiUnreachable("reset"), ApiProblem(503, {"detail": "busy"}), resource(done=False)],
        [done],
    )
    assert result.status == "succeeded"
    assert len(set(client.references)) == 1 and client.references[0] is not None
    assert time.sleeps == [1.0, 1.5]


def test_submit_that_never_answers_times_out_with_the_reference() -> None:
    failures = [ApiUnreachable("refused")] * 50
    result, _, time = run(failures, [], max_wait=10, client_reference="mine")
    assert result.status == "timed_out" and result.operation_id is None
    assert result.client_reference == "mine" and "client_reference 'mine'" in result.message
    assert sum(time.sleeps) <= 10


def test_lost_contact_while_waiting_times_out_with_ids() -> None:
    result, _, time = run([resource(done=False)], [ApiUnreachable("reset")] * 50, max_wait=20)
    assert result.status == "timed_out"
    assert (result.operation_id, result.job_id) == ("op_1", "job_1")
    assert result.message.startswith("Lost contact with jobwarden")
    assert time.sleeps[0] == 2  # the server's poll_after_seconds
    assert sum(time.sleeps) <= 20


def test_revoked_token_while_waiting_times_out_at_once() -> None:
    revoked = ApiProblem(401, {"type": "urn:jobwarden:problem:unauthenticated", "detail": "no"})
    result, _, time = run([resource(done=False)], [revoked])
    assert result.status == "timed_out" and result.operation_id == "op_1"
    assert time.sleeps == []


def test_still_running_at_max_wait_times_out() -> None:
    result, _, _ = run([resource(done=False)], [resource(done=False)] * 5, max_wait=30)
    assert result.status == "timed_out" and result.job_id == "job_1"


def test_an_unrecorded_claim_forbids_acting() -> None:
    done = resource(done=True, outcome="succeeded", message="Finished successfully.")
    result, client, _ = run([done], [], consumer="next-step")
    assert result.status == "succeeded" and result.claimed is None
    assert "do not act on this result yet" in result.message and client.claims == 1


def test_an_unknown_operation_is_not_found_never_failed() -> None:
    missing = ApiProblem(404, {"type": "urn:jobwarden:problem:not-found", "detail": "no such"})
    result = agent_tools.read_failed("op_9", missing)
    assert (result.status, result.done, result.operation_id) == ("not_found", False, "op_9")
    assert "Do NOT start a new job" in result.message and result.error == {
        "code": "not_found",
        "message": "no such",
    }
    unreachable = agent_tools.read_failed("op_9", ApiUnreachable("reset"))
    assert unreachable.status == "unknown" and not unreachable.done


# ------------------------------------------------------------------ the MCP view


def test_the_output_schema_is_exactly_the_mcp_view() -> None:
    done = resource(
        done=True,
        outcome="completed_with_errors",
        response={"result": {"n": 1}, "summary": {"total": 2, "succeeded": 1, "failed": 1}},
    )
    for result in (from_resource(done), from_resource(resource(done=False))):
        payload = view.structured(result)
        assert list(payload) == list(TOOL_RESULT_SCHEMA["properties"])
        jsonschema.validate(payload, TOOL_RESULT_SCHEMA)
    for status in agent_tools.STATUSES:
        shaped = view.structured(replace(from_resource(done), status=status))
        jsonschema.validate(shaped, TOOL_RESULT_SCHEMA)


def test_results_are_resource_uris_not_server_paths() -> None:
    response: dict[str, Any] = {
        "result": {"n": 1},
        "result_ref": "file:/var/lib/jobwarden/results/ab/abcd",
        "summary": {"total": 2, "succeeded": 1, "failed": 1},
        "errors_ref": "/v1/operations/op_1/failed-items",
    }
    answer = view.tool_result(
        from_resource(resource(done=True, outcome="succeeded", response=response))
    )
    payload = answer.structured_content
    assert payload is not None
    assert payload["result_uri"] == "jobwarden://operations/op_1/result"
    assert payload["failed_items_uri"] == "jobwarden://operations/op_1/failed-items"
    assert "file:" not in json.dumps(payload)
    link = answer.content[1]
    assert isinstance(link, types.ResourceLink) and link.uri == payload["result_uri"]
    running = view.structured(from_resource(resource(done=False)))
    assert running["result_uri"] is None


@pytest.mark.parametrize(
    ("done", "outcome", "task_status"),
    [
        (False, None, "working"),
        (True, "succeeded", "completed"),
        (True, "completed_with_errors", "completed"),
        (True, "failed", "failed"),
        (True, "cancelled", "cancelled"),
        (True, "timed_out", "working"),  # the remote job may still run: never failed
        (True, "needs_attention", "working"),  # an operator decides: never failed
        (True, "something_new", "working"),  # an unknown outcome is never terminal
    ],
)
def test_task_status_of_an_operation(done: bool, outcome: str | None, task_status: str) -> None:
    operation = resource(done=done, outcome=outcome)
    operation["metadata"].update(created_at="2026-01-01T00:00:00+00:00", updated_at="x")
    assert tasks.task_status(operation) == task_status
    task = tasks.task_of(operation)
    assert (task.task_id, task.status, task.poll_interval) == ("op_1", task_status, 2000)
    assert tasks.wire(task)["ttl"] is None  # required on the wire, even when unlimited


def test_annotations_state_every_hint_for_every_tool() -> None:
    for spec in TOOLS:
        hints = spec.definition("2025-11-25").annotations
        assert hints is not None
        values = (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        )
        assert all(isinstance(v, bool) for v in values), spec.name
        assert spec.definition("2025-06-18").execution is None  # tasks are 2025-11-25 only


# ------------------------------------------------------------------ event stream


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_server_sent_events_are_parsed_in_order() -> None:
    stream = _lines(
        ": keep-alive",
        "",
        "event: transition",
        "id: 3",
        'data: {"to_state": "observing"}',
        "",
        "event: end",
        'data: {"done": true}',
        "",
    )
    events = [e async for e in _sse_events(stream)]
    assert [(e.name, e.event_id, e.data) for e in events] == [
        ("transition", 3, {"to_state": "observing"}),
        ("end", None, {"done": True}),
    ]


async def test_an_error_event_is_a_problem_not_an_end() -> None:
    stream = _lines("event: error", 'data: {"status": 503, "title": "down"}', "")
    with pytest.raises(ApiProblem) as problem:
        [e async for e in _sse_events(stream)]
    assert problem.value.status == 503


def test_progress_messages_name_the_move_and_its_cause() -> None:
    moved = {"from_state": "accepted", "to_state": "observing", "cause": "status read: running"}
    assert progress_message(moved) == "accepted -> observing: status read: running"
    assert progress_message({"from_state": None, "to_state": "create_pending"}) == (
        "recorded -> create_pending"
    )


# ------------------------------------------------------------------ in-process transport


async def test_the_in_process_transport_streams_and_cancels_the_app() -> None:
    sent_first = asyncio.Event()
    app_ended = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"one\n", "more_body": True})
            sent_first.set()
            await asyncio.Event().wait()  # an event stream that never ends by itself
        finally:
            app_ended.set()

    async with httpx.AsyncClient(transport=InProcessTransport(app), base_url="http://x") as client:
        async with client.stream("GET", "/events") as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "one"  # before the app has finished
        async with asyncio.timeout(5):
            await app_ended.wait()  # closing the response ended the app
    assert sent_first.is_set()


async def test_the_in_process_transport_passes_the_request_through() -> None:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["path"], seen["query"] = scope["path"], scope["query_string"]
        seen["auth"] = dict(scope["headers"]).get(b"authorization")
        seen["body"] = (await receive())["body"]
        await send({"type": "http.response.start", "status": 202, "headers": [(b"x-a", b"1")]})
        await send({"type": "http.response.body", "body": b'{"ok": true}'})

    transport = InProcessTransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        answer = await client.post(
            "/v1/operations?x=1", json={"a": 1}, headers={"Authorization": "Bearer t"}
        )
    assert (answer.status_code, answer.json(), answer.headers["x-a"]) == (202, {"ok": True}, "1")
    assert seen == {
        "path": "/v1/operations",
        "query": b"x=1",
        "auth": b"Bearer t",
        "body": b'{"a":1}',
    }


def test_a_cancelled_jobs_partial_output_reaches_the_tool_caller() -> None:
    """The message says result_ref holds the partial output (migration 036): the
    wrapper read `response` alone, and handed back none."""
    partial = {"result_ref": "file:/p", "result": [1, 2], "summary": {"total": 2}}
    result = from_resource(resource(done=True, outcome="cancelled", partial_output=partial))
    assert result.status == "cancelled"
    assert (result.result_ref, result.result) == ("file:/p", [1, 2])


class _CancelClient:
    """What the API answered a cancel, handed to the tool as its client would."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    def cancel(self, operation_id: str, reason: str) -> dict[str, Any]:
        return self.answer


@pytest.mark.parametrize("recorded", [False, True], ids=["not_recorded", "recorded"])
def test_a_cancel_of_an_escalated_operation_tells_the_agent_what_became_of_it(
    recorded: bool,
) -> None:
    """An escalated operation reads as done (needs a human): the cancel's own words
    were dropped for the operation's, so an agent never learned that its cancel was
    NOT recorded (an earlier intent stands), nor that it waits for an operator."""
    said = (
        "NOT recorded: an earlier cancellation intent stands"
        if recorded is False
        else ("Cancellation intent recorded, NOT acted on yet")
    )
    answer = resource(
        done=True,
        outcome="needs_attention",
        message="Waiting for an operator.",
        cancel={"state": "needs_attention", "recorded": recorded, "message": said},
    )
    result = agent_tools.cancel(_CancelClient(answer), "op_1", "stop")  # type: ignore[arg-type]
    assert result.needs_human and result.done
    assert said in result.message
    assert "NOT finished from your point of view" in result.message


def test_a_cancel_of_a_finished_operation_reads_as_its_end() -> None:
    answer = resource(
        done=True,
        outcome="succeeded",
        message="Succeeded.",
        cancel={"state": "succeeded", "recorded": False, "message": "Nothing to cancel"},
    )
    result = agent_tools.cancel(_CancelClient(answer), "op_1", "stop")  # type: ignore[arg-type]
    assert result.status == "succeeded" and result.message == "Succeeded."


def test_a_failed_jobs_kept_failures_reach_the_tool_caller() -> None:
    """A job failed item by item whose failures were read and kept
    (`result.failures_only`: Klaviyo's import, every profile failed): the view's
    errors_ref names them, but the operation resource showed `partial_output` only
    for a cancelled job's result_ref, so GET /v1/operations/{id} and the tools
    (MCP's failed_items_uri) pointed the agent at nothing but "2 failed"."""
    from receiver.api.resources import operation_resource

    op_id = "op_1"
    row: dict[str, Any] = {
        "operation_id": op_id,
        "provider": "klaviyo_imports",
        "kind": "default",
        "client_reference": "ref-1",
        "requested_by": "agent",
        "state": "failed",
        "remote_state": "failed",
        "remote_job_id": "job_1",
        "outcome": "failed",
        "final": True,
        "message": "FAILED: 0 succeeded, 2 failed",
        "poll_after_seconds": None,
        "progress_completed": None,
        "progress_total": None,
        "progress_percent": None,
        "cancel_requested_at": None,
        "result_deadline": None,
        "created_at": None,
        "updated_at": None,
        "finished_at": None,
        "done": True,
        "result_ref": None,  # the view shows a result_ref for succeeded or cancelled alone
        "result": None,
        "items_total": 2,
        "items_succeeded": 0,
        "items_failed": 2,
        "errors_ref": f"/v1/operations/{op_id}/failed-items",
        "error": {"code": "failed", "message": "0 succeeded, 2 failed"},
    }
    answered = operation_resource(row)
    assert "response" not in answered and answered["error"] is not None
    assert answered["partial_output"]["errors_ref"] == row["errors_ref"], answered
    result = from_resource(answered)
    assert result.status == "failed" and result.errors_ref == row["errors_ref"]
    assert result.counts == {"total": 2, "succeeded": 0, "failed": 2}
    assert view.structured(result)["failed_items_uri"] == view.failed_items_uri(op_id)
    # a failed job with nothing kept shows no partial output, as before
    bare = operation_resource({**row, "errors_ref": None, "items_total": None})
    assert "partial_output" not in bare


def test_a_failed_jobs_failed_items_uri_is_readable() -> None:
    """The failed_items_uri a failed job's kept failures are given (its
    `partial_output.errors_ref`) reads them: the resource read looked for
    errors_ref under `response` alone, a success's, and answered "has no failed
    items" for the very URI the tool had just handed the agent."""
    from typing import cast

    from shared.agents.client import AsyncJobwardenClient
    from shared.agents.mcp.resources import read_resource

    op_id = "op_" + "0" * 26
    errors_ref = f"/v1/operations/{op_id}/failed-items"
    operation = resource(
        done=True,
        outcome="failed",
        error={"code": "failed", "message": "0 succeeded, 2 failed"},
        partial_output={"result_ref": None, "summary": {"failed": 2}, "errors_ref": errors_ref},
    )
    page = {"items_failed": 2, "items_total": 2, "items": [{"item_key": "a"}, {"item_key": "b"}]}

    class _Client:
        async def get(self, operation_id: str) -> dict[str, Any]:
            return operation

        async def failed_items(self, operation_id: str, **_: Any) -> dict[str, Any]:
            return page

    client = cast(AsyncJobwardenClient, _Client())
    read = asyncio.run(read_resource(client, view.failed_items_uri(op_id)))
    body = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    assert [i["item_key"] for i in body["items"]] == ["a", "b"], body
