"""A configurable HMAC header, for providers that sign in their own way.

Options (checked by `check_options` at config load):
- `signature_header` (required): where the signature travels.
- `algorithm`: sha256 (default), sha512 or sha1.
- `encoding`: hex (default) or base64.
- `prefix`: text before each signature, e.g. "sha256=" (default none).
- `signed_content`: template of the signed bytes (default "{body}"). The
  placeholders `{body}`, `{timestamp}` and `{id}` are replaced by the raw body
  and the raw header values; everything else, braces included, is literal.
  `{body}` is required: a signature that does not cover the body proves
  nothing about it.
- `timestamp_header`: where the unix-seconds timestamp travels. Only allowed
  together with `{timestamp}` in the template (an unsigned timestamp can be
  rewritten by an attacker, so its replay window would be an illusion); when
  set, the tolerance is enforced after the signature check.
- `id_header`: where the event id travels. It counts as signed (a safe dedupe
  key) only when the template contains `{id}`; otherwise it is returned with
  `id_signed=False`, with the replay caveats described in `github`.

The header may hold several signatures separated by commas or whitespace
(secret rotation). Entries without the prefix are ignored as another
scheme's; an entry with the prefix that does not decode makes it malformed.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .digests import (
    HMAC_ALGORITHMS,
    MAX_SIGNATURES_PER_HEADER,
    any_match,
    decode_base64,
    decode_hex,
    hmac_digest,
)
from .errors import SignatureError
from .headers import HeaderView
from .options import choice, header_name, optional_str, reject_unknown
from .timestamps import check_freshness, parse_unix_seconds
from .verified import Verified

SCHEME = "generic_hmac"

ENCODINGS: frozenset[str] = frozenset({"hex", "base64"})

_OPTION_KEYS = (
    "signature_header",
    "algorithm",
    "encoding",
    "prefix",
    "signed_content",
    "timestamp_header",
    "id_header",
)
_BODY = "{body}"
_TIMESTAMP = "{timestamp}"
_ID = "{id}"
# The capture group makes re.split keep the placeholders: literal text lands on
# even indexes, placeholders on odd ones.
_PLACEHOLDER = re.compile(r"(\{body\}|\{timestamp\}|\{id\})")
_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True, slots=True)
class GenericHmacOptions:
    """Validated options; build with `parse_options`."""

    signature_header: str
    algorithm: str
    encoding: str
    prefix: str
    signed_content: str
    timestamp_header: str | None
    id_header: str | None

    @property
    def id_signed(self) -> bool:
        return _ID in self.signed_content


def parse_options(options: Mapping[str, object]) -> GenericHmacOptions:
    """Validated options, or ValueError naming the offending key."""
    reject_unknown(SCHEME, options, _OPTION_KEYS)
    signature_header = header_name(SCHEME, options, "signature_header", required=True)
    assert signature_header is not None  # guaranteed by required=True
    prefix = optional_str(SCHEME, options, "prefix") or ""
    if _SEPARATORS.search(prefix):
        raise ValueError(f"{SCHEME}: option 'prefix' must not contain commas or whitespace")
    template = optional_str(SCHEME, options, "signed_content") or _BODY
    if _BODY not in template:
        raise ValueError(f"{SCHEME}: option 'signed_content' must contain {_BODY}")
    timestamp_header = header_name(SCHEME, options, "timestamp_header", required=False)
    if (_TIMESTAMP in template) != (timestamp_header is not None):
        raise ValueError(
            f"{SCHEME}: option 'timestamp_header' must be set exactly when option "
            f"'signed_content' contains {_TIMESTAMP} (an unsigned timestamp is no replay guard)"
        )
    id_header = header_name(SCHEME, options, "id_header", required=False)
    if _ID in template and id_header is None:
        raise ValueError(f"{SCHEME}: option 'id_header' is required when signed_content has {_ID}")
    return GenericHmacOptions(
        signature_header=signature_header,
        algorithm=choice(SCHEME, options, "algorithm", HMAC_ALGORITHMS, "sha256"),
        encoding=choice(SCHEME, options, "encoding", ENCODINGS, "hex"),
        prefix=prefix,
        signed_content=template,
        timestamp_header=timestamp_header,
        id_header=id_header,
    )


def check_options(options: Mapping[str, object]) -> None:
    """Raise ValueError naming the bad or missing option key."""
    parse_options(options)


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int,
) -> Verified:
    """Authenticate one request; see the module docstring for the rules."""
    opts = parse_options(options)
    signature_header = headers.require(opts.signature_header)
    raw_timestamp = headers.require(opts.timestamp_header) if opts.timestamp_header else None
    timestamp = parse_unix_seconds(raw_timestamp) if raw_timestamp is not None else None
    event_id = _event_id(opts, headers)
    signatures = _parse_signatures(opts, signature_header)

    content = _signed_content(opts, body, raw_timestamp, event_id)
    expected = (hmac_digest(opts.algorithm, secret.encode(), content) for secret in secrets)
    if not any_match(expected, signatures):
        raise SignatureError("bad_signature")
    if timestamp is not None:
        check_freshness(timestamp, now, tolerance_seconds)
    return Verified(scheme=SCHEME, event_id=event_id, id_signed=opts.id_signed, timestamp=timestamp)


def sign_generic(
    options: Mapping[str, object],
    secret: str,
    body: bytes,
    timestamp: int | None = None,
    event_id: str | None = None,
) -> str:
    """One signature, prefix included, as the sender would put it in the header."""
    opts = parse_options(options)
    if opts.timestamp_header is not None and timestamp is None:
        raise ValueError(f"{SCHEME}: signed_content has {_TIMESTAMP}; pass a timestamp")
    if opts.id_signed and event_id is None:
        raise ValueError(f"{SCHEME}: signed_content has {_ID}; pass an event_id")
    raw_timestamp = str(timestamp) if timestamp is not None else None
    content = _signed_content(opts, body, raw_timestamp, event_id)
    digest = hmac_digest(opts.algorithm, secret.encode(), content)
    encoded = digest.hex() if opts.encoding == "hex" else base64.b64encode(digest).decode("ascii")
    return opts.prefix + encoded


def _event_id(opts: GenericHmacOptions, headers: HeaderView) -> str | None:
    if opts.id_header is None:
        return None
    # A signed id is part of the signed content, so it must be present; an
    # unsigned one is merely informative.
    return headers.require(opts.id_header) if opts.id_signed else headers.get(opts.id_header)


def _parse_signatures(opts: GenericHmacOptions, header: str) -> list[bytes]:
    entries = [entry for entry in _SEPARATORS.split(header) if entry]
    if len(entries) > MAX_SIGNATURES_PER_HEADER:
        raise SignatureError("malformed_header")
    signatures: list[bytes] = []
    for entry in entries:
        if not entry.startswith(opts.prefix):
            continue
        encoded = entry[len(opts.prefix) :]
        decoded = decode_hex(encoded) if opts.encoding == "hex" else decode_base64(encoded)
        if decoded is None:
            raise SignatureError("malformed_header")
        signatures.append(decoded)
    return signatures


def _signed_content(
    opts: GenericHmacOptions, body: bytes, raw_timestamp: str | None, event_id: str | None
) -> bytes:
    values: dict[str, bytes | str] = {
        _BODY: body,
        _TIMESTAMP: raw_timestamp or "",
        _ID: event_id or "",
    }
    parts = _PLACEHOLDER.split(opts.signed_content)
    return b"".join(
        part.encode() if index % 2 == 0 else _as_bytes(values[part])
        for index, part in enumerate(parts)
    )


def _as_bytes(value: bytes | str) -> bytes:
    # surrogatepass: header values must not be able to cause an encoding crash.
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
