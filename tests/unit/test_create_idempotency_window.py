"""`create.idempotency_window_seconds`: how long the provider honours our token.

The resend's behaviour past the window is in test_unseen_round55b.py (a lost
MediaConvert create looked up, or a human told why); here, what the load takes.
"""

from __future__ import annotations

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
