"""Signature-header formats: how a sender lays out one or more signatures in a header.

- `kv`: a key-value list, `t=1700000000,v1=<hex>,v1=<hex>` (Stripe, Mux),
  separated by commas or, where the sender says so, semicolons
  (`ts=1700000000;h1=<hex>`, Paddle). The timestamp key, when configured,
  must appear exactly once: with two, which one was signed would depend on
  the parser, an ambiguity an attacker could exploit. Keys other than ours
  are ignored (`v0`, test-mode extras).
- `versioned`: space-separated `<version>,<value>` entries,
  `v1,<b64> v1a,<b64>` (Standard Webhooks). Unknown versions are ignored so a
  sender can add new ones, and so is an entry we cannot read beside one we
  can (the specification's rule); only a header of unreadable entries is
  malformed.
- `hex` / `base64`: bare values, several separated by commas or whitespace,
  each optionally behind a prefix such as `sha256=` or `v0=`.

Several signatures appear while a sender rotates its secret; any one matching
is enough (checked by the caller). For `kv` and the bare formats an entry we
would check that does not decode makes the header malformed, and so does any
entry without `key=` structure; for all, more entries than
MAX_SIGNATURES_PER_HEADER.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

from .digests import MAX_SIGNATURES_PER_HEADER, decode_base64, decode_hex
from .errors import SignatureError

FORMATS: frozenset[str] = frozenset({"kv", "versioned", "hex", "base64"})
ENCODINGS: frozenset[str] = frozenset({"hex", "base64"})
LABELLED_FORMATS: frozenset[str] = frozenset({"kv", "versioned"})
# What separates a kv header's entries. Only characters no kv key, hex or
# base64 value holds, so the choice can never split a value in two.
KV_SEPARATORS: frozenset[str] = frozenset({",", ";"})
BARE_LABEL = ""

_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True, slots=True)
class HeaderFormat:
    """How to read one signature header.

    `encoding` is the text encoding of each signature (fixed by the kind for
    bare formats). `prefix` applies to bare formats only. `timestamp_key` (kv
    only) names the key carrying the signed timestamp. `foreign_is_malformed`
    makes a bare entry without our prefix malformed instead of ignored, for
    senders that only ever send one signature of one kind (GitHub).
    `separator` (kv only) splits the header's entries.
    """

    kind: str
    encoding: str
    prefix: str = ""
    timestamp_key: str | None = None
    foreign_is_malformed: bool = False
    separator: str = ","


class SignatureList(NamedTuple):
    """What a signature header carries: its timestamp (kv only) and decoded signatures.

    A named tuple rather than a frozen dataclass: one is made per delivery.
    """

    timestamp: str | None
    entries: tuple[tuple[str, bytes], ...]

    def labelled(self, label: str) -> list[bytes]:
        """The signatures under `label` (a kv key or a version; "" for bare formats),
        each once: a header repeating one signature must not repeat the work."""
        unique: dict[bytes, None] = {}
        for entry_label, value in self.entries:
            if entry_label == label:
                unique[value] = None
        return list(unique)


def parse_signature_header(
    fmt: HeaderFormat, header: str, labels: Collection[str]
) -> SignatureList:
    """Split and decode `header`; only entries under `labels` are decoded and kept."""
    if fmt.kind == "kv":
        return _parse_kv(fmt, header, labels)
    if fmt.kind == "versioned":
        return _parse_versioned(fmt, header, labels)
    return _parse_bare(fmt, header)


def _decode(encoding: str, value: str) -> bytes:
    decoded = decode_hex(value) if encoding == "hex" else decode_base64(value)
    if not decoded:  # None (not valid) or empty: no real signature is zero bytes
        raise SignatureError("malformed_header")
    return decoded


def _parse_kv(fmt: HeaderFormat, header: str, labels: Collection[str]) -> SignatureList:
    items = header.split(fmt.separator)
    if len(items) > MAX_SIGNATURES_PER_HEADER + 1:  # the signatures plus one timestamp
        raise SignatureError("malformed_header")
    timestamps: list[str] = []
    entries: list[tuple[str, bytes]] = []
    for item in items:
        key, equals, value = item.strip().partition("=")
        if not equals or not key:
            raise SignatureError("malformed_header")
        if key == fmt.timestamp_key:
            timestamps.append(value)
        elif key in labels:
            entries.append((key, _decode(fmt.encoding, value)))
    if fmt.timestamp_key is not None and len(timestamps) != 1:
        raise SignatureError("malformed_header")
    return SignatureList(timestamps[0] if timestamps else None, tuple(entries))


def _parse_versioned(fmt: HeaderFormat, header: str, labels: Collection[str]) -> SignatureList:
    """Standard Webhooks: verify any entry we can read and ignore the others, as
    the specification and its reference verifiers do (an entry of a version
    we do not know, or one we cannot decode, beside a valid one). A header of
    nothing but unreadable entries is still malformed."""
    items = header.split()
    if len(items) > MAX_SIGNATURES_PER_HEADER:
        raise SignatureError("malformed_header")
    entries: list[tuple[str, bytes]] = []
    unreadable = False
    for item in items:
        version, comma, value = item.partition(",")
        if not comma or not version:
            unreadable = True
        elif version in labels:
            try:
                entries.append((version, _decode(fmt.encoding, value)))
            except SignatureError:
                unreadable = True
    if unreadable and not entries:
        raise SignatureError("malformed_header")
    return SignatureList(None, tuple(entries))


def _parse_bare(fmt: HeaderFormat, header: str) -> SignatureList:
    items = [item for item in _SEPARATORS.split(header) if item]
    if len(items) > MAX_SIGNATURES_PER_HEADER:
        raise SignatureError("malformed_header")
    entries: list[tuple[str, bytes]] = []
    for item in items:
        if not item.startswith(fmt.prefix):
            if fmt.foreign_is_malformed:
                raise SignatureError("malformed_header")
            continue  # another scheme's entry (e.g. `sha1=` beside our `sha256=`)
        entries.append((BARE_LABEL, _decode(fmt.encoding, item[len(fmt.prefix) :])))
    return SignatureList(None, tuple(entries))
