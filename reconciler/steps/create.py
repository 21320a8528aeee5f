"""Creating the remote job: once, idempotently, and honestly when unsure.

The create is sent only from a stored operation with its stored token. An
ambiguous outcome (timeout, reset, 5xx after sending) is `create_unknown`,
resolved by a same-token retry or a lookup by our client reference — never by a
new token. A provider that cannot deduplicate creates gets one attempt: after
an uncertain one, only a lookup may continue, else a human decides. A refusal
the description says creates nothing (`create.not_created_statuses`, e.g. a
documented 429) is no uncertain attempt: it is back-pressure, and the same
create goes out again after its Retry-After or the backoff. The same
token answered with another job id is never overwritten: both answers stay on
record and the operation stops for a human (needs_attention).

A same-token retry that is answered with a job is cross-checked by a lookup
(a provider may honour the token and still have started a second job). The
cross-check is a recovery point written with the job id, in the same
statement: whatever happens after that commit — a crash, a lost connection —
the next owner runs the cross-check before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from reconciler.calls import NEVER_LEFT, imposed_wait, recorded_response
from reconciler.readings import read_create, read_lookup, read_status
from reconciler.step import NOW, Delay, Step, lease_lost
from reconciler.steps.collect import store_sync_result
from shared import ledger
from shared.db.queries import q
from shared.ledger import webhooks
from shared.ledger.decisions import DEADLINE_READ_GRACE_S
from shared.ledger.errors import JobShared, StaleTransition
from shared.ledger.operations import unstorable_job_id
from shared.ledger.states import STATE_SETS, Evidence, LocalState
from shared.providers import CreateFact, HttpRequest, LookupFact, RequestBuildError
from shared.providers.delivery import may_have_been_delivered
from shared.providers.description import CreateSpec, Idempotency
from shared.providers.requests import RESEND
from shared.providers.responses import unreferenced_listing
from shared.text import holds_exactly

S = LocalState
CROSS_CHECK = "cross_check"
# Without idempotency, an empty lookup proves the lost create never landed only
# once the provider has had time to index it: this many request timeouts after
# the create was sent (40 s at the default 10 s timeout).
LOOKUP_SETTLE_FACTOR = 4
# An inconclusive cross-check (lookup unreachable, incomplete, back-pressure)
# is tried again with backoff this many times; then the provider's own
# same-token answer stands, and that it could not be cross-checked is on
# record. Bounded, so a lookup that keeps refusing cannot hold up the job.
MAX_CROSS_CHECKS = 8
# A 409 to our create, in a row: a request with the same token still in
# progress (Stripe) passes within seconds; one that keeps coming says the token
# is spent on a job we cannot see (Firecrawl: "Idempotency key already used"),
# and resending it until the create deadline (an hour) helps nobody.
CONFLICTS_TOLERANCE = 5
# ...over this long at least: a create a Stripe-like provider still works on
# (its 409 "in progress") may outlive our request timeout by a minute or two.
CONFLICTS_MIN_SECONDS = 600.0


async def step_create(step: Step) -> Delay:
    held = delay = step.held_back()
    if held is None:
        delay = await _create(step)
        held = step.held_back()  # the wait this step's own answer imposed (a 429's)
    # An answer of this step (a create's or a lookup's 429) or an earlier one may
    # hold every call past the create deadline's grace: a human hears of it now.
    if held is None or not _outlasts_deadline(step, held) or not _wants_create(step):
        return delay
    async with step.ctx.pool.acquire() as conn:
        return await _held_past_deadline(step, conn, held)


def _wants_create(step: Step) -> bool:
    return step.op.state in STATE_SETS["wants_create"] and not step.op.remote_job_id


async def _create(step: Step) -> Delay:
    async with step.ctx.pool.acquire() as conn:
        op = step.op
        last = None
        if op.create_attempts > 0:
            last = await conn.fetchrow(q("latest_create_call"), op.operation_id)
            acted = await _act_on_recorded_answer(step, conn, last)
            if acted is not None:
                return acted
        if op.state is S.CANCEL_REQUESTED and op.create_attempts == 0:
            # Cancelled while the only create was in flight, and it never left:
            # no job can exist.
            async with conn.transaction():
                await step.move(
                    conn, S.ABANDONED, "cancelled; no create request ever reached the provider"
                )
            return None
        if (
            op.state is S.CREATE_PENDING
            and op.create_attempts > 0
            and not _made_nothing(step, last)
        ):
            # An earlier attempt has no recorded answer (we died mid-call, or it
            # failed after the bytes may have left): we cannot know if a job exists.
            async with conn.transaction():
                await step.move(
                    conn,
                    S.CREATE_UNKNOWN,
                    f"create attempt {op.create_attempts} has no definitive answer",
                )
        if step.now() >= step.op.create_deadline:
            return await _deadline_passed(step, conn)
        if step.op.state is not S.CREATE_PENDING:
            settled, delay = await _resolve_uncertain(step, conn)
            if settled:
                return delay
        return await _send_create(step, conn)


async def _act_on_recorded_answer(step: Step, conn: Any, last: Any) -> Delay | None:
    """A decisive create answer on record that nobody acted on (we died between the two).

    The answer itself is the recovery point: it is interpreted now, as it
    would have been then, instead of being treated as "no answer" (which would
    cost a retry, or a human for a provider that cannot deduplicate creates).
    Returns None when there is nothing to act on: no answer, an ambiguous one
    (the usual retry or lookup follows), or one that created nothing (nobody
    moves on from it, so it is never "acted on": the usual resend follows).
    `last`: the latest create call on record, or None.
    """
    if last is None or last["finished_at"] is None or last["acted_on"]:
        return None
    fact = _recorded_fact(step, last)
    if fact is None or fact.kind in ("ambiguous", "not_created"):
        return None
    async with conn.transaction():
        await step.reload(conn)
        if step.op.state not in STATE_SETS["wants_create"] or step.op.remote_job_id:
            return None
        retried = last["attempt"] > 1 and await _made_a_job_maybe(step, conn, last["call_id"])
        return await _interpret_create(
            step, conn, fact, last["call_id"], last["attempt"], retried=retried
        )


def _recorded_fact(step: Step, call: Any) -> CreateFact | None:
    """What a recorded create answer shows: parsed again from its stored body when
    that is the body exactly, else from the facts stored on the call (a job id
    with a 2xx); None when neither tells."""
    resp = recorded_response(call, step.adapter.headers_read)
    if resp is not None:
        return read_create(step, resp)
    status, job_id = call["status_code"], call["remote_job_id"]
    if status is not None and 200 <= status <= 299 and job_id:
        return CreateFact("accepted", status, f"HTTP {status} (answer on record)", job_id)
    return None


def _made_nothing(step: Step, last: Any) -> bool:
    """The latest create (`last`) made no job: it failed to connect (nothing was
    sent), or the provider refused it with a status it documents as creating
    nothing. Either way nothing is uncertain (earlier attempts were settled
    when they ended)."""
    if last is None:
        return False
    refused = step.adapter.desc.create.not_created_statuses
    return (
        last["error_category"] in NEVER_LEFT
        or (last["finished_at"] is not None and last["status_code"] in refused)
        or _refused_by_code(step, last)
    )


def _refused_by_code(step: Step, call: Any) -> bool:
    """A create answered with an error code the provider documents as creating
    nothing (`create.not_created_codes`), or with a 4xx carrying Retry-After
    (refused for now, whatever the description lists: parse_create), read again
    from its recorded answer (an answer kept only in part proves nothing).

    Before, a 4xx + Retry-After of a description naming no such code was, at the
    next tick, an attempt without a definitive answer: create_unknown, and a
    human for a create that cannot be looked up."""
    if call["finished_at"] is None:
        return False
    client_refusal = call["status_code"] is not None and 400 <= call["status_code"] < 500
    if not step.adapter.desc.create.not_created_codes and not client_refusal:
        return False
    fact = _recorded_fact(step, call)
    return fact is not None and fact.kind == "not_created"


async def _made_a_job_maybe(step: Step, conn: Any, before_call: int | None) -> bool:
    """Could a create of this operation before `before_call` (any, when None)
    have made a job? Every attempt could, unless the description names refusals
    that create nothing and each one was such a refusal (or never left)."""
    spec = step.adapter.desc.create
    args = (step.op.operation_id, before_call, list(NEVER_LEFT), list(spec.not_created_statuses))
    # a refusal by code, or a 4xx's Retry-After, is in the answer: each remaining
    # call is read again (those neither can be are not parsed: `_refused_by_code`)
    calls = await conn.fetch(q("create_calls_not_refused"), *args)
    return not all(_refused_by_code(step, call) for call in calls)


async def _deadline_passed(step: Step, conn: Any) -> Delay:
    """The create deadline passed: a last look (lookup) before a human is asked.

    No look when no attempt can have made a job (none was sent, or each was
    refused with a status that creates nothing): the human is told so.
    """
    never_sent = step.op.create_attempts == 0
    unread = None
    refused_only = not never_sent and not await _made_a_job_maybe(step, conn, None)
    if not never_sent and not refused_only and step.adapter.desc.lookup.supported:
        found = await _lookup(step, conn)
        if found.job_ids is not None and len(found.job_ids) == 1:
            return await _accept(
                step,
                conn,
                found.job_ids[0],
                found.call_id,
                via="lookup",
                status_url=found.status_url(),
            )
        if found.job_ids is not None and len(found.job_ids) > 1:
            reason = f"lookup found {len(found.job_ids)} remote jobs for our reference"
            return await _conflict(step, conn, reason, found.job_ids)
        unread = _unproven(found)
    if never_sent:
        reason = "create deadline passed before any create request was sent"
    elif refused_only:
        reason = (
            f"create deadline passed: all {step.op.create_attempts} create attempt(s) were "
            "refused with an answer that creates nothing (a status or code the "
            "description lists in create.not_created_statuses or not_created_codes, or a "
            "403/413 with Retry-After: refused for now); no remote job exists"
        )
    else:
        last = await conn.fetchrow(q("latest_create_call"), step.op.operation_id)
        reason = (
            "create deadline passed without proof that a remote job exists or not"
            + (f" ({unread})" if unread else "")
            + _last_create_answer(last, step.op.last_error, step.adapter.desc.create)
            + _cancel_never_sent(step)
        )
    async with conn.transaction():
        await step.reload(conn)
        await step.move(conn, S.NEEDS_ATTENTION, reason, create_attempts=step.op.create_attempts)
    return None


def _cancel_never_sent(step: Step) -> str:
    """A cancel asked while the create was uncertain waits for the job id, which the
    deadline now leaves unknown: the human must hear it was never sent, or a job
    that does exist runs on, watched by nobody and stopped by nobody."""
    if step.op.state is not S.CANCEL_REQUESTED:
        return ""
    return (
        "; a cancel was asked meanwhile and never sent (no job id to send it to): "
        "if the job exists at the provider, cancel it there"
    )


def _last_create_answer(call: Any, last_error: Any = None, create: CreateSpec | None = None) -> str:
    """What the uncertain create got, for the human it goes to (a 429 whose
    provider does not document it as creating nothing, a timeout...), with the
    provider's own code and words when that answer carried them (`last_error`,
    recorded from it: `_interpret_create`), and, for a 2xx, why it was no job."""
    if call is None:
        return ""
    if call["status_code"] is not None:
        answer = f"HTTP {call['status_code']}" + _providers_words(call, last_error)
        answer += _why_no_job(call["status_code"], create)
        if call["not_before"] is not None:
            answer += f", asking to wait until {call['not_before']:%Y-%m-%dT%H:%M:%SZ}"
        if call["status_code"] >= 400:
            # the one fix in the description's hands: a refusal the provider's docs
            # say created nothing (a 429 most often) goes again, never to a human
            answer += (
                " (if the provider documents this answer as creating nothing, list it "
                "in create.not_created_statuses: it is then sent again)"
            )
    else:
        answer = f"no answer ({call['error_category'] or 'unknown'})"
    return f"; the last create got {answer}"


def _why_no_job(code: int, create: CreateSpec | None) -> str:
    """Why a 2xx create answer left the job uncertain: it named no job id where the
    description reads one, or its code is not listed. Fivetran's sync answers 200
    {"code": "Success", "message": "Sync has been successfully triggered ..."} and
    no id: the human was told only "the last create got HTTP 200 (Success: Sync has
    been successfully triggered ...)", an uncertain create that read as a success."""
    if create is None or not 200 <= code < 300:
        return ""
    if code not in create.accepted_statuses and code not in create.sync_result_statuses:
        return ", a code create.accepted_statuses does not list"
    if code not in create.accepted_statuses and create.sync_result is not None:
        # a code that is the result inline: uncertain for the result it lacks, job
        # id or none (such an answer naming its job was told "naming no job id")
        return f", carrying no result at create.sync_result ({create.sync_result.text})"
    where = create.job_id.text if create.job_id is not None else "the response"
    return f", naming no job id (create.job_id: {where})"


