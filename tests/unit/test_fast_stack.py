"""The fast stack (httptools, uvloop) is what servers and commands run on, and the
benchmarks refuse to compare sides that ran on different stacks."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import pytest

from bench import receiver as bench_receiver
from bench.harness import WaitMeter
from bench.stack import UnlikeStacks, describe, require_same_stack, unlike
from receiver.metrics import ReceiverMetrics
from shared import serve
from shared.cli import main as cli_main
from shared.serve import Stack

FAST = Stack("httptools", "uvloop")
SLOW = Stack("h11", "asyncio")


async def _app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("never called: the config is only built")


def test_server_config_selects_httptools_and_uvloop() -> None:
    async def build() -> tuple[str, str, Stack]:
        config = serve._config(_app, host="127.0.0.1", port=0, log_level="warning")
        config.load()
        return _parser(config.http), str(config.loop), serve.stack_of(config)

    http, loop, stack = serve.run(build())
    assert (http, loop) == ("httptools", "uvloop")
    assert stack == FAST  # read from the protocol class uvicorn loaded


def _parser(protocol: type) -> str:
    """The uvicorn parser a configured protocol class extends, as it writes through
    shared/segments.py."""
    assert protocol.__name__.startswith("OneSegment")
    module: str = serve._uvicorn_base(protocol).__module__
    return module.rsplit(".", 1)[-1].removesuffix("_impl")


def test_commands_run_on_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """`jobwarden receiver` (here with its handler replaced) gets a uvloop event loop."""
    seen: list[str] = []

    async def fake_receiver(args: object) -> int:
        seen.append(serve.loop_name())
        return 0

    monkeypatch.setattr(cli_main, "cmd_receiver", fake_receiver)
    assert cli_main.main(["receiver"]) == 0
    assert seen == ["uvloop"]


def test_without_uvloop_the_loop_is_asyncio_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # makes `import uvloop` fail
    with caplog.at_level(logging.WARNING, logger="shared.serve"):
        assert serve.loop_factory() is None
    assert "uvloop is not installed" in caplog.text


def test_without_httptools_uvicorn_parses_with_h11_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(serve, "_installed", lambda module: False)

    async def build() -> str:
        return _parser(serve._config(_app, host="127.0.0.1", port=0, log_level="warning").http)

    with caplog.at_level(logging.WARNING, logger="shared.serve"):
        assert serve.run(build()) == "h11"
    assert "httptools is not installed" in caplog.text


def test_like_stacks_compare() -> None:
    sides = {"bare": FAST, "receiver": Stack("httptools", "uvloop")}
    assert unlike(sides) is None
    require_same_stack(sides)  # does not raise
    assert describe(sides) == "stack: bare = httptools on uvloop; receiver = httptools on uvloop"


@pytest.mark.parametrize(
    "other", [SLOW, Stack("h11", "uvloop"), Stack("httptools", "asyncio")], ids=str
)
def test_unlike_stacks_are_refused_with_both_named(other: Stack) -> None:
    with pytest.raises(UnlikeStacks) as refused:
        require_same_stack({"bare": other, "receiver": FAST})
    message = str(refused.value)
    assert message.startswith("refusing to compare unlike stacks")
    assert f"bare = {other}" in message and "receiver = httptools on uvloop" in message
    assert refused.value.code not in (0, None)  # the command exits non-zero


def test_receiver_report_prints_no_ratio_for_unlike_stacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = bench_receiver.LoadResult("r", 1000, 1.0, 1.0, 2.0, 0)
    series = bench_receiver.Series("s", (run,))
    mixed = bench_receiver.MixedResult(
        sent=1, unique_valid=1, duplicates=0, forged=0,
        answers={"stored": 1, "duplicate": 0, "refused": 0, "other": 0},
        stored_rows=1, forged_rows=0, duplicate_count=0, seconds=1.0, answered=1,
    )  # fmt: skip
    workers = bench_receiver.Series("receiver --workers 2: new events", (run,))
    quiet_bare = bench_receiver.Series(
        "b", (bench_receiver.LoadResult("b", 4000, 1.0, 0.2, 0.5, 0),)
    )
    quiet = bench_receiver.Series(bench_receiver.QUIET, (run,))
    runs = [(series, 1000), (series, 1000), (quiet, 1000), (workers, 1000)]
    with pytest.raises(UnlikeStacks):
        bench_receiver.print_report(
            series, series, quiet_bare, runs, mixed, 2, {"bare": SLOW, "receiver": FAST}
        )
    assert "ratio" not in capsys.readouterr().out
    bench_receiver.print_report(
        series, series, quiet_bare, runs, mixed, 2, {"bare": FAST, "receiver": FAST}
    )
    out = capsys.readouterr().out
    # the one-at-a-time row is compared with the bare endpoint under the same load
    [quiet_row] = [line for line in out.splitlines() if line.startswith(bench_receiver.QUIET)]
    assert quiet_row.split()[-6] == "0.25", quiet_row
    assert "stack: bare = httptools on uvloop; receiver = httptools on uvloop" in out
    assert "ratio" in out
    assert "with 2 workers on both sides: 1.00" in out


def test_the_commit_counters_are_read_from_the_receivers_own_exposition() -> None:
    metrics = ReceiverMetrics(["sim"])
    for size, seconds in ((10, 0.002), (30, 0.006)):
        metrics.batch_size.observe(size)
        metrics.commit_seconds.observe(seconds)
    totals = bench_receiver.parse_commit_totals(metrics.exposition().decode())
    assert (totals.batches, totals.events) == (2.0, 40.0)
    assert totals.seconds == pytest.approx(0.008)
    earlier = bench_receiver.CommitTotals(1.0, 10.0, 0.002)
    assert (totals - earlier).events == 30.0


def test_receiver_report_shows_what_bounds_each_row(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = {"server": 1.5, "postgres": 0.2, "wrk": 0.3}
    commits = bench_receiver.CommitTotals(batches=50.0, events=1000.0, seconds=0.2)
    run = bench_receiver.LoadResult("r", 1000, 2.0, 1.0, 2.0, 0, cpu, commits, server_wait=0.2)
    bare_run = bench_receiver.LoadResult("b", 4000, 2.0, 1.0, 2.0, 0, {"server": 1.8})
    series = bench_receiver.Series("receiver: new events, committed", (run,))
    bare = bench_receiver.Series("bare Starlette 204", (bare_run,))
    assert (series.server_busy, series.batch_events, series.batch_ms) == (0.75, 20.0, 4.0)
    assert series.server_waiting == pytest.approx(0.1)
    assert (bare.batch_events, bare.batch_ms) == (None, None)
    mixed = bench_receiver.MixedResult(
        sent=1, unique_valid=1, duplicates=0, forged=0,
        answers={"stored": 1, "duplicate": 0, "refused": 0, "other": 0},
        stored_rows=1, forged_rows=0, duplicate_count=0, seconds=1.0, answered=1,
    )  # fmt: skip
    runs = [(series, 1000), (series, 1000)]
    bench_receiver.print_report(bare, bare, bare, runs, mixed, 2, {"bare": FAST, "receiver": FAST})
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith("receiver: new events")][:1]
    assert line.split()[-4:] == ["0.75", "0.10", "20.0", "4.0"]
    [bare_line] = [x for x in out.splitlines() if x.startswith("bare Starlette 204")]
    assert bare_line.split()[-2:] == ["0.90", "0.00"]  # busy and wait only: no commits


def test_the_wait_meter_sees_a_process_kept_from_its_core() -> None:
    """Two busy processes pinned to one core: each waits while the other runs."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    code = (
        f"import os, sys\nos.sched_setaffinity(0, {{{core}}})\n"
        "sys.stdout.write('pinned\\n')\nsys.stdout.flush()\nwhile True: pass"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as rival:
        try:
            assert rival.stdout is not None and rival.stdout.readline() == "pinned\n"
            os.sched_setaffinity(0, {core})
            meter = WaitMeter(lambda: [os.getpid()])
            meter.start()
            spent = time.process_time() + 0.2
            while time.process_time() < spent:  # 0.2 s of our own CPU, sharing the core
                pass
            waited = meter.stop()
        finally:
            os.sched_setaffinity(0, before)
            rival.kill()
    assert waited > 0.0


