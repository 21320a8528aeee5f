"""Tool wrappers for agents: one call in, one unambiguous result out.

`start_and_await` submits an operation and waits for it *inside the tool*, so
the model makes one call and never polls in its own reasoning loop (seed 003).
It returns exactly one of five statuses and never raises:

- ``succeeded`` / ``completed_with_errors``: the result is verified; with
  errors, some items failed and the counts say how many;
- ``failed``: the job failed, or the submit was refused (then nothing started);
- ``cancelled``: the provider confirmed the stop;
- ``timed_out``: we stopped waiting and the job may still be running. Always
  carries the operation id (and the job id when the provider gave one), so the
  agent can `check` it later instead of resubmitting.

Operations waiting for a human (the view's outcome ``needs_attention``:
contradictory facts, an unconfirmed cancellation, a result that could not be
fetched or did not validate) map to ``timed_out`` with ``needs_human=True``,
not to ``failed``. "Failed" invites a resubmit, and in each of those cases the
remote job may have run or may still succeed: a resubmit would be exactly the
duplicate job jobwarden exists to prevent. ``timed_out`` says what is true —
not finished from the agent's point of view, ids attached, someone owns it.

Transport trouble never surfaces as an exception: a submit that got no answer
is retried with the same client_reference (which cannot create a duplicate);
if it never answers, the result is ``timed_out`` with that client_reference
and no operation id. Waiting uses the server's long-poll, which is woken by
the database, so there is no client-side polling interval; the capped
backoff below (x1.5 up to 60 s, starting at the server's poll_after_seconds)
paces retries after errors only.

`start`, `check`, `pending` and `cancel` are for jobs longer than a tool call:
start, save the operation id durably, and check it (or list `pending`) at the
start of the next run. They return status ``running`` while not done, and
``unknown`` when jobwarden could not be read (which says nothing about the job).

An id jobwarden does not know (or that this token may not see) is its own
answer, ``not_found``, never ``failed``: "failed" reads as "the job ran and
failed, start it again", while the truth is that nothing is known under that
id — the usual cause is a mistyped or remembered-wrong id, and a resubmit
would start a second job. The answer says to check the id against `pending`.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from shared.agents.client import (
    MAX_SERVER_WAIT_SECONDS,
    ApiProblem,
    ApiUnreachable,
    AsyncJobwardenClient,
    JobwardenClient,
    JobwardenError,
    OutOfTime,
)
from shared.ids import is_operation_id

Status = Literal[
    "succeeded",
    "completed_with_errors",
    "failed",
    "cancelled",
    "timed_out",
    "running",
    "unknown",
    "not_found",
]
STATUSES: tuple[Status, ...] = get_args(Status)

# Retry pacing after errors (seed 003: start from the server's hint, x1.5,
# cap 60 s). The first retry comes after one second when there is no hint.
FIRST_RETRY_SECONDS = 1.0
BACKOFF_FACTOR = 1.5
BACKOFF_CAP_SECONDS = 60.0
DEFAULT_KIND = "job"
# A bounded wait (max_wait) comes back within max_wait plus this: every request
# made for it (a submit, a long-poll, a read, a claim) gets the time left plus
# this grace as its timeout, and none is sent again once max_wait has passed.
# Before, each had the client's 10 s (a long-poll its wait plus 10 s), so a
# stalled API server held `start_and_await(2)` for 10 s, and a claim for 42 s.
DEADLINE_GRACE_SECONDS = 2.0

_OUTCOME_STATUS: dict[str, Status] = {
    "succeeded": "succeeded",
    "completed_with_errors": "completed_with_errors",
    "failed": "failed",
    "cancelled": "cancelled",
    "timed_out": "timed_out",
    "needs_attention": "timed_out",
}
_SUCCESS: frozenset[Status] = frozenset({"succeeded", "completed_with_errors"})


@dataclass(frozen=True)
class ToolResult:
    status: Status
    operation_id: str | None
    job_id: str | None
    done: bool
    message: str
    outcome: str | None = None  # the server's outcome (needs_attention stays visible)
    needs_human: bool = False
    result_ref: str | None = None
    result: Any = None
    counts: dict[str, int | None] | None = None
    errors_ref: str | None = None
    error: dict[str, Any] | None = None
    poll_after_seconds: int | None = None
    client_reference: str | None = None
    # With a consumer: True for the one call that may act on this completion.
    claimed: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def next_delay(previous: float | None, hint: float | None, remaining: float) -> float:
    """Delay before the next retry: the server's hint first, then x1.5, capped."""
    if previous is None:
        delay = hint if hint and hint > 0 else FIRST_RETRY_SECONDS
    else:
        delay = previous * BACKOFF_FACTOR
    return max(0.0, min(delay, BACKOFF_CAP_SECONDS, remaining))


