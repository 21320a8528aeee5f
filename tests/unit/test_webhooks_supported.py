"""`webhooks.supported = false`: a preset's webhooks turned off, as `cancel` and
`lookup` already could be.

A new user describing Groq's Batch API (OpenAI's batch objects at /openai/v1) as
the openai_batch preset found no way to drop its `[webhooks]`: Groq sends none, yet
with OPENAI_WEBHOOK_SECRET set for an OpenAI provider beside it, Groq's batches
read that secret, were polled at the webhook backstop's pace and a receiver path
took deliveries signed with OpenAI's secret. The only way out was pointing
`secrets_env` at a variable no one sets.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers

ENV = {"GROQ_API_KEY": "gsk", "OPENAI_WEBHOOK_SECRET": "whsec_c2VjcmV0LWtleQ=="}


def _groq(webhooks: dict[str, Any] | None) -> Any:
    table: dict[str, Any] = {
        "preset": "openai_batch",
        "base_url": "https://api.groq.com",
        "auth": {"secret_env": "GROQ_API_KEY"},
        "create": {"path": "/openai/v1/batches"},
    }
    if webhooks is not None:
        table["webhooks"] = webhooks
    return parse_providers({"providers": {"groq": table}}, "jobwarden.toml", ENV)["groq"]


def test_a_presets_webhooks_are_turned_off() -> None:
    assert _groq(None).webhooks is not None  # the preset's, reading OPENAI_WEBHOOK_SECRET
    assert _groq({"supported": False}).webhooks is None


def test_supported_true_is_the_table_as_written() -> None:
    assert _groq({"supported": True}).webhooks is not None


def test_a_table_of_its_own_turned_off_loads_without_a_secret() -> None:
    table = {
        "base_url": "https://api.example.com",
        "create": {"path": "/v1/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {"path": "/v1/jobs/{job_id}", "state": "/s", "state_map": {"ok": "succeeded"}},
        "result": {"source": "none"},
        "webhooks": {"supported": False, "scheme": "stripe", "secrets_env": "UNSET"},
    }
    desc = parse_providers({"providers": {"p": table}}, "jobwarden.toml", {})["p"]
    assert desc.webhooks is None


def test_supported_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError, match=r"webhooks\.supported"):
        _groq({"supported": "no"})
