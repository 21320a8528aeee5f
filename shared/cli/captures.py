"""Captured HTTP messages, read from a file for `providers check --delivery/--result`.

A capture is what an operator can get hold of without writing code: the raw
message as a proxy, `nc -l` or a request bin shows it (start line, headers,
blank line, body), or a JSON object `{"headers": {...}, "body": "..."}` (or
`"body_base64"` when the body is not text). The body must be the bytes as
sent: a signature covers them exactly, so nothing here re-encodes, trims or
normalises it (line endings of the body included).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# A capture is a test input, not a stream: anything larger is a mistake.
MAX_CAPTURE_BYTES = 64 * 1024 * 1024
_REQUEST_LINE = re.compile(rb"^([A-Z]+) (\S+) HTTP/\d(?:\.\d)?\r?$")
_STATUS_LINE = re.compile(rb"^HTTP/\d(?:\.\d)? (\d{3})(?: .*)?\r?$")


class CaptureError(ValueError):
    """The file is not a capture this command can read; the message says why."""


@dataclass(frozen=True)
class Capture:
    """One captured message. `status_code` for responses, `method`/`target` for requests."""

    headers: dict[str, str]
    body: bytes
    method: str | None = None
    target: str | None = None
    status_code: int | None = None
    query: dict[str, str] = field(default_factory=dict)


def read_capture(path: Path) -> Capture:
    """The capture in `path`: a raw HTTP message, a JSON capture, or (for results) a bare body."""
    try:
        size = path.stat().st_size
        if size > MAX_CAPTURE_BYTES:
            raise CaptureError(f"{path}: {size} bytes, more than a capture may hold")
        data = path.read_bytes()
    except OSError as exc:
        raise CaptureError(f"{path}: {exc.strerror or exc}") from None
    first = data.split(b"\n", 1)[0]
    if _REQUEST_LINE.match(first) or _STATUS_LINE.match(first):
        return _raw_message(path, data)
    if data.lstrip()[:1] == b"{":
        as_json = _json_capture(data)
        if as_json is not None:
            return as_json
    return Capture(headers={}, body=data)


def _raw_message(path: Path, data: bytes) -> Capture:
    # the first blank line ends the headers, whichever line endings they use
    ends = [(i, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (i := data.find(sep)) >= 0]
    if not ends:
        raise CaptureError(f"{path}: no blank line between the headers and the body")
    at, width = min(ends)
    head, body = data[:at], data[at + width :]
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    headers: dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            raise CaptureError(f"{path}: line {number} is not a header ('Name: value')")
        key = name.strip().decode("latin-1").lower()
        text = value.strip().decode("latin-1")
        # a repeated header is one list-valued field (RFC 9110 §5.3)
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    request = _REQUEST_LINE.match(lines[0])
    if request:
        target = request.group(2).decode("latin-1")
        return Capture(
            headers=headers,
            body=body,
            method=request.group(1).decode("ascii"),
            target=target,
            query=_query(target),
        )
    status = _STATUS_LINE.match(lines[0])
    assert status is not None  # read_capture matched one of the two
    return Capture(headers=headers, body=body, status_code=int(status.group(1)))


def _json_capture(data: bytes) -> Capture | None:
    """A JSON capture, or None when the JSON is a bare body (a result document)."""
    try:
        document: Any = json.loads(data)
    except ValueError:
        return None
    if not isinstance(document, dict) or "headers" not in document:
        return None
    if not ({"body", "body_base64"} & document.keys()):
        return None
    headers = document["headers"]
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise CaptureError("capture: 'headers' must be an object of strings")
    if "body_base64" in document:
        try:
            body = base64.b64decode(str(document["body_base64"]), validate=True)
        except (binascii.Error, ValueError):
            raise CaptureError("capture: 'body_base64' is not base64") from None
    elif isinstance(document["body"], str):
        body = document["body"].encode("utf-8")
    else:
        raise CaptureError("capture: 'body' must be the raw body as a string")
    code = document.get("status_code")
    target = document.get("url") if isinstance(document.get("url"), str) else None
    return Capture(
        headers={k.lower(): v for k, v in headers.items()},
        body=body,
        method=document.get("method") if isinstance(document.get("method"), str) else None,
        target=target,
        status_code=code if isinstance(code, int) else None,
        query=_query(target or ""),
    )


def _query(target: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(target).query, keep_blank_values=True))