def time_left(deadline: float, now: float) -> float:
    """The timeout of a request made for a wait ending at `deadline`: the time
    left, plus the grace that lets an answer due at the deadline arrive."""
    return max(deadline - now, 0.0) + DEADLINE_GRACE_SECONDS


def claim_time(deadline: float, now: float) -> float | None:
    """The time a claim (all its resends) may take; None for a wait without end."""
    return None if math.isinf(deadline) else time_left(deadline, now)


def wait_budget(max_wait: object) -> float | None:
    """max_wait as seconds, or None when it is not a number of seconds.

    NaN compares false with everything: `remaining <= 0` never held, so a
    submit that got no answer was retried for ever. A string (what a model
    passing tool arguments often sends) raised TypeError, and an int beyond a
    double OverflowError; such an int is a wait as long as it takes, as
    `math.inf` is. A bool is refused, as the MCP `await` refuses it.
    """
    if isinstance(max_wait, bool) or not isinstance(max_wait, int | float):
        return None
    try:
        seconds = float(max_wait)
    except OverflowError:
        return math.inf if max_wait > 0 else -math.inf
    return None if math.isnan(seconds) else seconds


def _not_seconds(max_wait: object) -> dict[str, str]:
    """Why max_wait was refused, naming its type (never its value: it may be hostile)."""
    what = "NaN" if isinstance(max_wait, float) else f"a {type(max_wait).__name__}"
    return {
        "code": "invalid_argument",
        "message": f"max_wait must be a number of seconds, not {what}",
    }


def bad_wait_before_start(max_wait: object, client_reference: str | None) -> ToolResult:
    """start_and_await called with a max_wait that is not seconds: nothing was sent."""
    return ToolResult(
        "failed",
        operation_id=None,
        job_id=None,
        done=True,
        message="The job was NOT started: max_wait must be a number of seconds.",
        error=_not_seconds(max_wait),
        client_reference=client_reference,
    )


def bad_wait(operation_id: str, max_wait: object) -> ToolResult:
    """await called with a max_wait that is not seconds: nothing was read."""
    return ToolResult(
        "unknown",
        operation_id=operation_id,
        job_id=None,
        done=False,
        message=(
            f"Did not wait for operation {operation_id}: max_wait must be a number of "
            "seconds. Nothing was read and the operation is unaffected: do not report "
            "success or failure; call again with a number."
        ),
        error=_not_seconds(max_wait),
    )


def new_client_reference() -> str:
    return "ref_" + secrets.token_hex(12)


def from_resource(resource: Mapping[str, Any], *, gave_up_after: float | None = None) -> ToolResult:
    """Read an operation resource. `gave_up_after`: we stopped waiting (not done → timed_out)."""
    meta = resource.get("metadata", {})
    op_id = resource.get("operation_id")
    job_id = meta.get("remote_job_id")
    common: dict[str, Any] = {
        "operation_id": op_id,
        "job_id": job_id,
        "outcome": meta.get("outcome"),
        "client_reference": meta.get("client_reference"),
        "poll_after_seconds": meta.get("poll_after_seconds"),
    }
    if not resource.get("done"):
        if gave_up_after is None:
            return ToolResult("running", done=False, message=_message(resource), **common)
        return ToolResult(
            "timed_out",
            done=False,
            message=(
                f"Still running after {gave_up_after:.0f}s: operation {op_id} "
                f"({_job_words(job_id)}) continues in the background. Do not report success "
                f"and do not resubmit; check it later with check({op_id!r})."
            ),
            **common,
        )
    outcome = str(meta.get("outcome"))
    status = _OUTCOME_STATUS.get(outcome, "timed_out")  # an unknown outcome is never a success
    needs_human = outcome in ("needs_attention", "timed_out")
    # a cancelled job's partial output stands where a result would (its status says
    # cancelled, its message that the output is partial)
    response = resource.get("response") or resource.get("partial_output") or {}
    summary = response.get("summary")
    message = _message(resource)
    if outcome == "needs_attention":
        message = f"NOT finished from your point of view. {message}"
    return ToolResult(
        status,
        done=True,
        message=message,
        needs_human=needs_human,
        result_ref=response.get("result_ref"),
        result=response.get("result"),
        counts=dict(summary) if summary else None,
        errors_ref=response.get("errors_ref"),
        error=resource.get("error"),
        **common,
    )


