"""The tests the README cites exist, under the names it gives.

A claim cited as `test_file.py::test_name` is one a reader checks by opening
that test; one renamed or moved leaves the claim unbacked. `…::test_name` (or
`::test_name`) names a test of the file last named before it, as the
README's tables write a run of cases of one file. The Figures section is
left out: its benchmark figures are kept apart (docs/figures-history.md).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CITATION = re.compile(r"(?<![\w/])(test_\w+\.py)?(?:…)?::(test_\w+)")
FILE = re.compile(r"(?<![\w/])(test_\w+\.py)")


def cited_text() -> str:
    text = README.read_text("utf-8")
    start = text.index("\n## Figures\n")
    end = text.index("\n## ", start + 1)
    return text[:start] + text[end:]


def citations(text: str) -> list[tuple[str | None, str]]:
    """(file, test) for each citation; the file a bare `…::` falls back on is the
    one last named before it."""
    found: list[tuple[str | None, str]] = []
    last: str | None = None
    position = 0
    for match in CITATION.finditer(text):
        for named in FILE.finditer(text, position, match.start()):
            last = named.group(1)
        position = match.end()
        last = match.group(1) or last
        found.append((last, match.group(2)))
    return found


def test_a_bare_citation_takes_the_file_named_before_it() -> None:
    text = "`test_a.py::test_x`, `…::test_y`; then `test_b.py` (cases) and `::test_z`"
    assert citations(text) == [
        ("test_a.py", "test_x"),
        ("test_a.py", "test_y"),
        ("test_b.py", "test_z"),
    ]


def test_every_cited_test_exists_in_the_file_cited() -> None:
    sources = {path.name: path.read_text("utf-8") for path in (ROOT / "tests").rglob("test_*.py")}
    missing = [
        f"{name}::{test}"
        for name, test in citations(cited_text())
        if name is None
        or not re.search(rf"^\s*(?:async )?def {test}\(", sources.get(name, ""), re.MULTILINE)
    ]
    assert missing == []


def test_every_cited_test_file_exists() -> None:
    files = {path.name for path in (ROOT / "tests").rglob("test_*.py")}
    assert sorted(set(FILE.findall(cited_text())) - files) == []
