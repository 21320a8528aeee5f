"""AWS Signature Version 4 for provider calls (`[auth] scheme = "aws_sigv4"`).

AWS APIs (Bedrock's batch inference, Textract, Transcribe) take no static
credential: every request is signed with the secret key over its method,
path, query, chosen headers and body hash, at a time the signature names
(`X-Amz-Date`; AWS refuses one more than five minutes off). A pure function of
(method, URL, headers, body, credentials, region, service, now), checked in
the tests against botocore's signer, AWS's own.

The headers signed are those the request is built with that AWS reads:
`host`, `content-type`, and every `x-amz-*` one (the date, a session token,
`X-Amz-Target`). Headers added as the call leaves (our trace context, the
lane's defaults) are not signed, and AWS ignores unsigned ones.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote, unquote_to_bytes, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
_DATE = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


class CredentialsError(ValueError):
    """Credentials that cannot sign; the message never quotes them."""


def parse_credentials(text: str) -> Credentials:
    """The JSON `aws configure export-credentials --format process` prints (AWS's
    credential_process format): AccessKeyId, SecretAccessKey, SessionToken."""
    try:
        document = json.loads(text)
    except ValueError:
        raise CredentialsError("not JSON (the credential_process format)") from None
    if not isinstance(document, dict):
        raise CredentialsError("not a JSON object (the credential_process format)")
    key_id, secret = document.get("AccessKeyId"), document.get("SecretAccessKey")
    token = document.get("SessionToken")
    if not (isinstance(key_id, str) and key_id and isinstance(secret, str) and secret):
        raise CredentialsError("AccessKeyId and SecretAccessKey are required (strings)")
    if token is not None and not (isinstance(token, str) and token):
        raise CredentialsError("SessionToken, when given, must be a string")
    for value in (key_id, secret, token or ""):
        # visible ASCII only (0x21-0x7E), checked by str's C methods: a call is
        # signed twice (built, then as it leaves) and an STS token is ~1 KB
        if not (value.isascii() and value.isprintable()) or " " in value:
            raise CredentialsError("a credential holds a space or a character no header carries")
    return Credentials(key_id, secret, token)


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    """The headers to add to the request: its date, its session token (if any) and
    its `Authorization`."""
    stamp = now.strftime(_DATE)
    added = {"X-Amz-Date": stamp}
    if credentials.session_token:
        added["X-Amz-Security-Token"] = credentials.session_token
    signed = _signed_headers(url, {**without_signature(headers), **added})
    names = ";".join(signed)
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    parts = urlsplit(url)
    canonical = "\n".join(
        [
            method.upper(),
            _canonical_path(parts.path),
            _canonical_query(parts.query),
            "".join(f"{name}:{value}\n" for name, value in signed.items()),
            names,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _signing_key(credentials.secret_access_key, stamp[:8], region, service)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    added["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    return added


# The headers `sign` adds, lower-cased.
_ADDED = frozenset({"authorization", "x-amz-date", "x-amz-security-token"})


def without_signature(headers: Mapping[str, str]) -> dict[str, str]:
    """A re-signed request's headers without the last signature's."""
    return {k: v for k, v in headers.items() if k.lower() not in _ADDED}


def _signed_headers(url: str, headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased name -> trimmed value, sorted by name: host, content-type, x-amz-*."""
    chosen: dict[str, list[str]] = {"host": [_host(url)]}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered == "content-type" or lowered.startswith("x-amz-"):
            chosen.setdefault(lowered, []).append(" ".join(value.split()))
    return {name: ",".join(chosen[name]) for name in sorted(chosen)}


def _host(url: str) -> str:
    """The Host header the request will carry: the port only when not the scheme's."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def _canonical_path(path: str) -> str:
    """The path with dot segments and repeated slashes removed, each byte outside
    the unreserved set percent-encoded again (all services but S3 encode twice)."""
    return quote(_remove_dot_segments(path) if path else "/", safe="/~")


def _remove_dot_segments(path: str) -> str:
    kept: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment and segment != ".":
            kept.append(segment)
    tail = "/" if path.endswith("/") and kept else ""
    return ("/" if path.startswith("/") else "") + "/".join(kept) + tail


def _canonical_query(query: str) -> str:
    """Each name and value decoded, encoded as RFC 3986 says, sorted by name then value."""
    pairs = []
    for pair in query.split("&") if query else []:
        name, _, value = pair.partition("=")
        # decoded to bytes: a byte that is no UTF-8 (`%FF`) stays that byte
        pairs.append((_encoded(name), _encoded(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _encoded(text: str) -> str:
    return quote(unquote_to_bytes(text), safe="-_.~")


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = f"AWS4{secret}".encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key
