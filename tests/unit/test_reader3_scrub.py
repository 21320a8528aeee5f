"""static_header.scrub on bodies whose encoding a guess reads wrong: a BOM-led
big-endian text, a truncated UTF-16 text, bytes a NUL makes look like UTF-16."""

from __future__ import annotations

import codecs

import pytest

from shared.redaction import REDACTED
from shared.signatures.static_header import scrub

SECRET = "tok_9f2c1e7a4b6d"
JSON_ESCAPED = "".join(f"\\u{ord(c):04x}" for c in SECRET)
PERCENT = "".join(f"%{ord(c):02X}" for c in SECRET)


@pytest.mark.parametrize(
    ("bom", "codec"),
    [(codecs.BOM_UTF16_BE, "utf-16-be"), (codecs.BOM_UTF32_BE, "utf-32-be")],
)
def test_a_big_endian_body_keeps_its_byte_order(bom: bytes, codec: str) -> None:
    """Read with the BOM and written back in the machine's order, the whole body
    came back byte-swapped: only the token's span may change."""
    text = '{"callback":"https://x/h?t=%s","n":1}'
    body = bom + (text % JSON_ESCAPED).encode(codec)
    assert scrub(body, [SECRET]) == bom + (text % REDACTED).encode(codec)


def test_a_truncated_utf16_body_is_still_searched() -> None:
    """A stray last byte made UTF-16 unreadable: read as Latin-1 its escapes
    interleave with NULs, and the token, stored in base64, came back."""
    text = '{"callback":"https://x/h?t=%s"}'
    body = (text % JSON_ESCAPED).encode("utf-16-le") + b"\xff"
    assert scrub(body, [SECRET]) == (text % REDACTED).encode("utf-16-le") + b"\xff"


def test_bytes_a_nul_makes_look_like_utf16_are_searched_as_they_are() -> None:
    """A NUL as the second byte reads as UTF-16 (any even length does, with
    surrogatepass): the percent-escaped token in its ASCII bytes was missed."""
    body = b"P\x00 url=https://x/h?t=" + PERCENT.encode() + b" ends"
    assert len(body) % 2 == 0
    assert scrub(body, [SECRET]) == b"P\x00 url=https://x/h?t=" + REDACTED.encode() + b" ends"
