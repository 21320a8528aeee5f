"""Reading and checking what callers send as JSON bodies.

Three layers, each refusing with a problem that names the field: the bytes
(size, UTF-8, strict JSON, nesting), the values (what PostgreSQL's text and
jsonb cannot store, anywhere in the document), then the shape, by the pydantic
models of `models.py` that also generate the OpenAPI document. Strict on
purpose: an unknown key is refused rather than ignored, so an agent's typo
(`client_ref`) fails loudly instead of silently losing its idempotency.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from starlette.requests import Request

from receiver.api.models import CancelRequest, ClaimRequest, ProviderRequest, SubmitRequest
from receiver.api.params import shown
from receiver.api.problems import Problem, invalid
from receiver.api.text import unstorable
from shared.fingerprint import FingerprintError
from shared.ledger import RequestSpec
from shared.providers.description import HTTP_METHODS, ProviderDescription
from shared.providers.requests import unsendable

# Deeper than any provider's request body; the ledger's canonical JSON
# recurses once per level, and PostgreSQL's jsonb parser has its own stack.
MAX_JSON_DEPTH = 64
_ASCII_LENGTH = re.compile(r"[0-9]{1,15}")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MANTISSA = re.compile(r"[eE]")
_NONZERO_DIGIT = re.compile(r"[1-9]")
Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True)
class SubmitBody:
    provider: str
    kind: str
    request: RequestSpec
    client_reference: str | None
    approval_ref: str | None
    create_deadline_s: float
    result_deadline_s: float
    # The deadlines the caller set (a replay must match them), not defaults.
    given_deadlines: tuple[str, ...] = ()


def declared_length(request: Request) -> int | None:
    """The Content-Length header, or None; a malformed one is a 400, not a crash.

    `str.isdigit()` accepts superscripts that `int()` refuses, and five
    thousand ASCII digits exceed `int()`'s digit limit: both were 500s.
    """
    declared = request.headers.get("content-length")
    if declared is None:
        return None
    if not _ASCII_LENGTH.fullmatch(declared):
        raise invalid("Content-Length must be a byte count in ASCII digits", status=400)
    return int(declared)


async def read_json(request: Request, limit: int) -> Any:
    """The JSON body, refusing more than `limit` bytes before reading them all.

    The parsed value is checked whole (`check_json`) before any handler sees
    it, so no string PostgreSQL cannot store and no number it cannot hold gets
    past this point, whichever field it sits in.
    """
    declared = declared_length(request)
    if declared is not None and declared > limit:
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
    value = parse_json(raw)
    check_json(value)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class _LostNumber(Exception):
    """A number a double cannot tell from zero (`1e-400` would be stored as 0.0)."""


def _exact_float(text: str) -> float:
    """`text` as a float, refusing one that underflows to zero: the caller wrote a
    number that is not zero, and the ledger would store and send 0.0."""
    value = float(text)
    if value == 0.0 and _NONZERO_DIGIT.search(_MANTISSA.split(text, 1)[0]):
        raise _LostNumber(text)
    return value


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: `{"a": 1, "a": 2}` is ambiguous.

    Python keeps the last, other parsers the first; the fingerprint, the
    ledger and the provider must all read the one document the caller meant.
    """
    built = dict(pairs)
    if len(built) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return built


def parse_json(raw: bytes) -> Any:
    """Strict JSON: no NaN/Infinity literals; nesting and huge integers are 400s;
    a key repeated in one object is a 422."""
    try:
        return json.loads(
            raw,
            parse_constant=_refuse_constant,
            parse_float=_exact_float,
            object_pairs_hook=_unique_keys,
        )
    except _LostNumber:
        raise invalid(
            "body has a number too small for a double (it would be stored as 0); "
            "send 0, or the value as a string"
        ) from None
    except _DuplicateKey as exc:
        raise invalid(
            f"body has the key {json.dumps(shown(exc.key))} twice in one object; "
            "each key may appear once"
        ) from None
    except RecursionError:
        # The C scanner recurses once per level: 50,000 `[` exhaust the stack.
        raise invalid(
            f"body is not acceptable JSON: it nests deeper than {MAX_JSON_DEPTH} levels",
            status=400,
        ) from None
    except json.JSONDecodeError as exc:
        raise invalid(f"body is not valid JSON: {exc}", status=400) from None
    except UnicodeDecodeError:
        raise invalid("body is not valid JSON: it is not UTF-8", status=400) from None
    except ValueError as exc:  # NaN/Infinity, or an integer of more than 4300 digits
        reason = str(exc) if "JSON number" in str(exc) else "a number has too many digits"
        raise invalid(f"body is not acceptable JSON: {reason}", status=400) from None


