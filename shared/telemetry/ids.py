"""Our trace ids (32 lowercase hex, `shared.ids`) as OpenTelemetry's integers.

Every span of an operation is in the trace whose id is the operation's
`trace_id`. The submit span (the receiver's) takes the operation's *root span
id*, derived from the trace id alone, so any process can name it as the
parent of what it records later (a step, a webhook receipt) without asking
the database or the receiver: the trace is one tree, rooted at the submit.
"""

from __future__ import annotations

import hashlib
import re

# W3C trace-context flags: only "sampled" is defined.
SAMPLED = 0x01
_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")


def trace_id_int(trace_id: str | None) -> int | None:
    """`trace_id` as an integer, or None if it is not a valid (non-zero) 32-hex id."""
    if trace_id is None or not _HEX32.match(trace_id):
        return None
    return int(trace_id, 16) or None


def root_span_id(trace_id: int, operation_id: str) -> int:
    """The span id of an operation's submit span: a digest of its trace id and its
    operation id (never 0). Both, because operations can share a trace id (an
    agent submitting several within its own trace): each still has a root of its own."""
    data = trace_id.to_bytes(16, "big") + operation_id.encode("utf-8")
    digest = hashlib.blake2b(data, digest_size=8).digest()
    return int.from_bytes(digest, "big") or 1


def traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """A W3C `traceparent` header value naming one span."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags & 0xFF:02x}"


def parse_traceparent(value: str | None) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a version-00 `traceparent`, or None if invalid."""
    match = _TRACEPARENT.match(value.strip().lower()) if value else None
    if match is None:
        return None
    trace, span, flags = (int(group, 16) for group in match.groups())
    return (trace, span, flags) if trace and span else None