def _providers_words(call: Any, last_error: Any) -> str:
    """` (code: message)` of the error recorded from this create answer, if any.

    A 2xx naming no job but an error (MiniMax's HTTP 200 {"task_id": "",
    "base_resp": {"status_code": 1026, "status_msg": "input new_sensitive"}}) told
    the human only "HTTP 200", as if the provider had said nothing."""
    if not isinstance(last_error, dict) or last_error.get("status") != call["status_code"]:
        return ""
    words = [str(w) for w in (last_error.get("code"), last_error.get("message")) if w]
    return f" ({': '.join(words)})" if words else ""


async def _resolve_uncertain(step: Step, conn: Any) -> tuple[bool, Delay]:
    """For create_unknown (or a cancel waiting on an unresolved create).

    Returns (True, delay) when this step is settled, or (False, None) to go on
    and (re)send the create with the same token. A cancel waiting on an
    unresolved create never resends it: a lookup finds the job to cancel or
    proves there is none, and without a lookup a human decides.
    """
    desc = step.adapter.desc
    expired = await _token_expired(step, conn)
    no_idempotency = desc.create.idempotency is Idempotency.NONE or expired
    cancelling = step.op.state is S.CANCEL_REQUESTED
    if not no_idempotency and not cancelling and not await _our_id_taken(step, conn):
        return False, None  # the same-token retry is safe; a lookup cross-checks its answer
    if not desc.lookup.supported and cancelling:
        # Whatever the idempotency: a retry would start the job the caller just
        # asked to stop (one extra create can cost money), and only a lookup
        # could show whether it exists. A human decides.
        async with conn.transaction():
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                f"cancel requested before the job id was known, and provider {desc.name} "
                "offers no lookup: whether a job exists is unknown, and sending the create "
                "again only to cancel it could start one",
                create_attempts=step.op.create_attempts,
            )
        return True, None
    if not desc.lookup.supported:
        said = _last_create_answer(
            await conn.fetchrow(q("latest_create_call"), step.op.operation_id),
            step.op.last_error,
            desc.create,
        )
        async with conn.transaction():
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                _no_safe_resend(desc.name, desc.create.idempotency_window_seconds, expired) + said,
                create_attempts=step.op.create_attempts,
            )
        return True, None
    found = await _lookup(step, conn)
    if found.job_ids is None:
        return True, step.until_allowed(step.retry(step.op.lookup_attempts))
    job_ids, call_id = found.job_ids, found.call_id
    if len(job_ids) == 1:
        return True, await _accept(
            step, conn, job_ids[0], call_id, via="lookup", status_url=found.status_url()
        )
    if len(job_ids) > 1:
        return True, await _conflict(
            step, conn, f"lookup found {len(job_ids)} remote jobs for our reference", job_ids
        )
    if not found.complete or not await _absence_settled(step, conn):
        # A list can lag behind a create it has not indexed yet: an empty answer
        # soon after the create proves nothing. Look again later.
        return True, step.retry(step.op.lookup_attempts)
    if step.op.state is S.CANCEL_REQUESTED:
        # Nothing to cancel, as far as the provider can tell; creating the job
        # only to cancel it would be absurd. A human closes it, told that this is
        # the list's word, not a proof: a create the provider registered after
        # its list was read made a job all the same, which nobody would stop.
        async with conn.transaction():
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                "cancel requested before the job id was known, and the provider's lookup "
                "shows no job for this operation: most likely nothing to cancel; a create "
                "the provider registered after its list was read would still have made a "
                "job, so check there before closing this",
            )
        return True, None
    return False, None  # proven absent: sending again cannot duplicate


