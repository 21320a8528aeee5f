"""Errors raised by the provider adapter layer."""

from __future__ import annotations


class ConfigError(ValueError):
    """A provider description is wrong; raised at start-up, never mid-flight.

    The message always has the shape ``<file>: providers.<name>.<key>: <problem>``
    so an operator can go straight to the line to fix. It never contains a
    secret value.
    """


class WebhookParseError(ValueError):
    """A verified webhook body cannot be tied to a job (bad JSON, no job id/op ref)."""


class UnsafeJobIdError(ValueError):
    """A remote job id would change the meaning of the URL it is placed in.

    Job ids come from the provider; a hostile or buggy one ("..", "a/../../x",
    "id?x=1") must not be able to point our authenticated requests elsewhere.
    """


class RequestBuildError(ValueError):
    """A request cannot be built from what we have (no status URL, no result URL...)."""
