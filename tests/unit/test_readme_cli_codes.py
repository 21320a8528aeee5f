"""The README's list of `--json` failure codes is the codes the commands give.

A script branches on `code`; one the README leaves out is one its author
never handles (`conflict`, a deadlock or serialization failure, was given
but unlisted). The codes are read from the source, where they are written
as literals, so a new one cannot be added without the README saying so.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# where a command's failure gets its code: the database's problems and the CLI's own
SOURCES = sorted((ROOT / "shared" / "db").glob("*.py")) + sorted(
    (ROOT / "shared" / "cli").glob("*.py")
)


def _literal(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def codes_in_source(source: str) -> set[str]:
    """Codes written as literals: `DatabaseProblem("code", …)`, `code="…"` of a
    `CommandError` or a `Failure`, and the codes `failure_of`/`CommandError` fill in."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", ""))
        if name == "DatabaseProblem" and node.args:
            found.add(_literal(node.args[0]) or "")
        if name == "Failure" and node.args:
            found.add(_literal(node.args[0]) or "")
        for keyword in node.keywords:
            if keyword.arg == "code":
                found.add(_literal(keyword.value) or "")
    # CommandError's defaults: `code or ("usage" if status == USAGE else "refused")`
    for cls in ast.walk(ast.parse(source)):
        if isinstance(cls, ast.ClassDef) and cls.name == "CommandError":
            for node in ast.walk(cls):
                if isinstance(node, ast.IfExp):
                    found.update(filter(None, (_literal(node.body), _literal(node.orelse))))
    return {code for code in found if re.fullmatch(r"[a-z][a-z_]*", code)}


def readme_codes() -> set[str]:
    text = README.read_text("utf-8")
    match = re.search(r"^Codes: (.*?)\.\n", text, re.MULTILINE | re.DOTALL)
    assert match, "the README's operator guide lists the --json failure codes after 'Codes: '"
    return set(re.findall(r"`([a-z_]+)`", match.group(1)))


def test_the_scan_finds_codes_in_each_form() -> None:
    source = (
        'DatabaseProblem("database_busy", "m", "h")\n'
        'CommandError("m", code="not_found")\n'
        'Failure("config_error", "m", "", 2)\n'
        "class CommandError:\n"
        '    code = code or ("usage" if status == USAGE else "refused")\n'
        'elsewhere = "yes" if shown else "no"\n'
    )
    assert codes_in_source(source) == {"database_busy", "not_found", "config_error", "usage"} | {
        "refused"
    }


def test_every_failure_code_a_command_gives_is_in_the_readme() -> None:
    given: set[str] = set()
    for path in SOURCES:
        given |= codes_in_source(path.read_text("utf-8"))
    assert {"no_database", "not_found", "config_error", "usage", "refused"} <= given
    assert given - readme_codes() == set()


def test_every_code_the_readme_lists_is_given() -> None:
    given: set[str] = set()
    for path in SOURCES:
        given |= codes_in_source(path.read_text("utf-8"))
    assert readme_codes() - given == set()
