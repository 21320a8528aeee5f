"""A shared secret sent verbatim in a header we chose (AssemblyAI-style), or in
the callback URL's query string (Luma, Rev.ai: providers that sign nothing).

Some providers let the caller name a header and a value at job creation and
echo them on the webhook; others only call back the URL they were given, so
the secret can only travel in that URL (`{webhook_url}?token={webhook_secret}`
in the create's body). Nothing is signed: the value is a bearer token, so
anyone who sees one request (logs, a proxy, the provider's own dashboard) can
forge any later request, the body is not protected, and there is no event id
or replay window. Use only where the provider offers nothing better, over
HTTPS, and treat the event as a hint that triggers a status read.

A token in a URL is echoed more than one in a header: providers return the
callback URL in their job objects. So the query parameter's name must be one
the stored copies redact by name (`shared.redaction`: token, key, secret, ...),
the receiver scrubs the token from a delivery's stored payload by value
(`scrub`), and the token must be URL-safe and long enough not to be guessed.

The comparison is between SHA-256 digests of the presented and the configured
value: `hmac.compare_digest` returns early on a length mismatch, so comparing
the raw values would leak the secret's length; digests are always 32 bytes.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import parse_qsl, urlsplit

from shared.redaction import REDACTED, is_secret_param
from shared.secret import Secret

from .digests import any_match
from .errors import SignatureError
from .headers import MAX_HEADER_CHARS, HeaderView
from .options import header_name, optional_str, reject_unknown
from .verified import Verified

SCHEME = "static_header"
# A query parameter's name as it may appear unescaped in a URL.
_PARAM_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
# A token that travels in a URL: inserted there as written, so only characters
# no encoder escapes (URL, JSON, HTML: `~` and `.` are percent-encoded by some),
# so that every echo of it reads the same; long enough not to be guessed.
_URL_TOKEN = re.compile(r"[A-Za-z0-9_\-]+")
MIN_URL_TOKEN_CHARS, MAX_URL_TOKEN_CHARS = 24, 256


def check_options(options: Mapping[str, object]) -> None:
    """`header` names the header carrying the secret, or `query` the URL's query
    parameter (exactly one of them)."""
    reject_unknown(SCHEME, options, ("header", "query"))
    if "query" not in options:
        header_name(SCHEME, options, "header", required=True)
        return
    if "header" in options:
        raise ValueError(f"{SCHEME}: options 'header' and 'query' exclude each other")
    name = optional_str(SCHEME, options, "query")
    if name is None or _PARAM_NAME.fullmatch(name) is None:
        raise ValueError(
            f"{SCHEME}: option 'query' must be a query parameter name "
            "(1-64 letters, digits, '_', '.', '-')"
        )
    if not is_secret_param(name):
        raise ValueError(
            f"{SCHEME}: option 'query' must name the parameter as a credential "
            "(containing token, key, secret, sig or auth, e.g. 'token'): providers echo "
            "the callback URL in their answers, and stored copies redact such a "
            "parameter by its name"
        )


def headers_read(options: Mapping[str, object]) -> tuple[str, ...]:
    """The header the token travels in; none when it is in the query."""
    return () if in_query(options) else (str(options["header"]),)


def in_query(options: Mapping[str, object]) -> bool:
    """Whether the secret travels in the URL's query string."""
    return "query" in options


def check_secret(secret: str, options: Mapping[str, object] | None) -> None:
    """A token for the query string: URL-safe as written, and not guessable."""
    if options is None or not in_query(options):
        return
    if _URL_TOKEN.fullmatch(secret) is None:
        raise ValueError(
            f"{SCHEME}: a token sent in the URL must hold only letters, digits, '-' and "
            "'_' (it is inserted in the callback URL as written, and read back from "
            "every echo of it)"
        )
    if not MIN_URL_TOKEN_CHARS <= len(secret) <= MAX_URL_TOKEN_CHARS:
        raise ValueError(
            f"{SCHEME}: a token sent in the URL must be {MIN_URL_TOKEN_CHARS} to "
            f"{MAX_URL_TOKEN_CHARS} characters long (e.g. `openssl rand -hex 24`)"
        )


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int,
    url: str | None = None,
) -> Verified:
    """Authenticate one request; the body, `now` and the tolerance are unused.

    `url` is the request's target as it reached us (its path and query; the
    receiver never adds a query of its own configuration), needed only with
    the `query` option.
    """
    name = options.get("query") or options["header"]
    assert isinstance(name, str)  # checked by dispatch.verify (check_options) first
    value = _from_query(url, name) if in_query(options) else headers.require(name)
    presented = _fingerprint(value)
    if not any_match((_fingerprint(secret) for secret in secrets), [presented]):
        raise SignatureError("bad_signature")
    return Verified(scheme=SCHEME, event_id=None, id_signed=False, timestamp=None)


