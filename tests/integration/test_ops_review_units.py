"""The systemd units give the receiver only what it needs (an operator review):
a user of its own, no writable state, the reconciler's state and the signing
key out of sight; the example files put provider API keys in the reconciler's
own environment file and ship a config the reconciler starts with."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "deploy" / "systemd"
RECEIVER = SYSTEMD / "jobwarden-receiver.service"
RECONCILERS = [SYSTEMD / "jobwarden-reconciler.service", SYSTEMD / "jobwarden-reconciler@.service"]
INSTALLED_BINARY = "/opt/jobwarden/bin/jobwarden"


class _Repeated(dict[str, Any]):
    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, list) and isinstance(self.get(key), list):
            super().__getitem__(key).extend(value)
        else:
            super().__setitem__(key, value)


def _service(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(
        strict=False, interpolation=None, delimiters=("=",), dict_type=_Repeated
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text("utf-8"), source=path.name)
    return parser["Service"]


def test_the_receiver_runs_as_a_user_of_its_own() -> None:
    receiver = _service(RECEIVER)
    assert receiver["User"] == "jobwarden-receiver"
    assert receiver["Group"] == "jobwarden-receiver"
    assert receiver["SupplementaryGroups"] == "jobwarden"  # reads jobwarden.toml, 0640
    for path in RECONCILERS:
        assert _service(path)["User"] == "jobwarden"


def test_the_receiver_writes_no_state_and_cannot_see_the_reconcilers() -> None:
    receiver = _service(RECEIVER)
    assert receiver["ProtectSystem"] == "strict"
    assert "ReadWritePaths" not in receiver
    assert "StateDirectory" not in receiver  # it would chown /var/lib/jobwarden to the receiver
    hidden = receiver["InaccessiblePaths"].split()
    assert {"-/var/lib/jobwarden", "-/etc/jobwarden/keys"} <= set(hidden)
    for path in RECONCILERS:
        assert _service(path)["ReadWritePaths"] == "/var/lib/jobwarden"


def test_each_daemon_reads_the_shared_file_then_its_own() -> None:
    for path in [RECEIVER, *RECONCILERS]:
        files = _service(path)["EnvironmentFile"].splitlines()
        assert files == ["/etc/jobwarden/jobwarden.env", "-/etc/jobwarden/%p.env"]


def test_the_env_example_keeps_provider_api_keys_out_of_the_shared_file() -> None:
    text = (SYSTEMD / "jobwarden.env.example").read_text("utf-8")
    keys_part = text.split("Provider API keys")[1].split("# ----")[0]
    assert "jobwarden-reconciler.env" in keys_part
    assert "#ACME_API_KEY=" not in text and "#JW_SIM_API_KEY=" not in text


def test_the_example_config_names_no_key_file_the_reconciler_would_not_find() -> None:
    settings = load_settings(ROOT / "deploy" / "config.example.toml", env={})
    assert settings.log_signing_key_file == ""


def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    entry_point = shutil.which("jobwarden") or shutil.which(
        "jobwarden", path=str(Path(sys.executable).parent)
    )
    if analyze is None or entry_point is None:
        pytest.skip("systemd-analyze or the jobwarden entry point is not installed")
    copies = []
    for path in [RECEIVER, *RECONCILERS]:
        copy = tmp_path / path.name
        copy.write_text(path.read_text("utf-8").replace(INSTALLED_BINARY, entry_point), "utf-8")
        copies.append(str(copy))
    done = subprocess.run(
        [analyze, "verify", *copies], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "jobwarden" not in done.stdout + done.stderr