def _no_safe_resend(name: str, window: int | None, expired: bool) -> str:
    """Why an uncertain create goes to a human, in the description's own terms."""
    if expired:
        return (
            f"provider {name} honours our idempotency token only {window}s after the first "
            "attempt (create.idempotency_window_seconds), too little is left for a resend "
            "to arrive inside it, and it offers no lookup: an uncertain create cannot be "
            "retried safely (it might run twice)"
        )
    return (
        f"provider {name} cannot deduplicate creates and offers no lookup: an "
        "uncertain create cannot be retried safely (it might run twice)"
    )


async def _token_expired(step: Step, conn: Any) -> bool:
    """Would a resend arrive after the provider stops honouring our token?

    `create.idempotency_window_seconds` counts from the first attempt (the
    earliest the provider may have taken it: MediaConvert honours a
    clientRequestToken "within one minute of a successful request"), and a resend
    may take the whole request timeout to arrive. Before, a lost create was
    resent with the same token however late (after an outage, a reconciler
    down), and MediaConvert ran the job a second time."""
    window = step.adapter.desc.create.idempotency_window_seconds
    if window is None:
        return False
    first = await conn.fetchrow(q("first_create_call"), step.op.operation_id)
    if first is None or first["started_at"] is None:
        return False
    since = (step.now() - first["started_at"]).total_seconds()
    return bool(since + step.adapter.desc.limits.request_timeout >= window)


