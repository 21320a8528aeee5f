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