def test_receiver_report_sets_the_receiver_against_the_floor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def series(name: str, requests: int) -> bench_receiver.Series:
        return bench_receiver.Series(
            name, (bench_receiver.LoadResult(name, requests, 2.0, 1, 2, 0),)
        )

    receiver = series("receiver: new events, committed", 1000)
    floor_row = series(bench_receiver.FLOOR, 3000)
    bare = series("bare Starlette 204", 4000)
    mixed = bench_receiver.MixedResult(
        sent=1, unique_valid=1, duplicates=0, forged=0,
        answers={"stored": 1, "duplicate": 0, "refused": 0, "other": 0},
        stored_rows=1, forged_rows=0, duplicate_count=0, seconds=1.0, answered=1,
    )  # fmt: skip
    runs = [(receiver, 1000), (receiver, 1000), (floor_row, 3000)]
    bench_receiver.print_report(bare, bare, bare, runs, mixed, 2, {"bare": FAST, "receiver": FAST})
    out = capsys.readouterr().out
    assert "the floor against the bare endpoint: 0.75 (per round: 0.75); " in out
    assert "the receiver against the floor: 0.33" in out


def test_a_row_that_sent_an_event_id_twice_fails_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server that outran its request set got ids it had stored: fewer rows than answers."""
    fresh = bench_receiver.Series("fresh", (bench_receiver.LoadResult("f", 1000, 2.0, 1, 2, 0),))
    wrapped = bench_receiver.Series(
        "wrapped", (bench_receiver.LoadResult("w", 1000, 2.0, 1, 2, 0),)
    )
    assert bench_receiver.all_new([(fresh, 1000), (fresh, 1003)])
    assert not bench_receiver.all_new([(fresh, 1000), (wrapped, 640)])
    assert "FAILED: wrapped: some event ids were sent twice" in capsys.readouterr().out
