"""`jobwarden providers check` reads the `[jobwarden]` settings and the signing key
as the reconciler does at start-up, so a config it calls valid is one the
reconciler starts with (an operator review found a key the reconciler could
not find reported as valid, and the reconciler in a restart loop)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from shared.cli import providers as cli_providers
from shared.cli.main import build_parser
from shared.tlog import generate_key

ROOT = Path(__file__).resolve().parents[2]
CONFIG_EXAMPLE = ROOT / "deploy" / "config.example.toml"
ENV_EXAMPLE = ROOT / "deploy" / "systemd" / "jobwarden.env.example"
SIM = '[providers.sim]\npreset = "simulator"\nbase_url = "http://127.0.0.1:8765"\n'


def ns(config: Path, **values: object) -> argparse.Namespace:
    options = dict.fromkeys(("provider", "delivery", "at", "url", "result", "status"))
    return argparse.Namespace(config=str(config), **{"json": False, **options, **values})


def config_with_key(tmp_path: Path, key_file: str) -> Path:
    path = tmp_path / "jobwarden.toml"
    path.write_text(f'[jobwarden]\nlog_signing_key_file = "{key_file}"\n\n{SIM}', "utf-8")
    return path


def signing_key(tmp_path: Path, mode: int = 0o600) -> Path:
    private, _public = generate_key("jobwarden.example.com/log")
    key = tmp_path / "jobwarden.example.com_log.key"
    key.write_text(private + "\n", "utf-8")
    key.chmod(mode)
    return key


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads the environment like the daemons: none of ours leaks in."""
    for name in list(os.environ):
        if name.startswith("JW_"):
            monkeypatch.delenv(name)


async def test_the_example_config_passes_as_shipped_and_says_nothing_is_signed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await cli_providers.cmd_check(ns(CONFIG_EXAMPLE)) == 0
    out = capsys.readouterr().out
    assert "valid, 1 provider(s)" in out
    assert "no signing key" in out and "no checkpoint is signed" in out


async def test_a_missing_signing_key_file_is_invalid_naming_the_file_and_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "keys" / "log.key"
    assert await cli_providers.cmd_check(ns(config_with_key(tmp_path, str(missing)))) == 1
    err = capsys.readouterr().err
    assert "invalid: checkpoint signing key (log_signing_key_file" in err
    assert f"secret file {missing} does not exist" in err


async def test_an_unreadable_signing_key_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a directory stands in for a file this user cannot read (root reads any file)
    assert await cli_providers.cmd_check(ns(config_with_key(tmp_path, str(tmp_path)))) == 1
    assert f"secret file {tmp_path} cannot be read" in capsys.readouterr().err


async def test_a_file_that_is_not_a_signer_key_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _private, public = generate_key("jobwarden.example.com/log")
    wrong = tmp_path / "log.pub"
    wrong.write_text(public + "\n", "utf-8")
    assert await cli_providers.cmd_check(ns(config_with_key(tmp_path, str(wrong)), json=True)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert "not a signer key" in report["error"]
    assert public not in report["error"]


async def test_a_readable_key_is_reported_with_its_log_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    key = signing_key(tmp_path)
    assert await cli_providers.cmd_check(ns(config_with_key(tmp_path, str(key)), json=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["evidence_log"] == {
        "signed": True,
        "name": "jobwarden.example.com/log",
        "key": str(key),
        "checkpoint_dir": "var/checkpoints",
        "previous_keys": [],
        "warnings": [],
    }
    assert "PRIVATE+KEY" not in json.dumps(report)


async def test_a_key_others_can_read_or_a_check_run_as_root_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    key = signing_key(tmp_path, mode=0o644)
    assert await cli_providers.cmd_check(ns(config_with_key(tmp_path, str(key)))) == 0
    out = capsys.readouterr().out
    assert f"warning: {key} can be read by other users: chmod 600 it" in out
    assert "warning: checked as root" in out


async def test_the_environment_overrides_the_file_as_for_the_daemons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = signing_key(tmp_path)
    monkeypatch.setenv("JW_LOG_SIGNING_KEY_FILE", str(tmp_path / "nowhere.key"))
    assert await cli_providers.cmd_check(ns(config_with_key(tmp_path, str(key)))) == 1
    assert "nowhere.key does not exist" in capsys.readouterr().err


async def test_settings_the_reconciler_refuses_are_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobwarden.toml"
    path.write_text(f"[jobwarden]\nlease_seconds = 5.0\n\n{SIM}", "utf-8")
    assert await cli_providers.cmd_check(ns(path)) == 1
    assert "must be shorter than lease_seconds" in capsys.readouterr().err
    path.write_text(f"[jobwarden]\nlog_signing_key = 'x'\n\n{SIM}", "utf-8")
    assert await cli_providers.cmd_check(ns(path)) == 1
    assert "jobwarden.log_signing_key: unknown setting" in capsys.readouterr().err


async def test_as_the_receiver_the_key_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_with_key(tmp_path, str(tmp_path / "missing.key"))
    assert await cli_providers.cmd_check(ns(config, daemon="receiver", json=True)) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["daemon"] == "receiver" and report["evidence_log"] is None


def test_the_command_line_takes_the_daemon() -> None:
    args = build_parser().parse_args(["providers", "check", "--daemon", "receiver", "x.toml"])
    assert args.daemon == "receiver"
    assert build_parser().parse_args(["providers", "check", "x.toml"]).daemon == "reconciler"


def test_the_env_example_names_the_variables_an_operator_may_set() -> None:
    text = ENV_EXAMPLE.read_text("utf-8")
    for variable in (
        "JW_RECEIVER_WORKERS",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "FORWARDED_ALLOW_IPS",
        "JW_SIM_TIME_SCALE",
        "JW_SIM_STATUS_LATENCY",
        "JW_SIM_HONOUR_IDEMPOTENCY",
        "JW_SIM_WEBHOOK_URL",
    ):
        assert f"#{variable}=" in text, variable
    assert "docs/operations.md" not in text
