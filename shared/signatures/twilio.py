"""Twilio's request signature: `X-Twilio-Signature`, over the URL and the form.

Twilio signs what it posted as `base64(HMAC(key, url + params))`, where
`params` is every form parameter of the body, sorted by name, each written
as its name then its value (a name sent more than once: its values sorted),
keyed by the account's Auth Token (HMAC-SHA1), or by a webhooks SharedKey
secret when `X-Twilio-Webhooks-Signature-Settings` names
`algorithm=HMAC_SHA256`. A JSON body is not in the signed text: Twilio puts
its SHA-256 in the URL's `bodySHA256` query parameter, which the signature
covers, and the body must match it. The URL is the one Twilio was given,
query included (the receiver's `public_webhook_url`), with or without the
port: Twilio's own validator accepts both, as its servers sign either.

What this proves, and what not: the body and the URL are authentic; nothing
is timestamped, so there is no replay window (as for GitHub), and
`I-Twilio-Idempotency-Token`, the delivery's id, is not signed, so the receiver
never deduplicates on it (`id_signed=False`): it deduplicates on the body's
hash, and every event is a hint that triggers a status read of our own. A
form's signature covers its fields sorted and deduplicated, not its bytes:
the same fields in another order or spelling verify as well.

Checked against the `twilio` package's own `RequestValidator`
(tests/unit/test_signatures_twilio.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit, urlunsplit

from .errors import SignatureError
from .headers import MAX_HEADER_CHARS, HeaderView
from .options import header_name, reject_unknown
from .verified import Verified

SCHEME = "twilio"
SIGNATURE_HEADER = "X-Twilio-Signature"
SETTINGS_HEADER = "X-Twilio-Webhooks-Signature-Settings"
ID_HEADER = "I-Twilio-Idempotency-Token"
OPTIONS = ("signature_header", "id_header")
FORM = "application/x-www-form-urlencoded"
# Parameters a form may hold: Twilio's callbacks carry a few dozen.
MAX_FORM_FIELDS = 1000
_ALGORITHMS = {"HMAC_SHA1": hashlib.sha1, "HMAC_SHA256": hashlib.sha256}


def check_options(options: Mapping[str, object]) -> None:
    reject_unknown(SCHEME, options, OPTIONS)
    header_name(SCHEME, options, "signature_header", required=False)
    header_name(SCHEME, options, "id_header", required=False)


def headers_read(options: Mapping[str, object]) -> tuple[str, ...]:
    """The headers verification reads (the receiver screens them for non-ASCII bytes)."""
    return (_signature_header(options), SETTINGS_HEADER, _id_header(options))


def is_form(content_type: str | None) -> bool:
    """Whether a body is a form (what Twilio posts, and what its signature covers)."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media == FORM


