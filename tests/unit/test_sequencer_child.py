"""What the sequencer child is given: its settings, never the daemon's other secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.sequencer import LogSettings, child_environment, child_settings, named_connection
from shared.providers import ConfigError
from shared.settings import check_reconciler_settings, load_settings


def test_the_child_gets_its_settings_and_no_other_secret() -> None:
    parent = {
        "PATH": "/usr/bin",
        "PGSSLROOTCERT": "/etc/ssl/ca.pem",
        "JW_LOG_SIGNING_KEY": "PRIVATE+KEY+log+abcd+AAAA",
        "JW_LOG_LEVEL": "DEBUG",
        "OPENAI_API_KEY": "sk-secret",
        "JW_CONSOLE_DATABASE_URL": "postgresql://op:hunter2@db/jw",
        "NOTIFY_SOCKET": "/run/systemd/notify",
        "JW_CONFIG": "/etc/jobwarden/jobwarden.toml",
    }
    settings = LogSettings(5.0, Path("var/checkpoints"), "keys/signer")
    env = child_environment(settings, "postgresql://jw@db/jw", 4242, parent)
    assert env == {
        "PATH": "/usr/bin",
        "PGSSLROOTCERT": "/etc/ssl/ca.pem",
        "JW_LOG_SIGNING_KEY": "PRIVATE+KEY+log+abcd+AAAA",
        "JW_LOG_LEVEL": "DEBUG",
        "DATABASE_URL": "postgresql://jw@db/jw",
        "JW_LOG_INTERVAL": "5.0",
        "JW_LOG_WATCHDOG_SECONDS": "120.0",
        "JW_LOG_CHECKPOINT_DIR": str(Path("var/checkpoints").absolute()),
        "JW_LOG_SIGNING_KEY_FILE": str(Path("keys/signer").absolute()),
        "JW_SEQUENCER_PARENT": "4242",
    }


def test_no_key_file_stays_no_key_file() -> None:
    env = child_environment(LogSettings(1.0, Path("/c")), "postgresql://db/jw", 1, {})
    assert env["JW_LOG_SIGNING_KEY_FILE"] == ""
    assert "JW_LOG_SIGNING_KEY" not in env


def test_the_sequencers_session_is_named_and_other_parameters_kept() -> None:
    assert named_connection("postgresql://jw@db:5432/jw?sslmode=require&application_name=x") == (
        "postgresql://jw@db:5432/jw?sslmode=require&application_name=jobwarden-sequencer"
    )
    assert named_connection("postgresql://jw@db/jw") == (
        "postgresql://jw@db/jw?application_name=jobwarden-sequencer"
    )


def test_a_watchdog_no_longer_than_the_interval_is_a_config_error(tmp_path: Path) -> None:
    """A child is silent between passes: such a watchdog would kill every healthy one."""
    config = tmp_path / "jobwarden.toml"
    config.write_text("", "utf-8")
    env = {"JW_LOG_INTERVAL": "30", "JW_LOG_WATCHDOG_SECONDS": "30"}
    with pytest.raises(
        ConfigError, match=r"log_watchdog_seconds \(30 s, JW_LOG_WATCHDOG_SECONDS\)"
    ):
        check_reconciler_settings(load_settings(config, env=env))
    settings = load_settings(config, env={**env, "JW_LOG_WATCHDOG_SECONDS": "31"})
    check_reconciler_settings(settings)
    assert LogSettings.of(settings).watchdog == 31.0


def test_the_sequencers_session_ends_an_idle_transaction_after_the_watchdogs_time() -> None:
    """A session whose client vanished unseen held the sequencing lock for hours."""
    url = named_connection("postgresql://jw@db/jw?idle_in_transaction_session_timeout=0", 120.0)
    assert url == (
        "postgresql://jw@db/jw?application_name=jobwarden-sequencer"
        "&idle_in_transaction_session_timeout=120000&tcp_keepalives_idle=30"
        "&tcp_keepalives_interval=10"
    )
    env = child_environment(
        LogSettings(1.0, Path("/c"), watchdog=300.0), "postgresql://db/jw", 1, {}
    )
    assert env["JW_LOG_WATCHDOG_SECONDS"] == "300.0"
    assert child_settings(env).watchdog == 300.0  # what the child reads, not only what it gets


@pytest.mark.parametrize(
    ("wait", "refusal"),
    [
        # as read (shared/settings.py _RANGES)
        ("-1", r"JW_MIGRATION_WAIT: migration_wait: -1 is not between 0 and 3600"),
        ("3601", r"JW_MIGRATION_WAIT: migration_wait: 3601 is not between 0 and 3600"),
        ("nan", r"JW_MIGRATION_WAIT: migration_wait: expected a finite number"),  # as read
    ],
)
def test_the_migration_wait_is_bounded(tmp_path: Path, wait: str, refusal: str) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text("")
    with pytest.raises(ConfigError, match=refusal):
        check_reconciler_settings(load_settings(config, env={"JW_MIGRATION_WAIT": wait}))
    settings = load_settings(config, env={"JW_MIGRATION_WAIT": "0"})
    check_reconciler_settings(settings)
    assert settings.migration_wait == 0.0
