"""What the provider saw of each request: the request log and back-pressure bookkeeping.

Every public endpoint is wrapped by `observed`, so no handler can forget to
log itself, and the arrival is stamped before the handler does anything that
awaits (a simulated latency, a deliberately held create).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from shared.simulator.requestlog import LoggedRequest, RequestKind
from shared.simulator.runtime import Simulation
from shared.simulator.shape import ApiShape

Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Exchange:
    """One request being handled: its log entry, and what its answer told the client."""

    entry: LoggedRequest
    # poll_after_seconds of a status answer; None when it gave no hint.
    poll_after: float | None = None


def exchange_of(request: Request) -> Exchange:
    exchange = getattr(request.state, "exchange", None)
    if not isinstance(exchange, Exchange):
        raise RuntimeError("the endpoint is not wrapped by observed()")
    return exchange


async def _create_identity(request: Request, shape: ApiShape) -> tuple[str | None, str | None]:
    """(client_reference, idempotency key) of a create, leniently.

    A bad body is the handler's to report; here it only names no one.
    """
    try:
        body = shape.into(await request.json())
    except ValueError:
        body = None
    key = shape.idempotency_key(request.headers, body)
    value = body.get("client_reference") if isinstance(body, dict) else None
    return (value if isinstance(value, str) else None), key


def _subject(entry: LoggedRequest) -> str | None:
    """Whose deadlines a request is held to: its job, or its create's key (else reference)."""
    if entry.kind is RequestKind.CREATE:
        return entry.idempotency_key or entry.client_reference
    return entry.job_id


def _arrive(sim: Simulation, kind: RequestKind, request: Request) -> LoggedRequest:
    shape = sim.settings.shape
    client_reference = (
        request.query_params.get(shape.lookup_param) if kind is RequestKind.LOOKUP else None
    )
    return sim.store.requests.arrive(
        sim.wall(),
        request.method,
        request.scope["path"],
        kind,
        job_id=request.path_params.get("job_id"),
        idempotency_key=None,
        client_reference=client_reference,
        traceparent=request.headers.get("traceparent"),
    )


def observed(sim: Simulation, kind: RequestKind, handler: Handler) -> Handler:
    """`handler`, logged on arrival and held to the back-pressure earlier answers asked for."""

    async def endpoint(request: Request) -> Response:
        entry = _arrive(sim, kind, request)
        # Held for the whole request, so a /_sim/reset meanwhile cannot mix
        # this request's bookkeeping into the fresh log.
        log, pacing, stats = sim.store.requests, sim.store.pacing, sim.store.stats
        exchange = Exchange(entry)
        request.state.exchange = exchange
        try:
            if kind is RequestKind.CREATE:
                # Needed for the subject; Starlette caches the body for the handler.
                identity = await _create_identity(request, sim.settings.shape)
                entry.client_reference, entry.idempotency_key = identity
            subject = _subject(entry)
            if subject is not None:
                entry.violations = pacing.check(entry, subject)
                for rule in entry.violations:
                    stats.violated(rule, subject)
            response = await handler(request)
        except HTTPException as exc:  # e.g. 413 from the body limit, answered upstream
            entry.status_code = exc.status_code
            raise
        entry.status_code = response.status_code
        if subject is not None:
            pacing.answered(
                entry,
                subject,
                last_seq=log.last_seq,
                now=sim.wall(),
                retry_after=response.headers.get("retry-after"),
                poll_after=exchange.poll_after,
                accepted_job=_accepted_job(entry),
            )
        return response

    return endpoint


def _accepted_job(entry: LoggedRequest) -> str | None:
    """The job a create's successful answer accepted, else None."""
    code = entry.status_code
    if entry.kind is RequestKind.CREATE and code is not None and 200 <= code < 300:
        return entry.job_id
    return None
