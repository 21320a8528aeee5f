"""A complete signature scheme: an envelope plus the checks that may authenticate it.

Families (`hmac`, `asymmetric`) and presets all compile to a `Spec`, so there
is exactly one verification procedure. A spec usually has one check; Standard
Webhooks has two sharing one header (`v1` HMAC with `whsec_` secrets, `v1a`
Ed25519 with `whpk_` keys), and each configured secret is used only by the
check whose key encoding it fits, so a public key never keys an HMAC.

Order of work, and why:
1. No check has a usable secret: `no_secret`, before reading the request, so
   a configuration problem cannot hide behind request-shaped reasons.
2. The envelope is opened (missing/malformed headers).
3. Any signature under a check's label matching any of its keys passes;
   every comparison of MACs is constant-time (`digests.any_match`).
4. Only then the replay window, so `stale_timestamp` and `future_timestamp`
   always describe authentic requests (a replay or clock skew worth alerting
   on), never random garbage.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .envelope import Envelope, open_envelope
from .errors import SignatureError
from .headers import HeaderView
from .timestamps import check_freshness
from .verified import Verified

Matcher = Callable[[bytes, Sequence[bytes]], bool]


class Check(Protocol):
    """One way of authenticating the signed content with the configured secrets."""

    @property
    def label(self) -> str:
        """The kv key or version marking this check's signatures ("" when bare)."""
        ...

    def matcher(self, secrets: Sequence[str]) -> Matcher | None:
        """A matcher over the secrets this check can use, or None when there are none."""
        ...

    def secret_problem(self, secret: str) -> str | None:
        """Why this check cannot use `secret` (never quoting it), or None."""
        ...


@dataclass(frozen=True, slots=True)
class Spec:
    """A scheme ready to verify. `id_in_body` marks senders whose event id is in the
    (signed) body rather than a header, like Stripe: `id_signed` is then True with
    `event_id` None, and the caller takes the id from the body.

    Its hash is computed once: every verification looks the spec up in the
    matcher cache, and hashing the nested dataclasses again each time cost
    about as much as the HMAC.
    """

    scheme: str
    envelope: Envelope
    checks: tuple[Check, ...]
    id_in_body: bool = False
    _hash: int = field(init=False, repr=False, compare=False)
    # `Verified.id_signed` of every request this spec authenticates.
    _id_signed: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields = (self.scheme, self.envelope, self.checks, self.id_in_body)
        object.__setattr__(self, "_hash", hash(fields))
        object.__setattr__(self, "_id_signed", self.envelope.id_signed or self.id_in_body)

    def __hash__(self) -> int:
        return self._hash


# (headers, body, now, method, url): one request checked against a configuration
# worked out beforehand (`spec_verifier`, `dispatch.verifier`).
RequestCheck = Callable[[HeaderView, bytes, float, "str | None", "str | None"], Verified]


def spec_verifier(spec: Spec, secrets: Sequence[str], tolerance_seconds: int) -> RequestCheck:
    """The check of one request against `spec` and these secrets; see the module
    docstring for the order of checks.

    Raises `no_secret` here, before any request is read (step 1). Built once
    per configuration (`dispatch.verifier`): the receiver builds one per
    provider at start-up, so a delivery pays only for what depends on it.
    """
    labels, matchers = _plan(spec, tuple(secrets))
    if not matchers:
        raise SignatureError("no_secret")
    envelope, scheme, id_signed = spec.envelope, spec.scheme, spec._id_signed

    def check(
        headers: HeaderView, body: bytes, now: float, method: str | None, url: str | None
    ) -> Verified:
        content, signatures, timestamp, event_id = open_envelope(
            envelope, headers, body, labels, method, url
        )
        # A loop rather than any() over a generator: the same matchers in the same
        # order, stopping at the first that matches, without a generator per call.
        for label, matcher in matchers:
            if matcher(content, signatures.labelled(label)):
                break
        else:
            raise SignatureError("bad_signature")
        if timestamp is not None:
            check_freshness(timestamp, now, tolerance_seconds)
        # Positional: a frozen dataclass's keyword call costs a third more.
        return Verified(scheme, event_id, id_signed, timestamp)

    return check


@functools.lru_cache(maxsize=64)
def _plan(
    spec: Spec, secrets: tuple[str, ...]
) -> tuple[frozenset[str], tuple[tuple[str, Matcher], ...]]:
    """The labels to decode and each check's matcher for these secrets, made once
    per (spec, secret set).

    Every check's label is decoded, usable secrets or not, so a header's
    validity does not depend on which kinds of secret we happen to hold.
    Decoding keys (base64, PEM, DER) costs more than the MAC itself and the
    pair changes only on a rotation; a matcher is a pure function of its
    keys, so sharing it keeps each check a pure function of its inputs.
    """
    labels = frozenset(check.label for check in spec.checks)
    matchers = tuple(
        (check.label, matcher)
        for check in spec.checks
        if (matcher := check.matcher(secrets)) is not None
    )
    return labels, matchers


def secret_problem(spec: Spec, secret: str) -> str | None:
    """Why no check of `spec` can use `secret`, or None when one can."""
    problems: list[str] = []
    for check in spec.checks:
        problem = check.secret_problem(secret)
        if problem is None:
            return None
        if problem not in problems:
            problems.append(problem)
    return "; or ".join(problems)
