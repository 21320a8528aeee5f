"""The hooks the receiver and the reconciler call: cheap no-ops unless tracing is on.

`TRACER` is None until `setup.configure` installs one; every hook checks that
first and returns (None, or a shared null context manager), so with tracing
off a hook costs one call and one comparison, and nothing of OpenTelemetry is
imported. With tracing on:

- a provider call is a CLIENT span (`client_span` ... `end_client_span`), the
  child of the step that makes it; the `traceparent` sent is its context;
- a reconciler step is an INTERNAL span (`step`), the child of the
  operation's submit span (`ids.root_span_id`);
- a transition is an event on the span current when it is made (`transition`);
- a submit is a SERVER span recorded once the operation is known
  (`submitted`); created, it *is* the operation's root span;
- a webhook receipt is a SERVER span recorded when the answer has been sent
  (`webhook_receipts`), in the matched operation's trace (a child of its
  root), linked to the sender's trace if the delivery carried a traceparent.

Spans of one operation are joined by its trace id alone: no process needs
another's span to record its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from shared.telemetry import attributes
from shared.telemetry.ids import SAMPLED, parse_traceparent, root_span_id, trace_id_int
from shared.telemetry.ids import traceparent as format_traceparent

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The tracer spans are recorded with; None: tracing is off (the fast path).
TRACER: Tracer | None = None
# The ids the next span started in this context must take, (trace id, span
# id): a created operation's submit span is its root (see sdk.OperationIds).
FORCED_IDS: ContextVar[tuple[int, int] | None] = ContextVar("jobwarden_forced_ids", default=None)
# What the webhook endpoint learnt about the delivery being answered.
_RECEIPT: ContextVar[_Receipt | None] = ContextVar("jobwarden_receipt", default=None)
_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()
WEBHOOK_ROUTE = "/webhooks/{provider}"


class OperationLike(Protocol):
    @property
    def operation_id(self) -> str: ...
    @property
    def trace_id(self) -> str: ...
    @property
    def provider(self) -> str: ...


class RequestLike(Protocol):
    @property
    def method(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def action(self) -> str: ...


class OutcomeLike(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def operation_id(self) -> str | None: ...
    @property
    def trace_id(self) -> str | None: ...


@dataclass(slots=True)
class _Receipt:
    provider: str | None = None
    outcome: OutcomeLike | None = None


def install(tracer: Tracer | None) -> None:
    global TRACER
    TRACER = tracer


# ------------------------------------------------------------------ contexts


def operation_context(trace_id: str, operation_id: str) -> Context | None:
    """A parent context for spans of this operation: its root span.

    None when the id is not a valid trace id (the span then starts a trace of its own).
    """
    trace = trace_id_int(trace_id)
    if trace is None:
        return None
    return _remote_context(trace, root_span_id(trace, operation_id), SAMPLED)


def _remote_context(trace: int, span: int, flags: int) -> Context:
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        TraceFlags,
        set_span_in_context,
    )

    parent = SpanContext(trace, span, is_remote=True, trace_flags=TraceFlags(flags))
    return set_span_in_context(NonRecordingSpan(parent))


def _new_trace() -> Context:
    """An empty context: a span started in it begins a trace of its own."""
    from opentelemetry.context import Context

    return Context()


def _link(header: str | None) -> list[Link]:
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    parsed = parse_traceparent(header)
    if parsed is None:
        return []
    trace, span, flags = parsed
    return [Link(SpanContext(trace, span, is_remote=True, trace_flags=TraceFlags(flags)))]


def traceparent_of(span: Span) -> str:
    """The `traceparent` header naming `span` (sent with the call it records)."""
    ctx = span.get_span_context()
    return format_traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags)


# ------------------------------------------------------------------ provider calls


def client_span(req: RequestLike, trace_id: str) -> Span | None:
    """A started CLIENT span for one provider call, or None when tracing is off.

    Its parent is the current span when that is in the operation's trace (the
    step making the call), else the operation's root.
    """
    if TRACER is None:
        return None
    from opentelemetry.trace import SpanKind, get_current_span

    current = get_current_span().get_span_context()
    in_trace = current.is_valid and f"{current.trace_id:032x}" == trace_id
    attrs = attributes.client_request(req.method, req.url)
    attrs["jobwarden.call"] = req.action
    return TRACER.start_span(
        f"{attrs['http.request.method']} {req.action}",
        # outside a step (the reconciler makes none): in the trace, under no operation's root
        context=None if in_trace else (operation_context(trace_id, "") or _new_trace()),
        kind=SpanKind.CLIENT,
        attributes=attrs,
    )


def end_client_span(span: Span, status: int | None, error_category: str | None) -> None:
    """Record the call's answer (or its transport failure) and end the span."""
    from opentelemetry.trace import Status, StatusCode

    if status is not None:
        span.set_attribute("http.response.status_code", status)
    error = attributes.client_error_type(status, error_category)
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR))
    span.end()


