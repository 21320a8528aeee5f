"""Validate a fetched result against the provider's rules before anyone trusts it.

Checks run cheapest and most fundamental first (fetch status, size, content
type, checksum, parse, required fields, item counts) and stop at the first
failure, whose reason is written for the operator who will read it in the
escalation inbox.

Formats: json and jsonl are parsed as JSON (jsonl: one item per line); csv
rows are items (`result_formats`); text must be UTF-8; binary is only sized
and hashed, and its `parsed` stays None so it is kept as a file only.

Checksums (`checksums`: RFC 9530 `Content-Digest`, legacy RFC 3230 `Digest`,
a named header, a field of the status response) cover the bytes as sent: the
reconciler must hand over the body it received without content decoding, or
ask for `Accept-Encoding: identity` (it does; a provider that compresses
anyway is decoded, so a checksum over its compressed bytes does not match).

Base64 (`result.base64`): the answer is JSON and the result is the base64
text at a path of it, decoded strictly (shared.providers.base64_field). The
decoded bytes are the result: their sha256, size and content type (the one
`expect.content_types` names) are what is checked, recorded and stored, and
max_bytes is their size; the answer itself may be as large as that encoded
plus room for the JSON around it (`ResultSpec.fetched_max_bytes`), and its
checksum, if any, covers it as sent. Whatever fails is invalid, and the JSON
is never kept in the decoded bytes' place.

Follow (`result.follow`): the fetched answer is a JSON document naming the
result's link (MiniMax's file record), and the reconciler fetches that link;
every check here judges the followed bytes. `followed_link` reads the link, and
judges a document naming none: never a success.

Size: the reconciler reads a download up to max_bytes + 1 bytes and no
further (reconciler.lanes.download), so the size a "larger than max_bytes"
reason names for a fetched result is where reading stopped, not the whole.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.jsonread import NOT_JSON
from shared.ledger.states import RemoteState
from shared.providers.base64_field import Base64Error, decode_base64
from shared.providers.checksums import ChecksumError, check_checksum, digest_of
from shared.providers.description import (
    ChecksumAlgorithm,
    ProviderDescription,
    ResultFormat,
    ResultSpec,
    base64_encoded_size,
)
from shared.providers.facts import ItemFailure, ResultCheck, StatusFact
from shared.providers.messages import CODINGS_NOT_UNDONE, UNDONE_CODINGS, HttpResponse
from shared.providers.paths import PathSource, extract
from shared.providers.result_formats import (
    CsvTable,
    FormatError,
    check_columns,
    decode_text,
    joined_parts,
    merge_csv,
    parse_csv,
    split_rows,
)
from shared.providers.values import as_int, item_failure, raw_text
from shared.redaction import sanitize_text_urls
from shared.text import scrub_text

# Failed items kept inline in the check; the rest are counted, not listed
# (SPEC §7: a batch's failures live behind a paginated reference).
MAX_FAILED_ITEMS = 100
# Results up to this size are returned parsed, for storage inline in the row.
PARSED_MAX_BYTES = 256 * 1024
# Why a 3xx answer to a result fetch is not the result (result.follow_redirects).
REDIRECT_NOT_FOLLOWED = "redirect not followed (set result.follow_redirects)"


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


@dataclass(frozen=True)
class _Decoded:
    """A result's content in its format's terms.

    json/jsonl: `documents` (the JSON values); csv: `table`; text: `text`;
    binary: nothing (its bytes are only hashed, never parsed).
    """

    documents: list[Any]
    table: CsvTable | None = None
    text: str | None = None


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
    if desc.result.format is ResultFormat.BINARY and len(parts) > 1:
        return _not_one_document(parts)
    if desc.result.base64 is not None:
        return _validate_base64(desc, parts[0], status)
    digests = tuple(hashlib.sha256(p.body).hexdigest() for p in parts)
    whole = hashlib.sha256(b"".join(p.body for p in parts)).hexdigest()
    size = sum(len(p.body) for p in parts)
    content_type = parts[0].content_type if parts else None
    try:
        checksum_notes = _check_transport(desc, parts, size, status)
        decoded = _decode_parts(desc.result, parts)
        items, notes = _check_content(desc.result, decoded, status)
        if len(parts) > 1:  # what is stored: the parts as one document (result_content)
            try:
                content = result_content(desc.result, [p.body for p in parts])
            except FormatError as exc:
                raise _Invalid(exc.reason) from None
            whole, size = hashlib.sha256(content).hexdigest(), len(content)
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
        parsed=_parsed(desc.result, decoded) if size <= PARSED_MAX_BYTES else None,
        part_sha256=digests,
        notes=checksum_notes + notes,
    )


def _validate_base64(
    desc: ProviderDescription, resp: HttpResponse, status: StatusFact | None
) -> ResultCheck:
    """A result that is base64 text inside a fetched JSON answer: judged, and
    named, by its decoded bytes; a refusal names the answer as it came."""
    fetched = hashlib.sha256(resp.body).hexdigest()
    try:
        notes = _check_transport(desc, [resp], len(resp.body), status)
        content = _base64_content(desc.result, resp.body)
    except _Invalid as exc:
        return ResultCheck(
            ok=False,
            reason=exc.reason,
            sha256=fetched,
            size=len(resp.body),
            content_type=resp.content_type,
            part_sha256=(fetched,),
            unavailable=exc.unavailable,
        )
    return ResultCheck(
        ok=True,
        reason="valid",
        sha256=hashlib.sha256(content).hexdigest(),
        size=len(content),
        content_type=desc.result.expect.content_types[0],
        part_sha256=(fetched,),
        notes=notes,
        decoded=content,
    )


def _base64_content(spec: ResultSpec, body: bytes) -> bytes:
    try:
        document = _strict_json(body)
    except NOT_JSON:
        raise _Invalid("result is not valid JSON (result.base64 reads a field of it)") from None
    return _decoded_field(spec, document)


_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def _decoded_field(spec: ResultSpec, document: Any) -> bytes:
    """The bytes the base64 text at `result.base64` encodes, or _Invalid saying why not."""
    assert spec.base64 is not None
    where = f"base64 field {spec.base64.text!r}"
    value = extract(spec.base64, document)
    if value is None:
        raise _Invalid(f"missing {where}")
    if not isinstance(value, str):
        raise _Invalid(f"{where} is not a string but {_JSON_TYPES.get(type(value), 'a value')}")
    if not value:
        raise _Invalid(f"{where} is empty")
    limit = spec.expect.max_bytes
    if len(value) > base64_encoded_size(limit):  # before decoding: memory stays bounded
        raise _Invalid(
            f"{where} holds {len(value)} characters: decoded, more than max_bytes ({limit} bytes)"
        )
    try:
        data = decode_base64(value, url=spec.base64_url)
    except Base64Error as exc:
        raise _Invalid(f"{where} is not valid base64: {exc.reason}") from None
    if len(data) > limit:  # padding makes the character count a bound, not the size
        raise _Invalid(_too_big(len(data), limit))
    return data


def followed_link(desc: ProviderDescription, document: HttpResponse) -> str | ResultCheck:
    """The link a fetched result document names at `result.follow`, or the verdict
    on a document that names none: never a success, for the result is one hop
    further. Not JSON: invalid (result_validation_failed). JSON naming no link
    there (MiniMax's HTTP 200 {"base_resp": {"status_code": 1013, ...}} for a file
    it cannot find): unavailable, in the provider's words (`in_its_words`)."""
    follow = desc.result.follow
    assert follow is not None
    where = f"no link at {follow.text} (result.follow)"
    try:
        value = extract(follow, _strict_json(document.body))
    except NOT_JSON:
        return _document_refused(document, f"the result document is not valid JSON: {where}")
    if isinstance(value, str) and value.strip():
        return value
    if value is None or value == "":
        said = f"the result document names {where}{in_its_words(desc, document)}"
        return _document_refused(document, said, unavailable=True)
    kind = _JSON_TYPES.get(type(value), "a value")
    return _document_refused(document, f"the result document names {where}, but {kind}")


