"""The provider's public HTTP contract: create, status, cancel, result, errors, lookup."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.simulator.observe import Exchange, Handler, exchange_of, observed
from shared.simulator.payloads import (
    accepted_body,
    content_digest,
    error_body,
    failed_items,
    fingerprint,
    result_body,
    result_document,
    status_body,
)
from shared.simulator.requestlog import RequestKind
from shared.simulator.runtime import Simulation
from shared.simulator.scripts import (
    LOSES_FIRST_RESPONSE,
    JobParams,
    ParamError,
    Script,
    parse_params,
    parse_script,
)
from shared.simulator.shape import ApiShape
from shared.simulator.state import (
    IdempotencyRecord,
    Job,
    NotCancellable,
    StoredResponse,
)

# Upper bound on how long a create response waits for its own webhooks
# (webhook_before_create_response): room for the redelivery backoff on
# loopback, short enough that a dead receiver cannot stall the client forever.
ANNOUNCE_BEFORE_RESPONSE_SECONDS = 5.0
DEFAULT_PAGE_SIZE = 100
# Keeps one errors page to a bounded response size, like real providers do.
MAX_PAGE_SIZE = 1000


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character \\u-escaped.

    odd_facts' nul_state puts a lone surrogate in a state string: it has no
    UTF-8 encoding, but as an escape it is valid JSON text.
    """

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
        return text.encode("ascii")


def _retry_after(seconds: int, as_date: bool, wall_now: float) -> str:
    """A Retry-After value: delay-seconds, or the HTTP-date that many seconds from now."""
    if as_date:
        # Round up: an HTTP-date has whole seconds and must not come early.
        return formatdate(math.ceil(wall_now) + seconds, usegmt=True)
    return str(seconds)


def _error(status_code: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status_code, headers=headers)


def _job_not_found() -> JSONResponse:
    return _error(404, "not_found", "no such job")


@dataclass(frozen=True)
class CreateRequest:
    script: Script
    params: JobParams
    client_reference: str | None
    webhook_url: str | None
    input: Any
    fingerprint: str
    idempotency_key: str | None


def _optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ParamError(f"{name!r} must be a string")
    return value


def parse_create(
    body: object,
    idempotency_key: str | None,
    time_scale: float,
    default_params: Mapping[str, Any] | None = None,
) -> CreateRequest:
    if not isinstance(body, dict):
        raise ParamError("the body must be a JSON object")
    script = parse_script(body.get("script"))
    params = body.get("params")
    if default_params and (params is None or isinstance(params, dict)):
        params = {**default_params, **(params or {})}
    webhook_url = _optional_str(body, "webhook_url")
    if webhook_url is not None and not webhook_url.startswith(("http://", "https://")):
        raise ParamError("'webhook_url' must be an http(s) URL")
    return CreateRequest(
        script=script,
        params=parse_params(script, params, time_scale),
        client_reference=_optional_str(body, "client_reference"),
        webhook_url=webhook_url,
        input=body.get("input"),
        fingerprint=fingerprint(body),
        idempotency_key=idempotency_key,
    )


