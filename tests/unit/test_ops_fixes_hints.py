"""The tracing hint names the otel extra so that it also fits a wheel install
(shared/telemetry/setup.py): `pip install 'jobwarden[otel]'` alone fetches
jobwarden from the package index, not the wheel the host was installed from."""

from __future__ import annotations

import logging
import sys

import pytest

import shared.telemetry
from shared.telemetry import setup, spans

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


def test_without_the_otel_extra_the_warning_says_how_to_install_it_from_a_wheel_too(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # None in sys.modules makes `import` raise ImportError: the SDK "is not installed"
    monkeypatch.setattr(setup, "_provider", None)
    monkeypatch.setattr(spans, "TRACER", None)
    monkeypatch.delattr(shared.telemetry, "sdk", raising=False)
    monkeypatch.delitem(sys.modules, "shared.telemetry.sdk", raising=False)
    for name in ("opentelemetry.sdk", "opentelemetry.sdk.trace", "opentelemetry.sdk.resources"):
        monkeypatch.setitem(sys.modules, name, None)
    with caplog.at_level(logging.WARNING, logger="jobwarden.telemetry"):
        assert setup.configure("jobwarden-test", env=ENDPOINT) is False
    assert (
        "install jobwarden's otel extra (pip install 'jobwarden[otel]', or the wheel you"
        " installed from with [otel])" in caplog.text
    )
