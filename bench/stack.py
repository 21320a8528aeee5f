"""Which HTTP parser and event loop each side of a comparison ran on, and the check.

A ratio against a baseline means something only when both sides ran on the
same stack: issue 13 found the receiver's "0.56" held against a baseline
served by h11, the slow parser, and fell to 0.28 against httptools. So every
benchmark prints each side's stack and refuses to print a ratio when they
differ.

Servers in child processes report their stack through the startup line of
shared/serve.py (`serving HTTP with …`): `record_stack` writes it to a file
the parent reads, so what is compared is what uvicorn actually loaded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from shared.serve import Stack, loop_name

# What an in-process httpx client parses HTTP with (httpcore's HTTP/1.1 is h11).
HTTPX_CLIENT = "h11 (httpx client)"


class UnlikeStacks(SystemExit):
    """Two sides of a comparison ran on different stacks: no ratio is printed.

    A SystemExit, so the benchmark's command exits non-zero with this message
    and no traceback.
    """


def describe(sides: Mapping[str, Stack]) -> str:
    """One line naming each side's stack, for the report."""
    return "stack: " + "; ".join(f"{name} = {stack}" for name, stack in sides.items())


def unlike(sides: Mapping[str, Stack]) -> str | None:
    """Why the sides may not be compared (they ran on different stacks), or None."""
    if len(set(sides.values())) <= 1:
        return None
    return (
        "refusing to compare unlike stacks (" + describe(sides).removeprefix("stack: ") + "): "
        "a ratio means something only when both sides use the same HTTP parser and event "
        "loop; install uvicorn[standard] (httptools, uvloop) and run again"
    )


def require_same_stack(sides: Mapping[str, Stack]) -> None:
    """Raise `UnlikeStacks` if the sides ran on different stacks."""
    reason = unlike(sides)
    if reason is not None:
        raise UnlikeStacks(reason)


def client_stack() -> Stack:
    """The stack of an httpx loop running in this event loop (in-process sides)."""
    return Stack(HTTPX_CLIENT, loop_name())


class _StackFile(logging.Handler):
    """Writes the stack of the `serving HTTP` startup line to a file, as JSON."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.INFO)
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        ctx = getattr(record, "ctx", None)
        if isinstance(ctx, dict) and "http" in ctx and "loop" in ctx:
            self.path.write_text(json.dumps({"http": ctx["http"], "loop": ctx["loop"]}))


def record_stack(path: Path) -> None:
    """In a server's process: write the stack it serves with to `path` once it starts."""
    serving = logging.getLogger("shared.serve")
    serving.setLevel(logging.INFO)
    serving.addHandler(_StackFile(path))


def read_stack(path: Path) -> Stack:
    """The stack a server wrote with `record_stack` (it must have started)."""
    data = json.loads(path.read_text())
    return Stack(str(data["http"]), str(data["loop"]))
