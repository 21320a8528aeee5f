"""`{body_sha256}` and base64url public keys, read a second time (commit 04c54b9).

Properties (hypothesis, derandomized):

- the placeholder pattern widened (`_PLACEHOLDER`, `_` within a name) parses every
  template as the pattern before it did, `{body_sha256}` aside: generic_hmac's
  legacy placeholders always, so an existing `signed_content` signs the same bytes;
- `render_request` (a delivery's path) renders what `render` renders, and a
  template that parsed binds the body: two bodies never sign the same bytes;
- a base64url key loads the key it spells, padded or not, around whitespace, and
  never another one: `+` or `/`, or whitespace within, refuses it.

JW_FUZZ_EXAMPLES raises the example count.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Collection

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.signatures.keys import public_key
from shared.signatures.templates import (
    LEGACY_PLACEHOLDERS,
    PLACEHOLDERS,
    Template,
    parse_template,
)

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 400
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_BEFORE = re.compile(r"\{([a-z]+)\}")  # the pattern before 04c54b9


def parsed_before(text: str, placeholders: Collection[str]) -> tuple[str, ...] | None:
    """The template's parts as the code before 04c54b9 parsed them (None: refused)."""
    parts: list[str] = []
    position = 0
    for match in _BEFORE.finditer(text):
        if match.group(1) not in placeholders:
            continue
        parts.extend((text[position : match.start()], match.group(1)))
        position = match.end()
    parts.append(text[position:])
    return tuple(parts) if "body" in parts[1::2] else None


def parsed_now(text: str, placeholders: Collection[str]) -> tuple[str, ...] | None:
    try:
        return parse_template("x", "signed_content", text, placeholders).parts
    except ValueError:
        return None


_PIECES = st.sampled_from(
    [
        "{", "}", "{body}", "{id}", "{timestamp}", "{method}", "{url}", "{body_sha256}",
        "{body_", "_sha256}", "{Body}", "{body_sha}", "{body_sha256_x}", "{a_b}", "{id_1}",
        "{_body}", "{body__x}", "{{body}}", "body", "_", "1", ".", ":", "\n", "v0", "é",
    ]
)  # fmt: skip
_TEXTS = st.lists(_PIECES, max_size=10).map("".join)


@FUZZ
@given(_TEXTS)
def test_the_wider_pattern_parses_every_template_as_before(text: str) -> None:
    assert parsed_now(text, LEGACY_PLACEHOLDERS) == parsed_before(text, LEGACY_PLACEHOLDERS)
    if "{body_sha256}" not in text:
        now = parsed_now(text, PLACEHOLDERS)
        assert now == parsed_before(text, PLACEHOLDERS - {"body_sha256"})


_BODIES = st.binary(max_size=40)


@FUZZ
@given(_TEXTS, _BODIES, _BODIES, st.text(max_size=5), st.text(max_size=5))
def test_a_template_renders_alike_both_ways_and_binds_the_body(
    text: str, body: bytes, other: bytes, stamp: str, event: str
) -> None:
    try:
        template: Template = parse_template("x", "signed_content", text)
    except ValueError:
        return
    parts = ("POST", "https://h.test/w")
    signed = template.render_request(body, stamp, event, *parts)
    values = {"body": body, "timestamp": stamp, "id": event, "method": parts[0], "url": parts[1]}
    assert signed == template.render(values)
    if "body_sha256" in template.names:
        assert hashlib.sha256(body).hexdigest().encode() in signed
    if other != body:
        assert template.render_request(other, stamp, event, *parts) != signed


@FUZZ
@given(
    seed=st.binary(min_size=32, max_size=32),
    padded=st.booleans(),
    around=st.sampled_from(["", " ", "\n", "\t ", " \r\n"]),
)
def test_a_base64url_key_loads_the_key_it_spells_and_no_other(
    seed: bytes, padded: bool, around: str
) -> None:
    private = Ed25519PrivateKey.from_private_bytes(seed)
    raw = private.public_key().public_bytes_raw()
    text = base64.urlsafe_b64encode(raw).decode()
    text = text if padded else text.rstrip("=")
    key = public_key("ed25519", "base64url", around + text + around)
    if key is not None:  # a small-order key is refused as under any encoding
        assert key.public_bytes_raw() == raw  # type: ignore[union-attr]
    else:
        assert public_key("ed25519", "base64", base64.b64encode(raw).decode()) is None
    standard = base64.b64encode(raw).decode()
    if "+" in standard or "/" in standard:
        assert public_key("ed25519", "base64url", standard) is None
    assert public_key("ed25519", "base64url", text[:20] + " " + text[20:]) is None
    assert public_key("ed25519", "base64url", text[:-2]) is None  # a key cut short
