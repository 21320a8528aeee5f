"""`jobwarden providers list|show|check`, called through its handlers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from shared.cli import providers as cli_providers

SECRETS = {
    "OPENAI_API_KEY": "sk-real-looking-key",
    "ANTHROPIC_API_KEY": "sk-ant-real-looking-key",
    "ASSEMBLYAI_API_KEY": "aai-key",
}
CONFIG = """
[providers.openai]
preset = "openai_batch"
limits = { backoff_cap = 120 }

[providers.anthropic]
preset = "anthropic_batches"

[providers.transcripts]
preset = "assemblyai"
"""
SIX = {"openai_batch", "replicate", "assemblyai", "google_lro", "azure_async", "anthropic_batches"}


def ns(**values: object) -> argparse.Namespace:
    # the defaults of `providers check`'s options
    defaults = dict.fromkeys(("provider", "delivery", "at", "url", "result", "status"))
    return argparse.Namespace(**{"json": False, **defaults, **values})


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "jobwarden.toml"
    path.write_text(text)
    return str(path)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


async def test_list_names_every_preset_with_its_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await cli_providers.cmd_list(ns()) == 0
    lines = capsys.readouterr().out.splitlines()
    names = {line.split()[0] for line in lines}
    assert names >= SIX and "simulator" in names
    assert any(line.startswith("openai_batch") and "/v1/batches" in line for line in lines)


async def test_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert await cli_providers.cmd_list(ns(json=True)) == 0
    presets = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in presets} >= SIX
    assert all(p["description"] for p in presets)


async def test_show_prints_the_preset_with_its_documentation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await cli_providers.cmd_show(ns(name="anthropic_batches")) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Anthropic Message Batches")
    assert "cannot be reconciled automatically" in out
    assert 'path = "/v1/messages/batches"' in out


async def test_show_json_names_the_secrets_and_the_guarantees(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await cli_providers.cmd_show(ns(name="openai_batch", json=True)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["secrets"] == [
        {"env": "OPENAI_API_KEY", "for": "auth", "optional": False},
        {"env": "OPENAI_WEBHOOK_SECRET", "for": "webhooks", "optional": True},
    ]
    verdicts = {g["guarantee"]: g["holds"] for g in summary["guarantees"]}
    assert verdicts == {
        "at-most-once create": False,
        "lookup after lost response": True,
        "cancellable": True,
        "webhooks signed": True,
        "result integrity checked": False,
    }


async def test_show_unknown_preset_fails_listing_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await cli_providers.cmd_show(ns(name="openia")) == 1
    err = capsys.readouterr().err
    assert "unknown preset 'openia'" in err and "openai_batch" in err


async def test_check_reports_each_providers_guarantees_in_plain_words(
    env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli_providers.cmd_check(ns(config=write(tmp_path, CONFIG))) == 0
    out = capsys.readouterr().out
    assert "valid, 3 provider(s)" in out
    assert "openai (preset openai_batch)  https://api.openai.com" in out
    anthropic = out.split("anthropic (preset anthropic_batches)")[1].split("\n\n")[0]
    assert (
        "lookup after lost response? no   create after a lost response cannot be reconciled "
        "automatically" in anthropic
    )
    transcripts = out.split("transcripts (preset assemblyai)")[1]
    assert "cancellable?                no   cancellation is unsupported" in transcripts
    assert "webhooks signed?            no   no webhooks configured" in transcripts
    assert SECRETS["OPENAI_API_KEY"] not in out


async def test_check_of_one_provider_reports_that_one_only(
    env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, CONFIG)
    assert await cli_providers.cmd_check(ns(config=path, provider="transcripts")) == 0
    out = capsys.readouterr().out
    assert "valid, 1 provider(s)" in out
    assert "transcripts (preset assemblyai)" in out
    assert "openai (preset" not in out and "anthropic (preset" not in out
    assert await cli_providers.cmd_check(ns(config=path, provider="nope")) == 1
    assert "no provider 'nope' in the config" in capsys.readouterr().err


async def test_check_says_which_create_refusals_are_taken_as_nothing_created(
    env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = CONFIG + "create = { not_created_statuses = [429] }\n"  # on transcripts
    assert await cli_providers.cmd_check(ns(config=write(tmp_path, config), json=True)) == 0
    by_name = {p["name"]: p for p in json.loads(capsys.readouterr().out)["providers"]}
    said = {
        name: next(g["why"] for g in p["guarantees"] if g["guarantee"] == "at-most-once create")
        for name, p in by_name.items()
    }
    assert "HTTP 429 to a create is taken as 'nothing was created'" in said["transcripts"]
    assert "create.not_created_statuses" in said["transcripts"]
    assert "not_created_statuses" not in said["openai"]  # not set: not mentioned


async def test_check_json(env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await cli_providers.cmd_check(ns(config=write(tmp_path, CONFIG), json=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True
    by_name = {p["name"]: p for p in report["providers"]}
    assert by_name["openai"]["preset"] == "openai_batch"
    lookup = next(
        g for g in by_name["openai"]["guarantees"] if g["guarantee"] == "lookup after lost response"
    )
    assert lookup["holds"] is True
    assert by_name["anthropic"]["warnings"] == []


async def test_check_refuses_a_typo_in_an_override(
    env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, CONFIG + '\n[providers.openai.create]\nidempotency_heder = "X"\n')
    assert await cli_providers.cmd_check(ns(config=config)) == 1
    err = capsys.readouterr().err
    assert "providers.openai.create.idempotency_heder: unknown key" in err
    assert "did you mean 'idempotency_header'" in err


async def test_check_names_a_missing_secret_by_its_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = write(tmp_path, '[providers.openai]\npreset = "openai_batch"\n')
    assert await cli_providers.cmd_check(ns(config=config, json=True)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert "environment variable OPENAI_API_KEY is not set" in report["error"]


async def test_check_warns_about_placeholders_left_in_a_generic_preset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GOOGLE_ACCESS_TOKEN", "ya29.x")
    config = write(tmp_path, '[providers.lro]\npreset = "google_lro"\n')
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    out = capsys.readouterr().out
    assert "warning: base_url is still the preset's placeholder" in out
    assert "warning: create.path is still the preset's placeholder" in out


def test_register_wires_the_three_actions() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    cli_providers.register(sub)
    args = parser.parse_args(["providers", "check", "x.toml", "--json"])
    assert args.handler is cli_providers.cmd_check and args.config == "x.toml" and args.json
    assert parser.parse_args(["providers", "list"]).handler is cli_providers.cmd_list
    assert parser.parse_args(["providers", "show", "replicate"]).name == "replicate"


LUMA = """
[jobwarden]
public_webhook_url = "PUBLIC"