async def _our_id_taken(step: Step, conn: Any) -> bool:
    """Did the last create answer 409 to a job id we chose (`client_job_id`), with a
    lookup to read that job by? Then the job most likely exists, made by our own
    earlier attempt whose answer was lost (Fireworks' ALREADY_EXISTS for a
    batchInferenceJobId it holds): it is looked up (the lookup's read is what
    proves it ours) rather than sent again, since every resend would get the same
    409. Where `create.already_exists_codes` names the codes the provider documents
    for it (BigQuery's "duplicate"), only a 4xx carrying one counts, a 409 or not
    (Transcribe's 400 ConflictException: before, a human was told of a job we ran). Before, the
    create was resent at the backoff until the create deadline's lookup, or ten
    minutes of 409s sent it to a human
    (`test_unseen_round54.py::test_fireworks_a_lost_create_is_the_job_of_the_id_we_chose`)."""
    desc = step.adapter.desc
    if desc.create.idempotency is not Idempotency.CLIENT_JOB_ID or not desc.lookup.supported:
        return False
    last = await conn.fetchrow(q("latest_create_call"), step.op.operation_id)
    if last is None or last["finished_at"] is None:
        return False
    if not desc.create.already_exists_codes:
        return bool(last["status_code"] == 409)
    # the codes named, any 4xx carrying one: AWS JSON 1.1 answers a name it holds
    # 400 ConflictException (Transcribe's StartTranscriptionJob)
    if not 400 <= (last["status_code"] or 0) < 500:
        return False
    fact = _recorded_fact(step, last)
    return fact is not None and fact.exists


async def _absence_settled(step: Step, conn: Any) -> bool:
    """Is it long enough since our last create that an empty lookup proves absence?"""
    last = await conn.fetchrow(q("latest_create_call"), step.op.operation_id)
    if last is None:
        return True
    settle = LOOKUP_SETTLE_FACTOR * step.adapter.desc.limits.request_timeout
    # From when the call ended: it was recorded before its wait for a provider
    # slot, so it may have left well after `started_at`.
    since = last["finished_at"] or last["started_at"]
    return bool((step.now() - since).total_seconds() >= settle)


@dataclass(frozen=True)
class Lookup:
    """What a lookup by our reference found.

    `job_ids` is None when it was inconclusive (no answer, a problem, or
    back-pressure: `held_back`; or no match before pages that may hold one
    went unread); `complete` says every page was read, so the list is the
    provider's whole answer, not a prefix of it. `unread` says why pages
    were left unread (the page limit, a next page no one names), and
    `problem` why a page proved nothing, for the human the operation may go to.
    """

    job_ids: list[str] | None
    call_id: int = 0
    complete: bool = False
    held_back: bool = False
    unread: str | None = None
    problem: str | None = None  # why a page was inconclusive, for the human
    # the status URL of each found job whose URL the list names (`lookup.status_url`)
    status_urls: dict[str, str] = field(default_factory=dict)

    def status_url(self) -> str | None:
        """The one found job's status URL, when the lookup read one."""
        return self.status_urls.get(self.job_ids[0]) if self.job_ids else None


def _unproven(found: Lookup) -> str | None:
    """Why a lookup proved nothing (pages unread, a page that proved nothing), for
    the human the operation may go to; None when it gives no reason."""
    why = [found.unread] if found.unread else []
    if found.problem:
        why.append(f"the lookup: {found.problem}")
    return "; ".join(why) or None


# Why a lookup stopped short of the list's end, in the words a human reads.
UNFOLLOWABLE = "the lookup answer says more pages exist but names no next page it can request"


