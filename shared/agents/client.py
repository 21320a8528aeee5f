"""Python client of the agent API (`/v1/operations`), sync and async.

Both clients build the same requests and read the same answers (the `_Call`
descriptions and `_decode` below); only the sending differs. Errors come in two
kinds a caller must tell apart: `ApiProblem` (the server answered, with an RFC
9457 problem) and `ApiUnreachable` (no answer: a submit may or may not have
been recorded — resubmit with the same client_reference to find out, it never
creates a duplicate).

The async client also follows an operation's event stream (`events`, the API's
SSE endpoint): each transition as the database announces it, which is what the
MCP server turns into progress notifications.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import httpx

from shared.closing import ClosedOnExit

# the client refuses what is not an operation id before sending it
from shared.ids import is_operation_id

# Default per-request timeout: reads answer in milliseconds; ten seconds only
# absorbs a loaded database.
DEFAULT_TIMEOUT_SECONDS = 10.0
# A long-poll is allowed this much longer than the wait it asked for, so the
# server's own answer at max_wait wins over the client's timeout.
WAIT_MARGIN_SECONDS = 10.0
# The server's cap on one long-poll (receiver/api/bodies.py).
MAX_SERVER_WAIT_SECONDS = 300.0
PENDING_PAGE_SIZE = 200
# The API sends a keep-alive comment every 15 s on an idle event stream; a
# stream silent for three of those is dead, not idle.
EVENTS_READ_TIMEOUT_SECONDS = 45.0
# A claim whose answer is lost (no answer, a 5xx, a 429) is sent again with its
# token after each of these pauses, then given up (the caller is told so).
CLAIM_RESEND_SECONDS = (0.2, 0.5, 1.0)
# The shortest timeout a call is given when its caller's time is (nearly) spent:
# httpx refuses a timeout of zero.
MIN_CALL_SECONDS = 0.1


class JobwardenError(Exception):
    """Base class of client errors."""


class ApiUnreachable(JobwardenError):
    """No answer from the API (connection refused, reset, timed out)."""


class OutOfTime(ApiUnreachable):
    """No answer before the caller's time ran out (the call may have been made unheard).

    Raised by `claim_completion` given `within` seconds when no resend fits in it.
    """


class ApiProblem(JobwardenError):
    """The API answered with an error (RFC 9457 problem details)."""

    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        self.status = status
        self.type = str(body.get("type", "about:blank"))
        self.title = str(body.get("title", "HTTP error"))
        self.detail = str(body.get("detail", ""))
        self.body = dict(body)
        super().__init__(f"{status} {self.title}: {self.detail}")

    @property
    def retryable(self) -> bool:
        """Worth asking again later: the server was busy or failing, not refusing."""
        return self.status >= 500 or self.status == 429


class NotAnOperationId(ApiProblem):
    """An id that cannot be an operation's, refused without a request.

    The same answer the API gives such an id (404 not-found), so callers
    handle one case: nothing is known under it.
    """

    def __init__(self) -> None:
        super().__init__(
            404,
            {
                "type": "urn:jobwarden:problem:not-found",
                "title": "No such operation",
                "detail": "That is not an operation id (op_ followed by 26 Crockford base32 "
                "characters).",
            },
        )


def operation_path(operation_id: str, suffix: str = "") -> str:
    """The API path of an operation (plus `:wait`, `/events`...); the id checked first."""
    if not is_operation_id(operation_id):
        raise NotAnOperationId()
    return f"/v1/operations/{operation_id}{suffix}"


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None
    timeout: float | None = None


def _decode(response: httpx.Response) -> Any:
    if response.is_success:
        # Every answer of the API is a JSON object. Anything else with a 2xx
        # (a captive portal's or a proxy's page, a truncated body) is no answer
        # from it: before, it raised JSONDecodeError or TypeError out of the
        # tools; as ApiUnreachable a submit is retried under its reference.
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ApiUnreachable(
                f"{response.request.method} {response.request.url.path}: HTTP "
                f"{response.status_code} whose body is not the API's JSON object"
            )
        return body
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"title": response.reason_phrase or "HTTP error", "detail": response.text[:500]}
    raise ApiProblem(response.status_code, body)


def _submit_call(
    provider: str,
    kind: str,
    request: Mapping[str, Any],
    client_reference: str | None,
    approval_ref: str | None,
    create_deadline_seconds: float | None,
    result_deadline_seconds: float | None,
) -> _Call:
    body: dict[str, Any] = {"provider": provider, "kind": kind, "request": dict(request)}
    optional = {
        "client_reference": client_reference,
        "approval_ref": approval_ref,
        "create_deadline_seconds": create_deadline_seconds,
        "result_deadline_seconds": result_deadline_seconds,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return _Call("POST", "/v1/operations", body=body)


def _wait_call(operation_id: str, max_wait: float) -> _Call:
    bounded = min(max(max_wait, 0.1), MAX_SERVER_WAIT_SECONDS)
    return _Call(
        "GET",
        operation_path(operation_id, ":wait"),
        params={"max_wait": f"{bounded:g}"},
        timeout=bounded + WAIT_MARGIN_SECONDS,
    )


def _cancel_call(operation_id: str, reason: str) -> _Call:
    return _Call("POST", operation_path(operation_id, ":cancel"), body={"reason": reason})


def _claim_call(operation_id: str, consumer: str, claim_token: str) -> _Call:
    body = {"consumer": consumer, "claim_token": claim_token}
    return _Call("POST", operation_path(operation_id, ":claim"), body=body)


def new_claim_token() -> str:
    """A token naming one claim (and its resends), unguessable by any other claimer."""
    return secrets.token_urlsafe(16)


def _claim_lost(exc: JobwardenError) -> bool:
    """The claim may have been made without our hearing it: send it again."""
    return isinstance(exc, ApiUnreachable) or (isinstance(exc, ApiProblem) and exc.retryable)


def _ends_at(within: float | None) -> float | None:
    """When a claim given `within` seconds (for all its resends) must be over."""
    if within is None or math.isinf(within) or math.isnan(within):
        return None
    return time.monotonic() + within


def _time_left(end: float | None) -> float | None:
    return None if end is None else end - time.monotonic()


def _claim_out_of_time(end: float | None, pause: float | None, exc: JobwardenError) -> None:
    """Raise OutOfTime when the claim's time is spent, or the next resend would not fit."""
    if end is None:
        return
    if time.monotonic() + (pause or 0.0) >= end:
        raise OutOfTime(f"no answer to the claim in the time left ({exc})") from exc


