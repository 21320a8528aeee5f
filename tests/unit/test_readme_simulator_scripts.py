"""The README lists every script the simulator runs, and only those.

A script missing from the list is a failure mode a reader cannot ask for
(`cancellable`, `retry_spawns_duplicate` and `odd_facts` were left out).
"""

from __future__ import annotations

import re
from pathlib import Path

from shared.simulator.scripts import Script

README = Path(__file__).resolve().parents[2] / "README.md"
# the field the list is of, and the params it cites beside the scripts
PARAMS = {"script", "duration", "cancel_delay", "odd"}


def listed_scripts() -> set[str]:
    text = README.read_text("utf-8")
    start = text.index("scriptable per job by the `script` field")
    end = text.index(". It signs", start)
    names = set(re.findall(r"`([a-z0-9_]+)`", text[start:end]))
    return names - PARAMS


def test_every_script_is_listed() -> None:
    assert {s.value for s in Script} - listed_scripts() == set()


def test_every_listed_name_is_a_script() -> None:
    assert listed_scripts() - {s.value for s in Script} == set()