[providers.luma]
base_url = "https://api.lumalabs.ai/dream-machine/v1"
result = { source = "none" }
auth = { secret_env = "LUMA_API_KEY" }

[providers.luma.create]
path = "/generations"
idempotency = "none"
job_id = "/id"
set_body = { "/callback_url" = "{webhook_url}?token={webhook_secret}" }

[providers.luma.status]
path = "/generations/{job_id}"
state = "/state"
state_map = { completed = "succeeded" }
WEBHOOKS
"""
LUMA_HOOKS = """[providers.luma.webhooks]
scheme = "static_header"
options = { query = "token" }
secrets_env = "LUMA_CALLBACK_TOKEN"
job_id = "/id"
"""


@pytest.mark.parametrize(
    ("public", "hooks", "warned"),
    [
        ("https://hooks.example.com/webhooks/{provider}", LUMA_HOOKS, None),
        ("", LUMA_HOOKS, "but public_webhook_url is not set"),
        ("https://hooks.example.com/webhooks/{provider}", "", "but this provider has no webhooks"),
    ],
)
async def test_check_warns_about_a_callback_url_every_create_would_leave_out(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public: str,
    hooks: str,
    warned: str | None,
) -> None:
    """A create field naming {webhook_url} that the reconciler cannot fill is left out
    of every create: the provider never calls back, and nothing said so."""
    monkeypatch.setenv("LUMA_API_KEY", "luma-key")
    monkeypatch.setenv("LUMA_CALLBACK_TOKEN", "t" * 32)
    config = write(tmp_path, LUMA.replace("PUBLIC", public).replace("WEBHOOKS", hooks))
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "set_body" in line]
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warned in warnings[0], warnings
        assert "create.set_body /callback_url names {webhook_url}" in warnings[0]


async def test_check_warns_about_a_callback_url_inside_a_literal_list_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A callback inside a list (Speechmatics' notification_config) is a template
    as much as one at its own path: left out of every create without a public URL."""
    monkeypatch.setenv("LUMA_API_KEY", "luma-key")
    monkeypatch.setenv("LUMA_CALLBACK_TOKEN", "t" * 32)
    listed = LUMA.replace(
        'set_body = { "/callback_url" = "{webhook_url}?token={webhook_secret}" }',
        'set_body = { "/notify" = [{ url = "{webhook_url}?token={webhook_secret}" }] }',
    )
    config = write(tmp_path, listed.replace("PUBLIC", "").replace("WEBHOOKS", LUMA_HOOKS))
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "set_body" in line]
    assert len(warnings) == 1 and "but public_webhook_url is not set" in warnings[0], warnings