async def _lookup(step: Step, conn: Any) -> Lookup:
    """Page through the provider's lookup, each page recorded before it is sent.

    The call that proves a job is the page that listed it, not the last page
    read: a scan reads on to the end to see any second job for our reference.
    Finding nothing proves absence only if some item read carries a reference
    at all (see `unreferenced_listing`): else the answer is inconclusive.
    """
    desc = step.adapter.desc
    ids: list[str] = []
    urls: dict[str, str] = {}
    token: str | None = None
    listed = last_call = referenced = unreferenced = 0
    blind: str | None = None
    for _ in range(desc.lookup.max_pages):
        if step.held_back() is not None:
            return Lookup(None, held_back=True)
        last_call, fact = await _lookup_page(step, conn, token)
        if fact is None or fact.problem or fact.back_pressure:
            problem = fact.problem if fact is not None else "no answer"
            return Lookup(
                None, last_call, held_back=bool(fact and fact.back_pressure), problem=problem
            )
        if fact.found_job_ids and not listed:
            listed = last_call
        ids.extend(j for j in fact.found_job_ids if j not in ids)
        urls.update((j, url) for j, url in fact.found_status_urls if j not in urls)
        referenced += fact.referenced
        unreferenced += fact.unreferenced
        blind = None if ids else unreferenced_listing(desc.lookup, referenced, unreferenced)
        if fact.more_unreadable:
            return Lookup(
                ids or None,
                listed or last_call,
                unread=UNFOLLOWABLE,
                problem=blind,
                status_urls=urls,
            )
        if fact.next_page_token is None:
            if blind is not None:
                # Every page read, none of its items carrying any reference: a
                # `match` that reads nothing would look the same. No absence.
                return Lookup(None, last_call, problem=blind)
            return Lookup(ids, listed or last_call, complete=True, status_urls=urls)
        token = fact.next_page_token
    # Out of pages: what was found is true, but not the whole answer, and
    # finding nothing in it proves nothing.
    pages = desc.lookup.max_pages
    unread = f"the lookup read lookup.max_pages = {pages} pages and the list goes on"
    return Lookup(ids or None, listed or last_call, unread=unread, problem=blind, status_urls=urls)


async def _lookup_page(step: Step, conn: Any, token: str | None) -> tuple[int, LookupFact | None]:
    """One lookup page asked for by `token`, on record: its call id and what it showed."""
    attempt = await ledger.bump_attempt(conn, "lookup", step.op.operation_id, fence=step.fence)
    if attempt is None:
        raise lease_lost(step.op.operation_id)
    req = step.adapter.build_lookup(step.op.operation_id, step.op.idempotency_token, token)
    call_id = await step.begin_call(conn, req, "lookup", attempt)
    sent = await step.send(req, conn)
    fact: LookupFact | None = None
    if sent.response is not None:
        fact = read_lookup(step, sent.response, token)
    found = fact.found_job_ids if fact else ()
    await step.end_call(
        conn,
        call_id,
        sent,
        remote_job_id=found[0] if len(found) == 1 else None,
        wait=_retry_after(step, sent) if fact is not None and fact.back_pressure else None,
    )
    return call_id, fact


def _retry_after(step: Step, sent: Any) -> float | None:
    """A back-pressure answer's Retry-After, read the way status answers are."""
    if sent.response is None:
        return None
    return read_status(step, sent.response).retry_after_seconds


def _create_request(step: Step) -> tuple[HttpRequest, bool | None]:
    """The create to send, and whether it names our callback URL (None: the
    description's create names none: the provider's own settings call back)."""
    op = step.op
    webhook_url = step.ctx.webhook_url_for(op.provider)
    context = {
        "webhook_url": webhook_url,
        # an earlier attempt may have reached the provider: create.resend_query
        RESEND: "yes" if op.create_attempts > 0 else None,
        "trace_id": op.trace_id,
        "result_deadline_seconds": str(
            max(
                step.adapter.desc.create.min_result_deadline_seconds,
                int((op.result_deadline - step.now()).total_seconds()),
            )
        ),
    }
    req = step.adapter.build_create(
        body=op.request.get("body"),
        idempotency_token=op.idempotency_token,
        client_reference=op.operation_id,
        context=context,
    )
    names = step.adapter.desc.create.asks_callback
    return req, (webhook_url is not None) if names else None


def _unbuildable_create(exc: RequestBuildError, earlier: int) -> str:
    if earlier == 0:
        sent = "it was never sent"
    else:
        attempts = "attempt" if earlier == 1 else "attempts"
        sent = f"this attempt was never sent; {earlier} earlier {attempts} may have reached it"
    return f"the create request cannot be built from the stored request: {exc}; {sent}"