async def _hold_until_disconnect(request: Request, seconds: float) -> None:
    """Keep a request unanswered until the client gives up (or `seconds` pass).

    Returning as soon as the client disconnects means a test's server shutdown
    is not held hostage by a response nobody will read.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while (await request.receive())["type"] != "http.disconnect":
                pass


def _encode_page_token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset={offset}".encode()).decode()


def _decode_page_token(token: str) -> int:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("malformed page token") from None
    prefix, _, number = text.partition("=")
    if prefix != "offset" or not number.isdigit():
        raise ValueError("malformed page token")
    return int(number)


def shaped(shape: ApiShape, handler: Handler) -> Handler:
    """`handler`, its JSON answers (status, create, cancel, errors) in `shape`'s words.

    Result documents are plain `Response`s: their bytes are the provider's
    output, not its API, and checksums cover them as served.
    """
    if shape == ApiShape():
        return handler

    async def endpoint(request: Request) -> Response:
        response = await handler(request)
        if not isinstance(response, JSONResponse):
            return response
        headers = {
            name: value
            for name, value in response.headers.items()
            if name not in ("content-length", "content-type")
        }
        body = shape.out(json.loads(bytes(response.body)))
        return AsciiJSONResponse(body, status_code=response.status_code, headers=headers)

    return endpoint


class ProviderApi:
    def __init__(self, simulation: Simulation) -> None:
        self._sim = simulation

    def routes(self) -> list[Route]:
        shape = self._sim.settings.shape

        def route(path: str, kind: RequestKind, handler: Handler, method: str) -> Route:
            endpoint = observed(self._sim, kind, shaped(shape, handler))
            return Route(path, endpoint, methods=[method])

        jobs, job = shape.jobs_path, shape.job_url("{job_id}")
        cancel = f"{job}/cancel" if shape.cancel_method == "POST" else job
        return [
            route(jobs, RequestKind.CREATE, self.create_job, "POST"),
            route(jobs, RequestKind.LOOKUP, self.lookup_jobs, "GET"),
            route(job, RequestKind.STATUS, self.get_job, "GET"),
            route(cancel, RequestKind.CANCEL, self.cancel_job, shape.cancel_method),
            route(f"{job}/result", RequestKind.RESULT, self.get_result, "GET"),
            route(f"{job}/errors", RequestKind.ERRORS, self.get_errors, "GET"),
        ]

    def _job(self, request: Request) -> Job | None:
        return self._sim.store.jobs.get(request.path_params["job_id"])

    # -- create -----------------------------------------------------------

    async def create_job(self, request: Request) -> Response:
        sim = self._sim
        exchange = exchange_of(request)
        sim.store.stats.creates_total += 1
        shape = sim.settings.shape
        try:
            sent = await request.json()
        except ValueError:
            return _error(422, "invalid_request", "the body must be JSON")
        try:
            key = shape.idempotency_key(request.headers, sent)
            create = parse_create(
                shape.into(sent), key, sim.settings.time_scale, shape.default_params
            )
        except ParamError as exc:
            return _error(422, "invalid_request", str(exc))

        key = create.idempotency_key
        honour = (
            key is not None
            and sim.settings.honour_idempotency
            and create.script is not Script.NO_IDEMPOTENCY
        )
        if honour and key is not None and key in sim.store.idempotency:
            return self._replay(sim.store.idempotency[key], create, exchange)

        # What identifies "the same create, retried" for fail-once scripts.
        attempt = key or create.client_reference or create.fingerprint
        refusal = self._scripted_refusal(create, attempt)
        if refusal is not None:
            return refusal
        record = IdempotencyRecord(create.fingerprint) if honour else None
        stored = await self._accept(create, record)
        exchange.entry.job_id = stored.body["job_id"]
        if create.script in LOSES_FIRST_RESPONSE and sim.store.first_time(f"lost:{attempt}"):
            return await self._lose_response(request, create, record, exchange)
        return self._job_response(stored, replayed=False)

    @staticmethod
    async def _lose_response(
        request: Request,
        create: CreateRequest,
        record: IdempotencyRecord | None,
        exchange: Exchange,
    ) -> Response:
        """Hold an accepted create unanswered, arming what its retry will meet."""
        if record is not None:
            record.conflict_pending = create.script is Script.TOKEN_CONFLICT
            record.duplicate_pending = create.script is Script.RETRY_SPAWNS_DUPLICATE
        # Logged before the hold, so the log never shows this create as pending.
        exchange.entry.withhold(504)
        await _hold_until_disconnect(request, create.params.hang_seconds)
        return _error(504, "gateway_timeout", "the upstream did not answer in time")

    def _scripted_refusal(self, create: CreateRequest, attempt: str) -> Response | None:
        """Answers that create nothing: a definitive rejection, or a first-attempt 503."""
        if create.script is Script.REJECT:
            return _error(422, "invalid_request", "the provider refused this request")
        if create.script is Script.CREATE_5XX and self._sim.store.first_time(f"5xx:{attempt}"):
            return self._create_unavailable(create.params)
        return None

    def _create_unavailable(self, params: JobParams) -> Response:
        """create_5xx's 503; with Retry-After only if asked, as providers differ on it."""
        headers: dict[str, str] = {}
        if params.create_retry_after is not None:
            headers["Retry-After"] = _retry_after(
                params.create_retry_after, params.retry_after_date, self._sim.wall()
            )
        message = "temporarily unavailable, nothing was created"
        return _error(503, "unavailable", message, **headers)

    async def _accept(
        self, create: CreateRequest, record: IdempotencyRecord | None
    ) -> StoredResponse:
        """Create the job and remember the answer under its key (if honoured).

        The key is held "in progress" while webhook_before_create_response
        waits on its webhooks, so a concurrent same-key request gets a 409.
        """
        idempotency = self._sim.store.idempotency
        key = create.idempotency_key
        if record is not None and key is not None:
            idempotency[key] = record
        try:
            job = self._new_job(create)
            if create.script is Script.WEBHOOK_BEFORE_CREATE_RESPONSE:
                await self._sim.announce_before_response(job, ANNOUNCE_BEFORE_RESPONSE_SECONDS)
            stored = self._first_response(job)
            if record is not None:
                record.response = stored
            return stored
        finally:
            if record is not None and record.response is None and key is not None:
                # Failed mid-way (cancelled): free the key rather than block it forever.
                idempotency.pop(key, None)

    def _new_job(self, create: CreateRequest) -> Job:
        job = self._sim.store.new_job(
            create.script,
            create.params,
            client_reference=create.client_reference,
            webhook_url=create.webhook_url,
            idempotency_key=create.idempotency_key,
            input=create.input,
        )
        if create.script is Script.SYNC:
            # Answered inline: finished now, and nothing left to announce.
            job.settle(self._sim.now())
            job.notified = True
        return job

    def _first_response(self, job: Job) -> StoredResponse:
        body = accepted_body(job, self._sim.now(), self._sim.settings.shape)
        if job.script is Script.SYNC:
            return StoredResponse(200, {**body, "result": result_body(job)})
        return StoredResponse(202, body)

    def _replay(
        self, record: IdempotencyRecord, create: CreateRequest, exchange: Exchange
    ) -> Response:
        if record.fingerprint != create.fingerprint:
            return _error(
                409,
                "idempotency_key_reused",
                "this Idempotency-Key was used with a different request body",
            )
        if record.response is None:
            return _error(
                409,
                "idempotency_key_in_progress",
                "the first request with this Idempotency-Key is still being processed",
            )
        if record.conflict_pending:
            # token_conflict: a broken provider that forgot the first job.
            record.conflict_pending = False
            record.response = self._first_response(self._new_job(create))
        if record.duplicate_pending:
            # retry_spawns_duplicate: the answer is right, but a twin starts behind it.
            record.duplicate_pending = False
            self._new_job(create)
        exchange.entry.job_id = record.response.body["job_id"]
        return self._job_response(record.response, replayed=True)

    def _job_response(self, stored: StoredResponse, *, replayed: bool) -> Response:
        job_id = stored.body["job_id"]
        headers = {"Location": self._sim.settings.shape.job_url(job_id)}
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        job = self._sim.store.jobs.get(job_id)
        if stored.status_code == 202 and job is not None:
            wait = job.params.accept_retry_after
            if wait is not None:  # when to read the job: binds its status reads (pacing)
                headers["Retry-After"] = _retry_after(
                    wait, job.params.retry_after_date, self._sim.wall()
                )
        return JSONResponse(stored.body, status_code=stored.status_code, headers=headers)

    # -- observe ----------------------------------------------------------

    async def get_job(self, request: Request) -> Response:
        sim = self._sim
        job = self._job(request)
        if job is None:
            return _job_not_found()
        with sim.store.stats.status_call(job.job_id):
            if sim.settings.status_latency:
                # Simulated slowness, so overlapping polls can be observed.
                await asyncio.sleep(sim.settings.status_latency)
            if job.limited_reads_served < job.params.limited_reads:
                job.limited_reads_served += 1
                return self._backpressure(job)
            job.record_status_read(sim.now())
            sim.touch(job)
            body = status_body(job, sim.now(), sim.settings.shape)
            exchange_of(request).poll_after = body["poll_after_seconds"]
            return AsciiJSONResponse(body)

    def _backpressure(self, job: Job) -> Response:
        params = job.params
        retry_after = _retry_after(params.retry_after, params.retry_after_date, self._sim.wall())
        if params.status_code == 429:
            return _error(429, "rate_limited", "too many requests", **{"Retry-After": retry_after})
        return _error(503, "unavailable", "try again later", **{"Retry-After": retry_after})

    async def lookup_jobs(self, request: Request) -> Response:
        sim = self._sim
        shape = sim.settings.shape
        jobs = sim.store.by_reference(request.query_params.get(shape.lookup_param))
        for job in jobs:
            sim.touch(job)
        # each listed job in the provider's shape; the envelope is shaped on the way out
        listed = [shape.out(status_body(job, sim.now(), shape)) for job in jobs]
        return AsciiJSONResponse({"jobs": listed})

    # -- cancel -----------------------------------------------------------

    async def cancel_job(self, request: Request) -> Response:
        sim = self._sim
        job = self._job(request)
        if job is None:
            return _job_not_found()
        sim.store.stats.cancels_per_job[job.job_id] += 1
        sim.touch(job)
        try:
            job.request_cancel(sim.now())
        except NotCancellable:
            return _error(409, "not_cancellable", f"the job is already {job.final_state}")
        sim.touch(job)  # cancel_race finished the job: announce it
        # Always "cancelling": the answer to a cancel is never proof of cancellation.
        return JSONResponse({"job_id": job.job_id, "state": "cancelling"}, status_code=202)

    # -- results ----------------------------------------------------------

    def _finished_job(self, request: Request) -> Job | Response:
        job = self._job(request)
        if job is None:
            return _job_not_found()
        self._sim.touch(job)
        if not job.has_result:
            state = job.state(self._sim.now())
            return _error(404, "result_not_available", f"the job is {state}, no result")
        return job

    async def get_result(self, request: Request) -> Response:
        sim = self._sim
        if (job_id := request.path_params["job_id"]) in sim.store.jobs:
            sim.store.stats.result_fetches_per_job[job_id] += 1
        job = self._finished_job(request)
        if isinstance(job, Response):
            return job
        if job.result_expired(sim.now()):
            return _error(410, "result_expired", "the result link has expired")
        body, media_type = result_document(job, sim.settings.shape)
        # checksum_mismatch: the bytes sent are not the ones the checksums cover.
        if job.script is Script.CHECKSUM_MISMATCH:
            digested, body = body, body + b" "
        else:
            digested = body
        return Response(
            body, media_type=media_type, headers={"Content-Digest": content_digest(digested)}
        )

    async def get_errors(self, request: Request) -> Response:
        job = self._finished_job(request)
        if isinstance(job, Response):
            return job
        try:
            page_size = int(request.query_params.get("page_size", DEFAULT_PAGE_SIZE))
            token = request.query_params.get("page_token")
            offset = _decode_page_token(token) if token else 0
        except ValueError as exc:
            return _error(400, "invalid_request", f"bad pagination: {exc}")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            return _error(400, "invalid_request", f"page_size must be 1..{MAX_PAGE_SIZE}")
        items = failed_items(job)
        end = offset + page_size
        next_token = _encode_page_token(end) if end < len(items) else None
        return JSONResponse({"items": items[offset:end], "next_page_token": next_token})
