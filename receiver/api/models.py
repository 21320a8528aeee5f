"""The agent API's request bodies, as pydantic models.

One definition both validates a body (`bodies.py`) and becomes its JSON Schema
in the OpenAPI document (`openapi.py`), so a limit cannot be enforced without
being documented, or documented without being enforced. Strict: a number is
not a string, `true` is not a number, an unknown field is refused (an agent's
typo `client_ref` must fail loudly, not silently lose its idempotency).

What JSON Schema cannot say about free JSON (no U+0000 in any string or key,
at most MAX_JSON_DEPTH levels) is checked by `bodies.check_json` before these
models see a body, and stated by the hand-written `JsonValue` schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

from shared.providers.description import HTTP_METHODS, MAX_DEADLINE_SECONDS

# Text PostgreSQL can store: anything but U+0000 (ECMA-262, Python and Rust
# regular expressions all read `\x00`).
NO_NUL = "^[^\\x00]*$"
MAX_PROVIDER = 63
MAX_KIND = 100
MAX_REFERENCE = 200
MAX_TARGET = 2000
MAX_REASON = 500
MAX_CONSUMER = 200
# pydantic cannot reference a schema it did not generate; openapi.py replaces
# this marker with a $ref to the hand-written, recursive JsonValue schema.
JSON_VALUE_MARKER = "x-jobwarden-json-value"


def _bounded(max_len: int) -> StringConstraints:
    return StringConstraints(min_length=1, max_length=max_len, pattern=NO_NUL)


ProviderName = Annotated[str, _bounded(MAX_PROVIDER)]
Kind = Annotated[str, _bounded(MAX_KIND)]
Reference = Annotated[str, _bounded(MAX_REFERENCE)]
Target = Annotated[str, _bounded(MAX_TARGET)]
Reason = Annotated[str, _bounded(MAX_REASON)]
Consumer = Annotated[str, _bounded(MAX_CONSUMER)]


def any_case(word: str) -> str:
    """A regular expression matching `word` in any case (methods are case-insensitive)."""
    return "".join(f"[{c.upper()}{c.lower()}]" for c in word)


METHOD_PATTERN = "^(?:" + "|".join(any_case(m) for m in HTTP_METHODS) + ")$"
Deadline = Annotated[
    float,
    Field(
        gt=0,
        le=MAX_DEADLINE_SECONDS,
        allow_inf_nan=False,
        description="Seconds; the provider's configured default when absent or null.",
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ProviderRequest(_Strict):
    """What to send the provider: always its configured create call, with this body.

    `method` and `target` may be left out or restate that call; anything else is
    refused (422), since the create call sent is always the configured one.
    """

    method: Annotated[
        str | None,
        Field(
            pattern=METHOD_PATTERN,
            description="The provider's create method (any case); another method is refused.",
        ),
    ] = None
    target: Annotated[
        Target | None,
        Field(
            description=(
                "The provider's configured create path; best left out. Any other path is "
                "refused (the create call always goes to the configured path)."
            )
        ),
    ] = None
    body: Annotated[Any, WithJsonSchema({JSON_VALUE_MARKER: True})] = None


class SubmitRequest(_Strict):
    """Start an operation. 202 means STARTED, NOT complete."""

    provider: Annotated[ProviderName, Field(description="A provider configured on this server.")]
    kind: Kind
    request: ProviderRequest
    client_reference: Annotated[
        Reference | None,
        Field(
            description=(
                "Your idempotency key: the same reference with the same request returns the "
                "same operation; with a different request, 409."
            )
        ),
    ] = None
    approval_ref: Reference | None = None
    create_deadline_seconds: Deadline | None = None
    result_deadline_seconds: Deadline | None = None


class CancelRequest(_Strict):
    reason: Annotated[Reason, Field(description="Why; recorded with the intent.")]


class ClaimRequest(_Strict):
    consumer: Annotated[Consumer, Field(description="Who acts on the result (one claim each).")]
    claim_token: Annotated[
        Reference | None,
        Field(
            description=(
                "A token of your choosing, the same on every retry of this claim: a retry "
                "whose first answer was lost is then answered claimed=true again (it is the "
                "same claim). Without it, a lost answer cannot be told from another's claim."
            )
        ),
    ] = None


BODY_MODELS: tuple[type[BaseModel], ...] = (SubmitRequest, CancelRequest, ClaimRequest)