@contextlib.contextmanager
def ending(span: Span) -> Iterator[Span]:
    """End `span` however the block leaves; an exception marks it failed (its type only)."""
    try:
        yield span
    except BaseException as exc:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(Status(StatusCode.ERROR))
        raise
    finally:
        if span.is_recording():
            span.end()


# ------------------------------------------------------------------ reconciler steps


def step(name: str, op: OperationLike) -> contextlib.AbstractContextManager[Any]:
    """An INTERNAL span around one reconciler step, current while it runs."""
    if TRACER is None:
        return _OFF
    return _step(TRACER, name.removeprefix("step_"), op)


@contextlib.contextmanager
def _step(tracer: Tracer, name: str, op: OperationLike) -> Iterator[Span]:
    from opentelemetry.trace import SpanKind, use_span

    span = tracer.start_span(
        "step " + name,
        context=operation_context(op.trace_id, op.operation_id) or _new_trace(),
        kind=SpanKind.INTERNAL,
        attributes={
            "jobwarden.operation_id": op.operation_id,
            "jobwarden.provider": op.provider,
            "jobwarden.step": name,
        },
    )
    # `ending` ends it; an exception's message may quote a row or a provider,
    # so only its type is recorded (as in the logs).
    with (
        use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False),
        ending(span),
    ):
        yield span


def transition(src: str | None, dst: str, cause: str) -> None:
    """A transition, as an event on the current span (the step, the submit)."""
    if TRACER is None:
        return
    from opentelemetry.trace import get_current_span

    get_current_span().add_event("transition", _transition_attributes(src, dst, cause))


def enabled() -> bool:
    """Whether spans are recorded (callers skip work only a span would use)."""
    return TRACER is not None


def moved(
    name: str,
    trace_id: str,
    operation_id: str,
    actor: str,
    transitions: Sequence[tuple[str | None, str, str]],
    *,
    start_time: int = 0,
) -> None:
    """A span for transitions made outside a reconciler step, once they committed.

    An agent's cancel request through the API, an operator's decision in the
    console: each gets an INTERNAL span under the operation's root, with one
    `transition` event per history row it added, (from, to, cause).
    """
    if TRACER is None or not transitions:
        return
    from opentelemetry.trace import SpanKind

    span = TRACER.start_span(
        name,
        context=operation_context(trace_id, operation_id) or _new_trace(),
        kind=SpanKind.INTERNAL,
        attributes={
            "jobwarden.operation_id": operation_id,
            "jobwarden.actor": attributes.text(actor),
        },
        start_time=start_time or None,
    )
    for src, dst, cause in transitions:
        span.add_event("transition", _transition_attributes(src, dst, cause))
    span.end()


def _transition_attributes(src: str | None, dst: str, cause: str) -> dict[str, str]:
    attrs = {"to": dst, "cause": attributes.text(cause)}
    if src is not None:
        attrs["from"] = src
    return attrs


# ------------------------------------------------------------------ the receiver


def clock() -> int:
    """Now, for a span recorded later (`submitted`); 0 when tracing is off."""
    return time.time_ns() if TRACER is not None else 0


