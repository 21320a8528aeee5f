"""Named presets: well-known senders expressed as the families' options.

Each preset fixes the layout and lets a configuration override only header
names (and, where a sender has one, the id header), so a provider that signs
exactly like Stripe or GitHub but under its own header names needs no new
code. Every preset verifies the sender's official vectors or library output in
the unit tests.

- `standard_webhooks`: standardwebhooks.com, also Svix-branded senders.
  `webhook-*` and `svix-*` headers are aliases (they must agree when both are
  sent). Signed content `{id}.{timestamp}.{body}`; `v1` HMAC-SHA256 with
  `whsec_` secrets, `v1a` Ed25519 with `whpk_` keys, in one space-separated
  header. The id and timestamp are signed: a sound dedupe key and window.
- `stripe`: `Stripe-Signature: t=<unix>,v1=<hex>` over `{t}.{body}`, keyed by
  the secret's text. The event id is the `id` field of the signed body, so
  `Verified.event_id` is None and `id_signed` is True: the caller reads it
  from the body and may trust it as a dedupe key.
- `github`: `X-Hub-Signature-256: sha256=<hex>` over the body. No timestamp
  and no id are signed: there is no replay window, and `X-GitHub-Delivery` is
  returned with `id_signed=False`. An attacker holding one captured body can
  replay it under a fresh delivery id and it verifies; replay protection rests
  on deduplicating ids found inside the body, on restricting the endpoint to
  the sender's published address ranges, and on events being hints that
  trigger a status read (which jobwarden does anyway). A missing delivery
  header is not an error (`event_id` is then None).
- `slack`: `X-Slack-Signature: v0=<hex>` over `v0:{timestamp}:{body}`, with
  the timestamp in `X-Slack-Request-Timestamp`.
- `shopify`: `X-Shopify-Hmac-Sha256: <base64>` over the body. Like GitHub, no
  timestamp and no id are signed (`X-Shopify-Webhook-Id` is unsigned).
- `generic_hmac`: the original configurable HMAC, kept with exactly its
  original options (`encoding` hex|base64 stands for `format`; `{method}` and
  `{url}` stay literal text in its template, as they always were).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from . import asymmetric, hmac_family
from .asymmetric import AsymmetricCheck
from .envelope import parse_envelope
from .formats import ENCODINGS
from .hmac_family import HmacCheck
from .options import choice, reject_unknown
from .spec import Spec
from .templates import LEGACY_PLACEHOLDERS


@dataclass(frozen=True, slots=True)
class Preset:
    """A named scheme: the options a config may set, and how to build its spec."""

    name: str
    options: tuple[str, ...]
    build: Callable[[Mapping[str, object]], Spec]


def _hmac_preset(
    name: str,
    defaults: Mapping[str, object],
    overridable: tuple[str, ...],
    adjust: Callable[[Spec], Spec] = lambda spec: spec,
) -> Preset:
    def build(options: Mapping[str, object]) -> Spec:
        reject_unknown(name, options, overridable)
        return adjust(hmac_family.parse_options({**defaults, **options}, scheme=name))

    return Preset(name, overridable, build)


def _id_in_body(spec: Spec) -> Spec:
    return dataclasses.replace(spec, id_in_body=True)


def _single_signature(spec: Spec) -> Spec:
    # GitHub sends exactly one `sha256=` value: anything else is malformed
    # rather than another scheme's entry to skip.
    fmt = dataclasses.replace(spec.envelope.format, foreign_is_malformed=True)
    return dataclasses.replace(spec, envelope=dataclasses.replace(spec.envelope, format=fmt))


_HEADERS = ("signature_header", "timestamp_header", "id_header")
_STANDARD_WEBHOOKS_LAYOUT: Mapping[str, object] = {
    "signature_header": ["webhook-signature", "svix-signature"],
    "timestamp_header": ["webhook-timestamp", "svix-timestamp"],
    "id_header": ["webhook-id", "svix-id"],
    "format": "versioned",
    "signed_content": "{id}.{timestamp}.{body}",
}


def _standard_webhooks(options: Mapping[str, object]) -> Spec:
    name = "standard_webhooks"
    reject_unknown(name, options, _HEADERS)
    envelope, _ = parse_envelope(
        name, {**_STANDARD_WEBHOOKS_LAYOUT, **options}, default_format="versioned", default_key="v1"
    )
    checks = (
        HmacCheck(label=hmac_family.DEFAULT_KEY, algorithm="sha256", key_encoding="whsec"),
        AsymmetricCheck(label=asymmetric.DEFAULT_KEY, algorithm="ed25519", key_encoding="whpk"),
    )
    return Spec(scheme=name, envelope=envelope, checks=checks)


_GENERIC_HMAC_OPTIONS = (
    "signature_header",
    "algorithm",
    "encoding",
    "prefix",
    "signed_content",
    "timestamp_header",
    "id_header",
)


def _generic_hmac(options: Mapping[str, object]) -> Spec:
    name = "generic_hmac"
    reject_unknown(name, options, _GENERIC_HMAC_OPTIONS)
    encoding = choice(name, options, "encoding", ENCODINGS, "hex")
    family_options = {key: value for key, value in options.items() if key != "encoding"}
    family_options["format"] = encoding
    return hmac_family.parse_options(family_options, scheme=name, placeholders=LEGACY_PLACEHOLDERS)


PRESETS: tuple[Preset, ...] = (
    Preset("standard_webhooks", _HEADERS, _standard_webhooks),
    _hmac_preset(
        "stripe",
        {
            "signature_header": "Stripe-Signature",
            "format": "kv",
            "timestamp_key": "t",
            "signature_key": "v1",
            "signed_content": "{timestamp}.{body}",
        },
        ("signature_header",),
        _id_in_body,
    ),
    _hmac_preset(
        "github",
        {
            "signature_header": "X-Hub-Signature-256",
            "format": "hex",
            "prefix": "sha256=",
            "id_header": "X-GitHub-Delivery",
        },
        ("signature_header", "id_header"),
        _single_signature,
    ),
    _hmac_preset(
        "slack",
        {
            "signature_header": "X-Slack-Signature",
            "format": "hex",
            "prefix": "v0=",
            "timestamp_header": "X-Slack-Request-Timestamp",
            "signed_content": "v0:{timestamp}:{body}",
        },
        ("signature_header", "timestamp_header"),
    ),
    _hmac_preset(
        "shopify",
        {
            "signature_header": "X-Shopify-Hmac-Sha256",
            "format": "base64",
            "id_header": "X-Shopify-Webhook-Id",
        },
        ("signature_header", "id_header"),
    ),
    Preset("generic_hmac", _GENERIC_HMAC_OPTIONS, _generic_hmac),
)
