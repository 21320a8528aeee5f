"""Filtering the configured secrets down to the ones that can authenticate."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import SignatureError


def usable_secrets(secrets: Sequence[str]) -> tuple[str, ...]:
    """The non-blank secrets; none at all is a configuration failure.

    A blank secret must never be used: an HMAC keyed with "" can be computed
    by anyone, so it would accept forged requests.
    """
    if isinstance(secrets, str):
        # A lone string is a Sequence[str] too; iterating it would make every
        # character of the secret a separate one-letter "secret".
        raise TypeError("secrets must be a sequence of strings, not a string")
    usable = tuple([secret for secret in secrets if secret.strip()])  # no generator: hot path
    if not usable:
        raise SignatureError("no_secret")
    return usable
