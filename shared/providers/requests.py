"""Build the requests a provider description calls for.

Every builder returns an `HttpRequest` with an absolute URL and final headers.
The credential is rendered here, at request time, and only for the provider's
own hosts: a result URL on a storage host (pre-signed S3/GCS link) or a status
URL pointing somewhere unexpected never receives our Authorization header.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from shared.providers.description import Idempotency, ProviderDescription
from shared.providers.errors import RequestBuildError
from shared.providers.facts import StatusFact
from shared.providers.messages import HttpRequest
from shared.providers.paths import PathSyntaxError, ValuePath, set_value
from shared.providers.templates import Template, check_path_value, fill_path, fill_text
from shared.providers.tokens import create_token

# The create template values a caller supplies in `context` (the reconciler's
# `_create_request` in reconciler/steps/create.py); build_create fills the rest
# of config.CREATE_VALUES itself.
CREATE_CONTEXT_VALUES = ("webhook_url", "trace_id", "result_deadline_seconds")


def build_create(
    desc: ProviderDescription,
    *,
    body: Any,
    idempotency_token: str,
    client_reference: str,
    extra_headers: Mapping[str, str] | None = None,
    context: Mapping[str, str | None] | None = None,
) -> HttpRequest:
    """The create call for a stored operation.

    `body` is the operation's stored request body (copied, never mutated);
    `client_reference` is our operation id; `context` supplies optional
    template values (CREATE_CONTEXT_VALUES) — a `set_body`/`set_headers`
    entry whose value is unknown is left out.
    """
    spec = desc.create
    idempotency_token = create_token(spec, idempotency_token)
    values: dict[str, str | None] = {
        **(context or {}),
        "client_reference": client_reference,
        "idempotency_token": idempotency_token,
        "operation_id": client_reference,
        "webhook_secret": desc.webhooks.secrets[0].reveal() if desc.webhooks else None,
    }
    url = _join(
        desc,
        spec.path,
        {"client_reference": client_reference, "idempotency_token": idempotency_token},
    )
    try:
        payload = _create_body(desc, body, idempotency_token, client_reference, values)
    except RecursionError:
        # Copying recurses deeper than json.loads, so the API can store a body
        # (a few hundred levels of nesting) that cannot be copied here.
        raise RequestBuildError(
            f"provider {desc.name}: the stored create body is nested too deeply to be sent"
        ) from None
    headers = _base_headers(desc, extra_headers)
    secret_headers = set()
    for name, template in spec.set_headers:
        rendered = fill_text(template, values)
        if rendered is not None:
            headers[name] = rendered
            if "webhook_secret" in template.names:
                secret_headers.add(name)
    if spec.idempotency_header and spec.idempotency in (
        Idempotency.HEADER,
        Idempotency.CLIENT_JOB_ID,
    ):
        headers[spec.idempotency_header] = idempotency_token
    secret_fields = tuple(
        f.path for f in spec.set_body if f.template and "webhook_secret" in f.template.names
    )
    return _request(
        desc, "create", spec.method, url, headers, payload, frozenset(secret_headers), secret_fields
    )


def _create_body(
    desc: ProviderDescription,
    body: Any,
    idempotency_token: str,
    client_reference: str,
    values: Mapping[str, str | None],
) -> Any:
    spec = desc.create
    writes: list[tuple[Any, Any]] = []
    if spec.idempotency is Idempotency.BODY and spec.idempotency_body_field is not None:
        writes.append((spec.idempotency_body_field, idempotency_token))
    if spec.client_reference_field is not None:
        writes.append((spec.client_reference_field, client_reference))
    for field in spec.set_body:
        if field.template is None:
            writes.append((field.path, copy.deepcopy(field.literal)))
            continue
        rendered = fill_text(field.template, values)
        if rendered is not None:
            writes.append((field.path, rendered))
    if not writes:
        return copy.deepcopy(body)
    payload = {} if body is None else copy.deepcopy(body)
    if not isinstance(payload, dict):
        raise RequestBuildError(
            f"provider {desc.name}: the create body must be a JSON object to carry "
            "our token and client reference"
        )
    for path, value in writes:
        try:
            set_value(payload, path, value)
        except PathSyntaxError as exc:
            # the stored body has a non-object where our value must go
            # (`"metadata": "x"` for metadata.jobwarden_operation_id)
            raise RequestBuildError(
                f"provider {desc.name}: the stored create body cannot carry our value at {exc}"
            ) from None
    return payload


def build_status(
    desc: ProviderDescription, remote_job_id: str, status_url: str | None = None
) -> HttpRequest:
    """A status read: the recorded status URL when configured so, else the path template."""
    spec = desc.status
    if spec.use_status_url and status_url:
        url = resolve_url(desc, status_url)
    elif spec.path is not None:
        url = _join(desc, spec.path, {"job_id": remote_job_id})
    else:
        raise RequestBuildError(
            f"provider {desc.name}: status reads go to the status URL a create answer "
            "gives, and there is no status URL on record (the answer named none)"
        )
    return _request(desc, "status", spec.method, url, _base_headers(desc), None)


def build_cancel(
    desc: ProviderDescription, remote_job_id: str, extra_headers: Mapping[str, str] | None = None
) -> HttpRequest:
    spec = desc.cancel
    if not spec.supported or spec.path is None:
        raise RequestBuildError(f"provider {desc.name}: cancellation unsupported: {spec.reason}")
    url = _join(desc, spec.path, {"job_id": remote_job_id})
    payload = _render_json(spec.body, {"job_id": remote_job_id})
    return _request(desc, "cancel", spec.method, url, _base_headers(desc, extra_headers), payload)


def _render_json(value: Any, values: Mapping[str, str | None]) -> Any:
    """A templated JSON value (`config._json_body`) with its placeholders filled."""
    if isinstance(value, Template):
        rendered = fill_text(value, values)
        if rendered is None:  # config allows only placeholders the caller supplies
            raise RequestBuildError(f"no value for a placeholder of {value.text!r}")
        return rendered
    if isinstance(value, Mapping):
        return {key: _render_json(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_render_json(item, values) for item in value]
    return value


def build_result_requests(
    desc: ProviderDescription, remote_job_id: str, status: StatusFact
) -> list[HttpRequest]:
    """The fetches that make up the result (empty for inline or result-less jobs)."""
    spec = desc.result
    source = spec.source.value
    if source == "url":
        if not status.result_url:
            raise RequestBuildError("the final status gave no result URL")
        urls = [resolve_url(desc, status.result_url)]
    elif source == "path" and spec.path is not None:
        urls = [_join(desc, spec.path, {"job_id": remote_job_id})]
    elif source == "files" and spec.path is not None:
        if not status.result_file_ids:
            raise RequestBuildError("the final status named no result files")
        urls = [
            _join(desc, spec.path, {"job_id": remote_job_id, "file_id": file_id})
            for file_id in status.result_file_ids
        ]
    else:
        return []
    return [
        _request(desc, "result", "GET", url, _base_headers(desc, accept=None), None) for url in urls
    ]


def build_redirect(desc: ProviderDescription, previous: HttpRequest, location: str) -> HttpRequest:
    """The next hop of a result fetch answered by a redirect to `location`.

    Relative locations resolve against the URL that answered. Only http(s)
    targets are followed. A hop to where the credential may not go (the rule
    every call follows, `_may_receive_credential`: the base URL's origin, or
    an `auth.extra_hosts` host) drops it and every other secret header, and
    they stay dropped: a signed storage link needs none, and would hand ours
    to whoever serves it.
    """
    check_path_value(location, "the redirect's Location")
    try:
        url = urljoin(previous.url, location)
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsed now: a bad port is refused here
    except ValueError:
        # urlsplit's refusals (a bad port...); their text would repeat the URL
        raise RequestBuildError("the redirect's Location cannot be parsed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RequestBuildError(
            f"the redirect's Location is not an http(s) URL ({parts.scheme or 'no'} scheme)"
        )
    headers = dict(previous.headers)
    if not _may_receive_credential(desc, url):
        secret = {name.lower() for name in previous.secret_headers}
        headers = {k: v for k, v in headers.items() if k.lower() not in secret}
    return HttpRequest(
        action=previous.action,
        method="GET",
        url=url,
        headers=headers,
        timeout=previous.timeout,
        secret_headers=previous.secret_headers,
    )


def build_errors_page(
    desc: ProviderDescription, errors_url: str, page_token: str | None = None
) -> HttpRequest:
    """One page of a batch's per-item failures."""
    spec = desc.result.errors
    if spec is None:
        raise RequestBuildError(f"provider {desc.name}: no errors pagination configured")
    params: dict[str, str] = {}
    if spec.page_size is not None:
        params[spec.page_size_param] = str(spec.page_size)
    if page_token:
        params[spec.page_token_param] = page_token
    url = add_query(resolve_url(desc, errors_url), params)
    return _request(desc, "errors_page", "GET", url, _base_headers(desc), None)


