"""Example plugin: a provider that names the new job only in a `Location` header.

Some APIs answer a create with ``202 Accepted`` and
``Location: /v1/exports/exp_123`` and nothing else: no body, and the job id is
only the last segment of that URL. A value path can read the header but not
cut it, so this plugin overrides one hook, `parse_create`, and keeps the
declarative behaviour for everything else.

Use it from the config:

    [providers.exports]
    base_url = "https://api.example.com"
    plugin = "shared.providers.example_plugin:LocationJobIdPlugin"
    # or the registered short name: plugin = "location_job_id"
    [providers.exports.plugin_options]
    header = "Location"      # default
    [providers.exports.create]
    ...                      # job_id may be omitted: the plugin supplies it
    status_url = "header:Location"

Writing your own: subclass `ProviderAdapter`, override the hooks you need,
validate your options in `check_options`, and name the class in `plugin`.
Keep hooks pure (no I/O): the reconciler sends and records every request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from shared.providers.adapter import ProviderAdapter
from shared.providers.facts import CreateFact
from shared.providers.messages import HttpResponse


class LocationJobIdPlugin(ProviderAdapter):
    """Takes the job id from the last path segment of a response header."""

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        for key, value in options.items():
            if key != "header":
                raise ValueError(f"{key}: unknown option (this plugin takes 'header')")
            if not isinstance(value, str) or not value:
                raise ValueError("header: must be a non-empty string")

    @property
    def header(self) -> str:
        value = self.desc.plugin_options.get("header", "Location")
        return value if isinstance(value, str) else "Location"

    def parse_create(
        self,
        resp: HttpResponse,
        idempotency_token: str | None = None,
        now: datetime | None = None,
    ) -> CreateFact:
        fact = super().parse_create(resp, idempotency_token, now)
        location = resp.header(self.header)
        if fact.kind != "ambiguous" or fact.remote_job_id or not location:
            return fact
        if resp.status_code not in self.desc.create.accepted_statuses:
            return fact
        segment = unquote(urlsplit(location).path.rstrip("/").rpartition("/")[2])
        if not segment:
            return fact
        return dataclasses.replace(
            fact,
            kind="accepted",
            reason=f"HTTP {resp.status_code} with job id in {self.header}",
            remote_job_id=segment,
            status_url=fact.status_url or location,
        )
