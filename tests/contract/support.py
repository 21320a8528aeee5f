"""What every contract test shares: presets as users load them, operations, the usable-answer rules.

The rules a parsed answer must keep, whatever the body (they are what the
reconciler relies on: it catches nothing around the parsers, so any exception
there is a step that fails and is retried forever -- a stall):

- `parse_create`, `parse_status`, `parse_cancel`, `parse_lookup` and result
  validation return a fact, always. "Not usable" is said in the fact
  (`ambiguous`, `problem`, `ok=False`), never by raising.
- `parse_webhook` returns a fact or raises `WebhookParseError` (the receiver
  keeps such an event unmatched).
- request builders return a request or raise `RequestBuildError` /
  `UnsafeJobIdError` (a job id that would change the URL's meaning).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from shared.ledger.states import RemoteState
from shared.providers import (
    CancelFact,
    CreateFact,
    HttpRequest,
    HttpResponse,
    LookupFact,
    ProviderDescription,
    ResultCheck,
    StatusFact,
    WebhookFact,
    parse_providers,
)
from shared.providers.values import MAX_TEXT

CONTRACT_CONFIG = "contract-test.toml"
# A Standard Webhooks secret (whsec_ + base64), for presets whose webhooks need one to load.
WEBHOOK_SECRET = "whsec_Y29udHJhY3QtdGVzdC1zZWNyZXQ="


def load_preset(
    preset: str, env: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> ProviderDescription:
    """The preset as a user's config would name it, with only `overrides` changed."""
    table = {"preset": preset, **(overrides or {})}
    return parse_providers({"providers": {preset: table}}, CONTRACT_CONFIG, env)[preset]


def response(
    status: int, body: Any = None, headers: Mapping[str, str] | None = None
) -> HttpResponse:
    """An HTTP answer carrying `body` as JSON (None: an empty body)."""
    raw = b"" if body is None else json.dumps(body).encode()
    return HttpResponse(status, dict(headers or {"Content-Type": "application/json"}), raw)


def jsonl(lines: Sequence[Any]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


# --------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Operation:
    """One operation of a document: method, path template (as printed), operationId."""

    method: str
    path: str
    operation_id: str

    def pattern(self, server: str) -> re.Pattern[str]:
        """The URL regex: `{name}` is one segment, `{name=a/**}` a glob (google.api.http)."""
        parts: list[str] = []
        position = 0
        template = server.rstrip("/") + self.path
        for match in re.finditer(r"\{(\w+)(?:=([^}]*))?\}", template):
            parts.append(re.escape(template[position : match.start()]))
            glob = match.group(2)
            if glob is None:
                parts.append(r"[^/]+")
            else:
                pieces = (re.escape(piece) for piece in glob.split("/"))
                glob_pattern = "/".join(pieces)
                glob_pattern = glob_pattern.replace(r"\*\*", ".+").replace(r"\*", "[^/]+")
                parts.append(glob_pattern)
            position = match.end()
        parts.append(re.escape(template[position:]))
        return re.compile("".join(parts))


def operation_of(request: HttpRequest, server: str, operations: Sequence[Operation]) -> str:
    """The operationId the request calls; fails the test when no operation matches."""
    parts = urlsplit(request.url)
    url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    found = [
        op.operation_id
        for op in operations
        if op.method == request.method and op.pattern(server).fullmatch(url)
    ]
    assert len(found) == 1, f"{request.method} {url} matches {found or 'no operation'}"
    return found[0]


def query_of(request: HttpRequest) -> dict[str, list[str]]:
    return parse_qs(urlsplit(request.url).query, keep_blank_values=True)


# --------------------------------------------------------------------- usable answers


def check_status(fact: Any) -> StatusFact:
    """A status fact whose fields hold what their types say (text clipped for the ledger)."""
    assert isinstance(fact, StatusFact)
    _check_state(fact.remote_state, fact.raw_state)
    for number in (fact.progress_completed, fact.progress_total, fact.progress_percent):
        assert number is None or isinstance(number, float)
    if fact.counts is not None:
        for count in (fact.counts.total, fact.counts.succeeded, fact.counts.failed):
            assert count is None or (isinstance(count, int) and not isinstance(count, bool))
    _check_error(fact.error)
    assert all(isinstance(file_id, str) for file_id in fact.result_file_ids)
    assert (fact.problem is None) == (fact.raw_state is not None)
    return fact


def check_create(fact: Any) -> CreateFact:
    assert isinstance(fact, CreateFact)
    assert fact.kind in ("accepted", "sync_result", "rejected", "ambiguous")
    if fact.kind == "accepted":
        assert fact.remote_job_id
    _check_state(fact.remote_state, fact.raw_state)
    _check_error(fact.error)
    return fact


def check_cancel(fact: Any) -> CancelFact:
    assert isinstance(fact, CancelFact)
    assert fact.kind in ("accepted", "rejected", "not_found", "ambiguous")
    _check_state(fact.remote_state, fact.raw_state)
    return fact


def check_lookup(fact: Any) -> LookupFact:
    assert isinstance(fact, LookupFact)
    assert all(isinstance(job_id, str) and job_id for job_id in fact.found_job_ids)
    assert not (fact.proven_absent and fact.found_job_ids)
    return fact


def check_webhook(fact: Any) -> WebhookFact:
    assert isinstance(fact, WebhookFact)
    assert fact.references  # an event naming nothing is refused, never a fact
    _check_state(fact.remote_state, fact.raw_state)
    return fact


def check_result(check: Any) -> ResultCheck:
    assert isinstance(check, ResultCheck)
    assert check.ok or check.reason != "valid"
    return check


def _check_state(state: RemoteState | None, raw: str | None) -> None:
    assert state is None or isinstance(state, RemoteState)
    assert raw is None or (isinstance(raw, str) and len(raw) <= MAX_TEXT)
    assert state is None or raw is not None


def _check_error(error: Any) -> None:
    if error is None:
        return
    for text in (error.code, error.message):
        assert text is None or (isinstance(text, str) and len(text) <= MAX_TEXT)