def build_lookup(
    desc: ProviderDescription,
    client_reference: str,
    idempotency_token: str | None = None,
    page_token: str | None = None,
) -> HttpRequest:
    """Find the job created for `client_reference` after a lost create response."""
    spec = desc.lookup
    if not spec.supported or spec.path is None:
        raise RequestBuildError(f"provider {desc.name}: lookup unsupported: {spec.reason}")
    values = {"client_reference": client_reference}
    if idempotency_token is not None:
        values["idempotency_token"] = create_token(desc.create, idempotency_token)
    url = _join(desc, spec.path, values)
    params: dict[str, str] = {}
    if spec.query_param:
        params[spec.query_param] = client_reference
    if page_token:
        params[spec.page_token_param] = page_token
    return _request(desc, "lookup", spec.method, add_query(url, params), _base_headers(desc), None)


def resolve_url(desc: ProviderDescription, url: str) -> str:
    """An absolute http(s) URL for a URL the provider gave us (maybe relative)."""
    check_path_value(url, "the provider's URL")
    try:
        absolute = urljoin(desc.base_url + "/", url)
        parts = urlsplit(absolute)
        host = parts.hostname
    except ValueError:
        # urlsplit's own refusals (a bracketed host that is no IPv6 address...);
        # their text would repeat the URL, which may carry a credential
        raise RequestBuildError("the provider's URL cannot be parsed") from None
    if parts.scheme not in ("http", "https") or not host:
        raise RequestBuildError("the provider's URL is not an http(s) URL")
    return absolute


