"""Every key the provider loader reads is in the TOML reference the README points to.

The README calls the docstring of `shared/providers/description.py` "the full
key reference"; a key the loader accepts but the reference leaves out is one a
new user can only find in the source (`result.empty_without_url`,
`[result.failed]`, the webhooks' `challenge`, `events` and `allowed_origins`
were). The keys are found two ways, since neither alone sees them all: in the
source, every string literal handed to a parameter named `key` (or `…_key`)
of a function of `config.py`, the `_Table` readers included; and by loading
every preset and shipped configuration with the readers watched (keys built
at run time, `counts_{kind}`, an AWS signature's `region`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from shared.providers import config, description, load_preset, load_providers, preset_names

ROOT = Path(__file__).resolve().parents[2]
CONFIG_SOURCE = Path(config.__file__)
SHIPPED = (
    ROOT / "deploy" / "config.example.toml",
    ROOT / "examples" / "acme_exports" / "provider.toml",
)


def reference() -> str:
    doc = description.__doc__
    assert doc and "TOML reference" in doc
    return doc


def documented(key: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


def keys_in_source(source: str) -> set[str]:
    """String literals given to a `key`/`…_key` parameter of a function the source defines."""
    tree = ast.parse(source)
    params: dict[str, list[list[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names = [arg.arg for arg in node.args.args]
            params.setdefault(node.name, []).append(names[1:] if names[:1] == ["self"] else names)
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        for names in params.get(callee or "", []):
            for name, arg in zip(names, node.args, strict=False):
                if (
                    (name == "key" or name.endswith("_key"))
                    and isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                ):
                    found.add(arg.value.rsplit(".", 1)[-1])  # "create.x" names x
    return found


class EveryVariable(Mapping[str, str]):
    """An environment that sets every variable a description names (a preset's
    API key, its webhook secret), to one value each kind of secret accepts."""

    def __getitem__(self, name: str) -> str:
        return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __contains__(self, name: object) -> bool:
        return True


@pytest.fixture
def keys_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    seen: set[str] = set()
    raw, has = config._Table.raw, config._Table.has

    def watched(reader: Any) -> Any:
        def read(table: config._Table, key: str) -> Any:
            if table.rel[-1:] != ("also",):  # [auth.also.<Header>]: header names
                seen.add(key)
            return reader(table, key)

        return read

    monkeypatch.setattr(config._Table, "raw", watched(raw))
    monkeypatch.setattr(config._Table, "has", watched(has))
    yield seen


def test_the_source_scan_finds_a_key_in_each_form() -> None:
    source = (
        "class _Table:\n"
        "    def opt_str(self, key): ...\n"
        "def _secret(table, env_key, file_key, optional): ...\n"
        "def f(table):\n"
        '    table.opt_str("path")\n'
        '    _secret(table, "secret_env", "secret_file", False)\n'
        '    table.error("create.job_id")\n'
        '    print("not a key")\n'
    )
    assert keys_in_source(source) == {"path", "secret_env", "secret_file"}


def test_every_key_in_the_loaders_source_is_in_the_reference() -> None:
    keys = keys_in_source(CONFIG_SOURCE.read_text("utf-8"))
    assert {"base_url", "idempotency", "tolerance_seconds", "request_timeout"} <= keys
    assert sorted(key for key in keys if not documented(key, reference())) == []


def test_every_key_a_shipped_description_reads_is_in_the_reference(keys_read: set[str]) -> None:
    env = EveryVariable()
    for name in preset_names():
        load_preset(name, env)
    for path in SHIPPED:
        load_providers(path, env, credentials=False)
    assert {"counts_total", "region", "service"} <= keys_read
    assert sorted(key for key in keys_read if not documented(key, reference())) == []