def decompressed(
    desc: ProviderDescription, document: HttpResponse, answer: HttpResponse
) -> HttpResponse | ResultCheck:
    """The followed file as its document says it is (`result.compression`): gzip
    decompressed, at most max_bytes + 1 bytes of it (validation says a larger one
    is too large, as for any download); one larger than max_bytes as sent (the
    download stopped there) is too large as it came; its digests as sent are the
    compressed bytes', which a digest header covers. Not named: the file as it came. Another
    algorithm, or bytes that are no gzip: invalid, never the compressed bytes kept
    as the result. Before, an SP-API report document naming GZIP was judged as the
    gzip bytes, "not valid UTF-8" for a text report."""
    path = desc.result.compression
    if path is None or not 200 <= answer.status_code < 300:
        return answer
    try:
        named = extract(path, _strict_json(document.body))
    except NOT_JSON:
        return answer  # followed_link judged the document already
    algorithm = raw_text(named)
    if not algorithm:
        return answer
    where = f"{path.text}, result.compression"
    if algorithm.lower() != "gzip":
        reason = f"the result document says the file is compressed with {algorithm} ({where})"
        return _document_refused(answer, f"{reason}, which is not undone here")
    if _undone_by_the_transport(answer):
        return answer
    if len(answer.body) > desc.result.expect.max_bytes:
        # the download stopped at max_bytes + 1 bytes as sent: a stream cut there
        # ends short (or at a member's end, a prefix), so the file is judged as
        # sent, too large, never "no gzip" nor its first members as the whole
        return answer
    try:
        body = _gunzip(answer.body, desc.result.expect.max_bytes + 1)
    except (zlib.error, EOFError) as exc:
        reason = f"the result document says the file is gzip ({where}), but it is not: {exc}"
        return _document_refused(answer, reason)
    return dataclasses.replace(answer, body=body, sent_digests=_digests_as_sent(answer))