def _message(resource: Mapping[str, Any]) -> str:
    """The resource's message; an answer without one is said so, never a KeyError
    (which the MCP SDK turned into an opaque JSON-RPC error)."""
    message = resource.get("message")
    if isinstance(message, str) and message:
        return message
    return "jobwarden's answer carried no message: read the status, and check again later."


def refused(problem: ApiProblem, client_reference: str | None) -> ToolResult:
    """The API refused the submit: nothing was started."""
    return ToolResult(
        "failed",
        operation_id=None,
        job_id=None,
        done=True,
        message=f"The job was NOT started: the request was refused ({problem.detail}).",
        error={"code": problem.type.rsplit(":", 1)[-1], "message": problem.detail},
        client_reference=client_reference,
    )


def refused_after_unanswered(problem: ApiProblem, client_reference: str) -> ToolResult:
    """A resend refused after an attempt that got no answer: that one may be recorded.

    The refusal is of the resend (a token revoked meanwhile: 401; a receiver
    restarted without the provider: 422); it says nothing of the first
    attempt, whose COMMIT may have run unheard. "NOT started" would invite a
    second submit, under another token or reference: the duplicate job.
    """
    return ToolResult(
        "timed_out",
        operation_id=None,
        job_id=None,
        done=False,
        message=(
            f"jobwarden refused the resend of this submit ({problem.detail}), but an earlier "
            "attempt got no answer and may have recorded the job. Do not report success or "
            "failure, and do not start it under another client_reference: once the refusal is "
            f"fixed, call start again with client_reference {client_reference!r} (it returns "
            "the same operation if it exists and never creates a duplicate)."
        ),
        error={"code": problem.type.rsplit(":", 1)[-1], "message": problem.detail},
        client_reference=client_reference,
    )


def token_refused_for_reference(problem: ApiProblem, client_reference: str) -> ToolResult:
    """`start` with the caller's own client_reference, refused for its token (401/403).

    The caller may be resending after a call that got no answer (what a
    client_reference is for), and a refused token says nothing of that call:
    it may have recorded the job. "NOT started" would invite a submit under
    another token or reference: the duplicate job. Answered as a resend
    refused after an unanswered attempt is (`refused_after_unanswered`).
    """
    return ToolResult(
        "timed_out",
        operation_id=None,
        job_id=None,
        done=False,
        message=(
            f"{_refusal_words(problem)}. This call recorded nothing, but an earlier call with "
            f"client_reference {client_reference!r}, if one got no answer, may have recorded "
            "the job. Do not report success or failure, and do not start it under another "
            "client_reference: once the token is fixed, call start again with client_reference "
            f"{client_reference!r} (it returns the same operation if it exists and never "
            "creates a duplicate)."
        ),
        error=_refusal_error(problem),
        client_reference=client_reference,
    )


def submit_unanswered(client_reference: str, error: Exception) -> ToolResult:
    """No answer to the submit: the operation may or may not be recorded."""
    return ToolResult(
        "timed_out",
        operation_id=None,
        job_id=None,
        done=False,
        message=(
            "jobwarden did not answer, so it is unknown whether the job was recorded. "
            "Do not report success. Call start again with client_reference "
            f"{client_reference!r}: it returns the same operation if it exists and never "
            "creates a duplicate."
        ),
        error={"code": "unreachable", "message": str(error)},
        client_reference=client_reference,
    )


def lost_contact(last: Mapping[str, Any], waited: float, error: Exception) -> ToolResult:
    """We know the operation but could not learn how it ended."""
    base = from_resource(last, gave_up_after=waited)
    op_id = base.operation_id
    return ToolResult(
        "timed_out",
        operation_id=op_id,
        job_id=base.job_id,
        done=False,
        message=(
            f"Lost contact with jobwarden after {waited:.0f}s ({error}). Operation {op_id} "
            f"({_job_words(base.job_id)}) was recorded and may still be running. Do not "
            f"report success and do not resubmit; check it later with check({op_id!r})."
        ),
        outcome=base.outcome,
        error={"code": "unreachable", "message": str(error)},
        client_reference=base.client_reference,
    )