def _timeout_of(call: _Call, limit: float | None, default: float) -> Any:
    """The call's own timeout (the client's `default` unless it has one), or
    `limit` seconds when that is shorter: what the caller's deadline leaves."""
    own = call.timeout if call.timeout is not None else default
    if limit is None or math.isnan(limit) or limit >= own:
        return call.timeout if call.timeout is not None else httpx.USE_CLIENT_DEFAULT
    return max(limit, MIN_CALL_SECONDS)


def _failed_items_call(operation_id: str, page_size: int, page_token: str | None) -> _Call:
    params: dict[str, Any] = {"page_size": page_size}
    if page_token:
        params["page_token"] = page_token
    return _Call("GET", operation_path(operation_id, "/failed-items"), params=params)


@dataclass(frozen=True)
class ApiEvent:
    """One server-sent event of an operation's stream: `transition` or `end`."""

    name: str
    data: dict[str, Any]
    event_id: int | None = None


def _event_from(lines: list[str]) -> ApiEvent | None:
    """Assemble one SSE event from its field lines (comments and unknown fields skipped)."""
    name, event_id, data = "message", None, []
    for line in lines:
        field_name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field_name == "event":
            name = value
        elif field_name == "id" and value.isascii() and value.isdigit():
            event_id = int(value)
        elif field_name == "data":
            data.append(value)
    if not data:
        return None
    try:
        body = json.loads("\n".join(data))
    except ValueError as exc:
        raise ApiUnreachable(f"malformed {name} event from the API") from exc
    return ApiEvent(name, body if isinstance(body, dict) else {"value": body}, event_id)


async def _sse_events(lines: AsyncIterator[str]) -> AsyncIterator[ApiEvent]:
    pending: list[str] = []
    async for line in lines:
        if line:
            pending.append(line)
            continue
        event = _event_from(pending)
        pending = []
        if event is None:
            continue
        if event.name == "error":  # the server's own word that the stream broke
            raise ApiProblem(int(event.data.get("status") or 503), event.data)
        yield event


def _list_call(filters: Mapping[str, Any]) -> _Call:
    params = {}
    for key, value in filters.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params[key] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            params[key] = ",".join(str(v) for v in value)
        else:
            params[key] = str(value)
    return _Call("GET", "/v1/operations", params=params)


