"""The adapter interface, and Python plugins for providers TOML cannot describe.

`ProviderAdapter` is the declarative behaviour: every hook delegates to the
pure functions of this package, driven by the description. A plugin is a
subclass that overrides only the hooks its provider needs (say, deriving the
job id from a `Location` header, or signing each request), named in the
config as ``plugin = "package.module:Class"`` (or a registered short name) with
optional ``[providers.<name>.plugin_options]``.

The reconciler always goes through `adapter_for(desc)`, so declarative and
plugin providers look the same to it.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from shared import signatures
from shared.providers import requests, responses, results, timing
from shared.providers.description import ProviderDescription, header_names
from shared.providers.facts import (
    CancelFact,
    CreateFact,
    ErrorsPage,
    LookupFact,
    ResultCheck,
    StatusFact,
    WebhookFact,
)
from shared.providers.messages import HttpRequest, HttpResponse
from shared.signatures import SignatureError, Verified

# Whether the job whose next read is being scheduled can call back, while
# `ProviderAdapter.for_job` holds it: the adapter is shared by every job of its
# provider, and a plugin's `next_poll_delay` calling super() must get that job's
# schedule. A context variable, so concurrent steps never see each other's.
_JOB_CALLBACKS: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "jw_job_callbacks", default=None
)


class _ForJob:
    """`ProviderAdapter.for_job`'s context: a class, not a generator, as it wraps
    every status read's schedule (no generator made and driven per read)."""

    __slots__ = ("_callbacks", "_token")

    def __init__(self, callbacks: bool) -> None:
        self._callbacks = callbacks

    def __enter__(self) -> None:
        self._token = _JOB_CALLBACKS.set(self._callbacks)

    def __exit__(self, *exc: object) -> None:
        _JOB_CALLBACKS.reset(self._token)


class PluginError(ValueError):
    """A plugin cannot be loaded or refuses its options."""


