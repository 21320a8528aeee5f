"""The README's state diagram is the state machine, not a drawing of an old one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.ledger.states import EDGES

README = Path(__file__).resolve().parents[2] / "README.md"


def mermaid_block(text: str) -> str:
    """The mermaid block: from its opening fence to a closing fence on a line of its own.

    A fence glued to the end of a line does not close a block in Markdown (it
    would swallow the rest of the README), so it must not close one here.
    """
    lines = text.splitlines()
    start = lines.index("```mermaid")
    end = lines.index("```", start + 1)
    inside = lines[start + 1 : end]
    assert not any("```" in line for line in inside), "a fence inside the diagram"
    return "\n".join(inside)


def test_the_diagram_block_needs_a_closing_fence_of_its_own() -> None:
    broken = "x\n```mermaid\nstateDiagram-v2\n    a --> [*]```\n## Next\n"
    with pytest.raises((ValueError, AssertionError)):
        mermaid_block(broken)


def test_every_fence_in_the_readme_is_closed() -> None:
    fences = [line for line in README.read_text("utf-8").splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0


def test_readme_mermaid_diagram_lists_exactly_the_allowed_edges() -> None:
    block = mermaid_block(README.read_text("utf-8"))
    drawn = {
        (m.group(1), m.group(2), m.group(3) or "")
        for m in re.finditer(r"^\s+(\w+) --> (\w+)(?: : ([\w/]+))?$", block, re.MULTILINE)
        if "[*]" not in m.group(0)
    }
    expected = {
        (a.value, b.value, "/".join(sorted(e.value for e in ev))) for (a, b), ev in EDGES.items()
    }
    assert drawn == expected
