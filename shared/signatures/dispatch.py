"""Choosing the verifier for a provider's configured scheme."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from . import generic_hmac, github, standard_webhooks, static_header, stripe
from .errors import SignatureError
from .headers import HeaderView
from .secret_set import usable_secrets
from .verified import Verified

_Verifier = Callable[[Mapping[str, object], HeaderView, bytes, Sequence[str], float, int], Verified]
_OptionsChecker = Callable[[Mapping[str, object]], None]

_SCHEMES: Final[Mapping[str, tuple[_OptionsChecker, _Verifier]]] = {
    standard_webhooks.SCHEME: (standard_webhooks.check_options, standard_webhooks.verify),
    stripe.SCHEME: (stripe.check_options, stripe.verify),
    github.SCHEME: (github.check_options, github.verify),
    generic_hmac.SCHEME: (generic_hmac.check_options, generic_hmac.verify),
    static_header.SCHEME: (static_header.check_options, static_header.verify),
}

SCHEMES: frozenset[str] = frozenset(_SCHEMES)


def check_options(scheme: str, options: Mapping[str, object]) -> None:
    """Validate a scheme's options at config load; ValueError names the bad key."""
    entry = _SCHEMES.get(scheme)
    if entry is None:
        raise _unknown_scheme(scheme)
    entry[0](options)


def check_secret(scheme: str, secret: str) -> None:
    """Validate one configured secret at config load, without ever quoting it.

    Only Standard Webhooks secrets have a structure to check; for the other
    schemes any non-blank string is a valid key.
    """
    if scheme not in SCHEMES:
        raise _unknown_scheme(scheme)
    if not secret.strip():
        raise ValueError(f"{scheme}: a secret must not be blank (anyone can sign with it)")
    if scheme == standard_webhooks.SCHEME:
        standard_webhooks.check_secret(secret)


def verify(
    scheme: str,
    options: Mapping[str, object],
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int = 300,
) -> Verified:
    """Authenticate a webhook request from its raw body, or raise SignatureError.

    `secrets` are all the currently active secrets (rotation): any one of them
    authenticating the request is enough. `now` is unix seconds, injected so
    the replay window is testable.

    Configuration mistakes (unknown scheme, invalid options, a negative
    tolerance) surface as `bad_options`, checked before anything from the
    request is looked at, so they cannot hide behind request-shaped reasons.
    """
    entry = _SCHEMES.get(scheme)
    options_error: ValueError | None = None
    if entry is not None:
        try:
            entry[0](options)
        except ValueError as exc:
            options_error = exc
    if entry is None or options_error is not None or tolerance_seconds < 0:
        # Options are configuration, not secrets: chaining their error is safe
        # and tells the operator which key is wrong.
        raise SignatureError("bad_options") from options_error
    usable = usable_secrets(secrets)
    return entry[1](options, HeaderView(headers), body, usable, now, tolerance_seconds)


def _unknown_scheme(scheme: str) -> ValueError:
    return ValueError(f"unknown signature scheme {scheme!r} (known: {', '.join(sorted(SCHEMES))})")
