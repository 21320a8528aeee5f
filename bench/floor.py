"""The floor: the least a durable webhook receiver can do, as a ceiling for ours.

Only what no receiver may skip: the Standard Webhooks HMAC checked in
constant time against a replay window, and the event's id and body committed
(durably, `synchronous_commit` on) under a unique key before the answer, by
one group-commit writer: one prepared `INSERT … ON CONFLICT DO NOTHING` over
arrays, on a connection of its own, for everything queued while the last
batch committed. Deliveries reach it as plain ASGI, as the receiver's reach
its endpoint past Starlette's layers; no JSON parsing, no provider routing,
no evidence log, no metrics, no logs, a 204 with no body.

`bench.receiver` serves it beside the bare endpoint and the receiver: a
reference design, not a proof of a bound. What it reaches against the bare
endpoint shows whether the machine and the stack leave room for a target,
and the receiver's ratio over it says how much of that room it uses.
`bench.receiver_handler` runs its delivery handler in process beside the
receiver's, to compare the CPU each spends per delivery.

`serve(..., write=ReceiverWrite(provider, states))` puts the floor's handler in front
of the receiver's own write instead (`ReceiverWrite`): the receiver's writer,
statement and commit behind a handler that costs next to nothing. Beside the
floor and the receiver, it splits the receiver's distance from the floor
into its handler's part and its write's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson
from starlette.types import Receive, Scope, Send

from bench.stack import record_stack
from shared.ledger.states import RemoteState
from shared.serve import run as run_loop
from shared.settings import Settings

TABLE = "bench_floor_events"
REPLAY_WINDOW_SECONDS = 300

Store = Callable[[str, bytes], Awaitable[None]]
Deliver = Callable[[Scope, Receive, Send], Awaitable[None]]


def delivery_handler(secret: str, store: Store, now: Callable[[], float] = time.time) -> Deliver:
    """An ASGI handler for one delivery: read, verify, `store(id, body)`, answer 204
    (401 when the signature or its timestamp does not verify). `now` is the
    replay window's clock (unix seconds)."""
    keyed = hmac.new(base64.b64decode(secret.removeprefix("whsec_")), digestmod=hashlib.sha256)

    def verified(headers: dict[bytes, bytes], body: bytes) -> bool:
        event_id = headers.get(b"webhook-id", b"")
        stamp = headers.get(b"webhook-timestamp", b"")
        if not event_id.isascii() or not (stamp.isascii() and stamp.isdigit()):
            return False
        if abs(now() - int(stamp)) > REPLAY_WINDOW_SECONDS:
            return False
        mac = keyed.copy()
        mac.update(event_id + b"." + stamp + b".")
        mac.update(body)
        expected = b"v1," + base64.b64encode(mac.digest())
        presented = headers.get(b"webhook-signature", b"").split()
        return any(hmac.compare_digest(expected, signature) for signature in presented)

    async def deliver(scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        status = 401
        if verified(headers, body):
            await store(headers[b"webhook-id"].decode(), body)
            status = 204
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return deliver


class Writer(Protocol):
    """Where the floor's handler stores what it verified (`serve`)."""

    async def start(self, database_url: str) -> None: ...

    async def store(self, event_id: str, body: bytes) -> None: ...

    async def stop(self) -> None: ...


class GroupCommit:
    """One writer: everything queued while the last batch committed is the next batch.

    `table` (event_id text PRIMARY KEY, payload bytea) is created by `start`.
    """

    def __init__(self, table: str = TABLE) -> None:
        self._table = table
        self._task: asyncio.Task[None] | None = None
        self._conn: Any = None
        self._queue: list[tuple[str, bytes, asyncio.Future[None]]] = []
        self._work = asyncio.Event()

    async def store(self, event_id: str, body: bytes) -> None:
        if self._task is None or self._task.done():
            raise RuntimeError("the floor's writer is not running")
        future = asyncio.get_running_loop().create_future()
        self._queue.append((event_id, body, future))
        self._work.set()
        await future

    async def start(self, database_url: str) -> None:
        """Connect (a connection of its own, one plan kept), create the table, write."""
        import asyncpg

        conn = await asyncpg.connect(
            database_url, server_settings={"plan_cache_mode": "force_generic_plan"}
        )
        insert = await prepare_write(conn, self._table)
        self._task = asyncio.create_task(self._write(insert))
        self._conn = conn

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            # ended, whether cancelled here or by an error its requests were given
            await asyncio.gather(self._task, return_exceptions=True)
            await self._conn.close()

    async def _write(self, insert: Any) -> None:
        batch: list[tuple[str, bytes, asyncio.Future[None]]] = []
        try:
            while True:
                await self._work.wait()
                self._work.clear()
                batch = self._queue[:]
                del self._queue[:]
                try:
                    # executemany would be a round trip per row; this is one statement
                    await insert.fetch([b[0] for b in batch], [b[1] for b in batch])
                except Exception as exc:  # answered 500 by the server
                    _settle(batch, exc)
                else:
                    _settle(batch, None)
                batch = []
        finally:  # the writer ended: nothing queued or in flight is left waiting
            _settle(batch + self._queue, RuntimeError("the floor's writer stopped"))
            self._queue.clear()


async def prepare_write(conn: Any, table: str = TABLE) -> Any:
    """The floor's write on `conn`: its table made if missing, its INSERT prepared
    (called with the ids and the bodies as two arrays)."""
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (event_id text PRIMARY KEY, payload bytea)"
    )
    return await conn.prepare(
        f"INSERT INTO {table} (event_id, payload) "
        "SELECT * FROM unnest($1::text[], $2::bytea[]) ON CONFLICT DO NOTHING"
    )


