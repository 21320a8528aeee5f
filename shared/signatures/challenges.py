"""Answers to a sender's endpoint challenge: proof that the endpoint is ours.

Some senders deliver nothing until the endpoint answers a challenge, and ask
again from time to time: Zoom posts `endpoint.url_validation` (again every 72
hours) and wants the challenge's `plainToken` back with its HMAC-SHA256 under
the app's secret token, hex; Slack posts `url_verification` and wants its
`challenge` echoed; Azure Event Grid posts a batch holding one
`Microsoft.EventGrid.SubscriptionValidationEvent` and wants its
`validationCode` back as `validationResponse`. The request is signed (or
carries its token) like any delivery and is verified first: an answer never
goes to a request that did not verify, so the HMAC proves nothing to anyone
who does not already hold the secret.

Pure: the token and the secret in, the answer's JSON body out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from enum import StrEnum


class ChallengeAnswer(StrEnum):
    """How a challenge is answered, named after the sender that defined it."""

    ZOOM = "zoom"  # {"plainToken": t, "encryptedToken": hex(HMAC-SHA256(secret, t))}
    SLACK = "slack"  # {"challenge": t}
    # Azure Event Grid's SubscriptionValidationEvent, alone in a batch: {"validationResponse": t}
    EVENT_GRID = "event_grid"


# A token is echoed in our answer: bounded, and plain printable ASCII, so the
# answer never carries what a sender did not mean as a token.
MAX_TOKEN_CHARS = 256


def usable_token(value: object) -> str | None:
    """The challenge's token if it is one we answer (1 to 256 printable ASCII
    characters), else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TOKEN_CHARS:
        return None
    return value if value.isascii() and value.isprintable() else None


def answer(kind: ChallengeAnswer, token: str, secret: str) -> bytes:
    """The JSON body that answers a verified challenge carrying `token`."""
    if kind is ChallengeAnswer.ZOOM:
        digest = hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()
        return json.dumps({"plainToken": token, "encryptedToken": digest}).encode()
    if kind is ChallengeAnswer.EVENT_GRID:
        return json.dumps({"validationResponse": token}).encode()
    return json.dumps({"challenge": token}).encode()
