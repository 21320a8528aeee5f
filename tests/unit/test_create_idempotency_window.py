"""`create.idempotency_window_seconds`: how long the provider honours our token.

The resend's behaviour past the window is in test_unseen_round55b.py (a lost
MediaConvert create looked up, or a human told why); here, what the load takes.
"""

from __future__ import annotations

from shared.providers.guarantees import describe_guarantees
from tests.unit.test_providers_loader import acme, config_error, load


def test_the_window_is_read_and_defaults_to_none() -> None:
    assert load(acme()).create.idempotency_window_seconds is None
    desc = load(acme(create={"idempotency_window_seconds": 60}))
    assert desc.create.idempotency_window_seconds == 60


def test_a_window_without_a_token_is_refused() -> None:
    message = config_error(acme(create={"idempotency": "none", "idempotency_window_seconds": 60}))
    assert message == (
        "config.toml: providers.acme.create.idempotency_window_seconds: needs a token to"
        " hold (idempotency is none)"
    )


def test_a_window_must_be_a_positive_number_of_seconds() -> None:
    message = config_error(acme(create={"idempotency_window_seconds": 0}))
    assert message.startswith("config.toml: providers.acme.create.idempotency_window_seconds")


def test_providers_check_says_how_long_the_token_holds() -> None:
    """`providers check` said "a retry after a lost response returns the original
    job" with no limit, for a token MediaConvert honours one minute."""
    lookup = {
        "kind": "list",
        "path": "/v1/jobs",
        "list": "/jobs",
        "match": "/ref",
        "job_id": "/id",
    }
    desc = load(
        acme(
            create={"client_reference_field": "/ref", "idempotency_window_seconds": 60},
            lookup=lookup,
        )
    )
    (name, holds, why), *_ = describe_guarantees(desc)
    assert name == "at-most-once create" and holds
    assert why.endswith(
        "returns the original job, only while it can arrive within 60s of the first"
        " attempt (create.idempotency_window_seconds); past that, it is looked up instead"
    ), why
    (_, _, plain), *_ = describe_guarantees(load(acme()))
    assert "idempotency_window_seconds" not in plain