def submitted(
    started_ns: int,
    *,
    incoming: str | None,
    trace_id: str | None,
    operation_id: str,
    provider: str,
    kind: str,
    created: bool,
    route: str,
    status: int,
) -> None:
    """The SERVER span of a submit, recorded once its operation is known.

    A created operation's submit span takes the operation's root span id, so
    every later span of the operation is its descendant; its parent is the
    agent's span when the agent sent a traceparent of the same trace. A replay
    is an ordinary child of the root, linked to the caller's traceparent.
    """
    if TRACER is None or trace_id is None:
        return
    from opentelemetry.trace import SpanKind

    trace = trace_id_int(trace_id)
    if trace is None:
        return
    caller = parse_traceparent(incoming)
    links: list[Link] = []
    if created and caller is not None and caller[0] == trace:
        parent = _remote_context(*caller)  # the agent's span, whose trace we joined
    elif created:
        parent = _new_trace()  # the root of the trace: its ids are forced below
        links = _link(incoming)
    else:
        parent = _remote_context(trace, root_span_id(trace, operation_id), SAMPLED)
        links = _link(incoming)
    attrs = attributes.method_attributes("POST")
    attrs.update(
        {
            "http.route": route,
            "http.response.status_code": status,
            "jobwarden.operation_id": operation_id,
            "jobwarden.provider": provider,
            "jobwarden.kind": kind,
            "jobwarden.replayed": not created,
        }
    )
    forced = FORCED_IDS.set((trace, root_span_id(trace, operation_id)) if created else None)
    try:
        span = TRACER.start_span(
            f"POST {route}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attrs,
            links=links,
            start_time=started_ns or None,
        )
    finally:
        FORCED_IDS.reset(forced)
    if created:
        span.add_event("transition", _transition_attributes(None, "create_pending", "submitted"))
    span.end()


def webhook_outcome(provider: str, outcome: OutcomeLike) -> None:
    """What the endpoint did with the delivery being answered (for its receipt span)."""
    receipt = _RECEIPT.get()
    if receipt is not None:
        receipt.provider, receipt.outcome = provider, outcome


def webhook_receipts(app: ASGIApp) -> ASGIApp:
    """`app` (the webhook endpoint), each receipt recorded as a SERVER span.

    Returned unchanged when tracing is off. The span is recorded after the
    answer is sent, when the delivery's operation (hence its trace) is known:
    its start is the request's arrival, its parent the operation's root span
    when the event matched one, else the sender's traceparent if any.
    """
    return app if TRACER is None else _Receipts(app, TRACER)


class _Receipts:
    """The webhook endpoint, traced (a class: Starlette treats a plain function as a
    request handler, not as an ASGI app)."""

    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        self.app = app
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.time_ns()
        answered: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered.append(int(message["status"]))
            await send(message)

        receipt = _Receipt()
        token = _RECEIPT.set(receipt)
        try:
            await self.app(scope, receive, watch)
        finally:
            _RECEIPT.reset(token)
            status = answered[0] if answered else 500
            _record_receipt(self.tracer, scope, started, status, receipt)


def _record_receipt(
    tracer: Tracer, scope: Scope, started: int, status: int, receipt: _Receipt
) -> None:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    incoming = next(
        (v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"traceparent"), None
    )
    outcome = receipt.outcome
    attrs = attributes.server_request(scope, WEBHOOK_ROUTE)
    attrs["http.response.status_code"] = status
    links: list[Link] = []
    if outcome is not None:
        attrs["jobwarden.provider"] = receipt.provider or ""
        attrs["jobwarden.webhook.outcome"] = outcome.status
        if outcome.operation_id is not None:
            attrs["jobwarden.operation_id"] = outcome.operation_id
    matched = (
        operation_context(outcome.trace_id, outcome.operation_id)
        if outcome and outcome.trace_id and outcome.operation_id
        else None
    )
    if matched is not None:
        parent, links = matched, _link(incoming)
    else:
        caller = parse_traceparent(incoming)
        parent = _remote_context(*caller) if caller is not None else _new_trace()
    error = attributes.server_error_type(status)
    if error is not None:
        attrs["error.type"] = error
    span = tracer.start_span(
        f"{attrs['http.request.method']} {WEBHOOK_ROUTE}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attrs,
        links=links,
        start_time=started,
    )
    if error is not None:
        span.set_status(Status(StatusCode.ERROR))
    span.end()
