"""Strict base64 decoding of a result held as text inside JSON (`result.base64`).

RFC 4648 strict: the standard alphabet (section 4) with its padding, or, when
the description says so, the URL-safe one (section 5), where padding may be
left out (section 3.2 lets a specification say so, and base64url is where
they do). Nothing else passes: no whitespace or line breaks (MIME's wrapping
is not base64 text), no character of the other alphabet, no padding inside
the text, and no non-zero bits in the last character's unused low bits
(section 3.5: such text has more than one spelling, so it is not what an
encoder wrote). A lenient decoder would turn a damaged or cut field into
bytes that hash and store as if they were the provider's file.
"""

from __future__ import annotations

import binascii
import re

_STANDARD = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NOT_STANDARD = re.compile(r"[^A-Za-z0-9+/=]")
_NOT_URLSAFE = re.compile(r"[^A-Za-z0-9\-_=]")
_TO_STANDARD = str.maketrans("-_", "+/")


class Base64Error(ValueError):
    """Text that is not strict base64; `reason` says where and why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def decode_base64(text: str, *, url: bool = False) -> bytes:
    """The bytes `text` encodes, or Base64Error. `url`: the URL-safe alphabet."""
    bad = (_NOT_URLSAFE if url else _NOT_STANDARD).search(text)
    if bad is not None:
        raise Base64Error(
            f"invalid base64 character {bad.group()!r} at offset {bad.start()}"
            + _hint(bad.group(), url)
        )
    body = text.rstrip("=")
    padding = len(text) - len(body)
    inside = body.find("=")
    if inside >= 0:
        raise Base64Error(f"padding '=' inside the text (offset {inside}), not only at its end")
    if padding > 2:
        raise Base64Error(f"{padding} padding characters (at most 2)")
    if len(body) % 4 == 1:
        raise Base64Error(
            f"{len(body)} characters cannot be base64 (one over after the last group): cut short?"
        )
    if len(text) % 4 and not (url and padding == 0):
        raise Base64Error(
            f"length {len(text)} is not a multiple of 4: padding missing or the text cut short"
        )
    standard = body.translate(_TO_STANDARD) if url else body
    _check_unused_bits(standard)
    whole = standard + "=" * (-len(standard) % 4)
    try:
        return binascii.a2b_base64(whole, strict_mode=True)
    except binascii.Error as exc:  # ruled out above; said as base64's own words if not
        raise Base64Error(f"not base64 ({exc})") from None


def _hint(char: str, url: bool) -> str:
    if char.isspace():
        return " (whitespace and line breaks are not base64 text)"
    if not url and char in "-_":
        return " (the URL-safe alphabet: set result.base64_url = true)"
    if url and char in "+/":
        return " (the standard alphabet: result.base64_url is true)"
    return ""


def _check_unused_bits(body: str) -> None:
    """The last character of a short final group carries bits no byte uses: an
    encoder writes them as zero (RFC 4648 section 3.5)."""
    left = len(body) % 4
    if left == 0:
        return
    mask = 0x0F if left == 2 else 0x03
    if _STANDARD.index(body[-1]) & mask:
        raise Base64Error(
            f"the last character {body[-1]!r} has non-zero unused bits (not canonical base64)"
        )
