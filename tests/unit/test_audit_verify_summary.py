"""The last line of `jobwarden audit verify`: how many problems it found, all of them.

A broken history chain is a problem like a tampered row (exit 1 either way),
but the summary counted only the log's: an operation whose state a database
superuser rewrote without a transition ended `FAILED: 0 problem(s)`, and a
rewritten transition (a broken chain and a tampered leaf) `FAILED: 1`.
"""

from __future__ import annotations

import pytest

from shared.cli.audit import _print
from shared.ledger.audit import Break
from shared.ledger.log_audit import LogReport


def _last_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_a_broken_chain_alone_is_counted(capsys: pytest.CaptureFixture[str]) -> None:
    breaks = [Break("op_1", None, "operation state differs from its last transition")]
    _print(1, breaks, LogReport())
    assert _last_line(capsys) == "FAILED: 1 problem(s)"


def test_chain_breaks_and_log_problems_add_up(capsys: pytest.CaptureFixture[str]) -> None:
    report = LogReport()
    report.problem("history 1: altered (its content does not match its leaf)")
    breaks = [Break("op_1", 1, "row content does not match its hash: altered")]
    _print(1, breaks, report)
    assert _last_line(capsys) == "FAILED: 2 problem(s)"


def test_nothing_found_is_ok(capsys: pytest.CaptureFixture[str]) -> None:
    _print(1, [], LogReport())
    assert _last_line(capsys) == "OK"
