"""A provider's answers read into facts, whatever bytes they hold.

The adapter (a preset's description, or a plugin's own code) turns an answer
into a fact; it is meant never to raise, but its input is a third party's.
An exception there used to fail the step before the answer was recorded or a
deadline looked at: the same answer on every lease made the operation loop
for ever (a `Retry-After` date whose zone overflowed did). Here such an
answer becomes what it is, one that decides nothing: the step records it as
usual and goes on, deadlines included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.calls import recorded_response
from shared.providers import CancelFact, CreateFact, HttpResponse, LookupFact, StatusFact

if TYPE_CHECKING:
    from reconciler.step import Step

log = logging.getLogger("jobwarden.reconciler")

F = TypeVar("F")


def read_create(step: Step, resp: HttpResponse) -> CreateFact:
    """A create answer; unreadable, it is ambiguous (the job may exist: look it up)."""
    return _read(
        step,
        "create",
        lambda: step.adapter.parse_create(resp, step.op.idempotency_token, step.now()),
        lambda why: CreateFact("ambiguous", resp.status_code, why),
    )


def read_status(step: Step, resp: HttpResponse) -> StatusFact:
    """A status answer; unreadable, it shows no state."""
    return _read(
        step,
        "status",
        lambda: step.adapter.parse_status(resp, step.now()),
        lambda why: StatusFact(resp.status_code, problem=why),
    )


def read_cancel(step: Step, resp: HttpResponse) -> CancelFact:
    """A cancel answer; unreadable, whether it was taken is unknown."""
    return _read(
        step,
        "cancel",
        lambda: step.adapter.parse_cancel(resp, step.now()),
        lambda why: CancelFact("ambiguous", resp.status_code, why),
    )


def cancel_refusal(step: Step, call: Any) -> str | None:
    """The provider's refusal of a recorded cancel call in words (its status, error
    code and message), or None when the answer was no refusal."""
    answer = recorded_response(call, step.adapter.headers_read)
    fact = read_cancel(step, answer or HttpResponse(call["status_code"]))
    if fact.kind != "rejected":
        return None
    said = [x for x in (fact.error.code, fact.error.message) if x] if fact.error else []
    detail = f" ({': '.join(said)})" if said else ""
    return f"the provider refused the cancel request: HTTP {fact.status_code}{detail}"


def read_lookup(step: Step, resp: HttpResponse, page_token: str | None = None) -> LookupFact:
    """A lookup page (asked for with `page_token`); unreadable, it proves nothing.

    The page token is passed on only for numbered paging, which needs it to
    count on: a plugin's parse_lookup written before it existed still runs.
    """
    op_id = step.op.operation_id

    def parse() -> LookupFact:
        if step.adapter.desc.lookup.numbered:
            return step.adapter.parse_lookup(resp, op_id, page_token)
        return step.adapter.parse_lookup(resp, op_id)

    return _read(step, "lookup", parse, lambda why: LookupFact(resp.status_code, problem=why))


def _read(step: Step, kind: str, parse: Callable[[], F], unreadable: Callable[[str], F]) -> F:
    try:
        return parse()
    except Exception as exc:
        # The exception's type only: its text may quote the provider's bytes.
        why = f"the {kind} answer could not be read ({type(exc).__name__})"
        log.warning(
            "a provider answer could not be read; it is recorded and decides nothing",
            extra={
                "ctx": {
                    "operation_id": step.op.operation_id,
                    "provider": step.op.provider,
                    "call_kind": kind,
                    "error": type(exc).__name__,
                }
            },
        )
        return unreadable(why)
