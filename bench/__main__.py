"""`make bench`: every benchmark, one after the other, in one command.

    .venv/bin/python -m bench            # full run
    .venv/bin/python -m bench --quick    # smaller sizes, shorter windows

Runs the reconciler benchmarks (bench/throughput.py, lag.py, claim.py and
detection.py, through bench/reconciler.py), the webhook receiver benchmark
(bench/receiver.py) and its two in-process splits: the handler
(bench/receiver_handler.py) and the write (bench/receiver_write.py), and the
evidence log's leaf encoding (bench/leaves.py), each under the command that
reproduces it alone. One that fails is reported and
the others still run; the exit status is then non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="All jobwarden benchmarks."
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter windows")
    args = parser.parse_args(argv)
    passed = ["--quick"] if args.quick else []
    status = 0
    for name in ("reconciler", "receiver", "receiver_handler", "receiver_write", "leaves"):
        print(f"\n$ .venv/bin/python -m bench.{name} {' '.join(passed)}".rstrip())
        status = _run(name, passed) or status
    return status


def _run(name: str, passed: list[str]) -> int:
    """One benchmark's exit status; one that fails (a missing wrk, a server that
    did not start) is reported and the next runs all the same."""
    try:
        return int(importlib.import_module(f"bench.{name}").main(passed))
    except SystemExit as stop:  # the benchmarks' way of saying what is missing
        if stop.code in (0, None):
            return 0
        print(f"bench.{name} stopped: {stop.code}", file=sys.stderr)
        return stop.code if isinstance(stop.code, int) else 1
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