def add_query(url: str, params: Mapping[str, str]) -> str:
    if not params:
        return url
    parts = urlsplit(url)
    pairs = [*parse_qsl(parts.query, keep_blank_values=True), *params.items()]
    return urlunsplit(parts._replace(query=urlencode(pairs)))


def _join(desc: ProviderDescription, template: Template, values: Mapping[str, str]) -> str:
    return desc.base_url + fill_path(template, values)


def _base_headers(
    desc: ProviderDescription,
    extra: Mapping[str, str] | None = None,
    accept: str | None = "application/json",
) -> dict[str, str]:
    headers: dict[str, str] = {}
    if accept:
        headers["Accept"] = accept
    headers.update(desc.headers)
    headers.update(extra or {})
    return headers


def _request(
    desc: ProviderDescription,
    action: str,
    method: str,
    url: str,
    headers: dict[str, str],
    payload: Any,
    secret_headers: frozenset[str] = frozenset(),
    secret_fields: tuple[ValuePath, ...] = (),
) -> HttpRequest:
    if desc.auth is not None:
        secret_headers = secret_headers | {desc.auth.header}
        if _may_receive_credential(desc, url):
            headers[desc.auth.header] = desc.auth.header_value()
    return HttpRequest(
        action=action,
        method=method,
        url=url,
        headers=headers,
        json=payload,
        timeout=desc.limits.request_timeout,
        secret_headers=secret_headers,
        secret_fields=secret_fields,
    )


def _may_receive_credential(desc: ProviderDescription, url: str) -> bool:
    """The base URL's origin (RFC 6454: scheme, host, port, a default port the
    same as none written), or an https `auth.extra_hosts` host."""
    target = urlsplit(url)
    if _origin(target) == _origin(urlsplit(desc.base_url)):
        return True
    auth = desc.auth
    allowed = auth.extra_hosts if auth is not None else ()
    return target.scheme == "https" and (target.hostname or "").lower() in allowed


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:  # not a port: no origin the credential may go to
        port = -1
    return parts.scheme, (parts.hostname or "").lower(), port
