"""Every numeric setting is range-checked where it is read (file or environment).

Before, `receiver_port = 99999999` and `max_body_bytes = -5` loaded, and
`providers check` called the file valid; the daemons failed later, or a body
limit below zero refused every delivery.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from shared.providers import ConfigError
from shared.settings import _ENV, _RANGES, Settings, load_settings

NUMERIC = [f.name for f in fields(Settings) if str(f.type) in ("int", "float")]


def test_every_numeric_setting_has_a_range_and_its_default_is_in_it() -> None:
    assert sorted(_RANGES) == sorted(NUMERIC)
    defaults = Settings()
    for name, (low, high, _why) in _RANGES.items():
        assert low <= getattr(defaults, name) <= high, name


@pytest.mark.parametrize(
    ("key", "value", "bounds"),
    [
        ("receiver_port", "99999999", "0 and 65535"),
        ("max_body_bytes", "-5", "1 and 1073741824"),
        ("lease_seconds", "0", "1 and 86400"),
        ("claim_batch", "0", "1 and 10000"),
        ("webhook_retention_days", "0", "1 and 3650"),
        ("sweep_interval", "0", "0.001 and 3600"),
    ],
)
def test_a_value_out_of_range_is_refused_from_the_environment(
    key: str, value: str, bounds: str
) -> None:
    var = _ENV[key]
    with pytest.raises(ConfigError) as caught:
        load_settings(None, {var: value})
    assert str(caught.value).startswith(
        f"environment {var}: {key}: {value} is not between {bounds} ("
    )


def test_a_value_out_of_range_is_refused_from_the_file(tmp_path: Path) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text("[jobwarden]\nmax_body_bytes = -5\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config, {})
    assert str(caught.value) == (
        f"{config}: jobwarden: max_body_bytes: -5 is not between 1 and 1073741824 "
        "(bytes of a webhook body)"
    )


def test_the_ends_of_each_range_are_taken() -> None:
    for name, (low, high, _why) in _RANGES.items():
        kind = int if name in ("claim_batch", "max_in_flight", "receiver_port") else None
        for end in (low, high):
            text = str(int(end)) if kind is int or float(end).is_integer() else str(end)
            settings = load_settings(None, {_ENV[name]: text})
            assert getattr(settings, name) == end, name
