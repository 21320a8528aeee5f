"""The README's configuration reference is the settings the code reads.

Every `[jobwarden]` setting has its row, with the variable the loader reads
and the default the code has; every `JW_*` variable a daemon, the CLI or the
agent client reads is in the reference, so an operator never meets one only
in the source (`JW_API_URL` and `JW_API_TOKEN`, the agent client's, were
named only in the MCP section).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from pathlib import Path

from shared import settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# Variables one of our processes sets for another of its own, never an operator.
INTERNAL = {
    "JW_RECEIVER_WORKER",  # the receiver's supervisor to each worker (receiver/workers.py)
    "JW_SEQUENCER_PARENT",  # the reconciler to its sequencer child (reconciler/sequencer.py)
    "JW_SEQUENCER_HEARTBEAT_FD",  # likewise
    "JW_DEMO_POLLING_ONLY_NO_SECRET",  # the demo's polling-only provider: a secret never set
}
# How the reference writes a setting without a value.
EMPTY = {"—", "(none)", "empty", "[]"}


def reference_section() -> str:
    text = README.read_text("utf-8")
    return text.split("\n## Configuration reference\n", 1)[1].split("\n## ", 1)[0]


def rows() -> dict[str, tuple[str, str]]:
    """setting name → (its env cell, its default), from the `[jobwarden]` table;
    a row naming two settings (`a` / `b`) gives each its half of the default."""
    found: dict[str, tuple[str, str]] = {}
    for line in reference_section().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([a-z_]+)`", cells[0])
        defaults = [d.strip() for d in cells[2].split(" / ")]
        if len(defaults) != len(names):
            defaults = [cells[2]] * len(names)
        for name, default in zip(names, defaults, strict=True):
            found[name] = (cells[1], default.strip("`"))
    return found


def same_default(written: str, value: object) -> bool:
    if value in ("", ()):
        return written in EMPTY
    if isinstance(value, bool | str | Path):
        return written == str(value)
    if isinstance(value, int | float):
        try:
            return float(written) == float(value)
        except ValueError:
            return False
    return False


def variables_read() -> set[str]:
    names: set[str] = set()
    for folder in ("shared", "receiver", "reconciler"):
        for path in (ROOT / folder).rglob("*.py"):
            names |= set(re.findall(r"[\"'](JW_[A-Z0-9_]+)[\"']", path.read_text("utf-8")))
    return names


def test_the_row_reader_splits_a_row_of_two_settings() -> None:
    assert rows()["receiver_host"][1] == "127.0.0.1"
    assert rows()["receiver_port"][1] == "8080"


def test_every_setting_has_a_row_with_its_variable_and_default() -> None:
    table = rows()
    for field in fields(settings.Settings):
        if field.name not in settings._ENV and field.name not in settings._ENV_ONLY:
            continue  # config_path, providers: not settings an operator writes
        assert field.name in table, f"no row for {field.name}"
        env_cell, default = table[field.name]
        variable = settings._ENV.get(field.name) or settings._ENV_ONLY[field.name]
        assert f"`{variable}`" in env_cell, f"{field.name}: its variable is {variable}"
        if field.default is MISSING:
            continue  # computed at start (worker_id: host:pid)
        assert same_default(default, field.default), (
            f"{field.name}: the README says {default!r}, the code {field.default!r}"
        )


def test_every_row_names_a_setting_the_loader_reads() -> None:
    known = set(settings._ENV) | set(settings._ENV_ONLY)
    assert set(rows()) - known == set()


def test_every_variable_read_is_in_the_reference() -> None:
    section = reference_section()
    missing = {name for name in variables_read() - INTERNAL if f"`{name}`" not in section}
    assert missing == set(), f"read by the code, not in the configuration reference: {missing}"


def test_every_internal_variable_is_still_read() -> None:
    assert variables_read() >= INTERNAL


def test_the_units_environment_file_has_every_variable_the_readme_says_it_has() -> None:
    """deploy/systemd/jobwarden.env.example, as the README's operator guide
    describes it: every variable of the reference but the demo's and an
    agent's (the tracing one stands for the other OTEL_* variables)."""
    example = (ROOT / "deploy" / "systemd" / "jobwarden.env.example").read_text("utf-8")
    section = reference_section()
    named = set(re.findall(r"`((?:JW|OTEL|DATABASE|FORWARDED)_[A-Z0-9_]*|DATABASE_URL)`", section))
    expected = {
        name
        for name in named
        if not name.startswith(("JW_DEMO_", "JW_API_"))
        and (not name.startswith("OTEL_") or name == "OTEL_EXPORTER_OTLP_ENDPOINT")
    }
    assert "JW_LEASE_SECONDS" in expected
    assert {name for name in expected if name not in example} == set()
