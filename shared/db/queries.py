"""Named SQL queries, loaded once from `sql/queries/*.sql`.

SQL lives in `.sql` files so it can be read, reviewed and linted as SQL; Python
refers to a query by name and never concatenates SQL. A file holds blocks that
start with a `-- name: <query_name>` line.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def sql_root() -> Path:
    """The `sql/` folder, whether installed editable or as a wheel."""
    return Path(str(resources.files("sql")))


def parse_named_queries(text: str, source: str) -> dict[str, str]:
    """Split one file into {name: sql}; duplicate or empty queries are errors."""
    queries: dict[str, str] = {}
    matches = list(_HEADER.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip().rstrip(";").strip()
        name = match.group(1)
        if not body:
            raise ValueError(f"{source}: query {name!r} is empty")
        if name in queries:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        queries[name] = body
    return queries


@cache
def all_queries() -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted((sql_root() / "queries").glob("*.sql")):
        for name, body in parse_named_queries(path.read_text("utf-8"), path.name).items():
            if name in queries:
                raise ValueError(f"{path.name}: query {name!r} is also defined in another file")
            queries[name] = body
    return queries


def q(name: str) -> str:
    """The SQL of a named query; KeyError names the missing query."""
    try:
        return all_queries()[name]
    except KeyError:
        raise KeyError(f"no named query {name!r} in sql/queries/") from None