async def _send_create(step: Step, conn: Any) -> Delay:
    op = step.op
    try:
        req, callback_url_sent = _create_request(step)
    except RequestBuildError as exc:
        # Before the recovery point: no attempt counted, no call on record.
        return await step.cannot_build(
            conn, _unbuildable_create(exc, op.create_attempts), create_attempts=op.create_attempts
        )
    async with conn.transaction():  # recovery point: from here on, it may have been sent
        # with what the request asks for: the job's reads follow it (Step.callbacks)
        attempt = await ledger.bump_create_attempt(
            conn, op.operation_id, fence=step.fence, callback_url_sent=callback_url_sent
        )
        if attempt is None:
            if not await ledger.lease_held(conn, op.operation_id, step.fence):
                raise lease_lost(op.operation_id)
            raise StaleTransition(f"{op.operation_id} no longer wants a create (abandoned?)")
        call_id = await step.begin_call(conn, req, "create", attempt, token=op.idempotency_token)
    sent = await step.send(req, conn)
    if sent.response is None:
        async with conn.transaction():
            await step.end_call(conn, call_id, sent)
            await step.reload(conn)
            if sent.transport_failure is None or may_have_been_delivered(sent.transport_failure):
                if step.op.state is S.CREATE_PENDING:
                    await step.move(
                        conn,
                        S.CREATE_UNKNOWN,
                        f"create {sent.error_category}: delivery uncertain",
                    )
            else:
                # Never left this host: not an attempt (a cancel may still abandon
                # the operation), and the same create can simply be made again.
                await ledger.unbump_create_attempt(conn, op.operation_id, fence=step.fence)
                await ledger.set_last_error(
                    conn,
                    op.operation_id,
                    {"category": sent.error_category},
                    fence=step.fence,
                )
        return step.until_allowed(step.retry(attempt))
    fact = read_create(step, sent.response)
    # The answer is on record before we act on it: even if our lease was lost
    # meanwhile, whoever continues can see the job id the provider gave.
    await step.end_call(
        conn,
        call_id,
        sent,
        provider_request_id=fact.provider_request_id,
        remote_job_id=fact.remote_job_id,
        # back-pressure holds every call; a 202's Retry-After only says when to read
        wait=imposed_wait(fact.retry_after_seconds) if fact.back_pressure else None,
    )
    # only an acceptance (its cross-check) or a rejection asks whether an earlier
    # attempt may have made a job: a not_created resend never pays that query
    retried = (
        fact.kind in ("accepted", "rejected")
        and (attempt > 1 or step.op.create_attempts > 1)
        and await _made_a_job_maybe(step, conn, call_id)
    )
    async with conn.transaction():
        await step.reload(conn)
        return await _interpret_create(step, conn, fact, call_id, attempt, retried=retried)


def _outlasts_deadline(step: Step, held: float) -> bool:
    """Does the provider's window (`held` seconds from now) end past the create
    deadline's grace? Then no create or lookup can settle anything in time."""
    allowed_at = step.now() + timedelta(seconds=held)
    return allowed_at > step.op.create_deadline + timedelta(seconds=DEADLINE_READ_GRACE_S)


async def _held_past_deadline(step: Step, conn: Any, held: float) -> Delay:
    """The provider asks for a wait (a create's or a lookup's 429 with a
    Retry-After of a day) that ends past the create deadline's grace: a human
    is asked now, as a status read's wait past the result deadline is escalated
    (steps/poll.py), and nothing is sent.

    Before, the operation waited out the window in create_unknown, its deadline
    passed unseen: the row is not due before the window ends, and a human heard
    of it a day after a two-minute create deadline.
    """
    op = step.op
    allowed_at = step.now() + timedelta(seconds=held)
    if op.create_attempts == 0:
        known = "no create request was ever sent"
    elif await _made_a_job_maybe(step, conn, None):
        last = await conn.fetchrow(q("latest_create_call"), op.operation_id)
        known = (
            "whether a remote job exists is unknown"
            + _last_create_answer(last, op.last_error, step.adapter.desc.create)
            + _cancel_never_sent(step)
        )
    else:
        # as `_deadline_passed` says it: no advice meant for a job that may exist
        # (list the answer as creating nothing: it is; cancel the job: there is none)
        known = (
            "no remote job exists: every create attempt was refused with a status or code "
            "the provider documents as creating nothing"
        )
    reason = (
        f"the provider asks us not to call again until {allowed_at:%Y-%m-%dT%H:%M:%SZ}, "
        f"past the create deadline ({op.create_deadline:%Y-%m-%dT%H:%M:%SZ}) and its grace: "
        f"{known}"
    )
    async with conn.transaction():
        await step.reload(conn)
        if not _wants_create(step):
            return held  # settled meanwhile (a webhook's job id, an operator)
        await step.move(conn, S.NEEDS_ATTENTION, reason, create_attempts=step.op.create_attempts)
    return None


