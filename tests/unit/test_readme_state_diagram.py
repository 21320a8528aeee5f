"""The README's state diagram is the state machine, not a drawing of an old one."""

from __future__ import annotations

import re
from pathlib import Path

from shared.ledger.states import EDGES

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_mermaid_diagram_lists_exactly_the_allowed_edges() -> None:
    text = README.read_text("utf-8")
    block = text.split("```mermaid", 1)[1].split("```", 1)[0]
    drawn = {
        (m.group(1), m.group(2), m.group(3) or "")
        for m in re.finditer(r"^\s+(\w+) --> (\w+)(?: : ([\w/]+))?$", block, re.MULTILINE)
        if "[*]" not in m.group(0)
    }
    expected = {
        (a.value, b.value, "/".join(sorted(e.value for e in ev))) for (a, b), ev in EDGES.items()
    }
    assert drawn == expected
