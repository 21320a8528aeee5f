"""A create body sent as an HTML form or as multipart/form-data, not as JSON.

Some APIs take their create as a form: Stability's generations (an image
file beside its options), ElevenLabs' dubbing (a `source_url` or a file).
The description says so (`create.encoding`); the body is still built, stored
and templated as JSON (the operation's request, `set_body`, the token), and
turned into the form only here, as it leaves. Each member of the top-level
object is one field:

- a string is sent as written, a number or a boolean as its JSON text
  (`true`, `2.5`), null not at all;
- a list is the field repeated, once per item (`tags=a&tags=b`);
- in multipart only: an object `{"content_base64": …, "filename": …,
  "content_type": …}` is a file (its bytes decoded from base64), and any
  other object is a JSON part (`Content-Type: application/json`).

A form (`application/x-www-form-urlencoded`) cannot carry an object: such a
body is refused when the request is built, naming the field, unless the
description says how its API reads one (`create.form_nesting = "brackets"`,
Stripe's and Rack's way: `{"parameters": {"interval_start": 1}}` is the field
`parameters[interval_start]=1`, a list's items `a[0]=x&a[1]=y`, at any depth;
an empty object or list sends nothing). Without it the agent had to write
`"parameters[interval_start]"` as a member's name itself, and a body written as
Stripe's documentation and libraries show it went to a human unsent. The encoding
is a pure function of the body: the multipart boundary is derived from the
parts, so the same create sends the same bytes on every retry. It is derived
from the parts as they are recorded (`seed`: the body with its secret fields
redacted), never from a secret: the boundary is recorded with the call's
Content-Type, and a digest of a secret beside the rest of a body an agent
knows would let a guessable secret be found offline.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from shared.providers.description import BodyEncoding, FormNesting
from shared.providers.errors import RequestBuildError

FILE_KEYS = frozenset({"content_base64", "filename", "content_type"})
FORM_TYPE = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class _Part:
    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None


def encode(
    body: Any,
    encoding: BodyEncoding,
    seed: Any = None,
    *,
    nesting: FormNesting = FormNesting.NONE,
) -> tuple[bytes, str]:
    """The body's bytes and Content-Type; RequestBuildError for a body it cannot carry.

    `seed` is what the multipart boundary is derived from when the body holds
    a secret: the same body with the secret redacted (default: the body).
    `nesting` is how a form carries an object (FormNesting.BRACKETS: `a[b]=v`).
    """
    if not isinstance(body, Mapping):
        raise RequestBuildError(f"a {encoding} body must be a JSON object of fields")
    if encoding is BodyEncoding.FORM and nesting is FormNesting.BRACKETS:
        return urlencode(_bracketed_once(body)).encode("ascii"), FORM_TYPE
    parts = list(_parts(body, encoding))
    if encoding is BodyEncoding.FORM:
        pairs = [(part.name, part.data.decode()) for part in parts]
        return urlencode(pairs).encode("ascii"), FORM_TYPE
    # the body itself when it holds no secret (`redacted` returns it): its parts,
    # files decoded, are not built a second time
    same = seed is None or seed is body or not isinstance(seed, Mapping)
    boundary = _boundary(parts if same else list(_parts(seed, encoding)), parts)
    return _multipart(parts, boundary), f"multipart/form-data; boundary={boundary}"


def _bracketed_once(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The form's fields in brackets, each name once: a top-level member written
    `"a[b]"` beside `{"a": {"b": ...}}` names one field twice, which the provider
    reads as one value, not necessarily the one recorded first: refused."""
    pairs = list(_bracketed(body))
    seen: set[str] = set()
    for name, _text in pairs:
        if name in seen:
            raise RequestBuildError(
                f"create body field '{name}' is written twice (a member named with "
                "brackets beside the object that names it too)"
            )
        seen.add(name)
    return pairs