def _digests_as_sent(answer: HttpResponse) -> Mapping[str, bytes]:
    """The digests a checksum header is checked against once the body is opened:
    of the compressed bytes, as sent, with every algorithm a checksum may name
    (as the transport makes them for a content-coded answer, whose own it keeps)."""
    if answer.sent_digests:
        return answer.sent_digests
    return {a.value: digest_of(a, answer.body) for a in ChecksumAlgorithm}


# The two bytes every gzip member starts with (RFC 1952).
_GZIP_MAGIC = b"\x1f\x8b"


def _undone_by_the_transport(answer: HttpResponse) -> bool:
    """Was the file's gzip undone on the way already? A store that serves it with
    `Content-Encoding: gzip` has the transport decode it (as it decodes any
    answer): the bytes here are the file, no gzip left, and undoing it again
    refused them as "not gzip". Bytes still starting as gzip were packed twice,
    and are undone once more."""
    coding = (answer.header("content-encoding") or "").lower()
    return "gzip" in coding and not answer.body.startswith(_GZIP_MAGIC)


def _gunzip(data: bytes, limit: int) -> bytes:
    """The gzip members of `data` decompressed, up to `limit` bytes (a bomb stops
    there); a stream cut short is an error, never a prefix passed as the file.
    Zero bytes after a member are padding, read past as gzip itself does; no
    bytes at all are no stream (an empty file packed is 20 bytes), never an
    empty file."""
    if not data:
        raise EOFError("the file is empty, no gzip stream")
    out = bytearray()
    while data and len(out) < limit:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        out += inflater.decompress(data, limit - len(out))
        if inflater.unconsumed_tail:
            break  # the limit is reached: no need to read on
        if not inflater.eof:
            raise EOFError("the gzip stream ends before its end")
        data = inflater.unused_data.lstrip(b"\0")
    return bytes(out)