async def _interpret_create(
    step: Step, conn: Any, fact: CreateFact, call_id: int, attempt: int, *, retried: bool
) -> Delay:
    if fact.kind == "accepted":
        assert fact.remote_job_id is not None
        unstorable = unstorable_job_id(fact.remote_job_id)
        if unstorable is not None:
            # Before any comparison: the calls on record hold such an id scrubbed,
            # and this answer, compared with its own call, read as another job id.
            return await _unrecordable(step, conn, unstorable)
        known = [
            r["remote_job_id"]
            for r in await conn.fetch(q("known_remote_job_ids"), step.op.operation_id)
        ]
        others = [j for j in known if j != fact.remote_job_id]
        if others:
            return await _conflict(
                step,
                conn,
                "the same idempotency token was answered with "
                f"another job id ({fact.remote_job_id})",
                [*others, fact.remote_job_id],
            )
        return await _accept(
            step,
            conn,
            fact.remote_job_id,
            call_id,
            via="create",
            status_url=fact.status_url,
            cross_check=retried and step.adapter.desc.lookup.supported,
            retry_after=fact.retry_after_seconds,
            poll_after=fact.poll_after_seconds,
        )
    if fact.kind == "sync_result":
        return await store_sync_result(step, conn, fact, call_id)
    if fact.kind == "rejected":
        error = {
            "status": fact.status_code,
            "reason": fact.reason,
            "code": fact.error.code if fact.error else None,
            "message": fact.error.message if fact.error else None,
        }
        await ledger.set_last_error(conn, step.op.operation_id, error, fence=step.fence)
        if retried:
            # An earlier attempt may have created a job that is running now: a
            # rejection of the retry proves nothing about it.
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                f"the retried create was rejected ({fact.reason}); an earlier attempt may "
                "have created a job",
                error=error,
            )
            return None
        if fact.idempotency_conflict:
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                "provider says our idempotency token belongs to another request",
                error=error,
            )
            return None
        await step.move(conn, S.FAILED, f"create rejected: {fact.reason}", (Evidence.CALL, call_id))
        return None
    if fact.kind == "not_created":
        # Back-pressure, not doubt: no lookup, no human, no state change. The
        # answer's Retry-After already holds every call (end_call); the resend
        # waits for it, else for the backoff. The create deadline bounds this.
        return step.until_allowed(step.retry(attempt, fact.retry_after_seconds))
    # ambiguous: the provider may or may not hold a job
    said = _doubtful_answer(fact, step.op.last_error)
    if said is not None:
        await ledger.set_last_error(conn, step.op.operation_id, said, fence=step.fence)
        await step.reload(conn)
    if step.op.state is S.CREATE_PENDING:
        await step.move(conn, S.CREATE_UNKNOWN, f"create answer ambiguous: {fact.reason}")
    if fact.status_code == 409:
        run = await conn.fetchrow(q("create_conflicts_in_a_row"), step.op.operation_id)
        if run["conflicts"] >= CONFLICTS_TOLERANCE and run["seconds"] >= CONFLICTS_MIN_SECONDS:
            await step.move(conn, S.NEEDS_ATTENTION, _conflicts_cause(run["conflicts"]))
            return None
    return step.until_allowed(step.retry(attempt, fact.retry_after_seconds))


def _doubtful_answer(fact: CreateFact, last_error: Any) -> dict[str, Any] | None:
    """What a doubtful create answer puts on record as last_error, if anything.

    Its own words (a 2xx naming an error instead of a job): the agent reads them,
    and the human a doubt goes to is told them (`_providers_words`). An answer
    with none, after an earlier create answer's words were recorded, is recorded
    too, wordless: else those words stayed as if the last answer had said them
    (two 200s, the first MiniMax's "1002 rate limited", the second naming
    nothing: the human read "the last create got HTTP 200 (1002: rate limited)").
    """
    words = fact.error is not None and bool(fact.error.code or fact.error.message)
    earlier = isinstance(last_error, dict) and "status" in last_error
    if not words and not earlier:
        return None
    return {
        "status": fact.status_code,
        "reason": fact.reason,
        "code": fact.error.code if words and fact.error is not None else None,
        "message": fact.error.message if words and fact.error is not None else None,
    }


def _conflicts_cause(conflicts: int) -> str:
    return (
        f"the provider answered our create HTTP 409 {conflicts} times in a row, over ten "
        "minutes or more, naming no job: a request still in progress would have ended by "
        "now, so the idempotency "
        "token is likely spent on a job we cannot see (find it in the provider's console, "
        "or the job a webhook named in the inbox, and adopt it: jobwarden resolve "
        "OPERATION --decision observing --job-id JOB); a provider that names this "
        "conflict with an error code can have it in create.conflict_reject_codes, to be "
        "told at the first one"
    )


async def _accept(
    step: Step,
    conn: Any,
    job_id: str,
    call_id: int,
    *,
    via: str,
    status_url: str | None = None,
    cross_check: bool = False,
    retry_after: float | None = None,
    poll_after: float | None = None,
) -> Delay:
    """Record the job id (with the status read to send, and any cross-check to run next);
    `retry_after`: when the answer said to read it (no status read comes sooner,
    unless a cross-check follows: see `_first_read`); `poll_after`: the answer's own
    estimate (`create.poll_after_seconds`), the first read's time when polling, kept
    off the row: an estimate holds back no read a delivery wakes."""
    unstorable = unstorable_job_id(job_id)
    if unstorable is not None:
        return await _unrecordable(step, conn, unstorable)
    said = ""
    if status_url is not None and not holds_exactly(status_url):
        # PostgreSQL refused the row (NUL) and the step failed on every lease, the
        # job never recorded: the URL is left out, as when none is given, and the
        # job is read by status.path (without one, the first read asks a human)
        status_url = None
        said = " (its status URL holds NUL or an unpaired surrogate: not recorded)"
    request: dict[str, Any] | None
    try:
        status = step.adapter.build_status(job_id, status_url)
    except RequestBuildError:
        # The job exists (no status URL was given, or its id fits no URL): it is
        # recorded as given, with no status read to mark, and the first status
        # read, which cannot be built either, stops the operation for a human.
        request = None
    else:
        request = status.on_record()
    try:
        # Inside a caller's transaction this is a savepoint; on its own, a transaction.
        async with conn.transaction():
            await ledger.record_remote_job(
                conn,
                step.op.operation_id,
                job_id,
                status_url=status_url,
                create_mode="async",
                fence=step.fence,
                status_request=request,
                follow_up=CROSS_CHECK if cross_check else None,
                # A cross-check that follows is a lookup, not a read: its retries
                # must not wait for the hint (the row's hint holds every release).
                read_after_seconds=None if cross_check else retry_after,
            )
            await step.reload(conn)
            if step.op.state in (S.CREATE_PENDING, S.CREATE_UNKNOWN):
                await step.move(
                    conn,
                    S.ACCEPTED,
                    f"{via} answered with job {job_id}{said}",
                    (Evidence.CALL, call_id),
                )
            # in cancel_requested the job id is all we needed: the cancel goes out next
            # A delivery that came before the job id (the create's answer lost, the
            # job found by a lookup later) woke a step that could not read the job:
            # it is read now rather than at the backstop's time.
            delivered = step.adapter.desc.webhooks is not None and await webhooks.delivered_for(
                conn, step.op.operation_id
            )
    except JobShared:
        # the database refused the job id (its first statement above): the
        # savepoint or transaction is rolled back, nothing of it was written
        return await _shared_job(step, conn, job_id, via)
    if delivered and request is not None and not cross_check and step.op.state is S.ACCEPTED:
        return step.until_allowed(NOW, read=True)
    return step.until_allowed(
        _first_read(step, cross_check, retry_after, poll_after, readable=request is not None)
    )