def _bracketed(value: Any, name: str = "") -> Iterator[tuple[str, str]]:
    """(field, text) pairs of `value` named in brackets below `name`: an object's
    members `name[key]`, a list's items `name[0]`, `name[1]`; null sends nothing.

    A member below the top level named with a bracket or nothing (`a[x]y]`,
    `a[]`: a list's push to Rack) would be read as another field than the one
    recorded: refused. A top-level name goes as it is, as a flat form's does. A
    file (`is_file`) is refused too: a form carries text, and its fields would go
    as `name[content_base64]=...`, the file never sent as one."""
    if is_file(value):
        raise RequestBuildError(
            f"create body field '{name}' is a file: a form cannot carry one "
            '(encoding = "multipart" sends it as a file part)'
        )
    if isinstance(value, Mapping):
        for key, member in value.items():
            if name and (not key or "[" in key or "]" in key):
                raise RequestBuildError(
                    f"create body field '{name}[{key}]': a name below the top level "
                    "cannot be empty or hold a bracket in a form in brackets"
                )
            yield from _bracketed(member, f"{name}[{key}]" if name else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _bracketed(item, f"{name}[{index}]")
    elif isinstance(value, str):
        yield name, value
    elif value is not None:
        yield name, json.dumps(value)


def is_file(value: Any) -> bool:
    """A file field of a multipart body (see the module's docstring)."""
    return isinstance(value, Mapping) and "content_base64" in value and set(value) <= FILE_KEYS


def _parts(body: Mapping[str, Any], encoding: BodyEncoding) -> Iterator[_Part]:
    for name, value in body.items():
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                yield _part(str(name), item, encoding)


def _part(name: str, value: Any, encoding: BodyEncoding) -> _Part:
    if isinstance(value, str):
        return _Part(name, value.encode())
    if isinstance(value, bool | int | float):
        return _Part(name, json.dumps(value).encode())
    if encoding is BodyEncoding.FORM:
        raise RequestBuildError(
            f"create body field '{name}' is a JSON {_kind(value)}: a form carries text only"
        )
    if is_file(value):
        return _file(name, value)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _Part(name, text.encode(), content_type="application/json")


def _file(name: str, value: Mapping[str, Any]) -> _Part:
    content, filename = value["content_base64"], value.get("filename", name)
    content_type = value.get("content_type", "application/octet-stream")
    if not all(isinstance(v, str) for v in (content, filename, content_type)):
        raise RequestBuildError(f"create body file '{name}': its members must be strings")
    try:
        data = base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise RequestBuildError(
            f"create body file '{name}': content_base64 is not base64"
        ) from None
    for what, text in (("filename", filename), ("content_type", content_type)):
        if any(c in text for c in '\r\n"'):
            raise RequestBuildError(
                f"create body file '{name}': its {what} holds a quote or a line break"
            )
    return _Part(name, data, filename=filename, content_type=content_type)


def _kind(value: Any) -> str:
    return "list of lists" if isinstance(value, list) else "object"


def _boundary(derived: list[_Part], parts: list[_Part]) -> str:
    """A boundary none of the `parts` holds, the same for the same `derived` parts."""
    digest = hashlib.sha256()
    for part in derived:
        for piece in (part.name.encode(), part.data, (part.filename or "").encode()):
            digest.update(len(piece).to_bytes(8, "big") + piece)
    seed = digest.hexdigest()
    for attempt in range(1000):
        boundary = f"jobwarden-{seed[:32]}-{attempt}"
        marker = boundary.encode()
        if not any(marker in part.data for part in parts):
            return boundary
    raise RequestBuildError("no multipart boundary fits this body")  # never, in practice


def _multipart(parts: list[_Part], boundary: str) -> bytes:
    """RFC 7578: each part's name (and filename) quoted, its bytes as they are."""
    out = bytearray()
    for part in parts:
        disposition = f'form-data; name="{_quoted(part.name)}"'
        if part.filename is not None:
            disposition += f'; filename="{_quoted(part.filename)}"'
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        if part.content_type is not None:
            out += f"Content-Type: {part.content_type}\r\n".encode()
        out += b"\r\n" + part.data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out)


def _quoted(text: str) -> str:
    """A name as browsers write it (RFC 7578 4.2): quotes and line breaks escaped."""
    return text.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
