"""RFC 9457 problem details: every error of the agent API has the same shape.

`type` is a stable URN per kind of problem, so a client branches on it instead
of parsing `detail`, which is written for people (and models) to read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from starlette.responses import JSONResponse, Response

PROBLEM_MEDIA_TYPE = "application/problem+json"
_TYPE_PREFIX = "urn:jobwarden:problem:"
# Every 503 says when to come back (RFC 9110 Retry-After): the agent client and
# generic HTTP clients back off on it. Two seconds: long enough for a pool slot
# or a restarted database, short enough not to stall a waiting agent.
RETRY_AFTER_SECONDS = 2


def json_default(value: Any) -> Any:
    """JSON for what the database hands back (timestamps, numeric columns)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class ApiJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=json_default, ensure_ascii=False).encode("utf-8")


class Problem(Exception):
    """An error answer; raised anywhere in a handler, rendered once at the edge."""

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.headers = dict(headers or {})
        if status == 503:
            self.headers.setdefault("Retry-After", str(RETRY_AFTER_SECONDS))
        self.extra = dict(extra or {})

    def body(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": _TYPE_PREFIX + self.kind,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance:
            body["instance"] = instance
        body.update(self.extra)
        return body

    def response(self, instance: str | None = None) -> Response:
        return ApiJSONResponse(
            self.body(instance),
            status_code=self.status,
            headers=self.headers,
            media_type=PROBLEM_MEDIA_TYPE,
        )


def unauthenticated(detail: str) -> Problem:
    # One detail for every failure mode would be kinder to attackers than to
    # operators; these say what to fix without saying whether a token exists.
    return Problem(
        401,
        "unauthenticated",
        "Authentication required",
        detail,
        headers={"WWW-Authenticate": 'Bearer realm="jobwarden"'},
    )


def not_found(operation_id: str) -> Problem:
    return Problem(
        404,
        "not-found",
        "No such operation",
        f"No operation {operation_id} is visible to this token.",
    )


def no_result_file(operation_id: str) -> Problem:
    return Problem(
        404,
        "no-result-file",
        "No result file",
        f"Operation {operation_id} has no result stored as a file (none yet, or one kept "
        "inline only: read `result` on the operation).",
    )


def result_not_here(operation_id: str) -> Problem:
    """The file is on the reconciler's host, not this one (or not readable by us)."""
    return Problem(
        404,
        "result-not-on-this-host",
        "Result file not on this host",
        f"Operation {operation_id}'s result file is not in this receiver's results_dir: it "
        "is on the reconciler's host (the operator can give this receiver read access).",
    )


def archived(operation_id: str, archive: str) -> Problem:
    """Evidence that left the database for an archive: there, not gone (never an empty page)."""
    return Problem(
        410,
        "archived",
        "Moved to an evidence archive",
        f"The failed items of {operation_id} were moved to the evidence archive {archive}; "
        "an operator reads them there (jobwarden audit proof --archive).",
    )


def malformed_id() -> Problem:
    """A path segment that cannot be an operation id; not repeated (it may be hostile)."""
    return Problem(
        404,
        "not-found",
        "No such operation",
        "That is not an operation id (op_ followed by 26 Crockford base32 characters).",
    )


def invalid(detail: str, *, status: int = 422) -> Problem:
    return Problem(status, "invalid-request", "Invalid request", detail)


def unavailable(detail: str) -> Problem:
    return Problem(
        503,
        "unavailable",
        "Temporarily unavailable",
        detail,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def too_many_waits(limit: int, retry_after: int) -> Problem:
    """A caller holding `limit` long-polls already: wait for one of them to answer first."""
    return Problem(
        429,
        "too-many-waits",
        "Too many long-polls for this token",
        f"This token already holds {limit} long-polls (the most one caller may hold at "
        "once); wait for one of them to answer, or retry after Retry-After seconds.",
        headers={"Retry-After": str(retry_after)},
    )
