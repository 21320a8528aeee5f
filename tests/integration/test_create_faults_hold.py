"""Create answers a demanding user would try, each of which already holds.

One operation, an idempotent provider (token in a header) with a lookup by our
reference, the real reconciler. Whatever the create got — the connection reset
after the body left, an answer cut after a readable job id, a redirect to
another host, a login page, a 201 naming its job only in Location, a 202 with
an empty body, a 409 "in progress" — the record holds: one job at most without
a human told, no job id invented (a cut answer's partial id, a redirect's
Location), every resend with the same token, nothing sent where a redirect
pointed, and the agent never told the job is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.harness import TestClock
from reconciler.worker import Reconciler
from shared import ledger
from shared.ledger import RequestSpec
from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.rig import load, preset_rig
from tests.fixtures_providers.shapes import PLAIN_JOBS
from tests.harness import reconciler_context
from tests.integration.test_transport_review import plain, serve

S = LocalState
Answer = Callable[["Provider", Request], Awaitable[Response]]

DESCRIBED = PLAIN_JOBS


async def agent_view(pool: Any, op_id: str) -> Any:
    return await pool.fetchrow(
        "SELECT done, outcome, message FROM operations_overview WHERE operation_id = $1", op_id
    )


async def history(pool: Any, op_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
    )
    return [r[0] for r in rows]


# ------------------------------------------------------------ transport faults


async def _reset(w: asyncio.StreamWriter) -> None:
    """The request body was read whole; the connection is reset (RST), no answer."""
    w.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
    )
    w.transport.abort()


async def _cut(w: asyncio.StreamWriter) -> None:
    """A 201 whose body stops after a readable job id, short of its Content-Length."""
    w.write(b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n" + b'{"id": "j9"}')
    await w.drain()


async def _stalled(w: asyncio.StreamWriter) -> None:
    """A 201's head, then the body never comes (past the request timeout)."""
    w.write(b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
    await w.drain()
    await asyncio.Event().wait()  # cancelled when the provider stops


@pytest.mark.parametrize("fault", [_reset, _cut, _stalled], ids=["reset", "cut", "stalled"])
async def test_a_create_left_without_its_answer_is_retried_with_its_token_and_cross_checked(
    fault: Callable[[asyncio.StreamWriter], Awaitable[None]],
    pool: Any,
    tmp_path: Path,
    clock: TestClock,
) -> None:
    tokens: list[str] = []
    creates = 0

    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        nonlocal creates
        if method == "POST":
            creates += 1
            if creates == 1:
                await fault(w)
                return False
            w.write(plain(201, {"id": "j1"}))
        elif target.startswith("/v1/jobs?"):
            ref = target.partition("ref=")[2]
            w.write(plain(200, {"jobs": [{"ref": ref, "id": "j1"}]}))
        else:
            w.write(plain(200, {"id": "j1", "status": "done"}))
        return True

    async with serve(handler) as provider:
        providers = load("faulty", None, provider.url, {}, DESCRIBED)
        async with reconciler_context(pool, tmp_path, providers, clock=clock) as ctx:
            reconciler = Reconciler(ctx)
            sub = await ledger.submit_operation(
                pool,
                provider="faulty",
                kind="batch",
                request=RequestSpec("POST", "/v1/jobs", {"x": 1}),
                requested_by="agent:test",
                create_deadline_s=600,
                result_deadline_s=600,
            )
            op_id = sub.operation_id
            await reconciler.run_once()
            assert await history(pool, op_id) == ["create_pending", "create_unknown"]
            view = await agent_view(pool, op_id)
            assert not view["done"] and view["outcome"] is None, view
            for _ in range(8):
                await clock.advance(3.0)
                await reconciler.run_once()
            op = await ledger.load_operation(pool, op_id)
            assert op.state is S.SUCCEEDED, await history(pool, op_id)
            assert op.remote_job_id == "j1" and creates == 2
            calls = await pool.fetch(
                "SELECT call_kind, remote_job_id, idempotency_token FROM provider_calls"
                " WHERE operation_id = $1 ORDER BY call_id",
                op_id,
            )
            kinds = [c["call_kind"] for c in calls]
            assert kinds[:3] == ["create", "create", "lookup"], kinds  # cross-checked
            assert calls[0]["remote_job_id"] is None  # the cut answer's "j9" never taken
            tokens = [c["idempotency_token"] for c in calls if c["call_kind"] == "create"]
            assert tokens == [op.idempotency_token] * 2


# ------------------------------------------------------------ answers of odd shapes


class Provider:
    """Creates answered from a script (the last repeats), each create's token kept;
    the lookup lists `listed` for any reference; every job read is done."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.tokens: list[str | None] = []
        self.listed: list[str] = []
        self.reads = 0

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/jobs", self.create, methods=["POST"]),
                Route("/v1/jobs", self.lookup, methods=["GET"]),
                Route("/v1/jobs/{job_id}", self.read, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        answer = self.answers[min(len(self.tokens), len(self.answers) - 1)]
        self.tokens.append(request.headers.get("idempotency-key"))
        return await answer(self, request)

    async def lookup(self, request: Request) -> Response:
        ref = request.query_params.get("ref")
        return JSONResponse({"jobs": [{"ref": ref, "id": j} for j in self.listed]})

    async def read(self, request: Request) -> Response:
        self.reads += 1
        return JSONResponse({"id": request.path_params["job_id"], "status": "done"})


def said(status: int, body: bytes = b"", media: str = "application/json", **headers: str) -> Answer:
    async def respond(_p: Provider, _r: Request) -> Response:
        return Response(body, status_code=status, media_type=media, headers=headers)

    return respond


def created(job_id: str, *, listed: tuple[str, ...] | None = None) -> Answer:
    """A 201 naming `job_id`; the provider then lists `listed` (default: that job)."""

    async def respond(p: Provider, _r: Request) -> Response:
        p.listed = list(listed if listed is not None else (job_id,))
        return JSONResponse({"id": job_id}, status_code=201)

    return respond


class Elsewhere:
    """Where a redirect points: it must never be sent anything."""

    def __init__(self) -> None:
        self.hits = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.hits += 1
        await Response(b"{}", status_code=201)(scope, receive, send)


@contextlib.asynccontextmanager
async def elsewhere() -> AsyncIterator[tuple[Elsewhere, str]]:
    target = Elsewhere()
    async with serve_app(target) as url:
        yield target, url


NO_JOB_NAMED: dict[str, Callable[[str], Answer]] = {
    "307_to_another_host": lambda there: said(307, location=f"{there}/v1/jobs"),
    "308": lambda there: said(308, location=f"{there}/v2/jobs"),
    "303_to_the_job": lambda there: said(303, location=f"{there}/v1/jobs/j1"),
    "200_login_page": lambda _: said(200, b"<html><form>Sign in</form></html>", "text/html"),
    "201_location_only": lambda there: said(201, location=f"{there}/v1/jobs/j1"),
    "202_empty_retry_after": lambda _: said(202, retry_after="5"),
    "201_id_null": lambda _: said(201, b'{"id": null}'),
    "201_id_empty": lambda _: said(201, b'{"id": ""}'),
}


@pytest.mark.parametrize("shape", sorted(NO_JOB_NAMED))
async def test_a_create_answer_naming_no_job_is_followed_nowhere_and_ends_with_a_human(
    shape: str, pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with elsewhere() as (target, there):
        p = Provider([NO_JOB_NAMED[shape](there)])
        async with preset_rig(
            pool, tmp_path, p.app(), preset=None, name="odd", env={},
            overrides=DESCRIBED, clock=clock,
        ) as r:  # fmt: skip
            op_id = await r.submit({"x": 1}, create_deadline_s=60)
            for _ in range(4):
                await r.reconciler.run_once()
                await clock.advance(6.0)
            assert await r.state(op_id) is S.CREATE_UNKNOWN, await r.history(op_id)
            view = await agent_view(pool, op_id)
            assert not view["done"] and "Do not report success" in view["message"], view
            await clock.advance(60.0)
            assert await r.settle(op_id, {S.NEEDS_ATTENTION}) is S.NEEDS_ATTENTION
            op = await r.op(op_id)
            assert op.remote_job_id is None and p.reads == 0 and target.hits == 0
            assert len(p.tokens) >= 2 and set(p.tokens) == {op.idempotency_token}
            code = shape.partition("_")[0]
            reason = (await r.escalation(op_id))["reason"]
            assert f"the last create got HTTP {code}" in reason, reason


async def test_a_409_in_progress_then_the_job_is_taken_and_cross_checked(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Stripe's "a request with this key is in progress" (409) twice, then 201."""
    busy = b'{"error": {"type": "idempotency_error", "message": "request in progress"}}'
    p = Provider([said(409, busy), said(409, busy), created("j1")])
    async with preset_rig(
        pool, tmp_path, p.app(), preset=None, name="odd", env={},
        overrides=DESCRIBED, clock=clock,
    ) as r:  # fmt: skip
        op_id = await r.submit({"x": 1})
        for _ in range(10):
            await r.reconciler.run_once()
            await clock.advance(3.0)
        assert await r.state(op_id) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == "j1"
        assert len(p.tokens) == 3 and len(set(p.tokens)) == 1
        assert len(await r.calls(op_id, "lookup")) >= 1  # the retried create cross-checked


async def test_a_retry_answered_with_a_job_the_lookup_does_not_list_goes_to_a_human(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The first create got a 502 (its job j1 made all the same); the same-token
    retry answered j2, and the lookup lists only j1: two jobs may run, a human
    hears of both, and neither is read."""
    p = Provider([said(502, b"bad gateway"), created("j2", listed=("j1",))])
    async with preset_rig(
        pool, tmp_path, p.app(), preset=None, name="odd", env={},
        overrides=DESCRIBED, clock=clock,
    ) as r:  # fmt: skip
        op_id = await r.submit({"x": 1})
        for _ in range(6):
            await r.reconciler.run_once()
            await clock.advance(3.0)
        assert await r.state(op_id) is S.NEEDS_ATTENTION, await r.history(op_id)
        esc = await r.escalation(op_id)
        assert "also holds j1" in esc["reason"], esc["reason"]
        assert sorted(esc["details"]["remote_job_ids"]) == ["j1", "j2"]
        assert p.reads == 0
        view = await agent_view(pool, op_id)
        assert view["outcome"] == "needs_attention", view
