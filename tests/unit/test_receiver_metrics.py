"""The receiver's per-delivery counts: plain integers, exposed as Prometheus counters."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from receiver.metrics import REFUSAL_REASONS, ReceiverMetrics, _Tally


def _sample(metrics: ReceiverMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_every_series_exists_at_zero_and_counts_what_it_is_told() -> None:
    metrics = ReceiverMetrics(["sim", "gh"])
    for provider in ("sim", "gh", "unknown"):
        assert _sample(metrics, "jobwarden_webhook_requests_received_total", provider=provider) == 0
    for reason in REFUSAL_REASONS:
        labels = {"provider": "gh", "reason": reason}
        assert _sample(metrics, "jobwarden_webhook_events_rejected_total", **labels) == 0
    metrics.received("sim")
    metrics.received("sim")
    metrics.verified("sim")
    metrics.stored("sim", True)
    metrics.duplicate("gh")
    metrics.rejected("unknown", "unknown_provider")
    metrics.unavailable("gh")
    assert _sample(metrics, "jobwarden_webhook_requests_received_total", provider="sim") == 2
    assert _sample(metrics, "jobwarden_webhook_events_verified_total", provider="sim") == 1
    stored = "jobwarden_webhook_events_stored_total"
    assert _sample(metrics, stored, provider="sim", matched="true") == 1
    assert _sample(metrics, stored, provider="sim", matched="false") == 0
    assert _sample(metrics, "jobwarden_webhook_events_duplicate_total", provider="gh") == 1
    refused = {"provider": "unknown", "reason": "unknown_provider"}
    assert _sample(metrics, "jobwarden_webhook_events_rejected_total", **refused) == 1
    assert _sample(metrics, "jobwarden_webhook_events_unavailable_total", provider="gh") == 1
    text = metrics.exposition().decode()
    assert "# TYPE jobwarden_webhook_requests_received_total counter" in text
    assert 'jobwarden_webhook_requests_received_total{provider="sim"} 2.0' in text
    created = "jobwarden_webhook_requests_received_created"
    assert (_sample(metrics, created, provider="sim") or 0) > 1_700_000_000  # as Counter has


def test_the_exposition_has_the_lines_prometheus_clients_counters_wrote() -> None:
    """Names, labels, HELP, TYPE and the `_created` samples, series for series."""
    from prometheus_client import Counter

    ours = ReceiverMetrics(["sim"])
    registry = CollectorRegistry()
    theirs = Counter(
        "jobwarden_webhook_events_verified",
        "Deliveries whose signature verified",
        ["provider"],
        registry=registry,
    )
    theirs.labels("sim").inc()
    ours.verified("sim")
    from prometheus_client.exposition import generate_latest

    def lines(text: bytes) -> list[str]:
        kept = [x for x in text.decode().splitlines() if "events_verified" in x]
        return [x.rsplit(" ", 1)[0] if "_created" in x else x for x in kept]  # times differ

    assert lines(ours.exposition()) == lines(generate_latest(registry))


def test_a_series_needs_every_label() -> None:
    tally = _Tally("jobwarden_test", "a test count", ("provider", "reason"), CollectorRegistry())
    with pytest.raises(ValueError, match="labels"):
        tally.series("sim")


def test_two_tallies_of_one_name_are_refused_like_two_counters() -> None:
    registry = CollectorRegistry()
    _Tally("jobwarden_test", "a test count", ("provider",), registry)
    with pytest.raises(ValueError, match="Duplicated"):
        _Tally("jobwarden_test", "a test count", ("provider",), registry)
