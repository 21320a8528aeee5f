"""Choosing the verifier for a provider's configured scheme.

Schemes are the two families (`hmac`, `asymmetric`), the named presets built
on them (see `presets`), `static_header`, which is not a signature at all,
`twilio`, which signs the form's fields rather than the body's bytes,
`mailgun`, whose signature is in the body, and `jwt`, a token the delivery
carries (which covers the body only when it names the body's digest); each of
the last four keeps its own module, asked through one table (`_OWN_MODULES`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from . import asymmetric, hmac_family, jwt_scheme, mailgun, static_header, twilio
from .errors import SignatureError
from .headers import HeaderView
from .presets import PRESETS
from .secret_set import usable_secrets
from .spec import RequestCheck, Spec, secret_problem, spec_verifier
from .verified import Verified

_Builder = Callable[[Mapping[str, object]], Spec]

_BUILDERS: Final[Mapping[str, _Builder]] = {
    hmac_family.SCHEME: hmac_family.parse_options,
    asymmetric.SCHEME: asymmetric.parse_options,
    **{preset.name: preset.build for preset in PRESETS},
}


@dataclass(frozen=True, slots=True)
class _OwnModule:
    """A scheme with a module of its own (no spec): what each question asks of it."""

    check_options: Callable[[Mapping[str, object]], None]
    check_secret: Callable[[str, Mapping[str, object] | None], None]
    # (options, headers, body, usable secrets, now, tolerance_seconds, url); None
    # when the module builds its check itself (`verifier`)
    verify: (
        Callable[
            [Mapping[str, object], HeaderView, bytes, Sequence[str], float, int, str | None],
            Verified,
        ]
        | None
    )
    headers_read: Callable[[Mapping[str, object]], tuple[str, ...]]
    signs_timestamp: bool = False
    # whether the URL is signed; options-dependent for `jwt` (an audience `{url}`)
    signs_url: bool | Callable[[Mapping[str, object]], bool] = False
    reads_form: bool = False  # a form body is read (its fields, signed or not)
    # whether the body (so an id read from it) is covered; False: only its hash dedupes
    signs_body: bool | Callable[[Mapping[str, object]], bool] = True
    # (options, usable secrets, tolerance_seconds): the check built once, its
    # options read at build rather than on each request (`jwt`)
    verifier: Callable[[Mapping[str, object], Sequence[str], int], RequestCheck] | None = None


def _no_secret_rule(secret: str, options: Mapping[str, object] | None) -> None:
    """A secret that is text, any text (the Auth Token, a signing key)."""


_OWN_MODULES: Final[Mapping[str, _OwnModule]] = {
    static_header.SCHEME: _OwnModule(
        static_header.check_options,
        static_header.check_secret,
        static_header.verify,
        static_header.headers_read,
        signs_body=False,
        # nothing is signed, so a form body is read as its fields as well as a JSON
        # one: Mailchimp's batch webhooks POST form-encoded fields (`data[id]`),
        # their only credential a token in the callback URL
        reads_form=True,
    ),
    twilio.SCHEME: _OwnModule(
        twilio.check_options,
        _no_secret_rule,
        lambda options, view, body, secrets, now, tolerance, url: twilio.verify(
            options, view, body, secrets, url
        ),
        twilio.headers_read,
        signs_url=True,
        reads_form=True,
    ),
    mailgun.SCHEME: _OwnModule(
        mailgun.check_options,
        _no_secret_rule,
        lambda options, view, body, secrets, now, tolerance, url: mailgun.verify(
            body, secrets, now, tolerance
        ),
        lambda options: (),  # its signature is in the body
        signs_timestamp=True,
        signs_body=False,  # only the timestamp and the token (its dedupe id) are
    ),
    jwt_scheme.SCHEME: _OwnModule(
        jwt_scheme.check_options,
        jwt_scheme.check_secret,
        None,
        jwt_scheme.headers_read,
        signs_timestamp=True,  # `iat` and `exp`
        signs_url=jwt_scheme.signs_url,
        signs_body=jwt_scheme.signs_body,
        verifier=jwt_scheme.verifier,
    ),
}

SCHEMES: frozenset[str] = frozenset({*_BUILDERS, *_OWN_MODULES})


def build_spec(scheme: str, options: Mapping[str, object]) -> Spec:
    """The compiled spec of a signature scheme; ValueError names the bad key.

    `static_header` has no spec (nothing is signed), so it is refused here.
    """
    builder = _BUILDERS.get(scheme)
    if builder is None:
        raise _unknown_scheme(scheme)
    # No options (most presets) is the common case: skip freezing them. Only
    # an empty dict: anything else that is not a mapping fails in _freeze.
    frozen = () if type(options) is dict and not options else _freeze(options)
    if frozen is None:
        return builder(options)
    return _cached_spec(scheme, frozen)


def signs_timestamp(scheme: str, options: Mapping[str, object]) -> bool:
    """Whether the scheme signs a timestamp, i.e. has a replay window at all.

    GitHub and Shopify sign only the body: a captured delivery verifies
    forever, and only deduplication limits what a replay can do.
    """
    if scheme in _OWN_MODULES:
        return _OWN_MODULES[scheme].signs_timestamp
    if scheme not in _BUILDERS:
        return False
    return build_spec(scheme, options).envelope.template.uses("timestamp")


def signs_url(scheme: str, options: Mapping[str, object]) -> bool:
    """Whether the scheme signs the request URL, which the receiver must then know
    as the sender addressed it (`public_webhook_url`), not from the Host header."""
    if scheme in _OWN_MODULES:
        signed = _OWN_MODULES[scheme].signs_url
        return signed if isinstance(signed, bool) else signed(options)
    if scheme not in _BUILDERS:
        return False
    return build_spec(scheme, options).envelope.template.uses("url")


def signs_body(scheme: str, options: Mapping[str, object]) -> bool:
    """Whether the signature covers the body's content, so an id read from the
    body is a safe dedupe key. False for `static_header` (nothing is signed),
    `mailgun` (only its signature object is) and `jwt` without a `body_claim`
    (Pub/Sub's token names the endpoint, not the message): such a body is
    deduplicated on its hash, and what it says only wakes our own read."""
    module = _OWN_MODULES.get(scheme)
    if module is None:
        return True
    signed = module.signs_body
    return signed if isinstance(signed, bool) else signed(options)


def reads_form(scheme: str) -> bool:
    """Whether the scheme signs a form's fields (Twilio), so a form body is read."""
    module = _OWN_MODULES.get(scheme)
    return module is not None and module.reads_form


def check_reads_only(scheme: str, options: Mapping[str, object]) -> frozenset[str] | None:
    """The lowercase names of the only headers the scheme's check looks up, or None
    when it may look up others too (a scheme with a module of its own: Twilio's
    reads the content type as well). A spec's check reads its envelope's
    signature, timestamp and id headers and nothing else (`open_envelope`)."""
    if scheme in _OWN_MODULES:
        return None
    return frozenset(name.lower() for name in headers_read(scheme, options))


def headers_read(scheme: str, options: Mapping[str, object]) -> tuple[str, ...]:
    """The headers verification reads (the receiver screens them for non-ASCII
    bytes): a spec's signature, timestamp and id headers, aliases included."""
    module = _OWN_MODULES.get(scheme)
    if module is not None:
        return module.headers_read(options)
    envelope = build_spec(scheme, options).envelope
    return (
        *envelope.signature_headers,
        *(envelope.timestamp_headers or ()),
        *(envelope.id_headers or ()),
    )


# The receiver verifies with the same few option tables over and over;
# compiling one costs several times the HMAC itself. Specs are immutable, so
# they are shared. Only valid options are cached (errors propagate uncached).
@functools.lru_cache(maxsize=256)
def _cached_spec(scheme: str, frozen: tuple[tuple[str, str | tuple[str, ...]], ...]) -> Spec:
    options = {key: list(value) if isinstance(value, tuple) else value for key, value in frozen}
    return _BUILDERS[scheme](options)


def _freeze(options: Mapping[str, object]) -> tuple[tuple[str, str | tuple[str, ...]], ...] | None:
    """A hashable copy of options made of strings and lists of strings, else None."""
    items: list[tuple[str, str | tuple[str, ...]]] = []
    for key, value in options.items():
        if not isinstance(key, str):
            return None
        if isinstance(value, str):
            items.append((key, value))
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            items.append((key, tuple(value)))
        else:
            return None  # left to the builder, which names the bad key
    return tuple(sorted(items))


def check_options(scheme: str, options: Mapping[str, object]) -> None:
    """Validate a scheme's options at config load; ValueError names the bad key."""
    if scheme in _OWN_MODULES:
        _OWN_MODULES[scheme].check_options(options)
        return
    build_spec(scheme, options)


def check_secret(scheme: str, secret: str, options: Mapping[str, object] | None = None) -> None:
    """Validate one configured secret at config load, without ever quoting it.

    With the scheme's `options`, the secret is also checked against its key
    encoding (`whsec_`/`whpk_` prefixes, base64, hex, PEM...). Without them,
    only what the scheme alone determines is checked: presets fix their key
    encoding, so they are checked in full; the families' encodings are options,
    so for them only blankness is checked (and a secret that does not decode is
    skipped at verification, `no_secret` when none is left).
    """
    if scheme not in SCHEMES:
        raise _unknown_scheme(scheme)
    if not secret.strip():
        raise ValueError(f"{scheme}: a secret must not be blank (anyone can sign with it)")
    if scheme in _OWN_MODULES:
        _OWN_MODULES[scheme].check_secret(secret, options)
        return
    try:
        spec = build_spec(scheme, {} if options is None else options)
    except ValueError:
        if options is not None:
            raise
        return  # the scheme needs options to say more
    problem = secret_problem(spec, secret)
    if problem is not None:
        raise ValueError(f"{scheme}: {problem}")


def verify(
    scheme: str,
    options: Mapping[str, object],
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str],
    now: float,
    tolerance_seconds: int = 300,
    *,
    method: str | None = None,
    url: str | None = None,
) -> Verified:
    """Authenticate a webhook request from its raw body, or raise SignatureError.

    `secrets` are all the currently active secrets (rotation): any one of them
    authenticating the request is enough. `now` is unix seconds, injected so
    the replay window is testable. `method` (as on the request line, e.g.
    "POST") and `url` (exactly as the sender addressed it, scheme, host and
    query included) are needed only by templates that sign `{method}` or
    `{url}`; without them such a scheme fails as `bad_options`.

    Configuration mistakes (unknown scheme, invalid options, a negative
    tolerance) surface as `bad_options`, checked before anything from the
    request is looked at, so they cannot hide behind request-shaped reasons.
    """
    check = verifier(scheme, options, secrets, tolerance_seconds)
    return check(HeaderView(headers), body, now, method, url)


