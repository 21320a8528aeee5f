"""`make bench`: every benchmark, one after the other, in one command.

    .venv/bin/python -m bench            # full run
    .venv/bin/python -m bench --quick    # smaller sizes, shorter windows

Runs the reconciler benchmarks (bench/throughput.py, lag.py, claim.py and
detection.py, through bench/reconciler.py) and, when present, the webhook
receiver benchmark (bench/receiver.py). Each prints its own tables, with the
exact command that reproduces it on top.
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
        receiver = importlib.import_module("bench.receiver")
    except ImportError:
        print("\n(bench/receiver.py not present: receiver benchmark skipped)")
        return status
    print()
    return status or int(receiver.main(passed))


if __name__ == "__main__":
    sys.exit(main())
