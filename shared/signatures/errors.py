"""The one exception every verifier raises, carrying nothing but a reason word.

Whatever reaches an HTTP response, a log line or a metric label must not help
an attacker forge a signature: no expected digest, no secret, no echo of the
header they sent. So the message *is* the reason word, and verifiers raise it
outside of `except` blocks so no chained exception (which may quote a header
value, e.g. `int()`'s "invalid literal ... 'abc'") rides along in tracebacks.
"""

from __future__ import annotations

from typing import Literal, get_args

Reason = Literal[
    "missing_header",
    "malformed_header",
    "stale_timestamp",
    "future_timestamp",
    "bad_signature",
    "no_secret",
    "bad_options",
]

REASONS: frozenset[str] = frozenset(get_args(Reason))


class SignatureError(Exception):
    """A webhook failed verification; `reason` is safe to log and to count."""

    reason: Reason

    def __init__(self, reason: Reason) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown signature failure reason: {reason!r}")
        super().__init__(reason)
        self.reason = reason
