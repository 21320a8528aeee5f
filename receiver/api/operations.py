"""The agent API: `/v1/operations`, token-authenticated, AIP-151 shaped.

Every answer is read back from the `agent_operations` view after the write it
follows, so the API can never describe an operation differently from what an
agent reading the view would see. Waiting (long-poll and SSE) is woken by the
database's NOTIFY through one shared listener; nothing here talks to a
provider.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, BinaryIO, TypeVar

import asyncpg
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from receiver.api import bodies, params
from receiver.api.auth import Caller, authenticate, still_live
from receiver.api.openapi import openapi_document
from receiver.api.params import shown
from receiver.api.problems import (
    ApiJSONResponse,
    Problem,
    archived,
    invalid,
    json_default,
    malformed_id,
    no_result_file,
    not_found,
    result_not_here,
    too_many_waits,
    unavailable,
)
from receiver.api.resources import API_PREFIX, operation_resource, transition_event
from receiver.api.waiting import TooManyWaits, TransitionHub, WaitSlots
from receiver.moves import traced_moves
from shared import ledger
from shared.db import pooled
from shared.db.errors import DATABASE_UNREACHABLE, db_error_reason
from shared.db.migrate import pending_migrations
from shared.db.queries import q
from shared.ids import is_operation_id, trace_id_from_traceparent
from shared.ledger import receipts
from shared.ledger.errors import LedgerError, RequestMismatch, StaleTransition
from shared.ledger.log import LogCorrupt
from shared.ledger.states import TERMINAL, LocalState
from shared.result_store import ResultStore
from shared.settings import Settings
from shared.telemetry import spans
from shared.tlog import ProofError

log = logging.getLogger(__name__)

# A waiter re-reads the database at least this often even without a
# notification: it bounds the staleness if the listener connection was lost
# and re-established between a transition and its NOTIFY.
FALLBACK_REREAD_SECONDS = 15.0
# SSE comment lines keep idle proxies from closing the stream (most cut idle
# connections after 30-60 s) and reveal a vanished client.
SSE_KEEPALIVE_SECONDS = 15.0
# A cancel races the reconciler's own transitions; each retry re-reads the
# state, and three lost races in a row would mean something else is wrong.
CANCEL_ATTEMPTS = 3
# URL characters an `instance` keeps as they are; anything else is %-encoded,
# so a hostile path is never echoed raw.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_CANCEL_PENDING = frozenset({LocalState.CANCEL_REQUESTED, LocalState.CANCELLING})
# What a long-poll whose client went away "answers": nobody reads it (uvicorn
# drops a response to a closed connection); nginx's code for "client closed
# request", so a log that does record it says what happened.
CLIENT_CLOSED_REQUEST = 499
# What a statement meets when the schema is older than this code: a newer
# receiver deployed before `jobwarden migrate` ran (a column, table or function
# it uses missing, or a grant a later migration gives).
SCHEMA_BEHIND = (
    asyncpg.UndefinedTableError,
    asyncpg.UndefinedColumnError,
    asyncpg.UndefinedFunctionError,
    asyncpg.InsufficientPrivilegeError,
)
T = TypeVar("T")

Handler = Callable[[Request], Awaitable[Response]]
SchemaCheck = Callable[[], Awaitable[bool]]
# What a lost or unreachable database looks like from here (TimeoutError, a
# pool acquire that gave up, is an OSError).


def _problem_edge(handler: Handler, migrations_pending: SchemaCheck) -> Handler:
    """Render every failure as problem+json; never leak a traceback or a secret.

    A statement the schema cannot run while migrations are pending is the
    upgrade window, not a crash: 503 with Retry-After, so an agent retries
    rather than giving up on a cancel (`/readyz` says `migrations_pending`
    meanwhile). With nothing pending it is a real fault: 500, logged.
    """

    name = getattr(handler, "__name__", "handler")

    async def endpoint(request: Request) -> Response:
        instance = _instance(request)
        try:
            return await handler(request)
        except Problem as problem:
            return problem.response(instance=instance)
        except LedgerError as exc:  # the state machine refused: say so, it is not a crash
            refused = Problem(409, "conflict", "Refused by the ledger", str(exc))
            return refused.response(instance=instance)
        except DATABASE_UNREACHABLE as exc:
            # One line: every request says it while the database is down.
            log.warning("database unavailable during %s (%s)", name, db_error_reason(exc))
            down = unavailable("The database is unavailable; retry shortly.")
            return down.response(instance=instance)
        except asyncpg.DataError as exc:
            # A value PostgreSQL refused that the parsers here let through: a
            # caller's mistake, but also a gap in bodies/params to close. The
            # log names the SQLSTATE only, never the value.
            log.warning("PostgreSQL refused a value in %s (SQLSTATE %s)", name, exc.sqlstate)
            refused = invalid("a value in this request cannot be stored (refused by PostgreSQL)")
            return refused.response(instance=instance)
        except SCHEMA_BEHIND as exc:
            if not await migrations_pending():
                log.exception("unexpected error in %s %s", request.method, name)
                return _crash().response(instance=instance)
            log.warning(
                "%s refused by a schema older than this receiver (SQLSTATE %s): "
                "run `jobwarden migrate`",
                name,
                exc.sqlstate,
            )
            behind = unavailable("The database is being upgraded; retry shortly.")
            return behind.response(instance=instance)
        except Exception:
            log.exception("unexpected error in %s %s", request.method, name)
            return _crash().response(instance=instance)

    return endpoint


def _crash() -> Problem:
    return Problem(500, "internal", "Internal error", "Unexpected server error; it was logged.")


def _instance(request: Request) -> str:
    """The problem's `instance`: the path, %-encoded so nothing hostile is echoed raw."""
    return urllib.parse.quote(request.url.path, safe=_PATH_SAFE)