def _job_words(job_id: str | None) -> str:
    return f"job {job_id}" if job_id else "the provider has not given a job id yet"


def _token_refused(error: JobwardenError | None) -> ApiProblem | None:
    """The 401 or 403 that refused this token, if that is what `error` is.

    Such an answer is not lost contact: retrying later, the advice given for
    an unreachable server, can never work (a revoked token stays revoked).
    """
    if isinstance(error, ApiProblem) and error.status in (401, 403):
        return error
    return None


def _refusal_words(problem: ApiProblem) -> str:
    fix = (
        "the token is unknown or revoked: an operator must give you a valid one"
        if problem.status == 401
        else "this token may not do this"
    )
    return (
        f"jobwarden refused this token ({problem.status}: {problem.detail}); trying again "
        f"will not help until that is fixed: {fix}"
    )


def _refusal_error(problem: ApiProblem) -> dict[str, Any]:
    return {"code": problem.type.rsplit(":", 1)[-1], "message": problem.detail}


def refused_while_waiting(last: Mapping[str, Any], problem: ApiProblem) -> ToolResult:
    """The wait was refused (the token revoked meanwhile): stopped, the job unaffected."""
    base = from_resource(last, gave_up_after=0.0)
    op_id = base.operation_id
    return ToolResult(
        "timed_out",
        operation_id=op_id,
        job_id=base.job_id,
        done=False,
        message=(
            f"Stopped waiting for operation {op_id} ({_job_words(base.job_id)}): "
            f"{_refusal_words(problem)}. The operation was recorded and may still be running: "
            "do not report success and do not resubmit."
        ),
        outcome=base.outcome,
        error=_refusal_error(problem),
        client_reference=base.client_reference,
    )


def _with_claim(
    result: ToolResult, claimed: bool | None, consumer: str, *, out_of_time: bool = False
) -> ToolResult:
    if claimed is None and out_of_time:
        note = (
            f" Could not confirm the claim for {consumer!r} before max_wait ran out (the "
            "service did not answer in time): do not act on this result yet; call await "
            "again with the same consumer. If that answer says it was already claimed, the "
            "claim may be this one, made unheard: ask a human before acting."
        )
    elif claimed is None:
        note = (
            f" Could not confirm the claim for {consumer!r} (the service did not answer, "
            "even when asked again): do not act on this result yet; call again later. If "
            "that answer says it was already claimed, the claim may be this one, made "
            "unheard: ask a human before acting."
        )
    elif claimed:
        note = f" Claimed for {consumer!r}: you are the only one to act on it."
    else:
        note = f" Already claimed by {consumer!r} earlier: do NOT act on it again."
    return replace(result, claimed=claimed, message=result.message + note)


def wait_ended_by(
    operation_id: str, last: Mapping[str, Any], waited: float, error: JobwardenError
) -> ToolResult:
    """A wait whose last request failed as max_wait ran out: what that failure says.

    A 404 is `not_found`, a refused token (401/403) is said to be refused
    (retrying cannot help), anything else is lost contact.
    """
    if isinstance(error, ApiProblem) and error.status == 404:
        return read_failed(operation_id, error)
    refused_token = _token_refused(error)
    if refused_token is not None:
        return refused_while_waiting(last, refused_token)
    return lost_contact(last, waited, error)


def _claim_refused(result: ToolResult, problem: ApiProblem) -> ToolResult:
    """The API refused the claim (a consumer it cannot take, a revoked token):
    nothing was claimed, and asking again the same way is refused again."""
    note = (
        f" The claim was refused ({problem.status}: {problem.detail}): nothing was claimed, "
        "so do not act on this result yet, and asking again the same way will be refused "
        "again: fix what the refusal names, then claim it."
    )
    return replace(result, claimed=None, message=result.message + note)


def _fatal(problem: ApiProblem) -> bool:
    """Errors that retrying the same call cannot fix."""
    return not problem.retryable


def claim_if_succeeded(
    client: JobwardenClient,
    result: ToolResult,
    consumer: str | None,
    *,
    within: float | None = None,
) -> ToolResult:
    """With a consumer, claim a success exactly once; the result says whether to act.

    `within`: at most that many seconds for the claim and its resends (what a
    bounded wait has left); a claim not made in it is `claimed=None`, said so.
    """
    if not consumer or result.status not in _SUCCESS or result.operation_id is None:
        return result
    try:
        claimed: bool | None = client.claim_completion(result.operation_id, consumer, within=within)
    except OutOfTime:
        return _with_claim(result, None, consumer, out_of_time=True)
    except ApiProblem as problem:
        if _fatal(problem):
            return _claim_refused(result, problem)
        claimed = None
    except JobwardenError:
        claimed = None
    return _with_claim(result, claimed, consumer)


