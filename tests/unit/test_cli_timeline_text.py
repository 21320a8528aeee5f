"""`jobwarden show` says how each escalation ended: open, by a decision, or by a later move."""

from __future__ import annotations

from shared.cli.operator import _timeline_text

BASE = {"state": "cancellation_unconfirmed", "reason": "cancel deadline passed"}


def test_an_escalation_is_open_resolved_by_a_decision_or_settled_by_a_move() -> None:
    assert _timeline_text("escalation", BASE)[0].endswith("(open)")
    decided = {**BASE, "resolved_at": "2026-12-04T12:00:00Z", "decision_id": 7}
    assert _timeline_text("escalation", decided)[0].endswith("(resolved, decision #7)")
    settled = {**BASE, "resolved_at": "2026-12-04T12:00:00Z", "decision_id": None}
    text = _timeline_text("escalation", settled)[0]
    assert "decision #None" not in text and "the operation moved on" in text


CALL = {
    "call_kind": "status",
    "attempt": 4,
    "method": "GET",
    "url": "https://api.example/v1/jobs/1",
    "status_code": 404,
    "trace_id": "t",
}


def test_a_call_answered_in_0_ms_says_0_not_unknown() -> None:
    """A loopback answer takes 0 ms; only a call with no duration on record is '?'."""
    assert _timeline_text("call", {**CALL, "duration_ms": 0})[0].endswith("→ 404 (0 ms)")
    assert _timeline_text("call", {**CALL, "duration_ms": None})[0].endswith("→ 404 (? ms)")
