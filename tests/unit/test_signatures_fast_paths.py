"""The verifier's per-delivery shortcuts give exactly what the plain paths give.

Rendering a template from positional parts, checking timestamps with string
methods and decoding base64 without `base64.b64decode`'s argument handling
exist for speed alone: each is compared here with the plain path it
replaces, on the inputs where they could plausibly differ. Seeds are fixed,
so a failure replays.
"""

from __future__ import annotations

import base64
import binascii
import random
import re

import pytest

from shared.signatures import SignatureError
from shared.signatures.digests import decode_base64
from shared.signatures.templates import PLACEHOLDERS, parse_template
from shared.signatures.timestamps import parse_unix_seconds

BODY = b'{"id":"evt_1"}'


@pytest.mark.parametrize(
    "text",
    [
        "{id}.{timestamp}.{body}",
        "{body}",
        "v0:{timestamp}:{body}",
        "{method} {url}\n{body}{id}",
        "{{body}}{timestamp}{unknown}",
    ],
)
def test_rendering_a_request_gives_the_bytes_render_gives(text: str) -> None:
    template = parse_template("t", "signed_content", text, PLACEHOLDERS)
    values: dict[str, bytes | str | None] = {
        "body": BODY,
        "timestamp": "1700000000",
        "id": "é\udc80",
        "method": "POST",
        "url": "https://x.test/?q=1",
    }
    assert template.render_request(
        BODY, "1700000000", "é\udc80", "POST", "https://x.test/?q=1"
    ) == (template.render(values))


def test_a_timestamp_is_read_exactly_as_the_pattern_reads_it() -> None:
    pattern = re.compile(r"0|[1-9][0-9]{0,14}")
    alphabet = [*"0123456789", "", "+", "-", " ", "_", "\n", "\u0660", "\u00b2", "\uff10"]
    rng = random.Random(7)
    cases = ["", "0", "00", "01", "1" * 15, "1" * 16, "9" * 15, "1\n"]
    cases += ["".join(rng.choices(alphabet, k=rng.randint(0, 17))) for _ in range(20_000)]
    for case in cases:
        try:
            parsed: int | None = parse_unix_seconds(case)
        except SignatureError:
            parsed = None
        assert parsed == (int(case) if pattern.fullmatch(case) else None), repr(case)


def test_base64_is_decoded_exactly_as_b64decode_validates_it() -> None:
    alphabet = [*"AZaz09+/=", "-", "_", " ", "\n", "\xe9", "\u0660"]
    rng = random.Random(11)
    cases = ["", "=", "QQ==", "QQ=", "QQ", "QUJD", "QU JD", "QUJD\n", "Q===", "QUJD===="]
    cases += ["".join(rng.choices(alphabet, k=rng.randint(0, 12))) for _ in range(20_000)]
    for case in cases:
        try:
            expected: bytes | None = base64.b64decode(case, validate=True)
        except (binascii.Error, ValueError):
            expected = None
        assert decode_base64(case) == expected, repr(case)
