"""What a successful verification tells the caller."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Verified:
    """Proof that a request is authentic, plus the metadata the signature covers.

    `id_signed` says whether the event id can be trusted as a dedupe key: True
    when the signature covers it (Standard Webhooks' `webhook-id`, or the body
    for Stripe, whose id lives in the signed body so `event_id` is None and the
    caller reads it from there). False when the id came from an unsigned header
    (GitHub's `X-GitHub-Delivery`): an attacker holding a captured body can
    replay it under a fresh id, so dedupe on that id does not stop replays.
    """

    scheme: str
    event_id: str | None
    id_signed: bool
    timestamp: int | None
