"""Check result bytes against a checksum the provider published.

Sources (`result.expect.checksum`):

- ``content-digest``: RFC 9530 ``Content-Digest: sha-256=:<base64>:`` on each
  result response (sha-256, sha-512);
- ``digest``: legacy RFC 3230 ``Digest: SHA-256=<base64>`` on each result
  response (sha-256, sha-512; MD5 only when ``algorithm = "md5"`` is asked for);
- ``header``: a named header of each result response holding the digest in
  hex or base64 (S3 ``x-amz-checksum-sha256``, ``Content-MD5``, a quoted ETag);
- ``status``: a field of the final status response, covering the whole result
  (all parts of a multi-file result concatenated in order).

A header's digest (the first three sources) covers the part as sent: when a
server compressed it although we asked for identity, the bytes before the
content coding was undone (`HttpResponse.sent_digests`), as RFC 9530 says;
a digest of the decoded body passes as well, as some servers compute that.

Digests are not secrets, so comparison need not be constant-time, but it is
exact: a value that does not decode to a digest of the algorithm's length is
malformed, which fails like a mismatch.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence

from shared.providers.description import (
    Checksum,
    ChecksumAlgorithm,
    ChecksumEncoding,
    ChecksumOptions,
)
from shared.providers.messages import HttpResponse

# Algorithm names as the digest headers spell them (lower-cased).
_HEADER_NAMES = {
    ChecksumAlgorithm.SHA256: "sha-256",
    ChecksumAlgorithm.SHA512: "sha-512",
    ChecksumAlgorithm.MD5: "md5",
}
_HASHERS = {
    ChecksumAlgorithm.SHA256: hashlib.sha256,
    ChecksumAlgorithm.SHA512: hashlib.sha512,
    ChecksumAlgorithm.MD5: hashlib.md5,
}
# Checked whenever present in a digest header; md5 only on request.
_DEFAULT_HEADER_ALGORITHMS = (ChecksumAlgorithm.SHA256, ChecksumAlgorithm.SHA512)


class ChecksumError(Exception):
    """The checksum is missing (when required), malformed or does not match."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def digest_of(algorithm: ChecksumAlgorithm, data: bytes) -> bytes:
    return _HASHERS[algorithm](data).digest()


def source_label(kind: Checksum, options: ChecksumOptions) -> str:
    """The checksum source in words, as reasons and guarantees name it."""
    if kind is Checksum.CONTENT_DIGEST:
        return "Content-Digest"
    if kind is Checksum.DIGEST:
        return "Digest"
    if kind is Checksum.HEADER:
        return f"header {options.header}"
    if kind is Checksum.STATUS:
        field = options.status_field.text if options.status_field is not None else "?"
        return f"status field {field}"
    return "no checksum"


def check_checksum(
    kind: Checksum,
    options: ChecksumOptions,
    parts: Sequence[HttpResponse],
    status_value: str | None,
) -> tuple[str, ...]:
    """Raise ChecksumError on a mismatch; return notes (a missing optional checksum)."""
    if kind is Checksum.NONE:
        return ()
    if kind is Checksum.STATUS:
        return _check_status(options, parts, status_value)
    notes: list[str] = []
    for number, part in enumerate(parts, start=1):
        where = "" if len(parts) == 1 else f" (part {number})"
        if kind is Checksum.HEADER:
            missing = _check_named_header(options, part, where)
        else:
            missing = _check_digest_header(kind, options, part, where)
        if missing is not None:
            notes.append(missing)
    return tuple(notes)


def _missing(options: ChecksumOptions, reason: str) -> str:
    if options.required:
        raise ChecksumError(reason)
    return f"checksum not checked: {reason}"


def _check_status(
    options: ChecksumOptions, parts: Sequence[HttpResponse], value: str | None
) -> tuple[str, ...]:
    label = source_label(Checksum.STATUS, options)
    if value is None:
        return (_missing(options, f"{label} missing from the status"),)
    assert options.algorithm is not None  # config sets it for this source
    whole = b"".join(p.body for p in parts)
    _compare(label, options.algorithm, options.encoding, value, whole)
    return ()


