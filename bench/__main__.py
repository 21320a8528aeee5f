"""`make bench`: every benchmark, one after the other, in one command.

    .venv/bin/python -m bench            # full run
    .venv/bin/python -m bench --quick    # smaller sizes, shorter windows

Runs the reconciler benchmarks (bench/throughput.py, lag.py, claim.py and
detection.py, through bench/reconciler.py), the webhook receiver benchmark
(bench/receiver.py, when present) and its two in-process splits: the handler
(bench/receiver_handler.py) and the write (bench/receiver_write.py). Each
prints its own tables, with the exact command that reproduces it on top.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bench import reconciler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="All jobwarden benchmarks."
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter windows")
    args = parser.parse_args(argv)
    passed = ["--quick"] if args.quick else []
    status = reconciler.main(passed)
    try:
        receivers = [
            importlib.import_module(f"bench.{name}")
            for name in ("receiver", "receiver_handler", "receiver_write")
        ]
    except ImportError:
        print("\n(bench/receiver.py not present: receiver benchmarks skipped)")
        return status
    for module in receivers:  # each runs whatever the one before it said
        print(f"\n$ .venv/bin/python -m {module.__name__} {' '.join(passed)}".rstrip())
        status = int(module.main(passed)) or status
    return status


if __name__ == "__main__":
    sys.exit(main())
