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


class RequestBuildError(ValueError):
    """A request cannot be built from what we have (no status URL, no result URL...).

    The one type every request builder raises when the inputs it was given
    (a stored body, a job id or URL the provider gave) cannot make a request:
    building again from the same inputs fails the same way, so a caller stops
    and says why instead of retrying. The message says what is wrong in plain
    words; it never repeats a URL or a credential.
    """


class UnsafeJobIdError(RequestBuildError):
    """A remote job id would change the meaning of the URL it is placed in.

    Job ids come from the provider; a hostile or buggy one ("..", "a/../../x",
    "id?x=1") must not be able to point our authenticated requests elsewhere.
    """