def _document_refused(
    document: HttpResponse, reason: str, unavailable: bool = False
) -> ResultCheck:
    """A result document that leads nowhere, named by its bytes as they came."""
    digest = hashlib.sha256(document.body).hexdigest()
    return ResultCheck(
        ok=False,
        reason=reason,
        sha256=digest,
        size=len(document.body),
        content_type=document.content_type,
        part_sha256=(digest,),
        unavailable=unavailable,
    )


def _not_one_document(parts: Sequence[HttpResponse]) -> ResultCheck:
    """Several binary files: laid end to end they are one file no one can split again
    (two audio tracks glued together), so they are not stored as one."""
    whole = b"".join(p.body for p in parts)
    return ResultCheck(
        ok=False,
        reason=(
            f"a binary result is one file, and the status named {len(parts)}: several "
            "cannot be stored as one (describe one file per operation, or use a plugin)"
        ),
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        content_type=parts[0].content_type,
        part_sha256=tuple(hashlib.sha256(p.body).hexdigest() for p in parts),
    )


def validate_inline_result(
    desc: ProviderDescription, value: Any, status: StatusFact | None
) -> ResultCheck:
    """Check a result found inside a response (sync create, inline status).

    Its sha256 is over canonical JSON (sorted keys, compact) so the same
    result always hashes the same whatever key order the provider used.
    """
    if value is not None and desc.result.base64 is not None:
        try:
            content = _decoded_field(desc.result, value)
        except _Invalid as exc:
            return ResultCheck(
                ok=False, reason=f"inline result: {exc.reason}", **_named(inline_json(value))
            )
        named: dict[str, Any] = {
            "sha256": hashlib.sha256(content).hexdigest(),
            "size": len(content),
            "content_type": desc.result.expect.content_types[0],
            "decoded": content,
        }
        return _valid(_NO_ITEMS, (), named, None)
    body = inline_json(value)
    base = _named(body)
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
    fmt = desc.result.format
    if fmt is ResultFormat.JSONL and not isinstance(value, list):
        return ResultCheck(ok=False, reason="inline result is not a list of items", **base)
    if not fmt.is_json and not isinstance(value, str):
        # csv/text (or binary) inside a JSON response can only travel as a string.
        return ResultCheck(ok=False, reason=f"inline {fmt.value} result is not a string", **base)
    try:
        if fmt.is_json:
            decoded = _Decoded([value] if fmt is ResultFormat.JSON else value)
        else:
            decoded = _decode_parts(desc.result, [HttpResponse(200, {}, value.encode())])
        items, notes = _check_content(desc.result, decoded, status)
    except _Invalid as exc:
        return ResultCheck(ok=False, reason=exc.reason, **base)
    parsed = value if fmt.is_json else _parsed(desc.result, decoded)
    return _valid(items, notes, base, parsed if len(body) <= PARSED_MAX_BYTES else None)


