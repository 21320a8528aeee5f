"""What the tracing hooks cost: off, nanoseconds per call; on, microseconds per read.

    .venv/bin/python -m bench.tracing_hooks            # 2,000,000 calls per hook, best of 5
    .venv/bin/python -m bench.tracing_hooks --quick    # 200,000 calls, best of 3

Every hook (shared/telemetry/spans.py) is called where the daemons call it,
with tracing off (no OTLP endpoint: `spans.TRACER` is None), against a
baseline measured in the same run: no hook (timeit calling a function that
does nothing, the loop's own cost). The figure is the hook's extra cost over
that baseline in ns, and the ratio of the two. `send()`'s
extra coroutine frame (calls.send awaiting calls._send) is timed against
awaiting _send's body directly. Best of N repeats, as timeit advises: the
minimum is the least disturbed by the rest of the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.harness import command_line, print_table
from shared.telemetry import spans

MODULE = "bench.tracing_hooks"
CALLS, QUICK_CALLS = 2_000_000, 200_000
REPEATS, QUICK_REPEATS = 5, 3


@dataclass(frozen=True)
class _Req:
    method: str = "GET"
    url: str = "https://api.example.com/v1/jobs/job_1"
    action: str = "status"


@dataclass(frozen=True)
class _Op:
    operation_id: str = "op_01M8VB9KY3437HB9SR8BP0BPG0"
    provider: str = "sim"
    trace_id: str = "4bf92f3577b34da6a3ce929d0e0e4736"


@dataclass(frozen=True)
class _Outcome:
    status: str = "stored"
    operation_id: str | None = None
    trace_id: str | None = None


def _nothing() -> None:
    return None


def _with_step() -> None:
    with spans.step("step_poll", _OP):
        pass


_REQ, _OP, _OUTCOME = _Req(), _Op(), _Outcome()

# (hook, what it stands for, the hook call, the baseline call)
HOOKS: list[tuple[str, str, Callable[[], Any], Callable[[], Any]]] = [
    (
        "client_span()",
        "per provider call",
        lambda: spans.client_span(_REQ, _OP.trace_id),
        _nothing,
    ),
    ("with step(...)", "per reconciler step", _with_step, _nothing),
    (
        "transition()",
        "per state change",
        lambda: spans.transition("observing", "result_collecting", "the provider says done"),
        _nothing,
    ),
    (
        "webhook_outcome()",
        "per stored delivery",
        lambda: spans.webhook_outcome("sim", _OUTCOME),
        _nothing,
    ),
    ("enabled()", "per receiver move (cancel, decision)", spans.enabled, _nothing),
]


async def _inner() -> int:
    return 1


async def _outer() -> int:
    return await _inner()


def _frames(calls: int, repeats: int) -> tuple[float, float]:
    """ns per await of a coroutine awaiting another, and of the inner one alone."""

    async def nested() -> None:
        for _ in range(calls):
            await _outer()

    async def direct() -> None:
        for _ in range(calls):
            await _inner()

    def best(fn: Callable[[], Any]) -> float:
        return min(timeit.repeat(lambda: asyncio.run(fn()), number=1, repeat=repeats))

    return best(nested) / calls * 1e9, best(direct) / calls * 1e9


def _one_read() -> None:
    """What one status read does with spans: its step, its CLIENT span, the traceparent."""
    with spans.step("step_poll", _OP):
        span = spans.client_span(_REQ, _OP.trace_id)
        if span is not None:
            with spans.ending(span):
                spans.traceparent_of(span)
                spans.end_client_span(span, 200, None)


def traced_read_us(calls: int, repeats: int) -> tuple[float, float]:
    """µs per status read's spans with tracing on (the SDK as the daemons configure it,
    batch processor included, the export dropped) and off, in the same run."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from shared.telemetry.sdk import OperationIds

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    off = min(timeit.repeat(_one_read, number=calls, repeat=repeats)) / calls * 1e6
    provider = TracerProvider(id_generator=OperationIds(), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    spans.install(provider.get_tracer(MODULE))
    try:
        on = min(timeit.repeat(_one_read, number=calls, repeat=repeats)) / calls * 1e6
    finally:
        spans.install(None)
        provider.shutdown()
    return on, off


def measure(calls: int, repeats: int) -> list[list[str]]:
    if spans.TRACER is not None:
        raise SystemExit("tracing is on in this process; these figures are for tracing off")
    rows = []
    for name, per, hook, base in HOOKS:
        t_hook = min(timeit.repeat(hook, number=calls, repeat=repeats)) / calls * 1e9
        t_base = min(timeit.repeat(base, number=calls, repeat=repeats)) / calls * 1e9
        rows.append(_row(name, per, t_hook, t_base))
    nested, direct = _frames(calls // 4, repeats)
    rows.append(_row("send()'s extra coroutine frame", "per provider call", nested, direct))
    return rows


def _row(name: str, per: str, hook_ns: float, base_ns: float) -> list[str]:
    return [
        name,
        per,
        f"{hook_ns:.0f}",
        f"{base_ns:.0f}",
        f"{hook_ns - base_ns:+.0f}",
        f"{hook_ns / base_ns:.2f}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer calls and repeats")
    args = parser.parse_args(argv)
    calls = QUICK_CALLS if args.quick else CALLS
    repeats = QUICK_REPEATS if args.quick else REPEATS
    print_table(
        f"tracing hooks, tracing off ({calls:,} calls, best of {repeats})",
        command_line(MODULE, ["--quick"] if args.quick else []),
        ["hook", "called", "ns/call", "baseline ns", "extra ns", "ratio"],
        measure(calls, repeats),
    )
    print("baseline: no hook (timeit calling a function that does nothing), same run")
    on, off = traced_read_us(calls // 40, repeats)
    print(
        f"\none status read's spans (a step, a CLIENT span, its traceparent): "
        f"tracing on {on:.1f} us, off {off:.2f} us, same run (export dropped: the OTLP "
        "encoding and the HTTP post happen on the batch thread and are not counted)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
