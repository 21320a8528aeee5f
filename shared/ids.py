"""Identifiers we mint: operation ids, idempotency tokens, trace context.

Operation ids are ULIDs (time-ordered, so `ORDER BY operation_id` is creation
order and ids sort well in indexes). Tokens carry 128 random bits: enough that
two distinct operations never share one.

Trace and span ids only label telemetry: they come from `random` (as the
OpenTelemetry SDK's own generator does), not from the operating system's
source, which costs a system call on every provider call and webhook.
"""

from __future__ import annotations

import random
import re
import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def ulid(now_ms: int | None = None) -> str:
    """A 26-character Crockford base32 ULID: 48-bit ms timestamp + 80 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | secrets.randbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_operation_id() -> str:
    return "op_" + ulid()


# An operation id: op_ + a ULID (26 Crockford base32 characters). Whatever
# takes one from outside (the API, the console, the agent client, MCP) refuses
# anything else: an id goes into URL paths and queries, where "../openapi.json"
# or "op_...:wait?max_wait=5&" would reach another resource.
OPERATION_ID_PATTERN = "^op_[0-9A-HJKMNP-TV-Z]{26}$"
OPERATION_ID = re.compile(OPERATION_ID_PATTERN)


def is_operation_id(value: object) -> bool:
    return isinstance(value, str) and OPERATION_ID.fullmatch(value) is not None


def new_idempotency_token() -> str:
    return "idem_" + secrets.token_hex(16)


def new_trace_id() -> str:
    """32 hex digits, never all zeros (W3C Trace Context calls that invalid)."""
    return f"{random.getrandbits(128) or 1:032x}"


def new_span_id() -> str:
    """16 hex digits, never all zeros (W3C Trace Context calls that invalid)."""
    return f"{random.getrandbits(64) or 1:016x}"


def traceparent(trace_id: str, span_id: str | None = None) -> str:
    """W3C Trace Context `traceparent` header for an outbound call (sampled)."""
    return f"00-{trace_id}-{span_id or new_span_id()}-01"


def trace_id_from_traceparent(value: str | None) -> str | None:
    """The trace id of an incoming `traceparent`, or None if absent/invalid."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if not match or match.group(1) == "0" * 32:
        return None
    return match.group(1)