def check_json(value: Any, where: str = "") -> None:
    """Refuse what PostgreSQL's text/jsonb cannot hold, naming the field.

    Iterative, so depth costs no stack; bounded at MAX_JSON_DEPTH because the
    fingerprint's canonicalisation recurses once per level.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        name = path or "body"
        if depth > MAX_JSON_DEPTH:
            raise invalid(f"{name} nests deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, str):
            reason = unstorable(item)
            if reason:
                raise invalid(f"{name} {reason}")
        elif isinstance(item, float) and not math.isfinite(item):
            raise invalid(f"{name} is a number too large to store (beyond a double)")
        elif isinstance(item, dict):
            for key, child in item.items():
                reason = unstorable(key)
                if reason:
                    raise invalid(f"{name} has a key that {reason}")
                stack.append((child, _child(path, key), depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{name}[{i}]", depth + 1) for i, child in enumerate(item))


def _child(path: str, key: str) -> str:
    """`a.b` for plain keys; anything else shown escaped, so no raw bytes are echoed."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path or 'body'}[{json.dumps(shown(key))}]"


def _object(value: Any, where: str, model: type[BaseModel]) -> Mapping[str, Any]:
    """`value` as an object with only `model`'s fields, or a 422 listing the unknown ones."""
    if not isinstance(value, dict):
        raise invalid(f"{where} must be a JSON object")
    allowed = set(model.model_fields)
    unknown = sorted(shown(key) for key in set(value) - allowed)
    if unknown:
        raise invalid(
            f"{where}: unknown field(s) {', '.join(unknown)}; "
            f"expected only {', '.join(sorted(allowed))}"
        )
    return value


def _describe(error: ErrorDetails) -> str:
    """One pydantic error as a sentence naming the field (never the value sent)."""
    path = ".".join(str(part) for part in error["loc"]) or "body"
    if error["type"] == "missing":
        return f"{path} is required"
    if error["type"] == "model_type":
        return f"{path} must be a JSON object"
    if path == "request.method":
        return f"request.method must be one of {', '.join(HTTP_METHODS)}"
    return f"{path}: {error['msg']}"


def validated(model: type[Model], raw: Any) -> Model:
    """`raw` (checked by `check_json`) as `model`, or a 422 naming the first bad field."""
    body = _object(raw, "body", model)
    nested = body.get("request")
    if model is SubmitRequest and isinstance(nested, dict):
        _object(nested, "request", ProviderRequest)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        raise invalid(_describe(errors[0])) from None


def _request_spec(request: ProviderRequest, name: str, desc: ProviderDescription) -> RequestSpec:
    """What will be sent: the provider's create call, with the caller's body.

    `method` and `target` may only restate the configured create call: the
    reconciler always sends that one (build_create), so any other value would
    be stored, fingerprinted and shown as sent while something else was.
    """
    create = desc.create
    if request.method is not None and request.method.upper() != create.method.upper():
        raise invalid(
            f"request.method: provider '{name}' is called with {create.method.upper()} "
            "to create a job; leave request.method out or send that"
        )
    if request.target is not None and request.target != create.path.text:
        raise invalid(
            f"request.target: provider '{name}' creates jobs at its configured path "
            f"{json.dumps(shown(create.path.text, limit=200))}; leave request.target out "
            "or send that path"
        )
    spec = RequestSpec(create.method.upper(), create.path.text, request.body)
    try:
        spec.fingerprint  # noqa: B018 - computed now so a refusal names the field
    except FingerprintError as exc:
        # e.g. two keys that are one after Unicode normalization (NFC).
        raise invalid(f"request.body cannot be canonicalized: {exc}") from None
    _check_sendable(request.body, name, desc)
    return spec


def needs_object_body(name: str, desc: ProviderDescription) -> bool:
    """Whether the provider's create call can only carry a JSON object (or no body)."""
    try:
        _check_sendable([], name, desc)
    except Problem:
        return True
    return False


def _check_sendable(body: Any, name: str, desc: ProviderDescription) -> None:
    """Refuse a body the provider's create call cannot carry, before it is recorded
    (`unsendable`: a body it cannot build would otherwise be accepted with 202 and
    end in needs_attention, never sent)."""
    problem = unsendable(desc, body)
    if problem is not None:
        raise invalid(f"request.body cannot be sent to provider '{name}': {problem}")


def parse_submit(raw: Any, providers: Mapping[str, ProviderDescription]) -> SubmitBody:
    body = validated(SubmitRequest, raw)
    desc = providers.get(body.provider)
    if desc is None:
        known = ", ".join(sorted(providers)) or "none"
        raise invalid(
            f"provider '{shown(body.provider)}' is not configured here (configured: {known})"
        )
    limits = desc.limits
    return SubmitBody(
        provider=body.provider,
        kind=body.kind,
        request=_request_spec(body.request, body.provider, desc),
        client_reference=body.client_reference,
        approval_ref=body.approval_ref,
        create_deadline_s=body.create_deadline_seconds or limits.create_deadline_seconds,
        result_deadline_s=body.result_deadline_seconds or limits.result_deadline_seconds,
        given_deadlines=tuple(
            name
            for name in ("create_deadline_seconds", "result_deadline_seconds")
            if getattr(body, name) is not None
        ),
    )


def parse_cancel(raw: Any) -> str:
    return validated(CancelRequest, raw).reason


def parse_claim(raw: Any) -> ClaimRequest:
    return validated(ClaimRequest, raw)
