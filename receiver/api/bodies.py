"""Reading and checking what callers send: JSON bodies and query parameters.

Strict on purpose: an unknown key is refused rather than ignored, so an agent's
typo (`client_ref`) fails loudly instead of silently losing its idempotency.
Every refusal says which field and what is expected.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from receiver.api.problems import invalid
from shared.ledger import RequestSpec
from shared.providers.description import HTTP_METHODS, ProviderDescription

# A long-poll holds a connection and a task: five minutes bounds both, and is
# longer than any sensible tool call (the seed: two to ten minutes per call).
MAX_WAIT_SECONDS = 300.0
DEFAULT_WAIT_SECONDS = 30.0
# Deadlines beyond a month are configuration mistakes, not business needs.
MAX_DEADLINE_SECONDS = 30 * 86400.0
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

_SUBMIT_KEYS = frozenset(
    {
        "provider",
        "kind",
        "request",
        "client_reference",
        "approval_ref",
        "create_deadline_seconds",
        "result_deadline_seconds",
    }
)
_REQUEST_KEYS = frozenset({"method", "target", "body"})


@dataclass(frozen=True)
class SubmitBody:
    provider: str
    kind: str
    request: RequestSpec
    client_reference: str | None
    approval_ref: str | None
    create_deadline_s: float
    result_deadline_s: float


async def read_json(request: Request, limit: int) -> Any:
    """The JSON body, refusing more than `limit` bytes before reading them all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise invalid(f"body larger than {limit} bytes", status=413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise invalid(f"body larger than {limit} bytes", status=413)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise invalid(f"body is not valid JSON: {exc}", status=400) from None


def _object(value: Any, where: str, allowed: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{where} must be a JSON object")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise invalid(
            f"{where}: unknown field(s) {', '.join(unknown)}; "
            f"expected only {', '.join(sorted(allowed))}"
        )
    return value


def optional_text(body: Mapping[str, Any], key: str, *, max_len: int) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= max_len:
        raise invalid(f"{key} must be a string of 1 to {max_len} characters")
    return value


def required_text(body: Mapping[str, Any], key: str, *, max_len: int) -> str:
    value = optional_text(body, key, max_len=max_len)
    if value is None:
        raise invalid(f"{key} is required")
    return value


def _deadline(body: Mapping[str, Any], key: str, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_DEADLINE_SECONDS
    ):
        raise invalid(f"{key} must be a number of seconds in (0, {MAX_DEADLINE_SECONDS:.0f}]")
    return float(value)


def _request_spec(raw: Any, desc: ProviderDescription) -> RequestSpec:
    request = _object(raw, "request", _REQUEST_KEYS)
    method = request.get("method", desc.create.method)
    if not isinstance(method, str) or method.upper() not in HTTP_METHODS:
        raise invalid(f"request.method must be one of {', '.join(HTTP_METHODS)}")
    target = request.get("target", desc.create.path.text)
    if not isinstance(target, str) or not 1 <= len(target) <= 2000:
        raise invalid("request.target must be a string of 1 to 2000 characters")
    return RequestSpec(method.upper(), target, request.get("body"))


def parse_submit(raw: Any, providers: Mapping[str, ProviderDescription]) -> SubmitBody:
    body = _object(raw, "body", _SUBMIT_KEYS)
    provider = required_text(body, "provider", max_len=63)
    desc = providers.get(provider)
    if desc is None:
        known = ", ".join(sorted(providers)) or "none"
        raise invalid(f"provider {provider!r} is not configured here (configured: {known})")
    kind = required_text(body, "kind", max_len=100)
    if "request" not in body:
        raise invalid("request is required: {method?, target?, body}")
    return SubmitBody(
        provider=provider,
        kind=kind,
        request=_request_spec(body["request"], desc),
        client_reference=optional_text(body, "client_reference", max_len=200),
        approval_ref=optional_text(body, "approval_ref", max_len=200),
        create_deadline_s=_deadline(
            body, "create_deadline_seconds", desc.limits.create_deadline_seconds
        ),
        result_deadline_s=_deadline(
            body, "result_deadline_seconds", desc.limits.result_deadline_seconds
        ),
    )


def single_text(raw: Any, key: str, *, max_len: int) -> str:
    """A body that must hold exactly one required string field (cancel, claim)."""
    body = _object(raw, "body", frozenset({key}))
    return required_text(body, key, max_len=max_len)


def query_float(
    params: Mapping[str, str], key: str, *, default: float, low: float, high: float
) -> float:
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise invalid(f"{key} must be a number", status=400) from None
    if not math.isfinite(value) or not low < value <= high:
        raise invalid(f"{key} must be in ({low:g}, {high:g}]", status=400)
    return value


def query_int(params: Mapping[str, str], key: str, *, default: int, high: int) -> int:
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= high:
        raise invalid(f"{key} must be an integer from 1 to {high}", status=400)
    return int(raw)


def query_bool(params: Mapping[str, str], key: str) -> bool | None:
    raw = params.get(key)
    if raw is None or raw == "":
        return None
    lowered = raw.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise invalid(f"{key} must be true or false", status=400)


def encode_page_token(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")


def decode_page_token(raw: str | None) -> str | None:
    """Page tokens are opaque to callers; a mangled one is a 400, not a crash."""
    if not raw:
        return None
    try:
        return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid("page_token is not one this server issued", status=400) from None


def seq_from(value: str | None, where: str) -> int:
    if value is None or value == "":
        return 0
    if not value.isdigit():
        raise invalid(f"{where} must be a history sequence number", status=400)
    return int(value)
