"""A webhook's stored payload has its links' credential-looking query values
redacted (b478e90) on every path, the unread one included: a body that is no
JSON object (an array of events, as SendGrid posts; a cut text; NaN) and one
that had to be re-encoded and could not be were kept whole in base64, a
pre-signed link in them reusable from the ledger (second reading of b478e90)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.integration.test_receiver_support import running_receiver
from tests.integration.test_receiver_verification import standard_headers, stored_events

LINK = "https://cdn.example.test/v.mp4?Expires=1&Signature=SECRETSIG&Key-Pair-Id=K"


@pytest.mark.parametrize(
    "body",
    [
        json.dumps([{"event": "done", "url": LINK}]).encode(),  # an array: stored unread
        b'{"url": "' + LINK.encode() + b'", "progress": NaN}',  # NaN: no JSON, unread
        # a UTF-8 BOM makes it re-encoded, which 1e999 (infinity) refuses
        b'\xef\xbb\xbf{"url": "' + LINK.encode() + b'", "n": 1e999}',
    ],
)
async def test_a_link_in_a_payload_kept_in_base64_is_redacted(
    db: Any, pool: Any, body: bytes
) -> None:
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, standard_headers(body, "evt_link"))
    assert resp.status_code == 200, resp.text
    [event] = await stored_events(db)
    payload = event["payload"]
    kept = json.loads(payload) if isinstance(payload, str) else payload
    text = base64.b64decode(kept["body_base64"])
    assert b"SECRETSIG" not in text, text
    assert b"Signature=[redacted]" in text, text
    # the rest as sent (`Key-Pair-Id` names a key: redacted as every stored URL's)
    redacted = body.replace(b"SECRETSIG", b"[redacted]").replace(b"Id=K", b"Id=[redacted]")
    assert text == redacted
