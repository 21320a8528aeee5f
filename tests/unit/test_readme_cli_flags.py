"""Every command and option of `jobwarden` is in the README.

The operator guide lists the commands and says `--help` tells the rest; a
flag named nowhere in the README is one a reader of the guide cannot know
exists (`submit`'s and `list`'s were: `--ref`, `--state`, `--done`…).
Hidden options (`argparse.SUPPRESS`, the receiver supervisor's own) are not
for operators.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from shared.cli.main import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def test_the_walk_reaches_nested_commands() -> None:
    found = {" ".join(path) for path, _ in commands(build_parser())}
    assert {"audit verify", "tokens create", "providers check", "submit"} <= found


def test_every_command_is_in_the_readme() -> None:
    text = README.read_text("utf-8")
    missing = [
        " ".join(path)
        for path, _ in commands(build_parser())
        if path and not re.search(rf"(?<![\w-]){re.escape(path[-1])}(?![\w-])", text)
    ]
    assert missing == []


def test_every_option_is_in_the_readme() -> None:
    text = README.read_text("utf-8")
    missing = sorted(
        f"{' '.join(path) or 'jobwarden'} {option}"
        for path, parser in commands(build_parser())
        for option in options(parser)
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)
    )
    assert missing == []
