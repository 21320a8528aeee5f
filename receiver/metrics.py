"""Prometheus metrics of one receiver app, in a registry of its own.

A private `CollectorRegistry` per app (not the global default) lets tests build
many apps in one process and read each one's counters without interference.

Label values are bounded by construction: `provider` is a configured name or
"unknown" (never the raw path segment, so random URLs cannot grow the series
count), `reason` is the fixed vocabulary `RefusalReason`. Every (provider,
reason) series exists from start-up at zero, so a dashboard or an alert on a
rare reason works before the first time it happens.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any, Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

UNKNOWN_PROVIDER = "unknown"  # no provider may take it (shared/providers/config.py)

# Request latency buckets (seconds): group commit puts a healthy receiver in
# the 1-20 ms range; the tail buckets show DB stalls up to the acquire timeout.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Events per group-commit transaction: 1 at idle, tens to hundreds under load.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

# Why a delivery was answered with an error: the `reason` label of
# jobwarden_webhook_events_rejected and the `reason` of its log line. A
# Literal, so the type checker holds every refusal to this list (the
# signature verifiers' own reasons included) and the label set stays bounded.
RefusalReason = Literal[
    # the request itself
    "unknown_provider",  # 404: no configured provider with webhooks by that name
    "method_not_allowed",  # 405: anything but POST
    "non_ascii_header",  # 400: a header we read (signature, id, path) with non-ASCII bytes
    "unsupported_encoding",  # 415: a Content-Encoding other than identity (never decoded)
    "unsupported_media_type",  # 415: not application/json or */*+json
    "bad_content_length",  # 400: Content-Length is not plain digits
    "body_too_large",  # 413: over max_body_bytes
    "incomplete_body",  # 400: the client went away mid-body
    "bad_challenge",  # 400: an endpoint challenge whose token we would not echo
    "bad_verify_token",  # 403: a GET challenge without the verify token we gave the sender
    "origin_not_allowed",  # 403: a CloudEvents OPTIONS handshake from an origin not allowed
    # the signature (shared.signatures.errors.Reason)
    "missing_header",  # 400
    "malformed_header",  # 400
    "bad_signature",  # 401
    "stale_timestamp",  # 401
    "future_timestamp",  # 401
    # our side: configuration, plugins, the database
    "no_secret",  # 500: the provider has no usable secret
    "bad_options",  # 500: the verifier's options (or a verifier plugin) failed
    "parse_failed",  # 500: the provider plugin's parse_webhook raised
    "database_refused",  # 500: PostgreSQL refused the event's content
    "queue_full",  # 503: too many events waiting for the writer
    "not_accepting",  # 503: the receiver is shutting down
    "database_unavailable",  # 503: no connection, or the commit failed
]
REFUSAL_REASONS: frozenset[str] = frozenset(get_args(RefusalReason))
# The only reason a name that is not a configured provider can get.
_UNKNOWN_PROVIDER_REASONS: tuple[RefusalReason, ...] = ("unknown_provider",)

__all__ = [
    "CONTENT_TYPE_LATEST",
    "REFUSAL_REASONS",
    "UNKNOWN_PROVIDER",
    "ReceiverMetrics",
    "RefusalReason",
]


# The `matched` label of the stored count.
_MATCHED = {True: "true", False: "false"}


class _Tally(Collector):
    """A counter family kept as plain integers and built into samples when scraped.

    prometheus_client's `Counter` takes a lock on every increment: with three
    counts per delivery that was a measurable part of the receiver's CPU per
    event. Deliveries are counted on the receiver's one event-loop thread
    (never from another), so a dictionary increment is enough. Every series
    is created up front, at zero, by `series()`.
    """

    def __init__(
        self, name: str, documentation: str, labelnames: tuple[str, ...], registry: Any
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = labelnames
        self.counts: dict[tuple[str, ...], int] = {}
        # When each series began, exposed as its `_created` sample, as
        # prometheus_client's own counters do.
        self._created: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def series(self, *labels: str) -> None:
        """Create one series, at zero (only series made here can be counted)."""
        if len(labels) != len(self._labelnames):
            raise ValueError(f"{self._name}: labels {self._labelnames}, got {labels}")
        if labels not in self.counts:
            self.counts[labels] = 0
            self._created[labels] = time.time()

    def inc(self, labels: tuple[str, ...]) -> None:
        """Count one in a series made by `series` (KeyError for any other)."""
        self.counts[labels] += 1

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)

    def describe(self) -> Iterable[CounterMetricFamily]:
        yield self._family()

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = self._family()
        for labels, count in self.counts.items():
            family.add_metric(list(labels), count, created=self._created[labels])
        yield family


class _Timings(Collector):
    """A histogram without labels, observed without a lock (`_Tally`'s reasoning).

    Every delivery's answer time is observed once: prometheus_client's
    `Histogram` takes a lock and walks its buckets in Python on each. Here a
    bisection finds the one bucket to count, and the cumulative counts
    Prometheus reads are summed when it scrapes. The exposition is the
    `Histogram`'s: buckets, `+Inf`, count, sum and `_created`.
    """

    def __init__(
        self, name: str, documentation: str, buckets: tuple[float, ...], registry: Any
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._bounds = tuple(float(bound) for bound in buckets)
        # as prometheus_client writes a bound (its function is untyped)
        self._labels = [floatToGoString(b) for b in self._bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        self._counts = [0] * (len(self._bounds) + 1)  # per bucket, the last past every bound
        self._sum = 0.0
        self._created = time.time()
        registry.register(self)

    def observe(self, value: float) -> None:
        # bisect_left: a value equal to a bound is counted in that bound's bucket (le)
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self._name, self._documentation)

    def describe(self) -> Iterable[HistogramMetricFamily]:
        yield self._family()

    def collect(self) -> Iterable[HistogramMetricFamily]:
        family = self._family()
        cumulative, buckets = 0, []
        for label, count in zip(self._labels, self._counts, strict=True):
            cumulative += count
            buckets.append((label, float(cumulative)))
        family.add_metric([], buckets, self._sum)
        family.samples.append(Sample(f"{self._name}_created", {}, self._created))
        yield family


class ReceiverMetrics:
    """The receiver's counters; methods take a label from `label()`."""

    def __init__(self, providers: Iterable[str]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._received = _Tally(
            "jobwarden_webhook_requests_received",
            "Webhook deliveries received, before any check",
            ("provider",),
            r,
        )
        self._verified = _Tally(
            "jobwarden_webhook_events_verified",
            "Deliveries whose signature verified",
            ("provider",),
            r,
        )
        self._rejected = _Tally(
            "jobwarden_webhook_events_rejected",
            "Deliveries answered with an error (4xx/5xx), by reason",
            ("provider", "reason"),
            r,
        )
        self._duplicates = _Tally(
            "jobwarden_webhook_events_duplicate",
            "Verified deliveries of an event already stored",
            ("provider",),
            r,
        )
        self._stored = _Tally(
            "jobwarden_webhook_events_stored",
            "New events committed, by whether they matched an operation",
            ("provider", "matched"),
            r,
        )
        self._unread = _Tally(
            "jobwarden_webhook_events_unread",
            "Authentic deliveries stored unread: no JSON object this receiver reads "
            "(an array, not JSON, not UTF-8, nested too deep); also counted as stored",
            ("provider",),
            r,
        )
        self._unavailable = _Tally(
            "jobwarden_webhook_events_unavailable",
            "Verified deliveries answered 503 (also counted under the rejected reasons "
            "queue_full, not_accepting and database_unavailable)",
            ("provider",),
            r,
        )
        self.db_errors = Counter(
            "jobwarden_webhook_db_errors",
            "Database failures while storing events, by kind",
            ["kind"],
            registry=r,
        )
        self.latency = _Timings(
            "jobwarden_webhook_request_duration_seconds",
            "Time from request start to response, all outcomes",
            LATENCY_BUCKETS,
            r,
        )
        self.batch_size = Histogram(
            "jobwarden_webhook_commit_batch_size",
            "Events per group-commit transaction",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.commit_seconds = Histogram(
            "jobwarden_webhook_commit_duration_seconds",
            "Duration of one group-commit transaction, connection wait included",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "jobwarden_webhook_ingest_queue_depth",
            "Verified events waiting for the writer",
            registry=r,
        )
        self._known = frozenset(providers)
        # Every series made once, at zero. Only configured providers get past
        # the 404, so only they have these series; "unknown" exists for the
        # received and rejected counts.
        known = sorted(self._known)
        for name in (*known, UNKNOWN_PROVIDER):
            self._received.series(name)
        for name in known:
            for tally in (self._verified, self._duplicates, self._unread, self._unavailable):
                tally.series(name)
            for matched in _MATCHED.values():
                self._stored.series(name, matched)
            for reason in sorted(REFUSAL_REASONS):
                self._rejected.series(name, reason)
        for reason in _UNKNOWN_PROVIDER_REASONS:
            self._rejected.series(UNKNOWN_PROVIDER, reason)

    def label(self, provider: str) -> str:
        """The provider label to use for a name taken from a URL."""
        return provider if provider in self._known else UNKNOWN_PROVIDER

    def received(self, provider: str) -> None:
        self._received.inc((provider,))

    def verified(self, provider: str) -> None:
        self._verified.inc((provider,))

    def rejected(self, provider: str, reason: RefusalReason) -> None:
        self._rejected.inc((provider, reason))

    def duplicate(self, provider: str) -> None:
        self._duplicates.inc((provider,))

    def stored(self, provider: str, matched: bool) -> None:
        self._stored.inc((provider, _MATCHED[matched]))

    def unread(self, provider: str) -> None:
        self._unread.inc((provider,))

    def unavailable(self, provider: str) -> None:
        self._unavailable.inc((provider,))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