async def claim_if_succeeded_async(
    client: AsyncJobwardenClient,
    result: ToolResult,
    consumer: str | None,
    *,
    within: float | None = None,
) -> ToolResult:
    if not consumer or result.status not in _SUCCESS or result.operation_id is None:
        return result
    try:
        claimed: bool | None = await client.claim_completion(
            result.operation_id, consumer, within=within
        )
    except OutOfTime:
        return _with_claim(result, None, consumer, out_of_time=True)
    except ApiProblem as problem:
        if _fatal(problem):
            return _claim_refused(result, problem)
        claimed = None
    except JobwardenError:
        claimed = None
    return _with_claim(result, claimed, consumer)


# ---------------------------------------------------------------- blocking


def start(
    client: JobwardenClient,
    provider: str,
    request: Mapping[str, Any],
    *,
    kind: str = DEFAULT_KIND,
    client_reference: str | None = None,
    **options: Any,
) -> ToolResult:
    """Start a job and return at once (status running: started is not done)."""
    reference = client_reference or new_client_reference()
    try:
        resource = client.submit(provider, kind, request, client_reference=reference, **options)
    except ApiProblem as problem:
        if client_reference and _token_refused(problem):
            return token_refused_for_reference(problem, reference)
        if _fatal(problem):
            return refused(problem, reference)
        return submit_unanswered(reference, problem)
    except JobwardenError as exc:
        return submit_unanswered(reference, exc)
    return from_resource(resource)


def check(client: JobwardenClient, operation_id: str) -> ToolResult:
    """One read of an operation: running, or its final status."""
    try:
        return from_resource(client.get(operation_id))
    except JobwardenError as exc:
        return read_failed(operation_id, exc)


def pending(client: JobwardenClient) -> list[ToolResult]:
    """The caller's operations that are not over yet (re-read at the start of a run)."""
    return [from_resource(r) for r in client.pending()]


def cancel(client: JobwardenClient, operation_id: str, reason: str) -> ToolResult:
    """Ask for cancellation; the answer is 'requested', never 'cancelled'."""
    try:
        resource = client.cancel(operation_id, reason)
    except JobwardenError as exc:
        return read_failed(operation_id, exc)
    return _cancelled_view(resource)


