"""Where a sender puts its signature, timestamp and event id, and what it signs.

The envelope is everything about a signed webhook except the cryptography:
header names (each with optional aliases), the signature-header format, the
signed-content template and the source of the timestamp. HMAC and asymmetric
schemes share it, so a layout is parsed and validated the same way whatever
verifies the signature.

Options (checked at config load, errors name the key):
- `signature_header` (required): header name, or a list of alias names.
- `format`: kv, versioned, hex or base64 (see `formats`).
- `kv_separator`: `,` (default) or `;` between a kv header's entries (Paddle's
  `ts=…;h1=…`); kv only.
- `signature_encoding`: hex or base64, kv and versioned only (defaults: kv hex,
  versioned base64; bare formats are named after their encoding).
- `signature_key`: the kv key or version marking our signatures (kv and
  versioned only; default given by the scheme, `v1` for HMAC).
- `prefix`: text before each bare signature (`sha256=`, `v0=`).
- `signed_content`: template over {id}, {timestamp}, {body}, {method}, {url};
  default `{body}`.
- `timestamp_header` or `timestamp_key` (kv only, e.g. `t`): where the
  unix-seconds timestamp travels. Either is allowed exactly when the template
  signs `{timestamp}`: an unsigned timestamp can be rewritten by an attacker,
  so its replay window would be an illusion.
- `timestamp_format`: unix (seconds, default), unix_ms (HubSpot) or iso8601
  with an offset (Box): how the signed timestamp's text is read for the window.
- `signature_header_mode`: aliases (default: the names are aliases, present
  ones must agree) or each (every named header present carries signatures of
  its own, any one verifying is enough: Box's primary and secondary keys,
  DocuSign's `-1`, `-2` during a rotation); each is for bare formats only.
- `id_header`: where the event id travels. It counts as signed (a safe dedupe
  key) only when the template contains `{id}`; otherwise it is returned with
  `id_signed=False` (see `Verified`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import SignatureError
from .formats import (
    ENCODINGS,
    FORMATS,
    KV_SEPARATORS,
    LABELLED_FORMATS,
    HeaderFormat,
    SignatureList,
    parse_signature_header,
)
from .headers import HeaderView
from .options import choice, header_names, optional_str
from .templates import PLACEHOLDERS, Template, parse_template
from .timestamps import TIMESTAMP_FORMATS, parse_timestamp

ENVELOPE_KEYS: tuple[str, ...] = (
    "signature_header",
    "format",
    "kv_separator",
    "signature_encoding",
    "signature_key",
    "prefix",
    "signed_content",
    "timestamp_header",
    "timestamp_key",
    "timestamp_format",
    "signature_header_mode",
    "id_header",
)
HEADER_MODES: frozenset[str] = frozenset({"aliases", "each"})

# Labels and prefixes are short protocol words; a bound keeps them so.
_MAX_WORD_CHARS = 32
# A kv key or a version is a word without the separators of its own format.
_LABEL = re.compile(r"[A-Za-z0-9_.\-]+")
_PREFIX_FORBIDDEN = re.compile(r"[,\s]")


@dataclass(frozen=True, slots=True)
class Envelope:
    """A validated layout; build with `parse_envelope`.

    What every delivery would otherwise recompute from the layout (lowercased
    header names, which placeholders the template needs) is derived once here;
    those fields take no part in equality or hashing.
    """

    signature_headers: tuple[str, ...]
    format: HeaderFormat
    template: Template
    timestamp_headers: tuple[str, ...] | None
    id_headers: tuple[str, ...] | None
    timestamp_format: str = "unix"
    # Each signature header carries its own signatures (not aliases that agree).
    each_signature_header: bool = False
    # Lowercased, as HeaderView looks them up.
    signature_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    timestamp_keys: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    id_keys: tuple[str, ...] | None = field(init=False, repr=False, compare=False)
    _needs_method: bool = field(init=False, repr=False, compare=False)
    _needs_url: bool = field(init=False, repr=False, compare=False)
    _id_signed: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        signature_keys = tuple(name.lower() for name in self.signature_headers)
        timestamp_keys = _lowered(self.timestamp_headers)
        id_keys = _lowered(self.id_headers)
        template = self.template
        derived: dict[str, object] = {
            "signature_keys": signature_keys,
            "timestamp_keys": timestamp_keys,
            "id_keys": id_keys,
            "_needs_method": template.uses("method"),
            "_needs_url": template.uses("url"),
            "_id_signed": template.uses("id"),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def id_signed(self) -> bool:
        return self._id_signed


class Opened(NamedTuple):
    """One request seen through an envelope: the signed bytes and what came with them.

    A named tuple rather than a frozen dataclass: one is made per delivery,
    and a frozen dataclass costs a guarded attribute write per field.
    """

    content: bytes
    signatures: SignatureList
    timestamp: int | None
    event_id: str | None


def parse_envelope(
    scheme: str,
    options: Mapping[str, object],
    *,
    default_format: str,
    default_key: str,
    placeholders: Collection[str] = PLACEHOLDERS,
) -> tuple[Envelope, str]:
    """The envelope and the label of our signatures, or ValueError naming the bad key."""
    signature_headers = header_names(scheme, options, "signature_header", required=True)
    assert signature_headers is not None  # guaranteed by required=True
    kind = choice(scheme, options, "format", FORMATS, default_format)
    labelled = kind in LABELLED_FORMATS
    for key in ("signature_encoding", "signature_key"):
        if options.get(key) is not None and not labelled:
            raise ValueError(f"{scheme}: option {key!r} only applies to format kv or versioned")
    for key in ("timestamp_key", "kv_separator"):
        if options.get(key) is not None and kind != "kv":
            raise ValueError(f"{scheme}: option {key!r} only applies to format kv")
    separator = optional_str(scheme, options, "kv_separator")
    if separator is None:
        separator = ","
    elif separator not in KV_SEPARATORS:
        raise ValueError(f'{scheme}: option \'kv_separator\' must be "," or ";"')
    encoding = kind
    if labelled:
        default_encoding = "hex" if kind == "kv" else "base64"
        encoding = choice(scheme, options, "signature_encoding", ENCODINGS, default_encoding)
    label = (_word(scheme, options, "signature_key") or default_key) if labelled else ""
    prefix = optional_str(scheme, options, "prefix", _MAX_WORD_CHARS) or ""
    if prefix and labelled:
        raise ValueError(f"{scheme}: option 'prefix' only applies to format hex or base64")
    if _PREFIX_FORBIDDEN.search(prefix):
        raise ValueError(f"{scheme}: option 'prefix' must not contain commas or whitespace")
    text = optional_str(scheme, options, "signed_content") or "{body}"
    template = parse_template(scheme, "signed_content", text, placeholders)
    timestamp_headers = header_names(scheme, options, "timestamp_header", required=False)
    timestamp_key = _word(scheme, options, "timestamp_key")
    if timestamp_headers is not None and timestamp_key is not None:
        raise ValueError(f"{scheme}: set option 'timestamp_header' or 'timestamp_key', not both")
    has_source = timestamp_headers is not None or timestamp_key is not None
    if template.uses("timestamp") != has_source:
        raise ValueError(
            f"{scheme}: option 'timestamp_header' (or 'timestamp_key' with format kv) must be "
            "set exactly when option 'signed_content' contains {timestamp} "
            "(an unsigned timestamp is no replay guard)"
        )
    if timestamp_key is not None and timestamp_key == label:
        raise ValueError(f"{scheme}: option 'timestamp_key' must differ from 'signature_key'")
    timestamp_format = choice(scheme, options, "timestamp_format", TIMESTAMP_FORMATS, "unix")
    if options.get("timestamp_format") is not None and not has_source:
        raise ValueError(f"{scheme}: option 'timestamp_format' needs a signed timestamp")
    each = choice(scheme, options, "signature_header_mode", HEADER_MODES, "aliases") == "each"
    if each and (labelled or len(signature_headers) < 2):
        raise ValueError(
            f"{scheme}: option 'signature_header_mode' = \"each\" needs format hex or base64 "
            "and a list of at least two names in 'signature_header'"
        )
    id_headers = header_names(scheme, options, "id_header", required=False)
    if template.uses("id") and id_headers is None:
        raise ValueError(f"{scheme}: option 'id_header' is required when signed_content has {{id}}")
    fmt = HeaderFormat(
        kind=kind,
        encoding=encoding,
        prefix=prefix,
        timestamp_key=timestamp_key,
        separator=separator,
    )
    envelope = Envelope(
        signature_headers=signature_headers,
        format=fmt,
        template=template,
        timestamp_headers=timestamp_headers,
        id_headers=id_headers,
        timestamp_format=timestamp_format,
        each_signature_header=each,
    )
    return envelope, label


def open_envelope(
    envelope: Envelope,
    headers: HeaderView,
    body: bytes,
    labels: Collection[str],
    method: str | None,
    url: str | None,
) -> Opened:
    """Read one request: SignatureError for what is missing or malformed.

    A template needing {method} or {url} that the caller did not supply is a
    wiring problem on our side, reported as `bad_options` before anything from
    the request is looked at.
    """
    if (envelope._needs_method and method is None) or (envelope._needs_url and url is None):
        raise SignatureError("bad_options")
    if envelope.each_signature_header:
        raw_signatures = " ".join(headers.require_each_key(envelope.signature_keys))
    else:
        raw_signatures = headers.require_any_key(envelope.signature_keys)
    timestamp_keys = envelope.timestamp_keys
    raw_timestamp = headers.require_any_key(timestamp_keys) if timestamp_keys else None
    event_id = _event_id(envelope, headers)
    fmt = envelope.format
    signatures = parse_signature_header(fmt, raw_signatures, labels)
    if fmt.timestamp_key is not None:
        raw_timestamp = signatures.timestamp
    timestamp = (
        parse_timestamp(envelope.timestamp_format, raw_timestamp)
        if raw_timestamp is not None
        else None
    )
    content = envelope.template.render_request(body, raw_timestamp, event_id, method, url)
    return Opened(content, signatures, timestamp, event_id)


def _event_id(envelope: Envelope, headers: HeaderView) -> str | None:
    keys = envelope.id_keys
    if keys is None:
        return None
    # A signed id is part of the signed content, so it must be present; an
    # unsigned one is merely informative.
    if envelope._id_signed:
        return headers.require_any_key(keys)
    return headers.get_any_key(keys)


def _lowered(names: tuple[str, ...] | None) -> tuple[str, ...] | None:
    return None if names is None else tuple(name.lower() for name in names)


def _word(scheme: str, options: Mapping[str, object], key: str) -> str | None:
    value = optional_str(scheme, options, key, _MAX_WORD_CHARS)
    if value is not None and _LABEL.fullmatch(value) is None:
        raise ValueError(f"{scheme}: option {key!r} must be letters, digits, '_', '.' or '-'")
    return value
