"""What one leaf of the evidence log covers, for every kind of evidence row.

Defined here once and used by both sides: the sequencer hashes rows into
leaves, and `jobwarden audit verify` recomputes every leaf from the rows it
reads, so neither trusts a hash the database could have rewritten. A leaf is
`LEAF_PREFIX` + canonical JSON of {"kind", "id", "row": {covered columns}}
(keys sorted, no spaces, UTF-8; timestamps RFC 3339 UTC with microseconds;
numerics as decimal text; JSON documents as parsed values), or, for a row
that no longer exists when it is sequenced, {"kind", "id", "deleted": true}.

Covered columns are listed explicitly and versioned with the prefix: a column
added by a later migration is not covered until a new leaf version says so,
so old leaves keep verifying. Every column of each evidence table is covered,
except for `operations`, where only the submitted intent is (its other columns
are working state, each change of which is a history row, logged itself).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

LEAF_PREFIX = b"jobwarden/evidence-leaf/v1\n"


@dataclass(frozen=True)
class LeafKind:
    """One evidence table as the log sees it."""

    name: str
    table: str
    columns: tuple[str, ...]
    # Rows the ledger completes after inserting them (a call's answer, an
    # event's attachment, an escalation's resolution): each change is a new
    # leaf. Every other kind is written once, so a second version is tampering.
    updatable: bool = False

    def row_id(self, row: Mapping[str, Any]) -> str:
        """The row's key as log_queue holds it (SQL: the id column as text)."""
        if self.name == "failure":
            return f"{row['result_id']}/{row['item_key']}"
        return str(row[self.columns[0]])


KINDS: dict[str, LeafKind] = {
    kind.name: kind
    for kind in (
        LeafKind(
            "operation",
            "operations",
            (
                "operation_id",
                "provider",
                "kind",
                "client_reference",
                "request_fingerprint",
                "idempotency_token",
                "idempotency_mode",
                "trace_id",
                "requested_by",
                "approval_ref",
                "created_at",
            ),
        ),
        LeafKind(
            "history",
            "history",
            (
                "history_id",
                "operation_id",
                "seq",
                "at",
                "actor",
                "from_state",
                "to_state",
                "cause",
                "evidence_kind",
                "evidence_id",
                "remote_job_id",
                "prev_hash",
                "row_hash",
            ),
        ),
        LeafKind(
            "call",
            "provider_calls",
            (
                "call_id",
                "operation_id",
                "call_kind",
                "attempt",
                "worker",
                "fence",
                "trace_id",
                "traceparent",
                "idempotency_token",
                "method",
                "url",
                "request_headers",
                "started_at",
                "finished_at",
                "duration_ms",
                "status_code",
                "provider_request_id",
                "response_headers",
                "error_category",
                "response_sha256",
                "response_size",
                "response_body",
                "remote_job_id",
                "not_before",
                "marked",
                "anomalies",
            ),
            updatable=True,
        ),
        LeafKind(
            "observation",
            "observations",
            (
                "observation_id",
                "operation_id",
                "source",
                "call_id",
                "webhook_event_id",
                "remote_state",
                "remote_state_raw",
                "provider_updated_at",
                "fetched_at",
                "progress_completed",
                "progress_total",
                "progress_percent",
                "poll_after_seconds",
                "error",
                "result_url",
                "errors_url",
                "counts",
                "anomalies",
            ),
        ),
        LeafKind(
            "webhook",
            "webhook_events",
            (
                "webhook_event_id",
                "provider",
                "event_id",
                "received_at",
                "signature_scheme",
                "id_signed",
                "remote_job_id",
                "operation_ref",
                "client_reference",
                "remote_state",
                "remote_state_raw",
                "payload",
                "operation_id",
                "attached_at",
                "duplicate_deliveries",
            ),
            updatable=True,
        ),
        LeafKind(
            "result",
            "results",
            (
                "result_id",
                "operation_id",
                "call_id",
                "fetched_at",
                "valid",
                "reason",
                "content_type",
                "size_bytes",
                "sha256",
                "storage_ref",
                "inline",
                "items_total",
                "items_succeeded",
                "items_failed",
            ),
        ),
        LeafKind(
            "failure",
            "result_item_failures",
            ("result_id", "item_key", "code", "message"),
        ),
        LeafKind(
            "decision",
            "decisions",
            ("decision_id", "operation_id", "actor", "decided_at", "decision", "reason"),
        ),
        LeafKind(
            "escalation",
            "escalations",
            (
                "escalation_id",
                "operation_id",
                "opened_at",
                "state",
                "reason",
                "details",
                "resolved_at",
                "decision_id",
            ),
            updatable=True,
        ),
    )
}


class LeafError(ValueError):
    """A row whose columns cannot be encoded (a missing column, an unknown type)."""


def _value(kind: LeafKind, column: str, value: Any) -> Any:
    # jsonb arrives decoded (every connection of shared.db sets the codec), so
    # a str here is a JSON string value, never undecoded text
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise LeafError(f"{kind.name}.{column}: a timestamp without a time zone")
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list | tuple | dict | float):
        return _plain(value)
    raise LeafError(f"{kind.name}.{column}: cannot encode a {type(value).__name__}")


def _plain(value: Any) -> Any:
    """A JSON value with every float given as its shortest repr (json.dumps' own)."""
    return json.loads(json.dumps(value, allow_nan=False))


def leaf_data(kind: LeafKind, row_id: str, row: Mapping[str, Any] | None) -> bytes:
    """The bytes a leaf hashes: the row as it is now, or its deletion."""
    document: dict[str, Any] = {"kind": kind.name, "id": row_id}
    if row is None:
        document["deleted"] = True
    else:
        try:
            document["row"] = {c: _value(kind, c, row[c]) for c in kind.columns}
        except KeyError as exc:
            raise LeafError(f"{kind.name}: the row has no column {exc}") from None
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return LEAF_PREFIX + text.encode("utf-8", "surrogatepass")