def verifier(
    scheme: str,
    options: Mapping[str, object],
    secrets: Sequence[str],
    tolerance_seconds: int = 300,
) -> RequestCheck:
    """`verify` with its configuration half done once: the check of one request,
    a pure function of (headers, body, now, method, url).

    Raises what `verify` raises before it reads a request (`bad_options`,
    `no_secret`), so `verify` is this and one call. The receiver builds one
    per provider at start-up: each delivery then skips the scheme's lookup,
    its options' check and the secrets' screening.
    """
    spec: Spec | None = None
    options_error: ValueError | None = None
    module = _OWN_MODULES.get(scheme)
    known = scheme in SCHEMES
    if known:
        try:
            if module is not None:
                module.check_options(options)
            else:
                spec = build_spec(scheme, options)
        except ValueError as exc:
            options_error = exc
    if not known or options_error is not None or tolerance_seconds < 0:
        # Options are configuration, not secrets: chaining their error is safe
        # and tells the operator which key is wrong.
        raise SignatureError("bad_options") from options_error
    usable = usable_secrets(secrets)
    if module is None:
        assert spec is not None
        return spec_verifier(spec, usable, tolerance_seconds)
    if module.verifier is not None:
        return module.verifier(options, usable, tolerance_seconds)
    own = module.verify
    assert own is not None

    def check(
        headers: HeaderView, body: bytes, now: float, method: str | None, url: str | None
    ) -> Verified:
        return own(options, headers, body, usable, now, tolerance_seconds, url)

    return check


def _unknown_scheme(scheme: str) -> ValueError:
    return ValueError(f"unknown signature scheme {scheme!r} (known: {', '.join(sorted(SCHEMES))})")
