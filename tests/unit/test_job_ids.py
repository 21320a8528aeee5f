"""A job id the database cannot hold exactly is refused, never stored altered."""

from __future__ import annotations

from shared.ledger.operations import MAX_JOB_ID_LENGTH
from shared.ledger.operations import unstorable_job_id as _unstorable


def test_an_ordinary_job_id_is_storable() -> None:
    assert _unstorable("batch_abc123") is None
    assert _unstorable("j" * MAX_JOB_ID_LENGTH) is None


def test_empty_too_long_nul_and_surrogate_ids_are_not() -> None:
    assert "0 characters" in (_unstorable("") or "")
    assert f"{MAX_JOB_ID_LENGTH + 1} characters" in (_unstorable("j" * 501) or "")
    assert "NUL" in (_unstorable("job\x00id") or "")
    assert "surrogate" in (_unstorable("job\ud800") or "")
