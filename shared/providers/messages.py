"""Descriptions of HTTP requests and responses exchanged with a provider.

Adapters never touch the network: they produce an `HttpRequest` that the
reconciler sends with httpx, and read an `HttpResponse` the reconciler fills
from what came back. That keeps every adapter a pure function, testable without
a server, and keeps the one place that does I/O (and records it) in the
reconciler.
"""

from __future__ import annotations

import json
from collections.abc import ItemsView, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from shared import jsonread
from shared.providers.paths import ValuePath, extract, set_value
from shared.redaction import REDACTED, sanitize_headers, sanitize_url
from shared.secret import Secret


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only header mapping; repeated fields are joined with ", "."""

    def __init__(self, source: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = source.items() if isinstance(source, Mapping) else source
        store: dict[str, tuple[str, str]] = {}
        for name, value in items:
            key = name.lower()
            if key in store:
                store[key] = (store[key][0], f"{store[key][1]}, {value}")
            else:
                store[key] = (name, value)
        self._store = store

    def __getitem__(self, name: str) -> str:
        return self._store[name.lower()][1]

    def __iter__(self) -> Iterator[str]:
        return (original for original, _ in self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    def get(self, name: str, default: Any = None) -> Any:
        """Mapping.get without raising and catching KeyError for an absent header."""
        found = self._store.get(name.lower())
        return default if found is None else found[1]

    def items(self) -> ItemsView[str, str]:
        """(name as received, value) pairs, without a lookup per name (the hot path)."""
        return _HeaderItems(self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._store

    def __repr__(self) -> str:
        return f"Headers({sanitize_headers(dict(self.items()))!r})"


class _HeaderItems(ItemsView[str, str]):
    """Mapping's items view (live, case-insensitive `in`), iterated straight from the store."""

    _mapping: Headers

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._mapping._store.values())


def redacted(body: Any, secret_fields: tuple[ValuePath, ...]) -> Any:
    """`body` with its secret fields redacted (a copy; `body` itself when none)."""
    if not secret_fields or not isinstance(body, dict):
        return body
    cleaned = json.loads(json.dumps(body))
    for path in secret_fields:
        if extract(path, cleaned) is not None:
            set_value(cleaned, path, REDACTED)
    return cleaned


@dataclass(frozen=True, repr=False)
class HttpRequest:
    """A request ready to send: absolute URL, final headers (auth included), JSON body.

    `action` says what the call is for (create, status, cancel, result,
    errors_page, lookup) so the ledger can file it without re-deriving it.
    `secret_headers` names headers that must be redacted whatever their name;
    `secret_fields` are body fields holding a secret (a webhook secret we hand
    to the provider at create time); `answer_secrets` are values scrubbed from
    the answer's body as soon as it is read (a callback token the provider
    echoes with the callback URL), before anything parses or records it.
    """

    action: str
    method: str
    url: str
    headers: dict[str, str]
    json: Any = None
    timeout: float = 10.0
    secret_headers: frozenset[str] = frozenset()
    secret_fields: tuple[ValuePath, ...] = ()
    answer_secrets: tuple[Secret, ...] = ()
    # The body's bytes when it is not sent as `json` (a create sent as a form:
    # shared/providers/bodies.py); `json` is then what it was built from.
    content: bytes | None = None

    def sanitized_headers(self) -> dict[str, str]:
        return sanitize_headers(self.headers, self.secret_headers)

    def sanitized_json(self) -> Any:
        """The body with secret fields redacted: what the ledger may store."""
        return redacted(self.json, self.secret_fields)

    def sanitized_url(self) -> str:
        return sanitize_url(self.url)

    def on_record(self) -> dict[str, Any]:
        """This request as the ledger records a status read to send (method, URL and
        headers, sanitized): what a claim's marked read is filed with."""
        return {
            "method": self.method,
            "url": self.sanitized_url(),
            "headers": self.sanitized_headers(),
        }

    def __repr__(self) -> str:
        # The default dataclass repr would print the Authorization header.
        return (
            f"HttpRequest(action={self.action!r}, method={self.method!r}, "
            f"url={self.sanitized_url()!r}, headers={self.sanitized_headers()!r}, "
            f"json={'...' if self.json is not None else None}, timeout={self.timeout!r})"
        )


# The content codings the reconciler's transport undoes (reconciler.lanes), by the
# name an answer's Content-Encoding gives them: "x-gzip" is gzip (RFC 9110 8.4.1.3).
UNDONE_CODINGS: Mapping[str, str] = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}

# Content codings registered for HTTP (IANA's registry) that the transport does not
# undo: a body in one of them is not the result's bytes (shared.providers.results
# refuses it), and a coding applied under one is left too (reconciler.lanes: its
# bytes are inside the other's). Other names (a server's "utf-8", "binary") are no
# coding at all, and passed over as sent.
CODINGS_NOT_UNDONE = frozenset(
    {"aes128gcm", "br", "compress", "x-compress", "dcb", "dcz", "exi", "pack200-gzip", "zstd"}
)


@dataclass(frozen=True)
class HttpResponse:
    """What came back. `url` is the URL actually requested (resolves relative Locations)."""

    status_code: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    elapsed: float = 0.0
    url: str = ""
    # A body that came in a content coding (gzip, deflate) is `body` decoded;
    # these are the digests of the bytes as sent, by algorithm ("sha256",
    # "sha512", "md5"), which a digest header covers (RFC 9530 Content-Digest,
    # RFC 3230 Digest, Content-MD5). Empty when the body came as it is.
    sent_digests: Mapping[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.headers, Headers):
            object.__setattr__(self, "headers", Headers(self.headers))

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    @property
    def content_type(self) -> str | None:
        """The media type without parameters, lower-cased."""
        raw = self.headers.get("content-type")
        if raw is None:
            return None
        return raw.split(";", 1)[0].strip().lower() or None

    @cached_property
    def json_body(self) -> Any:
        """The body parsed as JSON, or None when empty or not JSON.

        Parse failures are reported by the callers in their own terms (a status
        read without a state, a result that is not JSON), so here they are None.
        """
        if not self.body:
            return None
        try:
            return jsonread.loads(self.body)
        except jsonread.NOT_JSON:
            return None