@pytest.mark.parametrize(
    ("public", "callback", "warned"),
    [
        ("https://h.example/webhooks/{provider}", "{webhook_url}?token={webhook_secret}", None),
        ("https://h.example/webhooks/{provider}", "{webhook_url}", "no create field names"),
        (
            "https://h.example/webhooks/{provider}",
            "{webhook_url}?sig={webhook_secret}",
            "writes token={webhook_secret}",
        ),
        (
            "https://h.example/webhooks/{provider}?src=jw",
            "{webhook_url}?token={webhook_secret}",
            "write '&' instead",
        ),
    ],
)
async def test_check_warns_about_a_callback_token_no_callback_would_carry(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public: str,
    callback: str,
    warned: str | None,
) -> None:
    """Each of these loaded fine, and every callback would have been refused."""
    monkeypatch.setenv("LUMA_API_KEY", "luma-key")
    monkeypatch.setenv("LUMA_CALLBACK_TOKEN", "t" * 32)
    text = LUMA.replace("PUBLIC", public).replace("WEBHOOKS", LUMA_HOOKS)
    text = text.replace("{webhook_url}?token={webhook_secret}", callback)
    config = write(tmp_path, text)
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "warning:" in line]
    if warned is None:
        assert warnings == []
    else:
        assert any(warned in w for w in warnings), warnings


@pytest.mark.parametrize(
    ("set_body", "stranded"),
    [
        (
            '{ "/webhook/url" = "{webhook_url}", "/webhook/metadata/op" = "{operation_id}" }',
            True,
        ),
        ('{ "/webhook" = { url = "{webhook_url}", metadata = { op = "{operation_id}" } } }', False),
        ('{ "/webhook/url" = "{webhook_url}", "/limit" = "10" }', False),
    ],
    ids=["siblings_by_path", "one_table", "elsewhere"],
)
async def test_check_names_what_stays_beside_a_callback_url_left_out(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    set_body: str,
    stranded: bool,
) -> None:
    """Firecrawl's webhook is an object, {url, metadata}, its url required. Written
    by path, `/webhook/url` is left out without a public URL but
    `/webhook/metadata/op` is still sent: every create carries a webhook without
    its url, which Firecrawl refuses (400 "webhook.url: Required"), and every
    operation failed, the warning having said only that the provider never calls
    back. It names the field left beside it, and the one table that is left out
    whole."""
    monkeypatch.setenv("LUMA_API_KEY", "luma-key")
    monkeypatch.setenv("LUMA_CALLBACK_TOKEN", "t" * 32)
    described = LUMA.replace(
        'set_body = { "/callback_url" = "{webhook_url}?token={webhook_secret}" }',
        f"set_body = {set_body}",
    )
    config = write(tmp_path, described.replace("PUBLIC", "").replace("WEBHOOKS", LUMA_HOOKS))
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    (warning,) = [line for line in capsys.readouterr().out.splitlines() if "set_body" in line]
    assert "but public_webhook_url is not set" in warning, warning
    if stranded:
        assert "create.set_body /webhook/metadata/op is still sent" in warning, warning
        assert "one table at /webhook" in warning, warning
    else:
        assert "still sent" not in warning, warning
