"""One gate for every write: only shared/ledger/ writes operations and evidence.

Every named query that writes (INSERT, UPDATE, DELETE, or a call to a
function that does) may be named only by code under shared/ledger/ — the
migration queries only by shared/db/migrate.py. No product module outside
the ledger spells a write statement of its own. Benchmarks and tests may
fabricate rows directly (they go through the same triggers); they are
checked for named write queries only.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from shared.db.queries import all_queries, sql_root

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("shared", "receiver", "reconciler")
ELSEWHERE = ("bench", "tests")
LEDGER = ROOT / "shared" / "ledger"
MIGRATE = ROOT / "shared" / "db" / "migrate.py"

_COMMENT = re.compile(r"--[^\n]*")
_WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE\s+[\w.]+|DELETE\s+FROM|TRUNCATE|MERGE\s+INTO|COPY\s+[\w.]+)\b",
    re.I,
)
# CREATE [OR REPLACE] FUNCTION|PROCEDURE [schema.]name (...) ... $tag$ body $tag$
_FUNCTION = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+(?:\w+\.)?(\w+)\s*\("
    r".*?(\$\w*\$)(.*?)\2",
    re.I | re.S,
)
# A write spelled out in a string: anywhere in it, aliased, schema-qualified or in a WITH.
_RAW_WRITE = re.compile(
    r"\b(INSERT\s+INTO|UPDATE\s+[\w.]+(?:\s+(?:AS\s+)?\w+)?\s+SET|DELETE\s+FROM|TRUNCATE"
    r"|MERGE\s+INTO)\b",
    re.I,
)
# asyncpg's bulk writers need no SQL string at all.
_BULK_WRITERS = frozenset({"copy_records_to_table", "copy_to_table", "copy_from_query"})


def _calls(names: set[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:\w+\.)?(" + "|".join(sorted(names)) + r")\s*\(", re.I)


def mutating_functions() -> set[str]:
    """SQL functions whose body writes, directly or by calling one that does."""
    bodies: dict[str, str] = {}
    for path in sorted((sql_root() / "migrations").glob("*.sql")):
        for match in _FUNCTION.finditer(path.read_text("utf-8")):
            bodies[match.group(1).lower()] = _COMMENT.sub("", match.group(3))
    names = {name for name, body in bodies.items() if _WRITE.search(body)}
    while True:  # a function calling a writer writes too
        calls = _calls(names)
        more = {n for n, body in bodies.items() if n not in names and calls.search(body)}
        if not more:
            return names
        names |= more


def write_queries() -> set[str]:
    calls = _calls(mutating_functions())
    writes = set()
    for name, sql in all_queries().items():
        body = _COMMENT.sub("", sql)
        if _WRITE.search(body) or calls.search(body):
            writes.add(name)
    return writes


def python_files(*tops: str) -> Iterator[Path]:
    for top in tops:
        yield from sorted((ROOT / top).rglob("*.py"))


def string_constants(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


_RUNS = frozenset({"fetch", "fetchrow", "fetchval", "execute", "executemany"})


def _query_name(node: ast.AST) -> str | None:
    """The name in a `q("name")` call, if `node` is one."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "q"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def named_queries(path: Path, *, executed_only: bool) -> Iterator[tuple[int, str]]:
    """`q("name")` references in `path`; with `executed_only`, those sent to the database."""
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if executed_only:
            runs = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _RUNS
                and node.args
            )
            name = _query_name(node.args[0]) if runs else None  # type: ignore[attr-defined]
        else:
            name = _query_name(node)
        if name is not None:
            yield node.lineno, name


def allowed_to_name(path: Path, query: str) -> bool:
    if query.startswith("migrations_"):
        return path == MIGRATE
    return LEDGER in path.parents


def test_the_classifier_finds_the_known_writes_and_reads() -> None:
    writes = write_queries()
    assert {"transition", "claim_due", "record_polls", "receiver_store_events"} <= writes
    assert {"request_wake", "webhook_purge_unattached", "api_authenticate"} <= writes
    assert {"load_operation", "api_operation", "operator_inbox", "chain_heads"}.isdisjoint(writes)
    assert {"jw_request_wake", "jw_request_wakes", "jw_purge_webhook_events"} <= (
        mutating_functions()
    )


def test_only_the_ledger_names_a_write_query() -> None:
    writes = write_queries()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in python_files(*PRODUCT)
        for line, name in named_queries(path, executed_only=False)
        if name in writes and not allowed_to_name(path, name)
    ]
    assert offenders == [], "write queries named outside shared/ledger/:\n" + "\n".join(offenders)


def test_benchmarks_and_tests_run_named_writes_only_through_the_ledger() -> None:
    writes = write_queries()
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in python_files(*ELSEWHERE)
        for line, name in named_queries(path, executed_only=True)
        if name in writes
    ]
    assert offenders == [], "write queries run outside the ledger:\n" + "\n".join(offenders)


def outside_the_ledger(*tops: str) -> Iterator[Path]:
    for path in python_files(*tops):
        if LEDGER not in path.parents and path != MIGRATE:
            yield path


def test_no_product_module_outside_the_ledger_spells_a_write() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in outside_the_ledger(*PRODUCT)
        for line, value in string_constants(path)
        if _RAW_WRITE.search(value)
    ]
    assert offenders == [], "raw write SQL outside shared/ledger/:\n" + "\n".join(offenders)


def test_no_product_module_outside_the_ledger_bulk_writes_or_names_queries_indirectly() -> None:
    """No COPY-style bulk writer, and no q(variable): every query named in plain sight."""
    offenders = []
    for path in outside_the_ledger(*PRODUCT):
        if path.parent == ROOT / "shared" / "db":
            continue  # the loader itself
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _BULK_WRITERS:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {func.attr}")
            named = isinstance(func, ast.Name) and func.id in {"q", "all_queries"}
            literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
            if named and (func.id == "all_queries" or not literal):  # type: ignore[union-attr]
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: query by variable")
    assert offenders == []


def test_the_patterns_catch_the_forms_a_write_takes() -> None:
    for sql in (
        "UPDATE operations o SET state = 'x'",
        "update public.operations set x = 1",
        "WITH t AS (SELECT 1) UPDATE operations AS o SET x = 1 FROM t",
        "  -- name\nDELETE FROM history",
        "INSERT INTO provider_calls VALUES (1)",
    ):
        assert _RAW_WRITE.search(sql), sql
    assert not _RAW_WRITE.search("SELECT * FROM operations WHERE state = 'update'")
    body = "CREATE FUNCTION public.a() RETURNS void LANGUAGE sql AS $fn$ SELECT b() $fn$;"
    assert _FUNCTION.search(body) and _FUNCTION.search(body).group(1) == "a"  # type: ignore[union-attr]


def test_every_named_write_is_used_by_the_ledger() -> None:
    named = {
        value
        for path in python_files("shared")
        if LEDGER in path.parents
        for _, value in string_constants(path)
    }
    unused = sorted(q for q in write_queries() if q not in named and not q.startswith("migr"))
    assert unused == [], f"write queries no ledger function runs: {unused}"
