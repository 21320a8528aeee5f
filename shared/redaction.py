"""Redaction of credentials from headers and URLs before anything is stored or logged.

The ledger records every external call (SPEC §3) and must not become a second
home for provider credentials or webhook signatures. The rule is name-based and
deliberately broad: a harmless header redacted by mistake costs a little audit
detail; a credential stored by mistake costs a rotation and an incident. One
rule looks at the value too: a query value that is a JWT (a signed download
link's `?_jwt=eyJ...`, a grant under any name) is a bearer credential, so it is
redacted whatever its parameter is called.

Only the stored and shown copies are redacted: a request is sent, and a
result fetched, from the URL as the provider gave it (`recorded_response`
re-reads an answer whose stored copy was altered rather than act on it).
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import json
import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"

_ALWAYS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"})
_WORDS = (
    "key",
    "token",
    "secret",
    "signature",
    "auth",
    "password",
    "credential",
    "session",
    "jwt",  # Runway's signed links: `?_jwt=...`; Cloudflare Access's Cf-Access-Jwt-Assertion
)
# Idempotency tokens are audit data, not credentials: the ledger needs them to
# prove which token a create carried, and knowing one grants no access.
_KEEP = frozenset({"idempotency-key", "x-idempotency-key"})
# Query parameters that commonly carry credentials in pre-signed result URLs
# (S3 X-Amz-Signature, GCS X-Goog-Signature, Azure SAS `sig`, API `key=`).
_QUERY_WORDS = (*_WORDS, "sig", "x-amz-security-token")
# Large bodies are referenced by digest, not copied into the call log.
EXCERPT_BYTES = 16 * 1024
# Headers whose values are URLs (a redirect to a pre-signed download, say).
_URL_HEADERS = frozenset({"location", "content-location", "link"})
# A query parameter inside free text (a JSON body, a header): after "?", "&"
# or JSON's escaped "\u0026", a name, "=" and the value up to a delimiter.
# Matching parameters rather than whole URLs also covers relative links and
# JSON-escaped ones ("https:\/\/..."), and leaves everything else as it was.
_QUERY_PARAM = re.compile(r"(?:[?&]|\\u0026)([A-Za-z0-9_.\-]+)=([^&\s\"'<>\\)#]+)")
# A JWS in compact form (RFC 7515): header.payload.signature, base64url, the
# signature empty for an unsecured JWT. The header is checked, decoded, only
# for values of this shape; it must be a JSON object naming "alg".
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
# A JWE in compact form (RFC 7516): header.encrypted_key.iv.ciphertext.tag, the
# key empty for direct encryption; an encrypted grant is a bearer grant too.
_JWE_SHAPE = re.compile(
    r"[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+"
)
# A JOSE header is a few dozen bytes: a first segment longer than this is not
# taken for one, and not decoded (a value of megabytes costs one scan).
_JWT_HEADER_CHARS = 2048
# base64url of a JSON object's "{" followed by '"' or a space ("ey"), or by a
# newline, tab or carriage return ("ew"): a header starts with one of these.
_JSON_OBJECT_STARTS = frozenset({"ey", "ew"})


def is_sensitive_header(name: str, extra: Iterable[str] = ()) -> bool:
    return _rule(name, frozenset(e.lower() for e in extra)) is _Rule.REDACT


class _Rule(enum.Enum):
    KEEP = enum.auto()
    REDACT = enum.auto()
    URLS = enum.auto()  # a header whose value holds links


@functools.lru_cache(maxsize=4096)
def _rule(name: str, extras: frozenset[str]) -> _Rule:
    """What a header name calls for; cached, as every call asks for the same few names.

    The cache is bounded (4,096 names): names an answer chooses cost a miss and
    at most that many entries, never unbounded memory.
    """
    lowered = name.lower()
    if lowered in _KEEP:
        return _Rule.KEEP
    if lowered in _ALWAYS or lowered in extras or any(word in lowered for word in _WORDS):
        return _Rule.REDACT
    return _Rule.URLS if lowered in _URL_HEADERS else _Rule.KEEP


def sanitize_headers(headers: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """A copy of `headers` with credential-looking values replaced by ``[redacted]``.

    `extra` names headers to redact whatever they are called (e.g. a provider's
    auth header with an unusual name).
    """
    extras = frozenset(e.lower() for e in extra) if extra else _NONE
    return {name: _header_value(_rule(name, extras), value) for name, value in headers.items()}


_NONE: frozenset[str] = frozenset()

# An answer's headers as the call log keeps them: a provider chooses them
# (httpcore reads up to about 100 KiB), and each is stored in the call log and
# hashed into its evidence leaf. Beyond these bounds a value is cut (marked
# CUT) and the headers past the count are one MORE_HEADERS entry (a name no
# HTTP header can have).
MAX_STORED_HEADERS = 100
MAX_STORED_HEADER_CHARS = 2048
CUT = "[cut]"
MORE_HEADERS = "[more]"


def stored_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` sanitized and bounded (see MAX_STORED_HEADERS); most answers as they are."""
    kept = sanitize_headers(headers)
    limit = MAX_STORED_HEADER_CHARS
    if len(kept) <= MAX_STORED_HEADERS and all(
        len(name) + len(value) <= limit for name, value in kept.items()
    ):
        return kept
    bounded: dict[str, str] = {}
    for index, (name, value) in enumerate(kept.items()):
        if index == MAX_STORED_HEADERS:
            bounded[MORE_HEADERS] = f"{len(kept) - index} more headers not stored"
            break
        if len(name) + len(value) > limit:
            if len(name) > limit // 2:  # numbered: two long names cut alike stay two
                name = f"{name[: limit // 2]}{CUT}{index}"
            value = f"{value[: limit // 8]}{CUT} {len(value)} characters"
        bounded[name] = value
    return bounded


