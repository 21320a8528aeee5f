"""Trace and span ids: the W3C Trace Context forms, never the invalid all-zero id."""

from __future__ import annotations

import random
import re

import pytest

from shared.ids import new_span_id, new_trace_id, trace_id_from_traceparent, traceparent


def test_trace_and_span_ids_have_the_w3c_forms_and_differ() -> None:
    traces = {new_trace_id() for _ in range(1000)}
    spans = {new_span_id() for _ in range(1000)}
    assert len(traces) == 1000 and len(spans) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in traces)
    assert all(re.fullmatch(r"[0-9a-f]{16}", s) for s in spans)


def test_a_generator_drawing_zero_still_gives_a_valid_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "getrandbits", lambda bits: 0)
    trace, span = new_trace_id(), new_span_id()
    assert trace == "0" * 31 + "1" and span == "0" * 15 + "1"
    # the receiver takes such a trace id from a traceparent: zero would be refused
    assert trace_id_from_traceparent(traceparent(trace, span)) == trace
