"""Answers to a sender's endpoint challenge (shared/signatures/challenges.py)."""

from __future__ import annotations

import json

import pytest

from shared.signatures.challenges import ChallengeAnswer, answer, usable_token

# `echo -n qgg8vlvZRS6UYooatFL8Aw | openssl dgst -sha256 -hmac zoom-secret-token-123`
# (the plainToken of Zoom's documented example; an independent HMAC)
ZOOM_VECTOR = "bb14734995b1296db328f8a0bf605e48f34f4c9ca4ab1f001ddc76ee33bd9975"


def test_zoom_is_answered_with_the_token_and_its_hmac_in_hex() -> None:
    body = json.loads(
        answer(ChallengeAnswer.ZOOM, "qgg8vlvZRS6UYooatFL8Aw", "zoom-secret-token-123")
    )
    assert body == {"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": ZOOM_VECTOR}


def test_slack_is_answered_with_its_challenge_echoed() -> None:
    body = json.loads(
        answer(ChallengeAnswer.SLACK, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "s")
    )
    assert body == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}


@pytest.mark.parametrize(
    "value",
    [
        "",
        "x" * 257,
        12,
        None,
        ["a"],
        {"a": 1},
        "tab\there",
        "line\nbreak",
        "é-token",
        "\u202etoken",
    ],
)
def test_a_token_we_would_not_echo_is_none(value: object) -> None:
    assert usable_token(value) is None


@pytest.mark.parametrize("value", ["a", "qgg8vlvZRS6UYooatFL8Aw", "x" * 256, "a b-c_d.e~f"])
def test_a_printable_ascii_token_is_answered(value: str) -> None:
    assert usable_token(value) == value