def _header_value(rule: _Rule, value: str) -> str:
    if rule is _Rule.KEEP:
        return value
    return REDACTED if rule is _Rule.REDACT else sanitize_text_urls(value)


def sanitize_url(url: str) -> str:
    """`url` with credential-looking query values redacted; user-info and the
    fragment are dropped.

    A fragment never leaves the client (no request carries it), so a record
    of what was requested has no use for it, and it is where implicit-flow
    links put their tokens (`#access_token=...`).
    """
    if _plain(url):
        return url  # nothing to redact, and the round trip below would give it back unchanged
    parts = urlsplit(url)._replace(fragment="")
    netloc = parts.netloc.rpartition("@")[2]
    if not parts.query:
        return urlunsplit(parts._replace(netloc=netloc))
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    cleaned = [(name, REDACTED if _secret_param(name, value) else value) for name, value in pairs]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(cleaned, safe="[]")))


def _plain(url: str) -> bool:
    """Whether `url` holds no query, user-info or fragment, and nothing `urlsplit`
    rewrites (spaces and control characters, an upper-case scheme, a bracketed
    host it validates, no host at all): most status URLs, read on every poll."""
    scheme, sep, rest = url.partition("://")
    return (
        bool(sep)
        and scheme.isalpha()
        and scheme.islower()
        and rest[:1] not in ("", "/")
        and url.isascii()
        and url.isprintable()
        and " " not in url
        and "?" not in url
        and "@" not in url
        and "#" not in url
        and "[" not in url
        and "]" not in url
    )


def sanitize_text_urls(text: str) -> str:
    """`text` with credential-looking query values in its links redacted.

    Status and create bodies are kept (an excerpt) as audit evidence; they
    often carry pre-signed result links, which are bearer credentials until
    they expire. Only the values are replaced; the rest is kept byte for byte.
    """
    if "=" not in text:
        return text
    return _QUERY_PARAM.sub(_redact_param, text)


def sanitize_bytes_urls(body: bytes) -> bytes:
    """`body` with credential-looking query values in its links redacted, every
    other byte as it came (a byte that is no UTF-8 kept through `surrogateescape`).

    For a body kept in base64 because it is no JSON text PostgreSQL takes (a
    webhook's array, a NaN): its links are as reusable from there as from text.
    """
    if b"=" not in body:
        return body
    text = body.decode("utf-8", "surrogateescape")
    return sanitize_text_urls(text).encode("utf-8", "surrogateescape")


def _redact_param(match: re.Match[str]) -> str:
    if not _secret_param(match.group(1), match.group(2)):
        return match.group(0)
    return match.group(0)[: match.start(2) - match.start(0)] + REDACTED


def _secret_param(name: str, value: str) -> bool:
    """Whether a query parameter carries a credential: by its name, or a JWT by its value."""
    return is_secret_param(name) or looks_like_jwt(value)


def is_secret_param(name: str) -> bool:
    """Whether a query parameter's name marks it as a credential (its value is
    redacted from every stored and shown copy of a URL, whatever the value)."""
    lowered = name.lower()
    return any(word in lowered for word in _QUERY_WORDS)


def looks_like_jwt(value: str) -> bool:
    """Whether `value` is a compact JWT: three base64url segments joined by dots
    (a JWS), or five (a JWE), the first a JSON object with "alg" (RFC 7515's
    JOSE header).

    Cheap on the values most queries hold: one count of dots rejects them
    before any regular expression or decoding runs.
    """
    shape = {2: _JWT_SHAPE, 4: _JWE_SHAPE}.get(value.count("."))
    if shape is None or value[:2] not in _JSON_OBJECT_STARTS:
        return False
    head = value.partition(".")[0]
    if len(head) > _JWT_HEADER_CHARS or not shape.fullmatch(value):
        return False
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError, RecursionError):  # not base64, UTF-8, JSON; too deep
        return False
    return isinstance(header, dict) and "alg" in header


def stored_excerpt(body: bytes) -> str:
    """The start of a response body as the call log keeps it.

    Text PostgreSQL can hold (no NUL), with credentials in URLs redacted; the
    digest and size recorded beside it are those of the bytes received.
    """
    text = body[:EXCERPT_BYTES].decode("utf-8", errors="replace")
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return sanitize_text_urls(text)[:EXCERPT_BYTES]  # a redaction may lengthen it