def _operation_id(request: Request) -> str:
    operation_id = str(request.path_params["operation_id"])
    if not is_operation_id(operation_id):
        raise malformed_id()
    return operation_id


def _states(values: list[str]) -> list[str]:
    """The `state` filter: repeatable and comma-separated, every name a LocalState."""
    states = [s for value in values for s in value.split(",") if s]
    unknown = sorted(shown(s) for s in set(states) - {s.value for s in LocalState})
    if unknown:
        raise invalid(f"state: unknown state(s): {', '.join(unknown)}", status=400)
    return states


def _resume_after(request: Request) -> int:
    """Where an event stream resumes: Last-Event-ID (a reconnect) wins over `after`.

    Both are checked, so a malformed one is refused even when the other wins.
    """
    after = params.AFTER.parse(request.query_params)
    header = request.headers.get(params.LAST_EVENT_ID.name)
    return params.LAST_EVENT_ID.parse_text(header) if header else after


def _sse(event: str, data: Mapping[str, Any], event_id: int | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, default=json_default, ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


async def _until_disconnect(receive: Receive) -> None:
    """Return when the ASGI server says the client went away."""
    while (await receive())["type"] != "http.disconnect":
        pass


class _HeldStream(StreamingResponse):
    """A streaming response that gives back what it holds however it ends
    (done, the client gone, an error): Starlette awaits every response it
    sends, so this `finally` runs where the body's generator may never start."""

    def __init__(self, release: Callable[[], None], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def unless_disconnected(receive: Receive, work: Coroutine[Any, Any, T]) -> T | None:
    """`work`'s result, or None as soon as the client disconnects (then `work` is cancelled).

    As Starlette's StreamingResponse does, the request's `receive` is watched
    while the handler works: a client that closed its connection sends
    `http.disconnect`, and nothing is left running on its behalf.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_until_disconnect(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        task.cancel()  # a no-op when it has finished
        await asyncio.wait({task, gone})
    if not gone.cancelled():
        gone.exception()  # a receive that failed also means the client is gone
    if task.cancelled():
        return None
    return task.result()


def cancel_message(state: LocalState, recorded: bool = True, intent_at: Any = None) -> str:
    """What a cancel request achieved, in words that cannot be read as 'cancelled'.

    `recorded`: whether this request's intent is the one on record. An
    escalated operation with an earlier intent keeps it (`ledger.cancel_intent`),
    and "intent recorded" claimed a record that was never made: the caller's
    reason was kept nowhere. The CLI and the console name the intent that
    stands; so does this answer (its time only: the intent may be another
    caller's, whose name this token may not see).
    """
    if state in _CANCEL_PENDING:
        return (
            "Cancellation requested, NOT yet confirmed by the provider. The job may still "
            "finish or fail; wait for done=true before reporting anything."
        )
    if state is LocalState.ABANDONED:
        return "The request had not been sent to the provider yet: nothing was started."
    if state is LocalState.RESULT_COLLECTING:
        return (
            "Too late to cancel: the provider reports the job finished and its result is "
            "being collected. Wait for done=true."
        )
    if state in TERMINAL:
        return f"Nothing to cancel: the operation had already finished ({state.value})."
    if not recorded:
        since = f" (recorded at {intent_at:%Y-%m-%dT%H:%M:%SZ})" if intent_at is not None else ""
        return (
            f"NOT recorded: an earlier cancellation intent{since} stands; the operation "
            f"stays {state.value}, waits for an operator, who sees that intent and decides, "
            "and nothing was done. If the operator resumes the operation instead, ask "
            "again: a later cancel request is then sent."
        )
    return (
        f"Cancellation intent recorded, NOT acted on yet: the operation is {state.value} and "
        "waits for an operator, who sees the request and decides. If the operator resumes "
        "the operation instead, ask again: a later cancel request is then sent."
    )


class OperationsApi:
    def __init__(self, settings: Settings, pool: Any) -> None:
        self.settings = settings
        self.pool = pool
        self.hub = TransitionHub(pool, acquire_timeout=settings.db_acquire_timeout)
        self.wait_slots = WaitSlots(params.MAX_WAITS_PER_CALLER)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        try:
            conn = await self.pool.acquire(timeout=self.settings.db_acquire_timeout)
        except DATABASE_UNREACHABLE as exc:
            log.warning("no database connection for the agent API (%s)", db_error_reason(exc))
            raise unavailable("The database is busy or unavailable; retry shortly.") from None
        try:
            yield conn
        finally:
            await pooled.release(self.pool, conn)

    async def _body(self, request: Request) -> Any:
        return await bodies.read_json(request, self.settings.max_body_bytes)

    async def migrations_pending(self) -> bool:
        """Is the schema behind this code? False when that cannot be told (then a
        refused statement stays a 500: nothing says it is the upgrade window)."""
        try:
            async with self.connection() as conn:
                return bool(await pending_migrations(conn))
        except Exception:  # a diagnosis only: it must never turn the 500 into a crash
            log.warning("could not tell whether migrations are pending", exc_info=True)
            return False

    async def caller(self, request: Request) -> Caller:
        async with self.connection() as conn:
            return await authenticate(conn, request)

    async def visible(self, conn: Any, operation_id: str, caller: Caller) -> Any:
        row = await conn.fetchrow(q("api_operation"), operation_id, caller.owner_filter)
        if row is None:
            raise not_found(operation_id)
        return row

    async def read(self, operation_id: str, caller: Caller) -> Any:
        async with self.connection() as conn:
            return await self.visible(conn, operation_id, caller)

    async def reread(self, operation_id: str, caller: Caller) -> Any:
        """A long-poll's read: its token checked again first (revoked since it began?)."""
        async with self.connection() as conn:
            await still_live(conn, caller)
            return await self.visible(conn, operation_id, caller)

    # ------------------------------------------------------------------ routes

    async def submit(self, request: Request) -> Response:
        started = spans.clock()  # 0 unless tracing is on
        caller = await self.caller(request)
        raw = await self._body(request)
        spec = bodies.parse_submit(raw, self.settings.providers)
        desc = self.settings.providers[spec.provider]
        # One transaction: a read failing after the insert undoes it, so a 503
        # never hides an operation that was made (a retry without a
        # client_reference would make a second one).
        async with self.connection() as conn, conn.transaction():
            try:
                submitted = await ledger.submit_operation(
                    conn,
                    provider=spec.provider,
                    kind=spec.kind,
                    request=spec.request,
                    requested_by=caller.requested_by,
                    client_reference=spec.client_reference,
                    approval_ref=spec.approval_ref,
                    idempotency_mode=desc.create.idempotency.value,
                    create_deadline_s=spec.create_deadline_s,
                    result_deadline_s=spec.result_deadline_s,
                    given_deadlines=spec.given_deadlines,
                    trace_id=trace_id_from_traceparent(request.headers.get("traceparent")),
                )
            except RequestMismatch as exc:
                raise Problem(
                    409, "request-mismatch", "Different request for the same reference", str(exc)
                ) from None
            except asyncpg.CheckViolationError as exc:
                raise invalid(f"refused by the ledger: {exc.constraint_name}") from None
            row = await self.visible(conn, submitted.operation_id, caller)
        resource = operation_resource(row)
        resource["replayed"] = not submitted.created
        location = f"{API_PREFIX}/{submitted.operation_id}"
        spans.submitted(
            started,
            incoming=request.headers.get("traceparent"),
            trace_id=submitted.trace_id,
            operation_id=submitted.operation_id,
            provider=spec.provider,
            kind=spec.kind,
            created=submitted.created,
            route=API_PREFIX,
            status=202,
        )
        return ApiJSONResponse(resource, status_code=202, headers={"Location": location})

    async def get(self, request: Request) -> Response:
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        return ApiJSONResponse(operation_resource(await self.read(operation_id, caller)))

    async def list_operations(self, request: Request) -> Response:
        caller = await self.caller(request)
        query = request.query_params
        mine = params.MINE.parse(query)
        owner = caller.requested_by if mine or not caller.is_operator else None
        page_size = params.LIST_PAGE_SIZE.parse(query)
        async with self.connection() as conn:
            rows = await conn.fetch(
                q("api_list_operations"),
                owner,
                _states(query.getlist("state")) or None,
                params.PROVIDER.parse(query),
                params.DONE.parse(query),
                params.FINAL.parse(query),
                params.PAGE_TOKEN.parse(query),
                page_size + 1,
            )
        page = rows[:page_size]
        body: dict[str, Any] = {"operations": [operation_resource(r) for r in page]}
        body["next_page_token"] = (
            params.encode_page_token(page[-1]["operation_id"]) if len(rows) > page_size else None
        )
        return ApiJSONResponse(body)

    async def wait(self, request: Request) -> Response:
        """The long-poll: ends when the operation is done, at max_wait, or when the
        client goes away (an abandoned wait must not hold a server slot)."""
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        max_wait = params.MAX_WAIT.parse(request.query_params)
        try:
            with self.wait_slots.hold(caller.token_id):
                row = await unless_disconnected(
                    request.receive, self._wait_until_done(operation_id, caller, max_wait)
                )
        except TooManyWaits:
            limit, retry = params.MAX_WAITS_PER_CALLER, params.WAIT_RETRY_AFTER_SECONDS
            raise too_many_waits(limit, retry) from None
        if row is None:
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        return ApiJSONResponse(operation_resource(row))

    async def _wait_until_done(self, operation_id: str, caller: Caller, max_wait: float) -> Any:
        """The operation's row once it is done or `max_wait` seconds have passed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        async with self.hub.subscribe(operation_id) as sub:
            while True:
                row = await self.reread(operation_id, caller)
                remaining = deadline - loop.time()
                if row["done"] or remaining <= 0:
                    return row
                await self.hub.ensure_listening()
                await sub.wait(min(remaining, FALLBACK_REREAD_SECONDS))

    async def events(self, request: Request) -> Response:
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        after = _resume_after(request)
        await self.read(operation_id, caller)  # 404 before the stream starts
        # A stream holds one of the caller's wait slots for as long as it is
        # open (hours, for a long job): uncapped, one token's streams filled
        # the server's connections as its abandoned long-polls once did.
        held = contextlib.ExitStack()
        try:
            held.enter_context(self.wait_slots.hold(caller.token_id))
        except TooManyWaits:
            limit, retry = params.MAX_WAITS_PER_CALLER, params.WAIT_RETRY_AFTER_SECONDS
            raise too_many_waits(limit, retry) from None
        return _HeldStream(
            held.close,
            self._event_stream(operation_id, caller, after),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _event_stream(
        self, operation_id: str, caller: Caller, after: int
    ) -> AsyncIterator[str]:
        """The SSE body.

        A database failure mid-stream ends it with an `error` event instead of
        a torn connection; the client resumes with Last-Event-ID.
        """
        try:
            async for chunk in self._transitions(operation_id, caller, after):
                yield chunk
        except Problem as problem:
            yield _sse("error", problem.body())
        except DATABASE_UNREACHABLE:
            log.warning("database lost during an event stream", exc_info=True)
            yield _sse("error", unavailable("The database is unavailable; resume shortly.").body())

    async def _transitions(
        self, operation_id: str, caller: Caller, after: int
    ) -> AsyncIterator[str]:
        """Every transition after `after`, in order; ends after a terminal state, or
        with a 401 `error` event once the caller's token is revoked."""
        last = after
        async with self.hub.subscribe(operation_id) as sub:
            while True:
                async with self.connection() as conn:
                    await still_live(conn, caller)
                    rows = await conn.fetch(q("api_history_after"), operation_id, last)
                    latest = (
                        rows[-1]["to_state"]
                        if rows
                        else await conn.fetchval(q("api_latest_state"), operation_id)
                    )
                    final = (
                        await conn.fetchrow(q("api_operation"), operation_id, None)
                        if latest in TERMINAL
                        else None
                    )
                for row in rows:
                    yield _sse("transition", transition_event(operation_id, row), row["seq"])
                    last = row["seq"]
                if final is not None:
                    yield _sse("end", operation_resource(final))
                    return
                await self.hub.ensure_listening()
                if not await sub.wait(SSE_KEEPALIVE_SECONDS):
                    yield ": keep-alive\n\n"

    async def cancel(self, request: Request) -> Response:
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        reason = bodies.parse_cancel(await self._body(request))
        async with self.connection() as conn:
            row = await self.visible(conn, operation_id, caller)
            deadline = self.settings.cancel_deadline_for(row["provider"])
            async with traced_moves(conn, operation_id, "cancel request", caller.requested_by):
                done = await self._request_cancel(conn, operation_id, caller, reason, deadline)
            row = await self.visible(conn, operation_id, caller)
        resource = operation_resource(row)
        state = done.state
        resource["cancel"] = {
            "state": state.value,
            "recorded": done.recorded,
            "message": cancel_message(state, done.recorded, row["cancel_requested_at"]),
        }
        return ApiJSONResponse(resource, status_code=202 if state in _CANCEL_PENDING else 200)

    async def _request_cancel(
        self, conn: Any, operation_id: str, caller: Caller, reason: str, deadline: float | None
    ) -> ledger.CancelRequest:
        for attempt in range(1, CANCEL_ATTEMPTS + 1):
            try:
                return await ledger.cancel_intent(
                    conn,
                    operation_id,
                    requested_by=caller.requested_by,
                    reason=reason,
                    cancel_deadline_s=deadline,
                )
            except StaleTransition:
                if attempt == CANCEL_ATTEMPTS:
                    raise Problem(
                        409,
                        "busy",
                        "Operation is changing",
                        "The operation changed state during the cancel three times; retry.",
                    ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def claim(self, request: Request) -> Response:
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        body = bodies.parse_claim(await self._body(request))
        consumer = body.consumer
        # One transaction: a read failing after the claim undoes it, so a 503
        # never hides a claim that was made (a lost COMMIT answer is what the
        # claim token is for).
        async with self.connection() as conn, conn.transaction():
            await self.visible(conn, operation_id, caller)
            claimed = await ledger.claim_completion(conn, operation_id, consumer, body.claim_token)
            row = await self.visible(conn, operation_id, caller)
        if claimed:
            reason, message = None, "Claimed: you are the only consumer to act on this completion."
        elif row["state"] == LocalState.SUCCEEDED:
            reason = "already_claimed"
            message = (
                f"Consumer {consumer!r} already claimed this completion earlier: "
                "do NOT act on it again."
            )
        else:
            reason = "not_succeeded"
            message = f"Nothing to claim: the operation has not succeeded (state {row['state']})."
        return ApiJSONResponse(
            {
                "operation_id": operation_id,
                "consumer": consumer,
                "claimed": claimed,
                "reason": reason,
                "message": message,
                "state": row["state"],
            }
        )

    async def failed_items(self, request: Request) -> Response:
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        query = request.query_params
        page_size = params.ITEMS_PAGE_SIZE.parse(query)
        after = params.PAGE_TOKEN.parse(query)
        async with self.connection() as conn:
            row = await self.visible(conn, operation_id, caller)
            items = await conn.fetch(q("api_failed_items"), operation_id, after, page_size + 1)
            moved = None if items else await conn.fetchval(q("api_failures_archive"), operation_id)
        if moved is not None:
            raise archived(operation_id, moved)
        page = items[:page_size]
        return ApiJSONResponse(
            {
                "operation_id": operation_id,
                "items_failed": row["items_failed"],
                "items_total": row["items_total"],
                "items": [dict(item) for item in page],
                "next_page_token": (
                    params.encode_page_token(page[-1]["item_key"])
                    if len(items) > page_size
                    else None
                ),
            }
        )

    async def result_file(self, request: Request) -> Response:
        """The stored result file, byte for byte, checked against its digest as it goes.

        Served only from this host's `results_dir`, found by the digest the
        database holds (never by the stored path: a row edited to name another
        file names nothing here). The answer carries `Repr-Digest` (RFC 9530)
        and `Content-Length`; bytes that no longer match the digest end the
        transfer short, so a damaged file never arrives looking whole.
        """
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        async with self.connection() as conn:
            await self.visible(conn, operation_id, caller)
            stored = await conn.fetchrow(q("api_result_file"), operation_id)
        if stored is None:
            raise no_result_file(operation_id)
        path = ResultStore(self.settings.results_dir).path_for(stored["sha256"])
        try:
            handle = path.open("rb")
        except OSError:
            raise result_not_here(operation_id) from None
        digest = base64.b64encode(bytes.fromhex(stored["sha256"])).decode()
        return StreamingResponse(
            _checked_chunks(handle, stored["sha256"], stored["size_bytes"]),
            media_type=stored["content_type"] or "application/octet-stream",
            headers={
                "Content-Length": str(stored["size_bytes"]),
                "Repr-Digest": f"sha-256=:{digest}:",
                "ETag": f'"{stored["sha256"]}"',
                "Cache-Control": "private, max-age=0",
            },
        )

    async def receipt(self, request: Request) -> Response:
        """The operation's evidence with audit paths and a signed checkpoint (offline proof)."""
        operation_id = _operation_id(request)
        caller = await self.caller(request)
        async with self.connection() as conn:
            await self.visible(conn, operation_id, caller)
            try:
                built = await receipts.build_receipt(conn, operation_id)
            except receipts.NoUsableCheckpoint as exc:
                raise _no_usable_checkpoint("receipt", exc) from None
            except receipts.ReceiptError as exc:
                raise Problem(409, "no-checkpoint", "No signed checkpoint yet", str(exc)) from None
            except (LogCorrupt, ProofError):
                log.exception("receipt refused: the log contradicts its checkpoint")
                raise Problem(
                    503,
                    "log-inconsistent",
                    "The evidence log cannot prove this now",
                    "The log's stored hashes do not match its newest checkpoint; an operator "
                    "has been alerted (jobwarden audit verify).",
                ) from None
        return ApiJSONResponse(built.to_json())

    async def checkpoint(self, request: Request) -> Response:
        """The newest signed checkpoint that agrees with the log, as the C2SP signed note
        the reconciler wrote (a row the log contradicts is skipped, as for receipts)."""
        await self.caller(request)
        async with self.connection() as conn:
            try:
                usable = await receipts.usable_checkpoint(conn)
            except receipts.NoUsableCheckpoint as exc:
                raise _no_usable_checkpoint("checkpoint", exc) from None
            except receipts.ReceiptError:
                raise Problem(
                    404,
                    "no-checkpoint",
                    "No signed checkpoint yet",
                    "The log has no signed checkpoint yet (no signing key configured, or none "
                    "signed since start-up).",
                ) from None
        return PlainTextResponse(usable.note, headers={"Cache-Control": "no-cache"})

    async def openapi(self, request: Request) -> Response:
        return ApiJSONResponse(openapi_document(self.settings.providers))

    def routes(self) -> list[BaseRoute]:
        """One route per path, so a wrong method is a 405 listing every allowed one.

        Order matters: `{operation_id}` would also match `op_...:wait`.
        """
        base = API_PREFIX
        one = base + "/{operation_id}"
        table: list[tuple[str, dict[str, Handler]]] = [
            ("/v1/openapi.json", {"GET": self.openapi}),
            (base, {"POST": self.submit, "GET": self.list_operations}),
            (one + ":wait", {"GET": self.wait}),
            (one + ":cancel", {"POST": self.cancel}),
            (one + ":claim", {"POST": self.claim}),
            (one + "/events", {"GET": self.events}),
            (one + "/failed-items", {"GET": self.failed_items}),
            (one + "/receipt", {"GET": self.receipt}),
            (one + "/result", {"GET": self.result_file}),
            ("/v1/audit/checkpoint", {"GET": self.checkpoint}),
            (one, {"GET": self.get}),
        ]
        document = openapi_document(self.settings.providers)["paths"]
        return [
            Route(
                path,
                _MethodDispatch(
                    handlers, _query_names(document.get(path, {})), self.migrations_pending
                ),
            )
            for path, handlers in table
        ]


# How much of a result file is read (and hashed) at a time while it is served.
_RESULT_CHUNK = 256 * 1024


async def _checked_chunks(handle: BinaryIO, sha256: str, size: int) -> AsyncIterator[bytes]:
    """The file's bytes, `size` of them, hashed as they go; a file that has become
    another (a disk error, a hand edit) stops the answer before its last bytes."""
    hasher = hashlib.sha256()
    sent = 0
    with handle:
        while sent < size:
            chunk = await asyncio.to_thread(handle.read, min(_RESULT_CHUNK, size - sent))
            if not chunk:
                break
            hasher.update(chunk)
            sent += len(chunk)
            if sent < size or hasher.hexdigest() == sha256:  # the last chunk: only if whole
                yield chunk
    if sent != size or hasher.hexdigest() != sha256:
        log.error(
            "a stored result file no longer matches its digest; its transfer was cut",
            extra={"ctx": {"sha256": sha256}},
        )
        raise OSError("stored result file damaged")


def _query_names(path_item: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Each method's query parameters, as the OpenAPI document states them (one source)."""
    return {
        method.upper(): frozenset(
            p["name"] for p in operation.get("parameters", ()) if p.get("in") == "query"
        )
        for method, operation in path_item.items()
        if isinstance(operation, dict)
    }


class _MethodDispatch:
    """One path's handlers by method; any other method is a 405 problem with `Allow`.

    An ASGI app rather than a function: Starlette would restrict a function
    endpoint to GET and answer other methods with its own plain-text 405.
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        query: Mapping[str, frozenset[str]],
        migrations_pending: SchemaCheck,
    ) -> None:
        self._handlers = {
            method: _problem_edge(handler, migrations_pending)
            for method, handler in handlers.items()
        }
        self._allow = ", ".join(sorted(self._handlers))
        self._query = query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        handler = self._handlers.get(request.method)
        unknown = sorted(set(request.query_params) - self._query.get(request.method, frozenset()))
        if handler is not None and unknown:
            # a misspelt filter (`?stat=running`) must not silently list everything
            response = invalid(
                f"unknown query parameter {shown(unknown[0])!r}: this resource takes "
                f"{', '.join(sorted(self._query.get(request.method, ()))) or 'none'}",
                status=400,
            ).response(instance=_instance(request))
        elif handler is not None:
            response = await handler(request)
        else:
            response = Problem(
                405,
                "method-not-allowed",
                "Method not allowed",
                f"This resource answers {self._allow} only.",
                headers={"Allow": self._allow},
            ).response(instance=_instance(request))
        await response(scope, receive, send)


def api_routes(settings: Settings, pool: Any) -> list[BaseRoute]:
    """The agent API's routes, for the receiver app's `extra_routes`, and the
    operator console under /console (sharing the pool and the NOTIFY hub)."""
    from receiver.console import console_routes  # the console builds on this module's parts

    api = OperationsApi(settings, pool)
    return [*api.routes(), *console_routes(settings, pool, api.hub)]


def _no_usable_checkpoint(what: str, exc: receipts.NoUsableCheckpoint) -> Problem:
    """Forged or stale log_checkpoints rows: the operator's to look at (logged), and
    the agent's to retry once a checkpoint that agrees with the log is signed."""
    log.error("%s refused: %s", what, exc)
    return Problem(
        503,
        "log-inconsistent",
        "The evidence log cannot prove this now",
        "No stored checkpoint agrees with the log; an operator has been alerted "
        "(jobwarden audit verify).",
    )