def await_operation(
    client: JobwardenClient,
    operation_id: str,
    max_wait: float,
    *,
    consumer: str | None = None,
    first: Mapping[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ToolResult:
    """Wait up to max_wait for an operation to be done; never raises."""
    budget = wait_budget(max_wait)
    if budget is None:
        return bad_wait(operation_id, max_wait)
    started = clock()
    deadline = started + budget
    last: Mapping[str, Any] = first or {"operation_id": operation_id, "done": False}
    delay: float | None = None
    error: JobwardenError | None = None  # the last attempt's, if it failed
    while not last.get("done"):
        remaining = deadline - clock()
        if remaining <= 0:
            break
        try:
            last = client.wait(
                operation_id,
                min(remaining, MAX_SERVER_WAIT_SECONDS),
                within=time_left(deadline, clock()),
            )
            delay, error = None, None
        except JobwardenError as exc:
            error = exc
            if isinstance(exc, ApiProblem) and _fatal(exc):
                break
            delay = next_delay(delay, _hint(last), deadline - clock())
            sleep(delay)
    if error is None and "message" not in last:
        # no time to wait even once (max_wait 0 or spent): read it, rather than
        # call contact lost that was never tried, or an unknown id recorded
        try:
            last = client.get(operation_id, within=time_left(deadline, clock()))
        except JobwardenError as exc:
            return read_failed(operation_id, exc)
    if isinstance(error, ApiProblem) and error.status == 404:
        return read_failed(operation_id, error)
    refused_token = _token_refused(error)
    if refused_token is not None:
        return refused_while_waiting(last, refused_token)
    if error is not None or "message" not in last:  # the end of the wait was not heard
        return lost_contact(last, clock() - started, error or ApiUnreachable("no answer"))
    result = from_resource(last, gave_up_after=clock() - started)
    return claim_if_succeeded(client, result, consumer, within=claim_time(deadline, clock()))


def start_and_await(
    client: JobwardenClient,
    provider: str,
    request: Mapping[str, Any],
    max_wait: float,
    *,
    kind: str = DEFAULT_KIND,
    client_reference: str | None = None,
    consumer: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    **options: Any,
) -> ToolResult:
    """Start a job and wait for it, up to max_wait seconds; exactly one final status."""
    reference = client_reference or new_client_reference()
    budget = wait_budget(max_wait)
    if budget is None:
        return bad_wait_before_start(max_wait, reference)
    started = clock()
    delay: float | None = None
    while True:
        try:
            resource = client.submit(
                provider,
                kind,
                request,
                client_reference=reference,
                within=time_left(started + budget, clock()),
                **options,
            )
            break
        except ApiProblem as problem:
            if _fatal(problem):
                if delay is not None:  # an earlier attempt went unanswered
                    return refused_after_unanswered(problem, reference)
                if client_reference and _token_refused(problem):  # perhaps an earlier call's
                    return token_refused_for_reference(problem, reference)
                return refused(problem, reference)
            error: JobwardenError = problem
        except JobwardenError as exc:
            error = exc
        delay = next_delay(delay, None, started + budget - clock())
        if delay <= 0:
            return submit_unanswered(reference, error)
        sleep(delay)
    remaining = budget - (clock() - started)
    return await_operation(
        client,
        resource["operation_id"],
        remaining,
        consumer=consumer,
        first=resource,
        clock=clock,
        sleep=sleep,
    )


# ---------------------------------------------------------------- asyncio


async def start_async(
    client: AsyncJobwardenClient,
    provider: str,
    request: Mapping[str, Any],
    *,
    kind: str = DEFAULT_KIND,
    client_reference: str | None = None,
    **options: Any,
) -> ToolResult:
    reference = client_reference or new_client_reference()
    try:
        resource = await client.submit(
            provider, kind, request, client_reference=reference, **options
        )
    except ApiProblem as problem:
        if client_reference and _token_refused(problem):
            return token_refused_for_reference(problem, reference)
        if _fatal(problem):
            return refused(problem, reference)
        return submit_unanswered(reference, problem)
    except JobwardenError as exc:
        return submit_unanswered(reference, exc)
    return from_resource(resource)


async def check_async(client: AsyncJobwardenClient, operation_id: str) -> ToolResult:
    try:
        return from_resource(await client.get(operation_id))
    except JobwardenError as exc:
        return read_failed(operation_id, exc)


async def pending_async(client: AsyncJobwardenClient) -> list[ToolResult]:
    return [from_resource(r) for r in await client.pending()]


async def cancel_async(client: AsyncJobwardenClient, operation_id: str, reason: str) -> ToolResult:
    try:
        resource = await client.cancel(operation_id, reason)
    except JobwardenError as exc:
        return read_failed(operation_id, exc)
    return _cancelled_view(resource)


async def await_operation_async(
    client: AsyncJobwardenClient,
    operation_id: str,
    max_wait: float,
    *,
    consumer: str | None = None,
    first: Mapping[str, Any] | None = None,
) -> ToolResult:
    budget = wait_budget(max_wait)
    if budget is None:
        return bad_wait(operation_id, max_wait)
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + budget
    last: Mapping[str, Any] = first or {"operation_id": operation_id, "done": False}
    delay: float | None = None
    error: JobwardenError | None = None  # the last attempt's, if it failed
    while not last.get("done"):
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        try:
            last = await client.wait(
                operation_id,
                min(remaining, MAX_SERVER_WAIT_SECONDS),
                within=time_left(deadline, loop.time()),
            )
            delay, error = None, None
        except JobwardenError as exc:
            error = exc
            if isinstance(exc, ApiProblem) and _fatal(exc):
                break
            delay = next_delay(delay, _hint(last), deadline - loop.time())
            await asyncio.sleep(delay)
    if error is None and "message" not in last:  # no time to wait even once: read it
        try:
            last = await client.get(operation_id, within=time_left(deadline, loop.time()))
        except JobwardenError as exc:
            return read_failed(operation_id, exc)
    if isinstance(error, ApiProblem) and error.status == 404:
        return read_failed(operation_id, error)
    refused_token = _token_refused(error)
    if refused_token is not None:
        return refused_while_waiting(last, refused_token)
    if error is not None or "message" not in last:  # the end of the wait was not heard
        return lost_contact(last, loop.time() - started, error or ApiUnreachable("no answer"))
    result = from_resource(last, gave_up_after=loop.time() - started)
    within = claim_time(deadline, loop.time())
    return await claim_if_succeeded_async(client, result, consumer, within=within)


async def start_and_await_async(
    client: AsyncJobwardenClient,
    provider: str,
    request: Mapping[str, Any],
    max_wait: float,
    *,
    kind: str = DEFAULT_KIND,
    client_reference: str | None = None,
    consumer: str | None = None,
    **options: Any,
) -> ToolResult:
    reference = client_reference or new_client_reference()
    budget = wait_budget(max_wait)
    if budget is None:
        return bad_wait_before_start(max_wait, reference)
    loop = asyncio.get_running_loop()
    started = loop.time()
    delay: float | None = None
    while True:
        try:
            resource = await client.submit(
                provider,
                kind,
                request,
                client_reference=reference,
                within=time_left(started + budget, loop.time()),
                **options,
            )
            break
        except ApiProblem as problem:
            if _fatal(problem):
                if delay is not None:  # an earlier attempt went unanswered
                    return refused_after_unanswered(problem, reference)
                if client_reference and _token_refused(problem):  # perhaps an earlier call's
                    return token_refused_for_reference(problem, reference)
                return refused(problem, reference)
            error: JobwardenError = problem
        except JobwardenError as exc:
            error = exc
        delay = next_delay(delay, None, started + budget - loop.time())
        if delay <= 0:
            return submit_unanswered(reference, error)
        await asyncio.sleep(delay)
    return await await_operation_async(
        client,
        resource["operation_id"],
        budget - (loop.time() - started),
        consumer=consumer,
        first=resource,
    )


# ---------------------------------------------------------------- helpers


def _hint(resource: Mapping[str, Any]) -> float | None:
    value = resource.get("metadata", {}).get("poll_after_seconds")
    return float(value) if isinstance(value, int | float) else None


def read_failed(operation_id: str, error: JobwardenError) -> ToolResult:
    """A read that failed says nothing about the job: never failed, never success.

    404 is `not_found` (nothing is known under that id), anything else
    `unknown` (jobwarden could not be read).
    """
    if isinstance(error, ApiProblem) and error.status == 404:
        well_formed = is_operation_id(operation_id)
        return ToolResult(
            "not_found",
            operation_id=operation_id,
            job_id=None,
            done=False,
            message=(
                f"{_nothing_under(operation_id, well_formed)}: nothing is known about it, "
                "so nothing can be reported for it, neither success nor failure. "
                "Do NOT start a new job because of this answer: check the id (pending() lists "
                "yours); if you did start one, start it again with the same client_reference, "
                "which returns the existing operation and never creates a duplicate."
            ),
            error={"code": "not_found", "message": error.detail},
        )
    refused_token = _token_refused(error)
    if refused_token is not None:
        return ToolResult(
            "unknown",
            operation_id=operation_id,
            job_id=None,
            done=False,
            message=(
                f"Could not reach operation {operation_id}: {_refusal_words(refused_token)}. "
                "Its state is unknown: do not report success or failure."
            ),
            error=_refusal_error(refused_token),
        )
    return ToolResult(
        "unknown",
        operation_id=operation_id,
        job_id=None,
        done=False,
        message=(
            f"Could not read operation {operation_id} ({error}). Its state is unknown: do not "
            "report success or failure; try again later."
        ),
        error={"code": "unreachable", "message": str(error)},
    )


def _nothing_under(operation_id: str, well_formed: bool) -> str:
    """What a 404 means, without repeating an id that is not one (it may be hostile)."""
    if well_formed:
        return f"No operation {operation_id} is visible to this token"
    return "That is not an operation id (op_ followed by 26 characters)"


def _cancelled_view(resource: Mapping[str, Any]) -> ToolResult:
    """The operation after a cancel request, told in the cancel's own words where they
    say more than its state: while it runs (requested, not confirmed), and while it
    waits for an operator (the intent recorded for them, or NOT recorded because an
    earlier one stands), which reads as done; a finished operation reads as its end."""
    base = from_resource(resource)
    note = resource.get("cancel", {}).get("message")
    if not note:
        return base
    if not base.done:
        return replace(base, message=note)
    if base.needs_human:
        return replace(base, message=f"{base.message} {note}")
    return base
