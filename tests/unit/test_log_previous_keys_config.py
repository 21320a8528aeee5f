"""`log_previous_key_files` (JW_LOG_PREVIOUS_KEY_FILES): the public keys of
signing keys rotated out, read and checked like the signing key is, so a bad
one is a configuration error at start and in `jobwarden providers check`,
never the sequencer child failing, and no key's text is ever repeated."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from reconciler.daemon import check_startup
from reconciler.sequencer import LogSettings, child_environment, child_settings
from shared.cli import providers as cli_providers
from shared.providers import ConfigError
from shared.settings import Settings, load_settings
from shared.tlog import generate_cosignature_key, generate_key

NAME = "jobwarden.example.com/log"
SIM = '[providers.sim]\npreset = "simulator"\nbase_url = "http://127.0.0.1:8765"\n'


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("JW_"):
            monkeypatch.delenv(name)


def keys(tmp_path: Path) -> tuple[Path, Path, str]:
    """A signing key file (the new one) and the public key file of an old one."""
    new_private, _ = generate_key(NAME)
    _, old_public = generate_key(NAME)
    key, pub = tmp_path / "new.key", tmp_path / "old.pub"
    key.write_text(new_private + "\n", "utf-8")
    key.chmod(0o600)
    pub.write_text(old_public + "\n", "utf-8")
    return key, pub, old_public


def config(tmp_path: Path, key: Path, previous: str) -> Path:
    path = tmp_path / "jobwarden.toml"
    path.write_text(
        f'[jobwarden]\nlog_signing_key_file = "{key}"\nlog_previous_key_files = {previous}\n\n'
        + SIM,
        "utf-8",
    )
    return path


def _material(text: str) -> str:
    """The key of a key string (its base64 may hold a "+"); any other text whole."""
    if text.startswith("PRIVATE+"):
        return text.split("+", 4)[-1]
    return text.split("+", 2)[-1]


def ns(path: Path, **values: object) -> argparse.Namespace:
    options = dict.fromkeys(("provider", "delivery", "at", "url", "result", "status"))
    return argparse.Namespace(config=str(path), **{"json": False, **options, **values})


def test_the_file_takes_a_list_and_the_environment_a_comma_separated_one(
    tmp_path: Path,
) -> None:
    key, pub, _ = keys(tmp_path)
    path = config(tmp_path, key, f'["{pub}", "{tmp_path}/older.pub"]')
    assert load_settings(path, {}).log_previous_key_files == (
        str(pub),
        f"{tmp_path}/older.pub",
    )
    env = {"JW_LOG_PREVIOUS_KEY_FILES": " a.pub, b.pub ,"}
    assert load_settings(path, env).log_previous_key_files == ("a.pub", "b.pub")
    assert load_settings(None, {"JW_LOG_PREVIOUS_KEY_FILES": ""}).log_previous_key_files == ()
    assert Settings().log_previous_key_files == ()


@pytest.mark.parametrize("value", ["3", '[""]', '["a.pub", 7]', '["a,b.pub"]'])
def test_a_value_that_is_no_list_of_file_names_is_refused(tmp_path: Path, value: str) -> None:
    key, _, _ = keys(tmp_path)
    with pytest.raises(ConfigError, match="log_previous_key_files: expected a list of file names"):
        load_settings(config(tmp_path, key, value), {})


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not a key at all\n", "not a verifier key"),
        ("jobwarden.example.com/log+0123abcd+QUJD\n", "not a verifier key"),
        (b"\xff\xfe\x00garbage", "not a verifier key"),
        ("", "not a verifier key"),
        ("private", "a private signer key: name its public key"),
        ("witness", "a witness's cosigning key"),
    ],
)
async def test_a_file_that_is_no_log_public_key_is_a_configuration_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str | bytes,
    said: str,
) -> None:
    key, _, _ = keys(tmp_path)
    bad = tmp_path / "bad.pub"
    if content == "private":
        content = generate_key(NAME)[0] + "\n"
    elif content == "witness":
        content = generate_cosignature_key("witness.example.com")[1] + "\n"
    if isinstance(content, str):
        bad.write_text(content, "utf-8")
    else:
        bad.write_bytes(content)
    path = config(tmp_path, key, f'["{bad}"]')
    with pytest.raises(ConfigError) as caught:
        check_startup(load_settings(path, {}))
    message = str(caught.value)
    assert message.startswith(
        "previous checkpoint keys (log_previous_key_files, JW_LOG_PREVIOUS_KEY_FILES): "
        f"{bad}: {said}"
    )
    assert await cli_providers.cmd_check(ns(path, json=True)) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["error"] == message
    text = bad.read_bytes().decode("utf-8", "replace").strip()
    if text:  # never the file's text, a private key least of all
        assert _material(text) not in message


@pytest.mark.parametrize("missing", [True, False])
async def test_a_file_that_cannot_be_read_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], missing: bool
) -> None:
    key, _, _ = keys(tmp_path)
    # a folder stands in for a file this user may not read (root reads any file)
    named = tmp_path / "gone.pub" if missing else tmp_path
    path = config(tmp_path, key, f'["{named}"]')
    assert await cli_providers.cmd_check(ns(path)) == 1
    err = capsys.readouterr().err
    assert "invalid: previous checkpoint keys (log_previous_key_files" in err
    said = "no such file" if missing else "cannot be read (Is a directory)"
    assert f"{named}: {said}" in err


async def test_the_environment_names_them_over_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key, pub, _ = keys(tmp_path)
    monkeypatch.setenv("JW_LOG_PREVIOUS_KEY_FILES", f"{pub},{tmp_path / 'nowhere.pub'}")
    assert await cli_providers.cmd_check(ns(config(tmp_path, key, "[]"))) == 1
    assert f"{tmp_path / 'nowhere.pub'}: no such file" in capsys.readouterr().err


async def test_providers_check_reports_the_previous_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    key, pub, public = keys(tmp_path)
    path = config(tmp_path, key, f'["{pub}"]')
    assert await cli_providers.cmd_check(ns(path, json=True)) == 0
    report = json.loads(capsys.readouterr().out)["evidence_log"]
    named = "+".join(public.split("+", 2)[:2])  # name+key id: the key itself is in the file
    assert report["previous_keys"] == [{"file": str(pub), "key": named}]
    assert report["warnings"] == []
    assert await cli_providers.cmd_check(ns(path)) == 0
    assert f"  previous key {named} ({pub}): new checkpoints are held to" in (
        capsys.readouterr().out
    )


async def test_a_previous_key_that_is_the_signing_keys_own_or_unused_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    private, public = generate_key(NAME)
    key, own = tmp_path / "log.key", tmp_path / "log.pub"
    key.write_text(private + "\n", "utf-8")
    key.chmod(0o600)
    own.write_text(public + "\n", "utf-8")
    assert await cli_providers.cmd_check(ns(config(tmp_path, key, f'["{own}"]'))) == 0
    assert f"warning: {own} is the signing key's own public key" in capsys.readouterr().out
    path = tmp_path / "unsigned.toml"
    path.write_text(f'[jobwarden]\nlog_previous_key_files = ["{own}"]\n\n{SIM}', "utf-8")
    assert await cli_providers.cmd_check(ns(path)) == 0
    assert "log_previous_key_files is set but no checkpoint is signed" in capsys.readouterr().out


def test_the_sequencer_child_is_handed_them_as_absolute_paths() -> None:
    settings = LogSettings(1.0, Path("/c"), "new.key", 10.0, ("keys/old.pub", "/k/older.pub"))
    env = child_environment(settings, "postgresql://db/jw", 1, {})
    assert env["JW_LOG_PREVIOUS_KEY_FILES"] == f"{Path('keys/old.pub').absolute()},/k/older.pub"
    assert child_settings(env).previous_key_files == (
        str(Path("keys/old.pub").absolute()),
        "/k/older.pub",
    )
    none = child_environment(LogSettings(1.0, Path("/c")), "postgresql://db/jw", 1, {})
    assert "JW_LOG_PREVIOUS_KEY_FILES" not in none
    assert child_settings(none).previous_key_files == ()


def test_a_file_name_with_a_nul_is_a_configuration_error(tmp_path: Path) -> None:
    """A TOML string may hold U+0000; open() refuses it with ValueError, which must
    stop the start as a configuration error naming the setting, not a traceback."""
    key, _, _ = keys(tmp_path)
    path = config(tmp_path, key, '["old\\u0000.pub"]')
    with pytest.raises(ConfigError, match=r"log_previous_key_files.*holds no NUL character"):
        check_startup(load_settings(path, {}))
