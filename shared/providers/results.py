"""Validate a fetched result against the provider's rules before anyone trusts it.

Checks run cheapest and most fundamental first (fetch status, size, content
type, checksum, parse, required fields, item counts) and stop at the first
failure, whose reason is written for the operator who will read it in the
escalation inbox.

Digests (RFC 9530 `Content-Digest`, legacy RFC 3230 `Digest`) cover the bytes
as sent: the reconciler must hand over the body it received without content
decoding, or ask for `Accept-Encoding: identity`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.providers.description import (
    Checksum,
    ProviderDescription,
    ResultFormat,
    ResultSpec,
)
from shared.providers.facts import ItemFailure, ResultCheck, StatusFact
from shared.providers.messages import HttpResponse
from shared.providers.paths import extract
from shared.providers.values import as_int, item_failure, raw_text

# Failed items kept inline in the check; the rest are counted, not listed
# (SPEC §7: a batch's failures live behind a paginated reference).
MAX_FAILED_ITEMS = 100
# Results up to this size are returned parsed, for storage inline in the row.
PARSED_MAX_BYTES = 256 * 1024

_ALGORITHMS = {"sha-256": hashlib.sha256, "sha-512": hashlib.sha512}


class _Invalid(Exception):
    def __init__(self, reason: str, unavailable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unavailable = unavailable


@dataclass(frozen=True)
class _Items:
    total: int | None
    succeeded: int | None
    failed: int | None
    failures: tuple[ItemFailure, ...]
    truncated: bool


_NO_ITEMS = _Items(None, None, None, (), False)


def validate_result(
    desc: ProviderDescription,
    resp: HttpResponse | Sequence[HttpResponse],
    status: StatusFact | None,
) -> ResultCheck:
    """Check one fetched result, or the parts of a multi-file result taken together.

    `status` is the final status read; its counts give the expected item
    numbers when the description says `item_count = "from_status_counts"`.
    """
    parts = [resp] if isinstance(resp, HttpResponse) else list(resp)
    digests = tuple(hashlib.sha256(p.body).hexdigest() for p in parts)
    whole = hashlib.sha256(b"".join(p.body for p in parts)).hexdigest()
    size = sum(len(p.body) for p in parts)
    content_type = parts[0].content_type if parts else None
    try:
        documents = _check_transport(desc, parts, size)
        items, notes = _check_content(desc.result, documents, status)
    except _Invalid as exc:
        return ResultCheck(
            ok=False,
            reason=exc.reason,
            sha256=whole,
            size=size,
            content_type=content_type,
            part_sha256=digests,
            unavailable=exc.unavailable,
        )
    return ResultCheck(
        ok=True,
        reason="valid",
        sha256=whole,
        size=size,
        content_type=content_type,
        items_total=items.total,
        items_succeeded=items.succeeded,
        items_failed=items.failed,
        failed_items=items.failures,
        failed_items_truncated=items.truncated,
        parsed=_parsed(desc.result, documents) if size <= PARSED_MAX_BYTES else None,
        part_sha256=digests,
        notes=notes,
    )


def validate_inline_result(
    desc: ProviderDescription, value: Any, status: StatusFact | None
) -> ResultCheck:
    """Check a result found inside a response (sync create, inline status).

    Its sha256 is over canonical JSON (sorted keys, compact) so the same
    result always hashes the same whatever key order the provider used.
    """
    body = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(body).hexdigest()
    base: dict[str, Any] = {"sha256": digest, "size": len(body), "content_type": "application/json"}
    if value is None:
        # Nothing arrived (removed after a retention period, never produced):
        # the result is unavailable, not invalid -- there are no bytes to judge.
        return ResultCheck(
            ok=False, reason="no result in the final response", unavailable=True, **base
        )
    if len(body) > desc.result.expect.max_bytes:
        return ResultCheck(
            ok=False, reason=_too_big(len(body), desc.result.expect.max_bytes), **base
        )
    documents = [value] if desc.result.format is ResultFormat.JSON else value
    if desc.result.format is ResultFormat.JSONL and not isinstance(value, list):
        return ResultCheck(ok=False, reason="inline result is not a list of items", **base)
    try:
        items, notes = _check_content(desc.result, documents, status)
    except _Invalid as exc:
        return ResultCheck(ok=False, reason=exc.reason, **base)
    return ResultCheck(
        ok=True,
        reason="valid",
        items_total=items.total,
        items_succeeded=items.succeeded,
        items_failed=items.failed,
        failed_items=items.failures,
        failed_items_truncated=items.truncated,
        parsed=value if len(body) <= PARSED_MAX_BYTES else None,
        notes=notes,
        **base,
    )


# --------------------------------------------------------------------- transport checks


def _check_transport(desc: ProviderDescription, parts: list[HttpResponse], size: int) -> list[Any]:
    expect = desc.result.expect
    for part in parts:
        if not 200 <= part.status_code < 300:
            raise _Invalid(f"result fetch answered HTTP {part.status_code}", unavailable=True)
    if size > expect.max_bytes:
        raise _Invalid(_too_big(size, expect.max_bytes))
    documents: list[Any] = []
    for part in parts:
        _check_content_type(expect.content_types, part.content_type)
        _check_digest(expect.checksum, part)
        documents.extend(_decode(desc.result.format, part.body))
    return documents


def _too_big(size: int, limit: int) -> str:
    return f"result larger than max_bytes ({size} > {limit} bytes)"


def _check_content_type(allowed: tuple[str, ...], actual: str | None) -> None:
    if not allowed:
        return
    if actual is None:
        raise _Invalid(f"no Content-Type (expected {', '.join(allowed)})")
    for pattern in allowed:
        if pattern == actual or (pattern.endswith("/*") and actual.startswith(pattern[:-1])):
            return
    raise _Invalid(f"unexpected content type {actual} (expected {', '.join(allowed)})")


def _check_digest(kind: Checksum, part: HttpResponse) -> None:
    if kind is Checksum.NONE:
        return
    if kind is Checksum.CONTENT_DIGEST:
        header, entries = "Content-Digest", _content_digest_entries(part.header("content-digest"))
    else:
        header, entries = "Digest", _legacy_digest_entries(part.header("digest"))
    known = {alg: value for alg, value in entries.items() if alg in _ALGORITHMS}
    if not known:
        raise _Invalid(f"{header} missing or without sha-256")
    for alg, claimed in known.items():
        actual = _ALGORITHMS[alg](part.body).digest()
        if claimed is None or not hmac.compare_digest(claimed, actual):
            raise _Invalid(f"{header} {alg} mismatch")


def _content_digest_entries(value: str | None) -> dict[str, bytes | None]:
    """RFC 9530 dictionary members `alg=:base64:`; unparseable values are None."""
    entries: dict[str, bytes | None] = {}
    for member in (value or "").split(","):
        name, _, raw = member.strip().partition("=")
        raw = raw.strip()
        if not name:
            continue
        if len(raw) >= 2 and raw.startswith(":") and raw.endswith(":"):
            entries[name.strip().lower()] = _b64(raw[1:-1])
        else:
            entries[name.strip().lower()] = None
    return entries


def _legacy_digest_entries(value: str | None) -> dict[str, bytes | None]:
    """RFC 3230 `SHA-256=base64` members (algorithm names are case-insensitive)."""
    entries: dict[str, bytes | None] = {}
    for member in (value or "").split(","):
        name, _, raw = member.strip().partition("=")
        if name:
            entries[name.strip().lower()] = _b64(raw.strip())
    return entries


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _decode(fmt: ResultFormat, body: bytes) -> list[Any]:
    if fmt is ResultFormat.JSON:
        try:
            return [json.loads(body)]
        except (ValueError, UnicodeDecodeError):
            raise _Invalid("result is not valid JSON") from None
    lines: list[Any] = []
    for number, line in enumerate(body.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except (ValueError, UnicodeDecodeError):
            raise _Invalid(f"result line {number} is not valid JSON") from None
    return lines


# --------------------------------------------------------------------- content checks


def _check_content(
    spec: ResultSpec, documents: list[Any], status: StatusFact | None
) -> tuple[_Items, tuple[str, ...]]:
    for document in documents:
        for field in spec.expect.required_fields:
            if extract(field, document) is None:
                raise _Invalid(f"missing required field {field.text}")
    if spec.format is ResultFormat.JSONL:
        entries: list[Any] | None = documents
    elif spec.items is not None:
        entries = []
        for document in documents:
            found = extract(spec.items, document)
            if not isinstance(found, list):
                raise _Invalid(f"missing item list {spec.items.text}")
            entries.extend(found)
    else:
        entries = None
    items = _split(spec, entries) if entries is not None else _NO_ITEMS
    notes = _check_counts(spec, items, documents, status)
    return items, notes


def _split(spec: ResultSpec, entries: list[Any]) -> _Items:
    failures: list[ItemFailure] = []
    failed = 0
    for position, entry in enumerate(entries):
        if _is_failure(spec, entry):
            failed += 1
            if len(failures) < MAX_FAILED_ITEMS:
                failures.append(item_failure(entry, position, None, spec.item_id, spec.item_error))
    return _Items(
        total=len(entries),
        succeeded=len(entries) - failed,
        failed=failed,
        failures=tuple(failures),
        truncated=failed > len(failures),
    )


def _is_failure(spec: ResultSpec, entry: Any) -> bool:
    if spec.item_error is not None:
        marker = extract(spec.item_error, entry)
        if marker is not None and marker is not False:
            return True
    if spec.item_success is not None:
        return raw_text(extract(spec.item_success, entry)) not in spec.item_success_values
    return False


def _check_counts(
    spec: ResultSpec, items: _Items, documents: list[Any], status: StatusFact | None
) -> tuple[str, ...]:
    """Compare item numbers with what the provider announced.

    Successful items are compared with the announced successes (status
    counts.succeeded, else total - failed). When the result can show failed
    items too (item_error / item_success configured), all items together are
    compared with counts.total; otherwise failures live on a separate errors
    list and are not expected here.
    """
    expect = spec.expect
    if items.succeeded is None or items.total is None:
        return ()
    if expect.item_count is not None and documents:
        expected = as_int(extract(expect.item_count, documents[0]))
        if expected is None:
            raise _Invalid(f"missing item count {expect.item_count.text}")
        _compare(expected, items.succeeded)
        return ()
    if not expect.item_count_from_status:
        return ()
    counts = status.counts if status is not None else None
    if counts is None:
        return ("item count not checked: the status reported no counts",)
    expected_ok = counts.succeeded
    if expected_ok is None and counts.total is not None:
        expected_ok = counts.total - (counts.failed or 0)
    if expected_ok is not None:
        _compare(expected_ok, items.succeeded, "successful ")
    can_see_failures = spec.item_error is not None or spec.item_success is not None
    if can_see_failures and counts.total is not None:
        _compare(counts.total, items.total)
    return ()


def _compare(expected: int, got: int, kind: str = "") -> None:
    if expected != got:
        raise _Invalid(f"expected {expected} {kind}items, got {got}")


def _parsed(spec: ResultSpec, documents: list[Any]) -> Any:
    if spec.format is ResultFormat.JSONL:
        return documents
    return documents[0] if len(documents) == 1 else documents
