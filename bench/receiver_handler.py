"""CPU per delivery in the receiver's webhook handler, against the floor's handler.

    .venv/bin/python -m bench.receiver_handler            # 20,000 deliveries a side, 5 rounds
    .venv/bin/python -m bench.receiver_handler --quick    # 5,000, 3 rounds

`bench.receiver` measures whole servers under wrk, where one run swings by a
tenth; this isolates the handlers, in one process, on one uvloop event loop, with
no HTTP server, no database and no other process. Both get the same
distinct signed Standard Webhooks deliveries as ASGI calls (a scope, one body
message, the answer's messages collected):

- the floor's handler (`bench.floor.delivery_handler`): read the body, check
  the HMAC and its timestamp, hand (id, body) on, answer 204;
- the receiver's endpoint (`receiver.webhooks.endpoint.WebhookEndpoint`,
  the simulator preset, the receiver's metrics and logging set up as
  `jobwarden receiver` sets them), the same deliveries.

Each hands its event to a writer that settles at once, so what is timed is
the handler's own work. Rounds alternate between the two; the report gives
microseconds per delivery (the fastest round of each, the least disturbed)
and the floor's figure over the receiver's as the ratio. Then, for the
receiver, the two steps the handler delegates, timed alone on the same
deliveries: the signature check (the provider's check the endpoint builds
once, on the view of the raw headers) and the reading of the event from its
parsed body (`parse_parsed_webhook`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.datastructures import Headers, QueryParams
from starlette.types import Message

from bench import floor
from bench.receiver import PROVIDER, SECRET, event_body, signed_headers
from receiver.metrics import ReceiverMetrics
from receiver.webhooks.endpoint import WebhookEndpoint, check_reads, request_check
from receiver.webhooks.ingest import Event, Outcome
from shared import jsonread, logs
from shared.providers import adapter_for, load_preset
from shared.providers.adapter import parse_parsed_webhook
from shared.serve import run as run_loop
from shared.signatures.headers import HeaderView

DELIVERIES = 20_000
ROUNDS = 5
QUICK_DELIVERIES = 5_000
QUICK_ROUNDS = 3

Delivery = tuple[list[tuple[bytes, bytes]], bytes]
Handler = Callable[[dict[str, Any], Any, Any], Any]


class _SettledWriter:
    """The receiver's writer, settling every event at once as new and unmatched."""

    _stored = Outcome(
        status="stored", webhook_event_id=1, operation_id=None, trace_id=None, matched_by=None
    )

    async def submit(self, event: Event) -> Outcome:
        return self._stored


class _NoRefusals:
    def note(self, *args: object) -> None:
        raise AssertionError("a benchmark delivery was refused")


def deliveries(count: int) -> list[Delivery]:
    """Distinct signed deliveries, as an ASGI server hands their headers over."""
    now = int(time.time())
    made = []
    for index in range(count):
        body = event_body(f"job_unknown_{index}", ("running", "succeeded")[index % 2])
        headers = signed_headers(f"handler_{index}", now, body)
        raw = [(name.encode(), value.encode()) for name, value in headers.items()]
        raw += [(b"host", b"127.0.0.1"), (b"content-length", str(len(body)).encode())]
        made.append((raw, body))
    return made


def scope_of(raw: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": f"/webhooks/{PROVIDER}",
        "path_params": {"provider": PROVIDER},
        "headers": raw,
        "query_string": b"",
        "root_path": "",
    }


async def time_handler(handler: Handler, batch: Sequence[Delivery], success: int) -> float:
    """Microseconds per delivery; every answer must be `success`."""
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.perf_counter()
    for raw, body in batch:
        message = {"type": "http.request", "body": body, "more_body": False}

        async def receive(message: Message = message) -> Message:
            return message

        await handler(scope_of(raw), receive, send)
    elapsed = time.perf_counter() - started
    if set(statuses) != {success}:
        raise SystemExit(f"a handler answered {sorted(set(statuses))}, not only {success}")
    return elapsed / len(batch) * 1e6


def time_steps(endpoint_desc: Any, batch: Sequence[Delivery]) -> tuple[float, float]:
    """Microseconds per delivery of the receiver's signature check and event reading."""
    adapter = adapter_for(endpoint_desc)
    check = request_check(adapter, endpoint_desc.webhooks)  # as the endpoint builds it
    assert check is not None
    keep = check_reads(endpoint_desc.webhooks)
    now = time.time()
    started = time.perf_counter()
    for raw, body in batch:
        check(HeaderView.from_raw(raw, keep), body, now, "POST", None)
    verify = (time.perf_counter() - started) / len(batch) * 1e6
    views = [(Headers(raw=raw), body) for raw, body in batch]
    parsed = [(jsonread.loads(body), body, headers) for headers, body in views]
    query = QueryParams(b"")
    started = time.perf_counter()
    for document, body, headers in parsed:
        parse_parsed_webhook(adapter, document, body, headers, query)
    extract = (time.perf_counter() - started) / len(batch) * 1e6
    return verify, extract


async def run(count: int, rounds: int) -> None:
    logs.configure()  # as `jobwarden receiver` does: its log level decides what is formatted
    desc = load_preset("simulator", {"JW_SIM_WEBHOOK_SECRET": SECRET})
    endpoint = WebhookEndpoint(
        {PROVIDER: desc},
        _SettledWriter(),  # type: ignore[arg-type]
        ReceiverMetrics([PROVIDER]),
        _NoRefusals(),  # type: ignore[arg-type]
        max_body_bytes=1 << 20,
        now=time.time,
    )

    async def stored(event_id: str, body: bytes) -> None:
        return None

    floor_handler = floor.delivery_handler(SECRET, stored)
    batch = deliveries(count)
    await time_handler(floor_handler, batch[: count // 10], 204)  # warm both
    await time_handler(endpoint, batch[: count // 10], 200)
    floor_us: list[float] = []
    receiver_us: list[float] = []
    for _ in range(rounds):
        floor_us.append(await time_handler(floor_handler, batch, 204))
        receiver_us.append(await time_handler(endpoint, batch, 200))
    steps = [time_steps(desc, batch) for _ in range(rounds)]
    best_floor, best_receiver = min(floor_us), min(receiver_us)
    print(f"{count:,} distinct signed Standard Webhooks deliveries a round, {rounds} rounds")
    print(f"{'handler':<44}{'µs/delivery':>12}{'rounds':>30}")
    for name, figures in (
        ("floor (bench.floor.delivery_handler)", floor_us),
        ("receiver (WebhookEndpoint, simulator)", receiver_us),
    ):
        spread = " ".join(f"{us:.1f}" for us in figures)
        print(f"{name:<44}{min(figures):>12.1f}{spread:>30}")
    print(f"ratio (floor / receiver, fastest rounds): {best_floor / best_receiver:.2f}")
    verify = min(step[0] for step in steps)
    extract = min(step[1] for step in steps)
    print(
        f"of the receiver's {best_receiver:.1f} µs: signature check {verify:.1f}, "
        f"event read from the parsed body {extract:.1f}, the rest of the handler "
        f"{best_receiver - verify - extract:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.receiver_handler", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="fewer deliveries and rounds")
    args = parser.parse_args(argv)
    count, rounds = (QUICK_DELIVERIES, QUICK_ROUNDS) if args.quick else (DELIVERIES, ROUNDS)
    run_loop(run(count, rounds))  # on uvloop, as the receiver runs
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