def _check_named_header(options: ChecksumOptions, part: HttpResponse, where: str) -> str | None:
    assert options.header is not None and options.algorithm is not None
    label = source_label(Checksum.HEADER, options)
    value = part.header(options.header)
    if value is None or not value.strip():
        return _missing(options, f"{label} missing{where}")
    # An ETag travels quoted ("d41d8cd98f00b204e9800998ecf8427e"): the quotes are syntax.
    text = value.strip()
    if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
        text = text[1:-1]
    _compare(label, options.algorithm, options.encoding, text, part, where)
    return None


def _check_digest_header(
    kind: Checksum, options: ChecksumOptions, part: HttpResponse, where: str
) -> str | None:
    if kind is Checksum.CONTENT_DIGEST:
        header, entries = "Content-Digest", _content_digest_entries(part.header("content-digest"))
    else:
        header, entries = "Digest", _legacy_digest_entries(part.header("digest"))
    if options.algorithm is not None:
        wanted = _HEADER_NAMES[options.algorithm]
        if wanted not in entries:
            return _missing(options, f"{header} missing or without {wanted}{where}")
        algorithms = [options.algorithm]
        # Other known members present are checked too: any wrong one is corruption.
        algorithms += [a for a in _DEFAULT_HEADER_ALGORITHMS if a is not options.algorithm]
    else:
        algorithms = list(_DEFAULT_HEADER_ALGORITHMS)
    present = [a for a in algorithms if _HEADER_NAMES[a] in entries]
    if not present:
        return _missing(options, f"{header} missing or without sha-256{where}")
    for algorithm in present:
        claimed = entries[_HEADER_NAMES[algorithm]]
        if claimed is None or not _matches(algorithm, claimed, part):
            raise ChecksumError(f"{header} {_HEADER_NAMES[algorithm]} mismatch{where}")
    return None


def _compare(
    label: str,
    algorithm: ChecksumAlgorithm,
    encoding: ChecksumEncoding,
    text: str,
    data: bytes | HttpResponse,
    where: str = "",
) -> None:
    """`text` decoded must be the digest of `data`: bytes, or a response's (`_matches`)."""
    claimed = decode_digest(algorithm, encoding, text)
    if claimed is None:
        raise ChecksumError(
            f"{label}{where} is not a {encoding.value} {algorithm.value} digest: {_shown(text)}"
        )
    if isinstance(data, HttpResponse):
        matched = _matches(algorithm, claimed, data)
    else:
        matched = claimed == digest_of(algorithm, data)
    if not matched:
        raise ChecksumError(f"{label} {algorithm.value} mismatch{where}")


def _matches(algorithm: ChecksumAlgorithm, claimed: bytes, part: HttpResponse) -> bool:
    """Whether a header's digest is the part's: of the bytes as sent (what RFC 9530
    and RFC 3230 digests and Content-MD5 cover, which differ from the body when
    it came content-coded), or of the decoded body, as some servers compute it.
    Either proves the result intact: decoding is deterministic."""
    if claimed == part.sent_digests.get(algorithm.value):
        return True
    return claimed == digest_of(algorithm, part.body)


def decode_digest(
    algorithm: ChecksumAlgorithm, encoding: ChecksumEncoding, text: str
) -> bytes | None:
    """The digest bytes `text` encodes, or None when it is not one of this algorithm.

    A digest written after its algorithm's name and a colon is that digest:
    Marketo's bulk extracts give `"fileChecksum": "sha256:<hex>"`, the form OCI
    digests take too. Before, the label made every such checksum malformed, and
    every export was refused as result_validation_failed. A label naming another
    algorithm is kept, so the value does not decode: a digest of something else
    never passes for this one."""
    text = _unlabelled(algorithm, text.strip())
    if encoding is ChecksumEncoding.HEX:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            return None
        if any(c.isspace() for c in text):
            return None
    else:
        raw_or_none = _b64(text)
        if raw_or_none is None:
            return None
        raw = raw_or_none
    return raw if len(raw) == _HASHERS[algorithm]().digest_size else None


def _unlabelled(algorithm: ChecksumAlgorithm, text: str) -> str:
    """`text` without a leading `<algorithm>:` naming `algorithm` (`sha256:`,
    `SHA-256:`, any case, a hyphen or none); hex and base64 never hold a colon."""
    label, colon, rest = text.partition(":")
    if colon and label.lower().replace("-", "") == algorithm.value:
        return rest.strip()
    return text


def _shown(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= 40 else text[:39] + "…")


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
