"""load_settings reads its file once: the providers are parsed from the document
it has already read. Before, load_providers opened and parsed the same file a
second time (and could see another version of it than the settings did)."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest

from shared.settings import load_settings


def test_the_config_file_is_read_and_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text('[jobwarden]\nclaim_batch = 5\n\n[providers.sim]\npreset = "simulator"\n')
    real_open = builtins.open

    def no_second_read(file: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | Path) and Path(file) == config:
            raise AssertionError("the config file was opened a second time")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_second_read)
    settings = load_settings(config, env={}, credentials=False)
    assert settings.claim_batch == 5
    assert list(settings.providers) == ["sim"]