async def _unrecordable(step: Step, conn: Any, why: str) -> Delay:
    """The provider named a job whose id PostgreSQL cannot hold as given (`why`):
    storing it altered would point every later call at the wrong job."""
    return await _conflict(
        step, conn, f"the provider's job id cannot be recorded as given ({why})", []
    )


async def _shared_job(step: Step, conn: Any, job_id: str, via: str) -> Delay:
    """Another operation holds `job_id` (the database refused it: JobShared): a
    human's, with the holder named. `conn` must not be in the aborted transaction."""
    whose = await ledger.holder_of_job(conn, step.op.provider, job_id, step.op.operation_id)
    return await _conflict(
        step,
        conn,
        f"the provider's {via} answer names job {job_id}, which is already {whose}: two "
        "operations must not share a job (ids reused, or a lookup matching another "
        "operation's job); nothing was recorded",
        [job_id],
    )


def _first_read(
    step: Step,
    cross_check: bool,
    retry_after: float | None,
    poll_after: float | None = None,
    *,
    readable: bool,
) -> float:
    """When to read a job just accepted: on the schedule's first step, not at once.

    A read now would only learn "queued". Polling, the first read is when the
    answer's Retry-After says (an Azure-style 202: not back-pressure, since it
    holds back no other call, but kept on the row as the job's poll hint, so no
    read comes sooner, even when a delivery wakes the operation; not when a
    cross-check follows, whose retries would wait for it), else when the answer's
    own estimate says (`create.poll_after_seconds`, ElevenLabs'
    `expected_duration_sec`: as a status's poll hint, capped at a day, never on the
    row; before it was read, the dub was read at the backoff's pace), else the
    backoff's first (about 2 s) or the provider's fixed poll interval; with webhooks the backstop's
    (webhook_backstop_poll_seconds at the least), or sooner when a delivery
    wakes the operation. The job stays `accepted` until then, and after it
    until a read names the job's state (steps/poll.py). A cross-check or
    a cancel waiting for this job id goes on at once, and so does a read that
    cannot be built (its refusal stops the operation for a human, now rather
    than at the first read).
    """
    if readable and not cross_check and step.op.state is S.ACCEPTED:
        return step.backoff(0, retry_after, poll_after)
    return NOW


async def _conflict(step: Step, conn: Any, reason: str, job_ids: list[str]) -> Delay:
    async with conn.transaction():
        await step.reload(conn)
        await step.move(conn, S.NEEDS_ATTENTION, reason, escalation=reason, remote_job_ids=job_ids)
    return None


async def step_cross_check(step: Step) -> Delay:
    """The recovery point after a same-token retry: does the provider hold another job?

    Runs before anything else while it is pending (see worker.step_for). It
    concludes when a lookup answers in full and lists our job: no stranger
    beside it clears it; a stranger (even on a partial answer) stops the
    operation for a human with every job on record. A lookup that is
    inconclusive, incomplete, held back, or does not list our job yet
    (lookups lag behind creates) is tried again with backoff; after
    MAX_CROSS_CHECKS such answers the provider's own answer stands, and the
    record says it was never cross-checked.
    """
    held = step.held_back()
    if held is not None:
        return held
    job_id = step.op.remote_job_id or ""
    async with step.ctx.pool.acquire() as conn:
        found = await _lookup(step, conn)
        strangers = [j for j in found.job_ids or () if j != job_id]
        if strangers:
            return await _conflict(
                step,
                conn,
                f"same token answered with job {job_id}, but the provider also holds "
                f"{', '.join(strangers)} for our reference",
                [job_id, *strangers],
            )
        if found.complete and found.job_ids is not None and job_id in found.job_ids:
            await ledger.settle_follow_up(conn, step.op.operation_id, CROSS_CHECK, fence=step.fence)
            await step.reload(conn)
            return NOW
        tries = await ledger.retry_follow_up(
            conn, step.op.operation_id, CROSS_CHECK, fence=step.fence
        )
        if tries < MAX_CROSS_CHECKS:
            return step.until_allowed(step.retry(tries))
        why = _unproven(found)
        short = f"; {why}" if why else ""
        note = {
            "code": "cross_check_inconclusive",
            "message": f"the lookup never listed job {job_id} in a complete answer "
            f"({tries} tries{short}); the same-token answer stands unchecked",
        }
        await ledger.settle_follow_up(
            conn, step.op.operation_id, CROSS_CHECK, fence=step.fence, note=note
        )
        await step.reload(conn)
    return NOW
