"""Webhook signature verification: pure functions of (headers, body, secrets, now).

No I/O, logging, database or HTTP framework here, so the receiver, the
simulated provider and the tests all share one implementation, and every
failure mode is testable with a fixed clock.

Layout: `templates` (what is signed), `formats` (how signatures sit in a
header), `keys` (what a configured secret stands for) and `envelope` (where
everything travels) describe a request; `hmac_family` and `asymmetric` check
its signature; `spec` runs one verification; `presets` names well-known
senders; `dispatch` picks one by the provider's configured scheme; `signing`
is the sender side.
"""

from __future__ import annotations

from .dispatch import (
    SCHEMES,
    check_options,
    check_reads_only,
    check_secret,
    headers_read,
    reads_form,
    signs_body,
    signs_timestamp,
    signs_url,
    verifier,
    verify,
)
from .errors import REASONS, Reason, SignatureError
from .signing import (
    generate_ed25519_keypair,
    generate_p256_private_pem,
    sign,
    sign_generic,
    sign_github,
    sign_headers,
    sign_standard_webhooks,
    sign_standard_webhooks_ed25519,
    sign_stripe,
)
from .verified import Verified

__all__ = [
    "REASONS",
    "SCHEMES",
    "Reason",
    "SignatureError",
    "Verified",
    "check_options",
    "check_reads_only",
    "check_secret",
    "generate_ed25519_keypair",
    "generate_p256_private_pem",
    "headers_read",
    "reads_form",
    "sign",
    "sign_generic",
    "sign_github",
    "sign_headers",
    "sign_standard_webhooks",
    "sign_standard_webhooks_ed25519",
    "sign_stripe",
    "signs_body",
    "signs_timestamp",
    "signs_url",
    "verifier",
    "verify",
]
