"""Webhook signature verification: pure functions of (headers, body, secrets, now).

No I/O, logging, database or HTTP framework here, so the receiver, the
simulated provider and the tests all share one implementation, and every
failure mode is testable with a fixed clock. Each scheme lives in its own
module; `dispatch` picks one by the provider's configured name.
"""

from __future__ import annotations

from .dispatch import SCHEMES, check_options, check_secret, verify
from .errors import REASONS, Reason, SignatureError
from .generic_hmac import sign_generic
from .github import sign_github
from .standard_webhooks import (
    generate_ed25519_keypair,
    sign_standard_webhooks,
    sign_standard_webhooks_ed25519,
)
from .stripe import sign_stripe
from .verified import Verified

__all__ = [
    "REASONS",
    "SCHEMES",
    "Reason",
    "SignatureError",
    "Verified",
    "check_options",
    "check_secret",
    "generate_ed25519_keypair",
    "sign_generic",
    "sign_github",
    "sign_standard_webhooks",
    "sign_standard_webhooks_ed25519",
    "sign_stripe",
    "verify",
]
