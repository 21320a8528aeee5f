"""What one leaf of the evidence log covers, for every kind of evidence row.

Defined here once and used by both sides: the sequencer hashes rows into
leaves, and `jobwarden audit verify` recomputes every leaf, so neither trusts
a hash the database could have rewritten.

A row version is its *document*: canonical JSON of its covered columns (keys
sorted, no spaces, UTF-8; timestamps RFC 3339 UTC with microseconds; numerics
as decimal text; JSON documents as parsed values). A leaf is `LEAF_PREFIX` +
canonical JSON of {"kind", "id", "deleted", "row", "fixed", "settled"}: the
sha256 of the document, of the columns that never change once written
(`fixed`), and of those written once when the row settles (`settled`: a
call's answer, an event's attachment, an escalation's resolution; null until
then). The log stores those digests beside each leaf, so every leaf, old
versions included, is recomputed from what it claims and bound by the tree;
verify then checks that every version of a row kept its fixed part and that
a settled part never changed.

Covered columns are listed explicitly and versioned with the prefix: a column
added by a later migration is not covered until a new leaf version says so,
so old leaves keep verifying. Every column of each evidence table is covered,
except for `operations`, where the submitted intent is (its other columns are
working state, each change of which is a history row, logged itself).
"""

from __future__ import annotations

import functools
import hashlib
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
    # Of an updatable kind: the columns written once, when `settled_when` (a
    # column) is first not null, and bookkeeping no rule checks (a read's
    # mark, a redelivery counter). Every other column is fixed: no version
    # may change it.
    settled: tuple[str, ...] = ()
    settled_when: str | None = None
    unchecked: tuple[str, ...] = ()
    # (column, value) pairs that keep a row unsettled though `settled_when` is set
    not_settled_while: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def fixed(self) -> tuple[str, ...]:
        loose = {*self.settled, *self.unchecked}
        return tuple(c for c in self.columns if c not in loose)

    @functools.cached_property
    def _pieces(self) -> dict[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """For each document a leaf hashes (the row, its fixed part, its settled
        part): its columns in key order, each with its `"name":` as the
        canonical encoder writes it."""
        return {
            part: tuple((c, _ESCAPE(c) + ":") for c in sorted(part))
            for part in (self.columns, self.fixed, self.settled)
        }

    def _document(self, encoded: Mapping[str, str], columns: tuple[str, ...]) -> bytes:
        """Canonical JSON of `columns` from their values encoded one by one: the
        bytes `_canonical` gives for the same dict (keys sorted, each item
        `"key":value`, comma-separated), without encoding a value twice."""
        items = ",".join(key + encoded[c] for c, key in self._pieces[columns])
        return ("{" + items + "}").encode("utf-8", "surrogatepass")

    def is_settled(self, row: Mapping[str, Any]) -> bool:
        if self.settled_when is None or row[self.settled_when] is None:
            return False
        return all(row[column] != value for column, value in self.not_settled_while)

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
                "request",
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
            settled=(
                "method",
                "url",
                "request_headers",
                "traceparent",
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
                "anomalies",
            ),
            settled_when="finished_at",
            # a status read recorded as lost is completed by its late answer
            not_settled_while=(("error_category", "lost"),),
            unchecked=("marked",),
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
            settled=("operation_id", "attached_at"),
            settled_when="operation_id",
            unchecked=("duplicate_deliveries",),
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
            settled=("resolved_at", "decision_id"),
            settled_when="resolved_at",
        ),
        # an archive's record: which rows it moved out of the database (the
        # manifest digest), so that list cannot grow after the fact
        LeafKind(
            "archive",
            "log_archives",
            (
                "archive_id",
                "name",
                "cutoff",
                "checkpoint_size",
                "operations",
                "rows",
                "manifest_sha256",
                "archived_at",
            ),
        ),
    )
}


class LeafError(ValueError):
    """A row whose columns cannot be encoded (a missing column, an unknown type)."""


def _value(kind: LeafKind, column: str, value: Any) -> Any:
    # jsonb arrives decoded (every connection of shared.db sets the codec) and
    # arrays as lists: JSON values already, which the final dumps encodes
    # canonically (sorted keys, floats by repr). A str is a JSON string value.
    if value is None or type(value) in _AS_IS:
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise LeafError(f"{kind.name}.{column}: a timestamp without a time zone")
        return value.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bool | int | str | float | list | tuple | dict):
        return value  # a subclass (an enum's str, a Record's list)
    raise LeafError(f"{kind.name}.{column}: cannot encode a {type(value).__name__}")