def _from_query(url: str | None, name: str) -> str:
    if url is None:
        raise SignatureError("bad_options")  # the receiver was not told its own URL
    values = [v for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True) if k == name]
    if not values or not values[0].strip():
        raise SignatureError("missing_header")
    # one spelling: which of two values we read must not be the sender's choice
    if len(values) > 1 or len(values[0]) > MAX_HEADER_CHARS:
        raise SignatureError("malformed_header")
    return values[0]


# The encodings a JSON body may come in (RFC 8259 and the BOM-led ones the
# standard library reads): a token echoed in any of them is found.
_ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")


def scrub(body: bytes, secrets: Sequence[str]) -> bytes:
    """`body` with every configured token replaced by REDACTED: an answer or a
    delivery that echoes the callback URL must not be stored with the token.

    Tokens are letters, digits, '-' and '_' (`check_secret`), which encoders
    rarely escape: an echo is found as written, in the body's encoding. One
    written otherwise, a character at a time as JSON's
    `\\u004e` or a percent-encoded `%4E`, is found by a pattern that takes
    each of its characters in any of those spellings, in UTF-16 or UTF-32 text
    as in UTF-8, and in bytes no encoding reads (such a body is stored in
    base64, which gives the token back). Only the
    token's span is replaced: the rest of the body stays byte for byte as it
    came."""
    secrets = [secret for secret in secrets if secret]
    for secret in secrets:
        for encoding in _ENCODINGS:
            token = secret.encode(encoding, "surrogatepass")
            if token in body:
                body = body.replace(token, REDACTED.encode(encoding))
    if not secrets or (b"\\" not in body and b"%" not in body):
        return body  # no escape of any kind: what was written was found above
    # Searched as bytes in each encoding, never decoded: a guess at the body's
    # encoding read a BOM-led big-endian text back byte-swapped, a truncated
    # UTF-16 text as Latin-1 (its escapes then interleaved with NULs), and
    # bytes with a NUL second as UTF-16 (their ASCII escapes then unseen).
    # UTF-16 and UTF-32 spell every ASCII character with a NUL: no NUL, no such text
    encodings = _ENCODINGS if b"\x00" in body else ("utf-8",)
    for secret in secrets:
        for encoding in encodings:
            body = _spelled_otherwise(secret, encoding).sub(_redacted(encoding), body)
    return body


def scrub_held(body: bytes, secrets: Iterable[Secret]) -> bytes:
    """`scrub` with every value the secrets hold: one held before a rotation too
    (a job created then echoes it)."""
    return scrub(body, [value for secret in secrets for value in secret.values_held()])


def _redacted(encoding: str) -> bytes:
    """REDACTED as an `re.sub` replacement, which reads a backslash as an escape."""
    return REDACTED.encode(encoding).replace(b"\\", b"\\\\")


@functools.lru_cache(maxsize=64)
def _spelled_otherwise(secret: str, encoding: str) -> re.Pattern[bytes]:
    """The token in `encoding` with each character as itself, a JSON `\\u00XX` or
    a `%XX` (hex digits in either case; the character itself as the token has it)."""

    def spelled(text: str) -> bytes:
        return b"".join(
            b"(?:%s|%s)"
            % (re.escape(ch.lower().encode(encoding)), re.escape(ch.upper().encode(encoding)))
            if ch in "abcdefABCDEF"
            else re.escape(ch.encode(encoding))
            for ch in text
        )

    parts = []
    for char in secret:
        code = f"{ord(char):02x}"
        itself = re.escape(char.encode(encoding, "surrogatepass"))
        escaped = re.escape("\\u".encode(encoding)) + spelled("00" + code)
        percent = re.escape("%".encode(encoding)) + spelled(code)
        parts.append(b"(?:%s|%s|%s)" % (itself, escaped, percent))
    return re.compile(b"".join(parts))


def _fingerprint(value: str) -> bytes:
    # surrogatepass: a mapping from any source may hold lone surrogates, and an
    # encoding error must not turn a forged request into a crash.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()
