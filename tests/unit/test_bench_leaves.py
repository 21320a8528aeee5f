"""bench.leaves compares like with like: the same bytes from both encodings, or no figure."""

from __future__ import annotations

import pytest

from bench import leaves


def test_every_row_it_times_gives_stop_39s_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    leaves.run(rows=20, rounds=1)
    out = capsys.readouterr().out
    assert all(name in out for name in leaves.CASES)


def test_an_encoding_that_differs_gives_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leaves, "leaf_data", lambda kind, row_id, digests: b"other")
    with pytest.raises(SystemExit, match="differs from stop 39's"):
        leaves.run(rows=1, rounds=1)
