"""The JSON log line: one valid ASCII object per record, secrets' keys dropped.

The formatter takes orjson's fast path for ordinary lines; these tests pin
what must hold whichever encoder wrote the line.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from shared import logs
from shared.logs import JsonFormatter


def _record(ctx: Any = None, msg: str = "webhook stored") -> logging.LogRecord:
    record = logging.LogRecord(
        "receiver.webhooks.endpoint", logging.INFO, __file__, 1, msg, None, None
    )
    if ctx is not None:
        record.ctx = ctx
    return record


def _line(ctx: Any = None, msg: str = "webhook stored") -> tuple[str, dict[str, Any]]:
    text = JsonFormatter().format(_record(ctx, msg))
    assert "\n" not in text and text.isascii()
    document: dict[str, Any] = json.loads(text)
    return text, document


def test_an_ordinary_line_carries_its_context_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow: list[object] = []
    real = json.dumps

    def counted(*args: Any, **kwargs: Any) -> str:
        slow.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(json, "dumps", counted)
    ctx = {"provider": "sim", "event_id": "e_1", "operation_id": None, "batch": 3, "ok": True}
    _, doc = _line(ctx)
    assert slow == []  # orjson wrote it
    assert {k: doc[k] for k in ctx} == ctx
    assert (doc["level"], doc["logger"], doc["msg"]) == (
        "info",
        "receiver.webhooks.endpoint",
        "webhook stored",
    )


@pytest.mark.parametrize(
    "value",
    [
        "caf\u00e9 \u2603",  # non-ASCII: escaped, never raw
        "line\u2028separator\u202eright-to-left",  # what a log viewer could act on
        "lone \ud800 surrogate",  # orjson refuses it
        2**70,  # orjson refuses integers past 64 bits
    ],
)
def test_lines_orjson_would_write_otherwise_stay_ascii_and_exact(value: Any) -> None:
    text, doc = _line({"note": value})
    assert doc["note"] == value
    assert "\u2028" not in text and "\u202e" not in text


def test_keys_that_name_a_secret_are_dropped_in_any_case() -> None:
    ctx = {"Webhook-Signature": "v1,abc", "api_key": "k", "DB_PASSWORD": "p", "provider": "sim"}
    text, doc = _line(ctx)
    assert doc["provider"] == "sim"
    assert not {"Webhook-Signature", "api_key", "DB_PASSWORD"} & set(doc)
    assert "abc" not in text


def test_values_json_cannot_hold_are_written_as_text() -> None:
    when = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    _, doc = _line({"at": when, "kind": object})
    assert (doc["at"], doc["kind"]) == (str(when), str(object))


def test_a_dataclass_is_written_as_its_repr_which_may_hide_a_secret() -> None:
    @dataclasses.dataclass
    class Credentials:
        user: str
        password: str = dataclasses.field(repr=False)

    text, doc = _line({"who": Credentials("ops", "hunter2")})
    assert doc["who"].endswith("Credentials(user='ops')")
    assert "hunter2" not in text


@pytest.mark.parametrize("text", ["plain", "caf\u00e9"])  # either encoder
def test_nan_and_infinities_are_written_as_null(text: str) -> None:
    line, doc = _line({"ratio": math.nan, "limits": [math.inf, -math.inf, 1.5], "t": text})
    assert (doc["ratio"], doc["limits"], doc["t"]) == (None, [None, None, 1.5], text)
    assert "NaN" not in line and "Infinity" not in line


def test_an_exception_is_named_by_its_type_only() -> None:
    try:
        raise ValueError("secret detail")
    except ValueError:
        record = _record({"provider": "sim"})
        record.exc_info = sys.exc_info()
    text = JsonFormatter().format(record)
    assert json.loads(text)["exc_type"] == "ValueError"
    assert "secret detail" not in text


def test_configure_gathers_only_what_the_line_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, name, getattr(logging, name))  # restored afterwards
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    logs.configure("info")
    [handler] = root.handlers
    seen: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "emit", seen.append)
    logging.getLogger("receiver.webhooks.endpoint").info("webhook stored", extra={"ctx": {}})
    [record] = seen
    # no walk up the stack for the caller, no thread or process lookups
    assert (record.lineno, record.threadName, record.processName) == (0, None, None)
    assert json.loads(JsonFormatter().format(record))["msg"] == "webhook stored"


def test_each_lines_stamp_is_the_datetime_of_its_record() -> None:
    """The stamp's date and time of day are made once per second (`_Stamps`): every
    line still reads as `datetime` writes its instant, milliseconds truncated after
    rounding to microseconds, across seconds, rollovers and out-of-order records."""
    import random
    from datetime import UTC, datetime

    from shared.logs import _Stamps

    stamp, rng = _Stamps(), random.Random(7)
    instants = [rng.uniform(0, 4e9) for _ in range(20_000)]
    instants += [
        second + micro / 1e6
        for second in (0, 1_700_000_000)
        for micro in (0, 499.5, 999_999, 999_999.4, 999_999.5, 999_999.6)
    ]
    instants += [1_700_000_000.5, 1_699_999_999.5, 1_700_000_000.25]  # back and forth
    for instant in instants:
        expected = datetime.fromtimestamp(instant, UTC).isoformat(timespec="milliseconds")
        assert stamp(instant) == expected, instant
