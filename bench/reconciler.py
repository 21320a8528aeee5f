"""Reconciler benchmarks: status-read throughput, scheduling lag, claim query, detection.

    .venv/bin/python -m bench.reconciler            # full run, about 4 minutes
    .venv/bin/python -m bench.reconciler --quick    # about a minute, smaller sizes
    .venv/bin/python -m bench.reconciler --only claim,detection

Each section is a module of its own and runs alone with the same flag
(`python -m bench.throughput [--quick]`, likewise bench.lag, bench.claim,
bench.detection). Each table is headed by that module's command. This
command runs several of them in one go, always in the order below, and is
kept so that the command line documented so far still works.

Every figure with a target is printed beside a baseline measured in the same
run on the same machine (a bare httpx loop, the naive wrapper of seed 003),
so the ratios hold wherever it runs. The simulated provider always runs in
its own process (`jobwarden simulator`), so its CPU is not charged to the
reconciler. Each section uses its own throw-away database (bench/harness.py).
Not part of the test suite: nothing here asserts, it measures and says which
targets are missed.

Sections:
1. throughput  bench/throughput.py: status reads/s of `Reconciler.run_once` vs. a
               bare GET loop on the reconciler's own HTTP path (a lane per task),
               database round trips per poll.
2. lag         bench/lag.py: first read minus next_poll_at under the real daemon.
3. claim       bench/claim.py: `claim_due` at 10k, 100k and 1M rows, rolled back.
4. detection   bench/detection.py: provider calls per job and completion-detection
               lag with webhooks, polling only, and the naive wrapper.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from bench import claim, detection, lag, throughput
from bench.harness import Benchmark, run_benchmarks

# Section name -> (its module, its benchmark), in the order they run.
SECTIONS: dict[str, tuple[str, Benchmark]] = {
    "throughput": (throughput.MODULE, throughput.run),
    "lag": (lag.MODULE, lag.run),
    "claim": (claim.MODULE, claim.run),
    "detection": (detection.MODULE, detection.run),
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reconciler",
        description="Reconciler benchmarks (throughput, scheduling lag, claim query, detection).",
    )
    parser.add_argument("--quick", action="store_true", help="about a minute, smaller sizes")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {', '.join(SECTIONS)})",
    )
    args = parser.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = [benchmark for name, benchmark in SECTIONS.items() if name in args.sections]
    return run_benchmarks(chosen, args.quick)


if __name__ == "__main__":
    sys.exit(main())