def _env_settings(env: Mapping[str, str] | None) -> tuple[str, str]:
    env = os.environ if env is None else env
    url, token = env.get("JW_API_URL"), env.get("JW_API_TOKEN")
    if not url or not token:
        raise JobwardenError("set JW_API_URL and JW_API_TOKEN to reach the jobwarden API")
    # what the HTTP client would fail on when built, said as what to mend (never
    # quoting the token): `jobwarden mcp` builds one at start to warn, and its
    # UnicodeEncodeError or InvalidURL was a traceback there
    if not (token.isascii() and token.isprintable()):
        raise JobwardenError(
            "JW_API_TOKEN holds a character an HTTP header cannot carry (not printable "
            "ASCII): set it to the token as issued"
        )
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise JobwardenError(f"JW_API_URL is not a usable URL: {exc}") from None
    return url, token


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


class JobwardenClient:
    """Blocking client (httpx.Client). Safe to share between threads."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url, headers=_headers(token), timeout=timeout, transport=transport
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        url, token = _env_settings(env)
        return cls(url, token)

    def __repr__(self) -> str:
        return f"JobwardenClient({self.base_url!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: _Call, limit: float | None = None) -> Any:
        timeout = _timeout_of(call, limit, self._timeout)
        try:
            response = self._http.request(
                call.method, call.path, params=call.params, json=call.body, timeout=timeout
            )
        except httpx.TransportError as exc:
            raise ApiUnreachable(f"{call.method} {call.path}: {type(exc).__name__}") from exc
        return _decode(response)

    def submit(
        self,
        provider: str,
        kind: str,
        request: Mapping[str, Any],
        *,
        client_reference: str | None = None,
        approval_ref: str | None = None,
        create_deadline_seconds: float | None = None,
        result_deadline_seconds: float | None = None,
        within: float | None = None,
    ) -> dict[str, Any]:
        """Record an operation; the answer is 'started', never 'done'."""
        call = _submit_call(
            provider,
            kind,
            request,
            client_reference,
            approval_ref,
            create_deadline_seconds,
            result_deadline_seconds,
        )
        result: dict[str, Any] = self._send(call, within)
        return result

    def get(self, operation_id: str, *, within: float | None = None) -> dict[str, Any]:
        call = _Call("GET", operation_path(operation_id))
        result: dict[str, Any] = self._send(call, within)
        return result

    def wait(
        self, operation_id: str, max_wait: float = 60.0, *, within: float | None = None
    ) -> dict[str, Any]:
        """Block until done or max_wait (capped at 300 s by the server).

        `within`, in this and the other calls: at most that many seconds for
        the request (what a caller's deadline leaves); by default the client's
        timeout, for a long-poll max_wait plus WAIT_MARGIN_SECONDS.
        """
        result: dict[str, Any] = self._send(_wait_call(operation_id, max_wait), within)
        return result

    def cancel(self, operation_id: str, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = self._send(_cancel_call(operation_id, reason))
        return result

    def claim_completion(
        self,
        operation_id: str,
        consumer: str,
        *,
        claim_token: str | None = None,
        within: float | None = None,
    ) -> bool:
        """True exactly once per (operation, consumer): act only then.

        The claim carries a token of its own and is sent again with it when
        its answer is lost, so a claim made unheard is still answered True
        (to this call only). Raises when every resend went unanswered. With
        `within`, the claim and its resends take at most that many seconds:
        no resend starts once they would not fit (OutOfTime is raised).
        """
        call = _claim_call(operation_id, consumer, claim_token or new_claim_token())
        end = _ends_at(within)
        for pause in (*CLAIM_RESEND_SECONDS, None):
            try:
                return bool(self._send(call, _time_left(end))["claimed"])
            except JobwardenError as exc:
                if not _claim_lost(exc):
                    raise
                _claim_out_of_time(end, pause, exc)
                if pause is None:
                    raise
            time.sleep(pause)
        raise AssertionError("unreachable")  # the last pass returns or raises

    def list_operations(self, **filters: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._send(_list_call(filters))
        return result

    def pending(self) -> list[dict[str, Any]]:
        """This caller's operations that are not over yet, all pages.

        Includes those waiting for a human (done but not final): re-read this at
        the start of every run instead of trusting ids kept in a conversation.
        """
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self.list_operations(
                final=False, mine=True, page_size=PENDING_PAGE_SIZE, page_token=token
            )
            found.extend(page["operations"])
            token = page.get("next_page_token")
            if not token:
                return found

    def failed_items(
        self, operation_id: str, *, page_size: int = 50, page_token: str | None = None
    ) -> dict[str, Any]:
        call = _failed_items_call(operation_id, page_size, page_token)
        result: dict[str, Any] = self._send(call)
        return result


class AsyncJobwardenClient(ClosedOnExit):
    """Non-blocking client (httpx.AsyncClient), same methods as JobwardenClient."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(token), timeout=timeout, transport=transport
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        url, token = _env_settings(env)
        return cls(url, token)

    def __repr__(self) -> str:
        return f"AsyncJobwardenClient({self.base_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: _Call, limit: float | None = None) -> Any:
        timeout = _timeout_of(call, limit, self._timeout)
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params, json=call.body, timeout=timeout
            )
        except httpx.TransportError as exc:
            raise ApiUnreachable(f"{call.method} {call.path}: {type(exc).__name__}") from exc
        return _decode(response)

    async def submit(
        self,
        provider: str,
        kind: str,
        request: Mapping[str, Any],
        *,
        client_reference: str | None = None,
        approval_ref: str | None = None,
        create_deadline_seconds: float | None = None,
        result_deadline_seconds: float | None = None,
        within: float | None = None,
    ) -> dict[str, Any]:
        call = _submit_call(
            provider,
            kind,
            request,
            client_reference,
            approval_ref,
            create_deadline_seconds,
            result_deadline_seconds,
        )
        result: dict[str, Any] = await self._send(call, within)
        return result

    async def get(self, operation_id: str, *, within: float | None = None) -> dict[str, Any]:
        call = _Call("GET", operation_path(operation_id))
        result: dict[str, Any] = await self._send(call, within)
        return result

    async def wait(
        self, operation_id: str, max_wait: float = 60.0, *, within: float | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._send(_wait_call(operation_id, max_wait), within)
        return result

    async def cancel(self, operation_id: str, reason: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._send(_cancel_call(operation_id, reason))
        return result

    async def claim_completion(
        self,
        operation_id: str,
        consumer: str,
        *,
        claim_token: str | None = None,
        within: float | None = None,
    ) -> bool:
        call = _claim_call(operation_id, consumer, claim_token or new_claim_token())
        end = _ends_at(within)
        for pause in (*CLAIM_RESEND_SECONDS, None):
            try:
                return bool((await self._send(call, _time_left(end)))["claimed"])
            except JobwardenError as exc:
                if not _claim_lost(exc):
                    raise
                _claim_out_of_time(end, pause, exc)
                if pause is None:
                    raise
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # the last pass returns or raises

    async def list_operations(self, **filters: Any) -> dict[str, Any]:
        result: dict[str, Any] = await self._send(_list_call(filters))
        return result

    async def pending(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = await self.list_operations(
                final=False, mine=True, page_size=PENDING_PAGE_SIZE, page_token=token
            )
            found.extend(page["operations"])
            token = page.get("next_page_token")
            if not token:
                return found

    async def failed_items(
        self, operation_id: str, *, page_size: int = 50, page_token: str | None = None
    ) -> dict[str, Any]:
        call = _failed_items_call(operation_id, page_size, page_token)
        result: dict[str, Any] = await self._send(call)
        return result

    async def events(self, operation_id: str, *, after: int = 0) -> AsyncGenerator[ApiEvent, None]:
        """The operation's transitions after history seq `after`, then `end` once it is final.

        Woken by the database's NOTIFY, like the long-poll. Iterate it under
        `contextlib.aclosing` so leaving early closes the HTTP stream at once.
        """
        path = operation_path(operation_id, "/events")
        timeout = httpx.Timeout(DEFAULT_TIMEOUT_SECONDS, read=EVENTS_READ_TIMEOUT_SECONDS)
        request = self._http.build_request(
            "GET",
            path,
            params={"after": str(after)},
            headers={"Accept": "text/event-stream"},
            timeout=timeout,
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise ApiUnreachable(f"GET {path}: {type(exc).__name__}") from exc
        try:
            if not response.is_success:
                await response.aread()
                _decode(response)
            async for event in _sse_events(response.aiter_lines()):
                yield event
        except httpx.TransportError as exc:
            raise ApiUnreachable(f"GET {path}: {type(exc).__name__}") from exc
        finally:
            await response.aclose()
