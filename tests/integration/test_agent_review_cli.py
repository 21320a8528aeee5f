"""The operator CLI shows agent-supplied text; it must never act on it.

Before: an agent that submitted kind "[/]\\x1b[2J\\x1b]8;;http://evil\\x07click"
and client_reference "[bold]x[/bold] \\r\\nFAKE op_01FAKE succeeded" made
`jobwarden list` / `jobwarden show` print raw escape sequences (clear the
screen, a hyperlink) and a forged line. The commands run here against a real
PostgreSQL, as the operator role, and their output is read as a terminal
would get it.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared import ledger
from shared.cli import operator as cli_operator
from shared.ledger import RequestSpec
from tests.integration.test_cli_operator import environment, run

KIND = "[/]\x1b[2J\x1b]8;;http://evil\x07click\u202eexe.txt"
REFERENCE = "[bold]x[/bold] \r\nFAKE op_01FAKE succeeded"
REASON = "stop\x1b[31m\u2028FAKE cancelled\x9b2J"


# The operator CLI as tests/integration/test_cli_operator.py runs it (its autouse
# fixture sets the operator role's database URL and a config in a temporary folder).
__all__ = ["environment"]


async def hostile_operation(db: Any) -> str:
    submitted = await ledger.submit_operation(
        db,
        provider="sim",
        kind=KIND,
        request=RequestSpec("POST", "/v1/jobs", {"n": 1}),
        requested_by="agent:bot",
        client_reference=REFERENCE,
    )
    await ledger.request_cancel(db, submitted.operation_id, requested_by="agent:bot", reason=REASON)
    return submitted.operation_id


def assert_inert(out: str) -> None:
    for control in ("\x1b", "\x07", "\r", "\u202e", "\u2028", "\x9b"):
        assert control not in out, repr(control)
    assert not any(line.lstrip().startswith("FAKE") for line in out.splitlines()), out


@pytest.mark.parametrize("command", ["list", "show"])
async def test_agent_text_is_shown_escaped_never_acted_on(
    db: Any, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    operation_id = await hostile_operation(db)
    argv = ("show", operation_id) if command == "show" else ("list",)
    assert await run(*argv) == 0
    out = capsys.readouterr().out
    assert_inert(out)
    assert "\\x1b[2J" in out  # shown, as an escape
    if command == "show":
        assert "[bold]x[/bold]" in out  # markup shown as written, not applied
        assert "\\x0d\\x0aFAKE op_01FAKE" in out


def test_printable_escapes_controls_and_keeps_text() -> None:
    assert cli_operator.printable("café → ∅ · ok") == "café → ∅ · ok"
    assert cli_operator.printable("a\x1bb\u202ec\x85d") == "a\\x1bb\\u202ec\\x85d"