def form_fields(body: bytes) -> list[tuple[str, str]]:
    """The form's fields in order; SignatureError when the body is no form we read
    (not UTF-8 once decoded, or more than MAX_FORM_FIELDS fields)."""
    try:
        return parse_qsl(
            body.decode("utf-8"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise SignatureError("bad_signature") from None


def verify(
    options: Mapping[str, object],
    headers: HeaderView,
    body: bytes,
    secrets: Sequence[str],
    url: str | None,
) -> Verified:
    """Authenticate one request from Twilio, or raise SignatureError."""
    if url is None:
        raise SignatureError("bad_options")  # the receiver was not told its public URL
    presented = _presented(headers.require(_signature_header(options)))
    algorithm = _algorithm(headers.get(SETTINGS_HEADER))
    form = is_form(headers.get("content-type"))
    # Twilio puts `bodySHA256` in the URL of a JSON body only; a form under such a
    # URL would verify with no field at all (its signed text is the URL alone,
    # which the JSON delivery's signature covers): the body must match it too.
    if not form or _claims_digest(url):
        _check_body_digest(url, body)
    signed = _params_text(form_fields(body)) if form else ""
    candidates = [
        hmac.new(secret.encode("utf-8", "surrogatepass"), (u + signed).encode(), algorithm).digest()
        for secret in secrets
        for u in _spellings(url)
    ]
    # every candidate is compared, so the time taken says nothing of which matched
    if not sum(hmac.compare_digest(c, presented) for c in candidates):
        raise SignatureError("bad_signature")
    if form:
        # What the signature covers is the URL and the fields, sorted and each
        # value once, not the form's bytes: the same fields reordered, `%20` for
        # `+`, a field repeated verify alike, and a dedupe key of the bytes stored
        # each respelling of one capture anew. The signed text is the key.
        digest = hashlib.sha256((url + signed).encode()).hexdigest()
        return Verified(scheme=SCHEME, event_id=f"twilio:{digest}", id_signed=True, timestamp=None)
    event_id = headers.get(_id_header(options))
    return Verified(scheme=SCHEME, event_id=event_id or None, id_signed=False, timestamp=None)


def sign(secret: str, url: str, body: bytes, *, form: bool, algorithm: str = "HMAC_SHA1") -> str:
    """The `X-Twilio-Signature` Twilio sends (for tests and the simulator): over
    `url` and the form's fields, or over `url` alone for another body (whose
    digest the caller puts in the URL's `bodySHA256`)."""
    signed = _params_text(form_fields(body)) if form else ""
    digest = hmac.new(secret.encode(), (url + signed).encode(), _ALGORITHMS[algorithm]).digest()
    return base64.b64encode(digest).decode()


def _signature_header(options: Mapping[str, object]) -> str:
    name = options.get("signature_header", SIGNATURE_HEADER)
    assert isinstance(name, str)  # check_options ran at load
    return name


def _id_header(options: Mapping[str, object]) -> str:
    name = options.get("id_header", ID_HEADER)
    assert isinstance(name, str)
    return name


def _presented(value: str) -> bytes:
    if len(value) > MAX_HEADER_CHARS:
        raise SignatureError("malformed_header")
    try:
        return base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("malformed_header") from None


def _algorithm(settings: str | None) -> Callable[..., Any]:
    """The HMAC's hash the settings header names: HMAC_SHA1 without one (the Auth
    Token's), HMAC_SHA256 for a SharedKey; any other is unreadable to us."""
    if settings is None:
        return hashlib.sha1
    if len(settings) > MAX_HEADER_CHARS:
        raise SignatureError("malformed_header")
    named = None
    for part in settings.split(","):
        key, separator, value = part.partition("=")
        if separator and key.strip() == "algorithm" and value.strip():
            named = value.strip().upper()
            break  # the first one named, as Twilio's get_signature_algorithm reads it
    if named is None:
        return hashlib.sha1
    if named not in _ALGORITHMS:
        raise SignatureError("malformed_header")
    return _ALGORITHMS[named]


def _params_text(fields: Sequence[tuple[str, str]]) -> str:
    """Each name, sorted, then its values, sorted, duplicates once: as Twilio signs."""
    values: dict[str, set[str]] = {}
    for name, value in fields:
        values.setdefault(name, set()).add(value)
    return "".join(name + value for name in sorted(values) for value in sorted(values[name]))


def _split(url: str) -> SplitResult:
    """The URL's parts; one `urlsplit` refuses (an unbalanced `[`, an IPv6 host
    that is none) is our own public URL's mistake, as a bad port is."""
    try:
        return urlsplit(url)
    except ValueError:
        raise SignatureError("bad_options") from None


def _claims_digest(url: str) -> bool:
    """Whether the URL carries a `bodySHA256` parameter (however many)."""
    query = parse_qsl(_split(url).query, keep_blank_values=True)
    return any(key == "bodySHA256" for key, _ in query)


def _check_body_digest(url: str, body: bytes) -> None:
    """A body that is no form is signed through its SHA-256 in the URL; without it,
    nothing of the body is signed."""
    query = parse_qsl(_split(url).query, keep_blank_values=True)
    claimed = [value for key, value in query if key == "bodySHA256"]
    if len(claimed) != 1:
        raise SignatureError("bad_signature")
    actual = hashlib.sha256(body).hexdigest()
    if not hmac.compare_digest(actual.encode(), claimed[0].strip().lower().encode()):
        raise SignatureError("bad_signature")


def _spellings(url: str) -> tuple[str, ...]:
    """The URL without its port and with it (Twilio's validator accepts both), the
    rest as written: the host is not lowercased, since Twilio signs it as given."""
    parts = _split(url)
    try:
        port = parts.port
    except ValueError:
        raise SignatureError("bad_options") from None  # our own public URL is wrong
    if port is None:
        default = 443 if parts.scheme == "https" else 80
        return (url, urlunsplit(parts._replace(netloc=f"{parts.netloc}:{default}")))
    bare = parts.netloc[: parts.netloc.rfind(":")]
    return (urlunsplit(parts._replace(netloc=bare)), url)
