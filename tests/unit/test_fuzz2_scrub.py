"""`static_header.scrub`, fuzzed: a URL token echoed in a body, in any of the
spellings encoders give it, never survives; a body without it is untouched.

Properties, over generated input (hypothesis, derandomized):

- a random URL-safe token inserted in a random body, each of its characters
  written as itself, as JSON's `\\u00XX` or as `%XX` (hex digits in either
  case), the whole in UTF-8/16/32 (either byte order, with or without a BOM),
  cannot be read back from the result: not as written, not once JSON escapes
  are undone, not once percent escapes are, nor both (either order);
- the bytes around the token are kept: the result is the body with each
  token span replaced by REDACTED in the body's encoding;
- a body that holds no token (random text with random escapes, random
  bytes) comes back byte for byte.

JW_FUZZ_EXAMPLES raises the example count (e.g. 5000 for a long run).
"""

from __future__ import annotations

import codecs
import os
import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shared.redaction import REDACTED
from shared.signatures.static_header import MIN_URL_TOKEN_CHARS, scrub

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 300
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_URL_SAFE = "ABCDEFabcdefXYZxyz0123456789-_"
TOKENS = st.text(_URL_SAFE, min_size=MIN_URL_TOKEN_CHARS, max_size=40)
# (codec, BOM): the BOM-led spellings as the standard library writes them
ENCODINGS = st.sampled_from(
    [
        ("utf-8", b""),
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", b""),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", b""),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-32-le", b""),
        ("utf-32-le", codecs.BOM_UTF32_LE),
        ("utf-32-be", b""),
        ("utf-32-be", codecs.BOM_UTF32_BE),
    ]
)
# Text around the token: any characters, and the escapes' pieces.
_AROUND = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=6),
        st.sampled_from(
            ["\\", "\\u", "\\u00", "\\u004", "%", "%4", "%%", "\\\\", '"', "\\/", "\ufeff"]
        ),
        st.text(_URL_SAFE, max_size=6),
    ),
    max_size=6,
).map("".join)


@st.composite
def _spelled(draw: st.DrawFn, token: str) -> str:
    out = []
    for char in token:
        how = draw(st.sampled_from(["raw", "json", "percent"]))
        code = ("00" if how == "json" else "") + f"{ord(char):02x}"
        code = "".join(c.upper() if draw(st.booleans()) else c for c in code)
        out.append(char if how == "raw" else ("\\u" if how == "json" else "%") + code)
    return "".join(out)


_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_PERCENT = re.compile(r"%([0-9a-fA-F]{2})")


def _json_unescaped(text: str) -> str:
    return _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def _percent_unescaped(text: str) -> str:
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), text)


def _readings(body: bytes, codec: str, bom: bytes) -> list[str]:
    text = (
        body[len(bom) :].decode(codec, "replace")
        if body.startswith(bom)
        else body.decode(codec, "replace")
    )
    return [
        text,
        _json_unescaped(text),
        _percent_unescaped(text),
        _percent_unescaped(_json_unescaped(text)),
        _json_unescaped(_percent_unescaped(text)),
    ]


@FUZZ
@given(
    token=TOKENS,
    encoding=ENCODINGS,
    before=_AROUND,
    after=_AROUND,
    copies=st.integers(1, 3),
    data=st.data(),
)
def test_an_echoed_token_cannot_be_read_back(
    token: str,
    encoding: tuple[str, bytes],
    before: str,
    after: str,
    copies: int,
    data: st.DataObject,
) -> None:
    codec, bom = encoding
    assume(token not in before and token not in after)
    spellings = [data.draw(_spelled(token)) for _ in range(copies)]
    text = before + "".join(s + after for s in spellings)
    body = bom + text.encode(codec, "surrogatepass")
    result = scrub(body, [token])
    for reading in _readings(result, codec, bom):
        assert token not in reading, (body, result)


@FUZZ
@given(token=TOKENS, encoding=ENCODINGS, before=_AROUND, after=_AROUND, data=st.data())
def test_only_the_token_span_changes(
    token: str, encoding: tuple[str, bytes], before: str, after: str, data: st.DataObject
) -> None:
    """Around one echo, separated from it by a quote (so no neighbouring piece of
    an escape can join the token's span), every byte is kept."""
    codec, bom = encoding
    before, after = before + '"', '"' + after
    for reading in _readings(bom + (before + after).encode(codec, "surrogatepass"), codec, bom):
        assume(token not in reading)
    spelled = data.draw(_spelled(token))
    body = bom + (before + spelled + after).encode(codec, "surrogatepass")
    expected = bom + (before + REDACTED + after).encode(codec, "surrogatepass")
    assert scrub(body, [token]) == expected


@FUZZ
@given(
    token=TOKENS,
    encoding=ENCODINGS,
    text=_AROUND,
    raw=st.one_of(st.none(), st.binary(max_size=200)),
)
def test_a_body_without_the_token_is_kept(
    token: str, encoding: tuple[str, bytes], text: str, raw: bytes | None
) -> None:
    codec, bom = encoding
    body = bom + text.encode(codec, "surrogatepass") if raw is None else raw
    for c in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
        for reading in _readings(body, c, b""):
            assume(token not in reading)
    assert scrub(body, [token]) == body