def inline_json(value: Any) -> bytes:
    """A result found inside a response as the bytes it is named and stored by
    (sorted keys, compact): the same result hashes the same whatever key order
    the provider used."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _named(body: bytes) -> dict[str, Any]:
    """What a check names a result found inside a response by: its canonical JSON."""
    return {
        "sha256": hashlib.sha256(body).hexdigest(),
        "size": len(body),
        "content_type": "application/json",
    }


def _valid(items: _Items, notes: tuple[str, ...], base: dict[str, Any], parsed: Any) -> ResultCheck:
    """The verdict on a result found in a response, or on no result at all, that
    passed its content rules."""
    return ResultCheck(
        ok=True,
        reason="valid",
        items_total=items.total,
        items_succeeded=items.succeeded,
        items_failed=items.failed,
        failed_items=items.failures,
        failed_items_truncated=items.truncated,
        parsed=parsed,
        notes=notes,
        **base,
    )


def is_empty_result(desc: ProviderDescription, status: StatusFact) -> bool:
    """A final status that says the job produced nothing: a state the description
    names for it (`result.empty_states`: Intercom's `no_data`), or no result URL and
    item counts totalling 0, where the description says that is how the provider
    tells it (`result.empty_without_url`)."""
    if status.raw_state is not None and status.raw_state in desc.result.empty_states:
        return True
    counts = status.counts
    return (
        desc.result.empty_without_url
        and not status.result_url
        and counts is not None
        and counts.total == 0
    )


def validate_empty_result(desc: ProviderDescription, status: StatusFact) -> ResultCheck:
    """The empty result `is_empty_result` found, judged by its content rules alone:
    nothing was fetched, so there is no answer, content type or digest to check."""
    body = b""
    base: dict[str, Any] = {
        "sha256": hashlib.sha256(body).hexdigest(),
        "size": 0,
        "content_type": None,
    }
    try:
        decoded = _decode_parts(desc.result, [HttpResponse(200, body=body)])
        items, notes = _check_content(desc.result, decoded, status)
    except _Invalid as exc:
        return ResultCheck(ok=False, reason=exc.reason, **base)
    if status.raw_state is not None and status.raw_state in desc.result.empty_states:
        said = f"empty: the job ended {status.raw_state!r}, a state with nothing to collect"
    else:
        said = "empty: the status gave no result URL and counted 0 items"
    return _valid(items, (said, *notes), base, None)


# --------------------------------------------------------------------- transport checks


# How much of a refused fetch's body is quoted: enough for "Request has expired".
_QUOTED_CHARS = 160


def in_its_words(desc: ProviderDescription, resp: HttpResponse) -> str:
    """The start of a refused fetch's body, quoted for the human the refusal goes
    to (S3's "Request has expired", a 400's "Invalid skip parameter"): a callback
    token it echoes scrubbed (a result's own bytes are not: `_echoed_secrets`),
    whitespace folded, credential-looking link parameters redacted, cut short."""
    head = resp.body[: _QUOTED_CHARS * 8]
    if desc.webhooks is not None:
        head = desc.webhooks.scrub_token(head)
    text = " ".join(head.decode("utf-8", "replace").split())
    if not text:
        return ""
    text = scrub_text(sanitize_text_urls(text))
    if len(text) > _QUOTED_CHARS:
        text = text[: _QUOTED_CHARS - 1] + "…"
    return f" ({text!r})"


def _check_transport(
    desc: ProviderDescription, parts: list[HttpResponse], size: int, status: StatusFact | None
) -> tuple[str, ...]:
    """Fetch status, size, content type and checksum; returns notes (an optional checksum)."""
    expect = desc.result.expect
    base64 = desc.result.base64 is not None
    for part in parts:
        if 300 <= part.status_code < 400:
            # not "unavailable": the result is there, behind a link we were told not to follow
            raise _Invalid(
                f"result fetch answered HTTP {part.status_code}: {REDIRECT_NOT_FOLLOWED}"
            )
        if not 200 <= part.status_code < 300:
            said = f"result fetch answered HTTP {part.status_code}{in_its_words(desc, part)}"
            raise _Invalid(said, unavailable=True)
    for part in parts:
        _check_coding(part.header("content-encoding"))
    if size > desc.result.fetched_max_bytes:
        if base64:
            raise _Invalid(
                f"the JSON holding the base64 result is larger than max_bytes allows encoded "
                f"({size} > {desc.result.fetched_max_bytes} bytes)"
            )
        raise _Invalid(_too_big(size, expect.max_bytes))
    if not base64:  # with it, content_types is the decoded bytes' type
        for part in parts:
            _check_content_type(expect.content_types, part.content_type)
    published = status.result_checksum if status is not None else None
    try:
        return check_checksum(expect.checksum, expect.checksum_options, parts, published)
    except ChecksumError as exc:
        raise _Invalid(exc.reason) from None


def _check_coding(coding: str | None) -> None:
    """A part whose Content-Encoding names a coding the transport left in place (we
    ask for identity; Brotli and zstd are what CDNs send anyway): its bytes are
    still encoded. Before, a binary result came through as valid, its encoded bytes
    stored as the video, and a JSON one was "not valid JSON", naming no cause."""
    if coding is None:
        return
    names = {name.strip().lower() for name in coding.split(",")}
    left = sorted(names & CODINGS_NOT_UNDONE)
    if left:
        raise _Invalid(
            f"the result came with Content-Encoding {', '.join(left)}, which is not undone "
            f"here (the fetch asks for identity; {', '.join(sorted(UNDONE_CODINGS))} are "
            "undone), so its bytes are not the result"
        )


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


def _decode_parts(spec: ResultSpec, parts: Sequence[HttpResponse]) -> _Decoded:
    fmt = spec.format
    if fmt is ResultFormat.BINARY:
        return _Decoded([])
    try:
        if fmt is ResultFormat.TEXT:
            text = "".join(decode_text(p.body, _where(n, len(parts))) for n, p in enumerate(parts))
            return _Decoded([], text=text)
        if fmt is ResultFormat.CSV:
            assert spec.csv is not None  # config sets it with format = csv
            count = len(parts)
            tables = [parse_csv(spec.csv, p.body, _where(n, count)) for n, p in enumerate(parts)]
            return _Decoded([], table=merge_csv(tables))
    except FormatError as exc:
        raise _Invalid(exc.reason) from None
    documents: list[Any] = []
    for part in parts:
        documents.extend(_decode(fmt, part.body))
    return _Decoded(documents)


def _where(index: int, count: int) -> str:
    return "result" if count == 1 else f"result part {index + 1}"


def _decode(fmt: ResultFormat, body: bytes) -> list[Any]:
    if fmt is ResultFormat.JSON:
        try:
            return [_strict_json(body)]
        except NOT_JSON:
            raise _Invalid("result is not valid JSON") from None
    lines: list[Any] = []
    for number, line in enumerate(body.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append(_strict_json(line))
        except NOT_JSON:
            raise _Invalid(f"result line {number} is not valid JSON") from None
    return lines


def _strict_json(data: bytes) -> Any:
    """JSON as RFC 8259 has it: UTF-8 (a leading BOM dropped), no NaN or Infinity.

    json.loads also takes UTF-16 and UTF-32 bytes and those three constants,
    so such a result passed, to be refused by whatever strict parser the
    agent reads it with.
    """
    return json.loads(data.decode("utf-8-sig"), parse_constant=_not_json)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def result_content(spec: ResultSpec, bodies: Sequence[bytes]) -> bytes:
    """The bytes a result is stored and hashed as: its parts as one document
    of its format (`joined_parts`), a single part as it came, or the bytes its
    base64 field encodes (`result.base64`; FormatError when it holds none)."""
    if spec.base64 is not None:
        try:
            return _base64_content(spec, b"".join(bodies))
        except _Invalid as exc:
            raise FormatError(exc.reason) from None
    return joined_parts(spec.format, spec.csv, bodies, lists=_pages_are_lists(spec))


def _pages_are_lists(spec: ResultSpec) -> bool:
    """Whether each JSON part is the list of items itself (`items = ""`)."""
    return (
        spec.items is not None and spec.items.source is PathSource.BODY and not spec.items.segments
    )


def inline_content(spec: ResultSpec, value: Any) -> bytes:
    """The bytes a result found inside a response is stored and hashed as: its
    canonical JSON (`validate_inline_result`), or the bytes its base64 field
    encodes (FormatError when it holds none)."""
    if spec.base64 is not None and value is not None:
        try:
            return _decoded_field(spec, value)
        except _Invalid as exc:
            raise FormatError(exc.reason) from None
    return inline_json(value)


# --------------------------------------------------------------------- content checks


def _check_content(
    spec: ResultSpec, decoded: _Decoded, status: StatusFact | None
) -> tuple[_Items, tuple[str, ...]]:
    if decoded.table is not None:
        return _check_rows(spec, decoded.table, status)
    if not spec.format.is_json:
        return _NO_ITEMS, ()  # text, binary: no items to count
    documents = decoded.documents
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
            if found is None and spec.empty_without_items and isinstance(document, dict):
                found = []  # BigQuery leaves `rows` out when there is none
            if not isinstance(found, list):
                raise _Invalid(f"missing item list {spec.items.text}")
            entries.extend(found)
    else:
        entries = None
    items = _split(spec, entries) if entries is not None else _NO_ITEMS
    notes = _check_counts(spec, items, documents, status)
    return items, notes


def _check_rows(
    spec: ResultSpec, table: CsvTable, status: StatusFact | None
) -> tuple[_Items, tuple[str, ...]]:
    """CSV: every data row is an item; failed rows per the [result.csv] rule."""
    assert spec.csv is not None
    try:
        check_columns(spec.csv, table)
        split = split_rows(spec.csv, table, MAX_FAILED_ITEMS)
    except FormatError as exc:
        raise _Invalid(exc.reason) from None
    items = _Items(
        total=split.total,
        succeeded=split.total - split.failed,
        failed=split.failed,
        failures=split.failures,
        truncated=split.truncated,
    )
    return items, _check_counts(spec, items, [], status)


def _split(spec: ResultSpec, entries: list[Any]) -> _Items:
    if spec.failures_only:
        return _failures(spec, entries)
    failures: list[ItemFailure] = []
    failed = 0
    for position, entry in enumerate(entries):
        if _is_failure(spec, entry):
            failed += 1
            if len(failures) < MAX_FAILED_ITEMS:
                failures.append(
                    item_failure(
                        entry,
                        position,
                        None,
                        spec.item_id,
                        spec.item_error,
                        spec.item_code,
                        spec.item_message,
                    )
                )
    return _Items(
        total=len(entries),
        succeeded=len(entries) - failed,
        failed=failed,
        failures=tuple(failures),
        truncated=failed > len(failures),
    )


def _failures(spec: ResultSpec, entries: list[Any]) -> _Items:
    """`result.failures_only`: every entry a failed item; the successes unknown here
    (None: the status's counts tell them, and no count check looks for them)."""
    failures = [
        item_failure(
            entry, position, None, spec.item_id, spec.item_error, spec.item_code, spec.item_message
        )
        for position, entry in enumerate(entries[:MAX_FAILED_ITEMS])
    ]
    return _Items(
        total=len(entries),
        succeeded=None,
        failed=len(entries),
        failures=tuple(failures),
        truncated=len(entries) > len(failures),
    )


def _is_failure(spec: ResultSpec, entry: Any) -> bool:
    if spec.item_error is not None:
        # an empty error names none, as a status read's does (`"error": ""` or
        # `{}` on a success line): counted failed, a batch of successes was
        # every item failed, and failed
        marker = extract(spec.item_error, entry)
        if marker is not None and marker is not False and marker not in ("", {}, []):
            return True
    if spec.item_success is not None:
        return raw_text(extract(spec.item_success, entry)) not in spec.item_success_values
    return False


def _check_counts(
    spec: ResultSpec, items: _Items, documents: list[Any], status: StatusFact | None
) -> tuple[str, ...]:
    """The configured count check (`expect.item_count`), then the status total's floor."""
    notes = _check_expected(spec, items, documents, status)
    _check_total(items, status)
    return notes


def _check_total(items: _Items, status: StatusFact | None) -> None:
    """A result that cannot account for the total its job's final status reports.

    Checked whatever `expect.item_count` says, because a result cut short (a
    paginated CSV whose next page is behind a header, a truncated JSONL) is
    otherwise stored as a success next to counts that contradict it. Only a
    floor: the result must hold at least the successes the status announces
    (counts.succeeded, else total - failed); with no split announced, its
    items (succeeded and failed) plus the items the status counts as
    cancelled must reach the total. A cancelled job's partial output is
    exempt: its total stays the batch's size.
    """
    counts = status.counts if status is not None else None
    if counts is None or counts.total is None or items.total is None or items.succeeded is None:
        return
    if status is not None and status.remote_state is RemoteState.CANCELLED:
        return
    announced_ok = counts.succeeded
    if announced_ok is None and counts.failed is not None:
        announced_ok = counts.total - counts.failed
    if announced_ok is not None:
        if items.succeeded < announced_ok:
            raise _Invalid(
                f"the status reports {announced_ok} successful items of {counts.total}, "
                f"the result holds {items.succeeded}: {_CUT_SHORT}"
            )
        return
    accounted = items.total + (counts.cancelled or 0)
    if accounted < counts.total:
        raise _Invalid(
            f"the status reports {counts.total} items, the result accounts for {accounted} "
            f"({items.succeeded} succeeded, {items.failed or 0} failed"
            + (f", {counts.cancelled} cancelled" if counts.cancelled else "")
            + f"): {_CUT_SHORT}"
        )


_CUT_SHORT = "the rest is missing (a truncated or paginated result?)"


def _check_expected(
    spec: ResultSpec, items: _Items, documents: list[Any], status: StatusFact | None
) -> tuple[str, ...]:
    """Compare item numbers with what the provider announced (`expect.item_count`).

    A count read in the result (`item_count`, a path) is of the items it
    lists: all of them when it can show failed items (item_error /
    item_success), else its successes. Before, it was always held to the
    successes, and a Zendesk job of three users, one refused, was "expected 3
    items, got 2". Successful items are compared with the announced successes
    (status counts.succeeded, else total - failed). When the result can show failed
    items too (item_error / item_success, or a CSV failed_column, configured),
    all items together are
    compared with counts.total; otherwise failures live on a separate errors
    list and are not expected here.
    """
    expect = spec.expect
    if items.succeeded is None or items.total is None:
        return ()
    can_see_failures = (
        spec.item_error is not None
        or spec.item_success is not None
        or (spec.csv is not None and spec.csv.can_fail_rows)
    )
    if expect.item_count is not None and documents:
        # a JSON result's parts (one document each) state their own counts: the
        # whole is their sum; a JSONL result's count is read from its first line
        counted = documents if spec.format is ResultFormat.JSON else documents[:1]
        stated = [as_int(extract(expect.item_count, document)) for document in counted]
        if None in stated:
            raise _Invalid(f"missing item count {expect.item_count.text}")
        expected = sum(n for n in stated if n is not None)
        # a result that lists its failed items beside the others counts them all
        # (Zendesk's job status: `total` users, `results` one each, made or not)
        _compare(expected, items.total if can_see_failures else items.succeeded)
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
    listed = counts.total
    cut_short = status is not None and status.remote_state is RemoteState.CANCELLED
    if cut_short and counts.succeeded is not None and counts.failed is not None:
        # a cancelled job's total stays its size; what it did is succeeded + failed
        listed = counts.succeeded + counts.failed
    if can_see_failures and listed is not None:
        _compare(listed, items.total)
    return ()


def _compare(expected: int, got: int, kind: str = "") -> None:
    if expected != got:
        raise _Invalid(f"expected {expected} {kind}items, got {got}")


def _parsed(spec: ResultSpec, decoded: _Decoded) -> Any:
    """The value stored inline for a small result; None (binary) means file only."""
    if spec.format is ResultFormat.BINARY:
        return None
    if decoded.table is not None:
        return decoded.table.parsed()
    if decoded.text is not None:
        return decoded.text
    documents = decoded.documents
    if spec.format is ResultFormat.JSONL:
        return documents
    if len(documents) > 1 and _pages_are_lists(spec):  # as stored: one list of the items
        return [item for document in documents for item in document]
    return documents[0] if len(documents) == 1 else documents