_AS_IS = frozenset({str, int, bool, float, list, dict})


# The canonical encoder, made once: json.dumps with these arguments builds a
# JSONEncoder on every call, a third of the cost of encoding a small value.
_ENCODE = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
# The string escaper that encoder uses (ensure_ascii=False).
_ESCAPE = json.encoder.encode_basestring


def _canonical(document: Any) -> bytes:
    return _ENCODE(document).encode("utf-8", "surrogatepass")


def _encoded(kind: LeafKind, column: str, value: Any) -> str:
    """`_canonical` of one column's value, as text. The scalars most columns
    hold are written directly, as json writes them (its string escaper, the
    int's repr): the encoder's own call costs more than a short string."""
    of = type(value)
    if of is str:
        return _ESCAPE(value)
    if value is None:
        return "null"
    if of is bool:
        return "true" if value else "false"
    if of is int:
        return int.__repr__(value)
    converted = _value(kind, column, value)
    return _ESCAPE(converted) if type(converted) is str else _ENCODE(converted)


def _encoded_row(kind: LeafKind, row: Mapping[str, Any]) -> dict[str, str]:
    try:
        return {c: _encoded(kind, c, row[c]) for c in kind.columns}
    except KeyError as exc:
        raise LeafError(f"{kind.name}: the row has no column {exc}") from None


def row_document(kind: LeafKind, row: Mapping[str, Any]) -> bytes:
    """The row version as the log covers it (what a receipt shows)."""
    return kind._document(_encoded_row(kind, row), kind.columns)


@dataclass(frozen=True)
class Digests:
    """What a leaf commits to of one row version (None: deleted / not settled)."""

    row: bytes | None
    fixed: bytes | None
    settled: bytes | None

    @classmethod
    def of(cls, kind: LeafKind, row: Mapping[str, Any] | None) -> Digests:
        if row is None:
            return cls(None, None, None)
        # Each column converted and encoded once; the three documents are
        # joined from those pieces (the sequencer hashes every row version of
        # the log here: encoding a webhook's payload once per document cost
        # more than the rest of its leaf).
        encoded = _encoded_row(kind, row)
        row_digest = hashlib.sha256(kind._document(encoded, kind.columns)).digest()
        # A kind with no loose column (written once) fixes the whole row: the
        # same bytes, hence the same digest, without joining them again.
        fixed = (
            row_digest
            if kind.fixed == kind.columns
            else hashlib.sha256(kind._document(encoded, kind.fixed)).digest()
        )
        settled = (
            hashlib.sha256(kind._document(encoded, kind.settled)).digest()
            if kind.is_settled(row)
            else None
        )
        return cls(row_digest, fixed, settled)


def digests_of_document(kind: LeafKind, document: bytes) -> Digests:
    """The digests of a row version from its document alone (an archived row, whose
    database row is gone): its columns are JSON values already, so re-encoding
    a part of them gives the bytes `Digests.of` hashed."""
    try:
        row = json.loads(document.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LeafError(f"{kind.name}: not a row document ({exc})") from None
    if not isinstance(row, dict) or set(row) != set(kind.columns):
        raise LeafError(f"{kind.name}: the document does not have this kind's columns")
    fixed = hashlib.sha256(_canonical({c: row[c] for c in kind.fixed})).digest()
    settled = (
        hashlib.sha256(_canonical({c: row[c] for c in kind.settled})).digest()
        if kind.is_settled(row)
        else None
    )
    return Digests(hashlib.sha256(document).digest(), fixed, settled)


def leaf_data(kind_name: str, row_id: str, digests: Digests) -> bytes:
    """The bytes a leaf hashes: which row, whether it is gone, and its version's digests."""

    # Canonical JSON of {"kind", "id", "deleted", "row", "fixed", "settled"},
    # written out in its keys' order: a digest is hex (nothing to escape) or null.
    text = (
        f'{{"deleted":{"true" if digests.row is None else "false"},'
        f'"fixed":{_hexed(digests.fixed)},"id":{_ESCAPE(row_id)},'
        f'"kind":{_ESCAPE(kind_name)},"row":{_hexed(digests.row)},'
        f'"settled":{_hexed(digests.settled)}}}'
    )
    return LEAF_PREFIX + text.encode("utf-8", "surrogatepass")


def _hexed(value: bytes | None) -> str:
    return "null" if value is None else f'"{value.hex()}"'