def _settle(batch: list[tuple[str, bytes, asyncio.Future[None]]], error: Exception | None) -> None:
    for _, _, future in batch:
        if future.done():  # its request was cancelled (the client went away)
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


class ReceiverWrite:
    """The receiver's own write (`receiver.webhooks.ingest`: its group-commit writer on
    a pool made as the receiver makes it, its statement, its commit), storing the event
    the receiver makes of a bench delivery: the signed id, the body's `job_id` and
    `state` (mapped by `states`, the provider's webhook state map, as the receiver
    maps it: a word it does not name is kept raw, with no state), the body as the
    payload.

    The floor's handler checks the delivery; what is left is the write, so a server
    with this writer shows what the receiver reaches with a handler costing next to
    nothing. An event the writer refuses fails its request (500), as the floor's own.
    """

    def __init__(self, provider: str, states: Mapping[str, RemoteState]) -> None:
        self._provider = provider
        self._states = states
        self._pool: Any = None
        self._ingestor: Any = None

    async def start(self, database_url: str) -> None:
        from receiver.webhooks.ingest import Ingestor, create_writer_pool

        self._pool = await create_writer_pool(database_url)
        self._ingestor = Ingestor(self._pool, acquire_timeout=Settings.db_acquire_timeout)
        self._ingestor.start()

    async def store(self, event_id: str, body: bytes) -> None:
        from receiver.webhooks.ingest import Event

        document = orjson.loads(body)
        raw = document.get("state")
        mapped = self._states.get(raw) if isinstance(raw, str) else None
        state = None if mapped is None else mapped.value
        job = document.get("job_id")
        event = Event(
            self._provider,
            event_id,
            "standard_webhooks",
            True,
            job,
            None,
            state,
            raw,
            body.decode(),
        )
        await self._ingestor.submit(event)

    async def stop(self) -> None:
        if self._ingestor is not None:
            await self._ingestor.close()
            await self._pool.close()


def serve(
    port: int, database_url: str, stack_file: Path, secret: str, write: Writer | None = None
) -> None:
    """The floor on the stack every server here runs on (`shared.serve`); `write`:
    where it stores (default: its own `GroupCommit`)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from shared import heap
    from shared.serve import serve_forever

    writer = write if write is not None else GroupCommit()
    deliver = delivery_handler(secret, writer.store)

    class FloorApp(Starlette):
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["path"].startswith("/webhooks/"):
                await deliver(scope, receive, send)
                return
            await super().__call__(scope, receive, send)

    async def healthz(request: Request) -> Response:
        return Response(status_code=204)

    @contextlib.asynccontextmanager
    async def writing(app: Starlette) -> AsyncIterator[None]:
        await writer.start(database_url)
        heap.settle()  # as the receiver and the bare endpoint do once started
        yield
        await writer.stop()

    app = FloorApp(routes=[Route("/healthz", healthz, methods=["GET"])], lifespan=writing)
    record_stack(stack_file)
    run_loop(serve_forever(app, "127.0.0.1", port, log_level="warning"))