@runtime_checkable
class ProviderPlugin(Protocol):
    """What the reconciler and receiver call; `ProviderAdapter` implements all of it."""

    desc: ProviderDescription

    def build_create(
        self,
        *,
        body: Any,
        idempotency_token: str,
        client_reference: str,
        extra_headers: Mapping[str, str] | None = None,
        context: Mapping[str, str | None] | None = None,
    ) -> HttpRequest: ...

    def parse_create(
        self,
        resp: HttpResponse,
        idempotency_token: str | None = None,
        now: datetime | None = None,
    ) -> CreateFact: ...

    def build_status(self, remote_job_id: str, status_url: str | None = None) -> HttpRequest: ...

    def parse_status(self, resp: HttpResponse, now: datetime | None = None) -> StatusFact: ...

    def inline_result(self, resp: HttpResponse) -> Any: ...

    def build_cancel(
        self,
        remote_job_id: str,
        extra_headers: Mapping[str, str] | None = None,
        status_url: str | None = None,
    ) -> HttpRequest: ...

    def parse_cancel(self, resp: HttpResponse, now: datetime | None = None) -> CancelFact: ...

    def build_result_requests(
        self, remote_job_id: str, status: StatusFact
    ) -> list[HttpRequest]: ...

    def validate_result(
        self, resp: HttpResponse | Sequence[HttpResponse], status: StatusFact | None
    ) -> ResultCheck: ...

    def verify_webhook(
        self,
        headers: Mapping[str, str],
        body: bytes,
        secrets: Sequence[str],
        now: float,
        *,
        method: str | None = None,
        url: str | None = None,
    ) -> Verified: ...

    def validate_inline_result(self, value: Any, status: StatusFact | None) -> ResultCheck: ...

    def build_errors_page(self, errors_url: str, page_token: str | None = None) -> HttpRequest: ...

    def build_result_page(
        self, first: HttpRequest, page_token: str, page_url: str | None = None
    ) -> HttpRequest: ...

    def result_next_page(self, resp: HttpResponse, page_token: str | None = None) -> str | None: ...

    def result_failure(self, resp: HttpResponse) -> StatusFact | None: ...

    def parse_errors_page(self, resp: HttpResponse) -> ErrorsPage: ...

    def build_lookup(
        self,
        client_reference: str,
        idempotency_token: str | None = None,
        page_token: str | None = None,
    ) -> HttpRequest: ...

    def parse_lookup(
        self, resp: HttpResponse, client_reference: str, page_token: str | None = None
    ) -> LookupFact: ...

    def parse_webhook(
        self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> WebhookFact: ...

    def next_poll_delay(
        self,
        attempt: int,
        retry_after: float | None,
        poll_after: float | None,
        rng: random.Random,
    ) -> float: ...

    def retry_delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float: ...

    def confirming_poll_delay(
        self,
        attempt: int,
        retry_after: float | None,
        poll_after: float | None,
        rng: random.Random,
    ) -> float: ...


class ProviderAdapter:
    """Declarative adapter; subclass it to write a plugin.

    Subclasses receive the full description (with `plugin_options`) and may
    validate those options at load time by overriding `check_options`.
    """

    def __init__(self, desc: ProviderDescription) -> None:
        self.desc = desc
        # Can a callback come (the reconciler's say: [webhooks] described, and the
        # callback URL known or not asked for by the create)? None: as described.
        # Stands for a job with no record of its own (`callbacks_for`); a plugin's
        # `next_poll_delay` calling super() gets the schedule it implies.
        self.callbacks: bool | None = None

    @property
    def expects_callbacks(self) -> bool:
        """Whether reads are a backstop for callbacks: the job's, while `for_job`
        schedules one; else the reconciler's say, else the description's."""
        job = _JOB_CALLBACKS.get()
        return self._configured_callbacks() if job is None else job

    def _configured_callbacks(self) -> bool:
        return self.desc.webhooks is not None if self.callbacks is None else self.callbacks

    def callbacks_for(self, callback_url_sent: bool | None) -> bool:
        """Can a job call back whose create named our callback URL (True), left it
        out (False), or is not on record saying (None: the reconciler's say)?

        What the create sent decides, whatever this reconciler's URL now: the
        provider calls back where it was told, the receiver being a process of
        its own. Never without `[webhooks]`: no delivery would be verified.
        """
        if self.desc.webhooks is None:
            return False
        return self._configured_callbacks() if callback_url_sent is None else callback_url_sent

    def for_job(self, callbacks: bool) -> _ForJob:
        """Schedule one job's reads: `expects_callbacks` (hence the built-in
        `next_poll_delay`, a plugin's super() included) says `callbacks` meanwhile."""
        return _ForJob(callbacks)

    @functools.cached_property
    def headers_read(self) -> frozenset[str] | None:
        """Lower-case names of the answer headers this adapter reads; None: any of them.

        A plugin's own parsing may read any header, so for a subclass that
        parses answers itself every header counts.
        """
        own = ("parse_create", "parse_status", "parse_cancel", "inline_result")
        if any(getattr(type(self), name) is not getattr(ProviderAdapter, name) for name in own):
            return None
        return header_names(self.desc)

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Raise ValueError("<key>: <problem>") for bad plugin_options; called at load."""
        if options:
            raise ValueError(f"{sorted(options)[0]}: this plugin takes no options")

    def build_create(
        self,
        *,
        body: Any,
        idempotency_token: str,
        client_reference: str,
        extra_headers: Mapping[str, str] | None = None,
        context: Mapping[str, str | None] | None = None,
    ) -> HttpRequest:
        return requests.build_create(
            self.desc,
            body=body,
            idempotency_token=idempotency_token,
            client_reference=client_reference,
            extra_headers=extra_headers,
            context=context,
        )

    def parse_create(
        self,
        resp: HttpResponse,
        idempotency_token: str | None = None,
        now: datetime | None = None,
    ) -> CreateFact:
        return responses.parse_create(self.desc, resp, idempotency_token, now)

    def build_status(self, remote_job_id: str, status_url: str | None = None) -> HttpRequest:
        return requests.build_status(self.desc, remote_job_id, status_url)

    def parse_status(self, resp: HttpResponse, now: datetime | None = None) -> StatusFact:
        return responses.parse_status(self.desc, resp, now)

    def inline_result(self, resp: HttpResponse) -> Any:
        return responses.inline_result(self.desc, resp)

    def build_cancel(
        self,
        remote_job_id: str,
        extra_headers: Mapping[str, str] | None = None,
        status_url: str | None = None,
    ) -> HttpRequest:
        return requests.build_cancel(self.desc, remote_job_id, extra_headers, status_url)

    def parse_cancel(self, resp: HttpResponse, now: datetime | None = None) -> CancelFact:
        return responses.parse_cancel(self.desc, resp, now)

    def build_result_requests(self, remote_job_id: str, status: StatusFact) -> list[HttpRequest]:
        return requests.build_result_requests(self.desc, remote_job_id, status)

    def validate_result(
        self, resp: HttpResponse | Sequence[HttpResponse], status: StatusFact | None
    ) -> ResultCheck:
        return results.validate_result(self.desc, resp, status)

    def validate_inline_result(self, value: Any, status: StatusFact | None) -> ResultCheck:
        return results.validate_inline_result(self.desc, value, status)

    def verify_webhook(
        self,
        headers: Mapping[str, str],
        body: bytes,
        secrets: Sequence[str],
        now: float,
        *,
        method: str | None = None,
        url: str | None = None,
    ) -> Verified:
        """Authenticate a delivery from its raw body, or raise SignatureError.

        The configured scheme by default; a plugin overrides this for a
        sender no scheme option can describe. It stays a pure function of
        (headers, body, secrets, now): no I/O, no logging of its inputs.
        """
        spec = self.desc.webhooks
        if spec is None:
            raise SignatureError("bad_options")
        return signatures.verify(
            spec.scheme.value,
            spec.options,
            headers,
            body,
            secrets,
            now,
            spec.tolerance_seconds,
            method=method,
            url=url,
        )

    def build_errors_page(self, errors_url: str, page_token: str | None = None) -> HttpRequest:
        return requests.build_errors_page(self.desc, errors_url, page_token)

    def build_result_page(
        self, first: HttpRequest, page_token: str, page_url: str | None = None
    ) -> HttpRequest:
        """The next result page; `page_url`: the URL of the page that named it."""
        return requests.build_result_page(self.desc, first, page_token, page_url)

    def result_next_page(self, resp: HttpResponse, page_token: str | None = None) -> str | None:
        """What leads past this page; `page_token`: what it was requested with."""
        return responses.result_next_page(self.desc, resp, page_token)

    def result_failure(self, resp: HttpResponse) -> StatusFact | None:
        return responses.result_failure(self.desc, resp)

    def parse_errors_page(self, resp: HttpResponse) -> ErrorsPage:
        return responses.parse_errors_page(self.desc, resp)

    def build_lookup(
        self,
        client_reference: str,
        idempotency_token: str | None = None,
        page_token: str | None = None,
    ) -> HttpRequest:
        return requests.build_lookup(self.desc, client_reference, idempotency_token, page_token)

    def parse_lookup(
        self, resp: HttpResponse, client_reference: str, page_token: str | None = None
    ) -> LookupFact:
        return responses.parse_lookup(self.desc, resp, client_reference, page_token)

    def parse_webhook(
        self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> WebhookFact:
        return responses.parse_webhook(self.desc, body, headers, query)

    def next_poll_delay(
        self,
        attempt: int,
        retry_after: float | None,
        poll_after: float | None,
        rng: random.Random,
    ) -> float:
        return timing.next_poll_delay(
            self.desc.limits,
            attempt,
            retry_after,
            poll_after,
            rng,
            webhooks_configured=self.expects_callbacks,
        )

    def retry_delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """When a failed or uncertain call (not a status read) is made again.

        A plugin's own `next_poll_delay` schedules status reads only: used for
        retries, its built-in part brings the webhook backstop (300 s) back.
        A plugin overrides this hook itself to schedule its retries.
        """
        return timing.retry_delay(self.desc.limits, attempt, retry_after, rng)

    def confirming_poll_delay(
        self,
        attempt: int,
        retry_after: float | None,
        poll_after: float | None,
        rng: random.Random,
    ) -> float:
        """When to read again while confirming an end a webhook announced.

        The plain schedule, without the webhook backstop's stretch: the next
        read looks for news already delivered. A plugin that sets its own
        schedule (overrides `next_poll_delay`) has no such variant, so its
        schedule is kept; override this to choose otherwise.
        """
        if type(self).next_poll_delay is not ProviderAdapter.next_poll_delay:
            return self.next_poll_delay(attempt, retry_after, poll_after, rng)
        return timing.next_poll_delay(
            self.desc.limits, attempt, retry_after, poll_after, rng, webhooks_configured=False
        )


def parse_parsed_webhook(
    adapter: ProviderAdapter,
    document: Any,
    body: bytes,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    event_id: str | None = None,
) -> WebhookFact:
    """What `adapter.parse_webhook(body, headers, query)` returns, for a body the
    caller already parsed as JSON into `document`; `event_id`: the caller's own
    key for the event, carried by a declarative reading's fact (`webhook_fact`).

    The receiver parses every authentic body once; the declarative reading
    takes that document instead of parsing the body again. A plugin that
    overrides `parse_webhook` is called as it always was, with the raw body.
    Not a hook: a module function, so no plugin can override it (plugins
    override `parse_webhook`).
    """
    if type(adapter).parse_webhook is not ProviderAdapter.parse_webhook:
        return adapter.parse_webhook(body, headers, query)
    return responses.webhook_fact(adapter.desc, document, body, headers, query, event_id)


def adapter_for(desc: ProviderDescription) -> ProviderAdapter:
    """The adapter the reconciler/receiver should use for `desc`."""
    cls = desc.plugin_class or ProviderAdapter
    return cls(desc)


# Short names usable as `plugin = "<name>"`; values are import specs or classes.
_REGISTRY: dict[str, str | type[ProviderAdapter]] = {
    "location_job_id": "shared.providers.example_plugin:LocationJobIdPlugin",
}


def register_plugin(name: str, plugin: str | type[ProviderAdapter]) -> None:
    """Make `plugin` available under a short name (call before loading the config)."""
    _REGISTRY[name] = plugin


def resolve_plugin(spec: str) -> type[ProviderAdapter]:
    """The adapter class for a registered name or a ``package.module:Class`` spec."""
    target = _REGISTRY.get(spec, spec)
    if isinstance(target, type):
        return _checked(spec, target)
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        known = ", ".join(sorted(_REGISTRY))
        raise PluginError(
            f"'{spec}' is neither 'package.module:Class' nor a registered plugin ({known})"
        )
    if module_name.startswith("."):  # import_module raises TypeError without a package
        raise PluginError(f"'{module_name}' is a relative module name: name it from the top")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"cannot import '{module_name}': {exc}") from None
    except SyntaxError as exc:  # the plugin's own file: where, not what it holds
        where = f"{Path(exc.filename or '?').name}, line {exc.lineno}"
        raise PluginError(f"cannot import '{module_name}': a syntax error ({where})") from None
    except Exception as exc:
        # The plugin's code failed as it loaded. Its message is not repeated: it
        # may quote what the plugin read (a key from the environment).
        raise PluginError(
            f"cannot import '{module_name}': importing it raised {type(exc).__name__} "
            f"(python -c 'import {module_name}' shows it)"
        ) from None
    found: Any = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise PluginError(f"module '{module_name}' has no attribute '{attribute}'")
    return _checked(spec, found)


def _checked(spec: str, found: Any) -> type[ProviderAdapter]:
    if not isinstance(found, type) or not issubclass(found, ProviderAdapter):
        raise PluginError(f"'{spec}' is not a subclass of ProviderAdapter")
    return found
