"""Build the requests a provider description calls for.

Every builder returns an `HttpRequest` with an absolute URL and final headers.
The credential is rendered here, at request time, and only for the provider's
own hosts: a result URL on a storage host (pre-signed S3/GCS link) or a status
URL pointing somewhere unexpected never receives our Authorization header.

Every URL is checked here the way the sender (httpx) will parse it
(`check_sendable`): one it would refuse, or one on an internal address the
operator did not name, is a `RequestBuildError` (the reconciler's "cannot be
built", a human's decision) and never reaches the sender, where it would fail
the step on every claim for ever.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import ipaddress
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import (
    SplitResult,
    parse_qsl,
    quote,
    unquote_plus,
    urlencode,
    urljoin,
    urlsplit,
    urlunsplit,
)

import httpx

from shared.ids import new_idempotency_token, new_operation_id
from shared.providers import bodies, sigv4
from shared.providers.description import (
    AuthSpec,
    BodyEncoding,
    Idempotency,
    LookupSpec,
    ProviderDescription,
    ResultPages,
    ResultSource,
)
from shared.providers.errors import RequestBuildError
from shared.providers.facts import StatusFact
from shared.providers.messages import HttpRequest, redacted
from shared.providers.paths import PathSyntaxError, ValuePath, set_value, writable_keys
from shared.providers.templates import (
    Template,
    check_path_value,
    fill_path,
    fill_text,
    without_query_param,
)
from shared.providers.tokens import create_token
from shared.secret import Secret

# The create template values a caller supplies in `context` (the reconciler's
# `_create_request` in reconciler/steps/create.py); build_create fills the rest
# of config.CREATE_VALUES itself.
CREATE_CONTEXT_VALUES = ("webhook_url", "trace_id", "result_deadline_seconds")
# A context fact, not a template value: set (to any text) when an earlier attempt
# of this create may have reached the provider, so `create.resend_query` applies.
RESEND = "resend"

# The longest URL a request is built for. httpx refuses 65,536 characters;
# no API's status, result or errors link comes near 16 KiB (a pre-signed S3
# link with a session token is about 1.5 KiB), yet the API schemas we check
# allow 10,000-character ids and links, which must still be sent.
MAX_URL_CHARS = 16384

# What a refusal may quote of a URL's host or of httpx's complaint.
_QUOTE_CHARS = 100

# One part of a numeric IPv4 host as inet_aton (so getaddrinfo) reads it:
# hex, octal, or decimal. `127.1`, `0x7f000001` and `2130706433` all name
# 127.0.0.1, and httpx passes the shorter forms on as names.
_INET_PART = re.compile(r"0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*")


def unsendable(desc: ProviderDescription, body: Any) -> str | None:
    """Why the provider's create call cannot carry `body` (None: it can).

    The builder the reconciler sends with, run on placeholder ids and every
    template value set, so each field it writes into the body is tried: a body
    it cannot build (a number where our token must go, a list where the client
    reference must) would be recorded and then never sent. The API (422) and
    `jobwarden submit` refuse such a body before recording it. Pure: nothing
    leaves the process.
    """
    try:
        build_create(
            desc,
            body=body,
            idempotency_token=new_idempotency_token(),
            client_reference=new_operation_id(),
            context=dict.fromkeys(CREATE_CONTEXT_VALUES, "0"),
        )
    except RequestBuildError as exc:
        return str(exc).removeprefix(f"provider {desc.name}: ")
    return None


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
    entry whose value is unknown is left out — and, under RESEND, whether an
    earlier attempt may have reached the provider (`create.resend_query`).
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
    url = _create_url(desc, values)
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
            _put(headers, name, rendered)
            if "webhook_secret" in template.names:
                secret_headers.add(name)
    if spec.idempotency_header and spec.idempotency in (
        Idempotency.HEADER,
        Idempotency.CLIENT_JOB_ID,
    ):
        _put(headers, spec.idempotency_header, idempotency_token)
    secret_fields = tuple(
        f.path for f in spec.set_body if any("webhook_secret" in t.names for t in f.templates)
    )
    content = None
    if spec.encoding is not BodyEncoding.JSON:
        # the boundary (recorded with the headers) derives from the body as recorded
        recorded = redacted(payload, secret_fields)
        content, content_type = bodies.encode(
            payload, spec.encoding, recorded, nesting=spec.form_nesting
        )
        _put(headers, "Content-Type", content_type)
    return _request(
        desc,
        "create",
        spec.method,
        url,
        headers,
        payload,
        frozenset(secret_headers),
        secret_fields,
        content=content,
    )


def _create_url(desc: ProviderDescription, values: Mapping[str, str | None]) -> str:
    """The create's URL; a callback URL in its query only when one is known."""
    path = desc.create.path
    filled = {
        name: value
        for name in ("client_reference", "idempotency_token", "webhook_url")
        if (value := values.get(name))
    }
    if "webhook_url" in path.names and "webhook_url" not in filled:
        path = without_query_param(path, "webhook_url")
    url = _join(desc, path, filled)
    if values.get(RESEND) and desc.create.resend_query:
        # Snowflake's retry=true: "set to true only when retrying the request"
        url = _with_query(url, dict(desc.create.resend_query))
    return url


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
        if field.template is None and not field.templates:
            writes.append((field.path, copy.deepcopy(field.literal)))
            continue
        # a value unknown (no public_webhook_url) leaves the whole field out,
        # a literal holding it as much as a string that is it
        rendered = (
            fill_text(field.template, values)
            if field.template is not None
            else _filled_json(field.literal, values)
        )
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
        if spec.encoding is BodyEncoding.MULTIPART:
            _refuse_writing_into_a_file(desc, payload, path)
        try:
            set_value(payload, path, value)
        except PathSyntaxError as exc:
            # the stored body has a non-object where our value must go
            # (`"metadata": "x"` for metadata.jobwarden_operation_id)
            raise RequestBuildError(
                f"provider {desc.name}: the stored create body cannot carry our value at {exc}"
            ) from None
    return payload


def _filled_json(value: Any, values: Mapping[str, str | None]) -> Any:
    """A literal's templates filled; None when one names a value unknown."""
    try:
        return _render_json(value, values)
    except RequestBuildError:
        return None


def _refuse_writing_into_a_file(desc: ProviderDescription, payload: Any, path: ValuePath) -> None:
    """A path below a multipart member is written into its JSON part; a file member
    so written would stop being a file and go out as JSON holding its base64."""
    keys = writable_keys(path)
    if len(keys) > 1 and bodies.is_file(payload.get(keys[0])):
        raise RequestBuildError(
            f"provider {desc.name}: the create body's {keys[0]!r} is a file part of the "
            f"multipart body: {path.text} cannot be written into it"
        )


def build_status(
    desc: ProviderDescription, remote_job_id: str, status_url: str | None = None
) -> HttpRequest:
    """A status read: the recorded status URL when configured so, else the path template."""
    spec = desc.status
    url = _job_url(
        desc, "status reads go", spec.use_status_url, spec.path, remote_job_id, status_url
    )
    payload = _render_json(spec.body, {"job_id": remote_job_id})
    # a status URL that is the result's is asked as the result is
    headers = _result_headers(desc) if status_is_the_result(desc) else _base_headers(desc)
    return _request(desc, "status", spec.method, url, headers, payload)


def _job_url(
    desc: ProviderDescription,
    calls: str,
    use_status_url: bool,
    path: Template | None,
    remote_job_id: str,
    status_url: str | None,
) -> str:
    """Where a call about one job goes: the status URL on record when the description
    says so (`use_status_url`), else its path template with the job id."""
    if use_status_url and status_url:
        return resolve_url(desc, status_url)
    if path is not None:
        return _join(desc, path, {"job_id": remote_job_id})
    raise RequestBuildError(
        f"provider {desc.name}: {calls} to the status URL a create answer gives, and "
        "there is no status URL on record (the answer named none)"
    )


def _result_headers(desc: ProviderDescription) -> dict[str, str]:
    """A result fetch's headers: the description's, then `result.headers` over them,
    and no Accept of ours (the result is whatever the provider keeps)."""
    return _base_headers(desc, desc.result.headers, accept=None)


def status_is_the_result(desc: ProviderDescription) -> bool:
    """Is the status URL the result's (Stability's `/v2beta/results/{id}`: 202 while
    the job runs, then 200 with the video)?

    Such a read of a finished job is the result's download. The reconciler
    bounds it by its pace (`reconciler.step`): answered past MAX_ANSWER_BYTES
    it failed as `protocol`, and the job read as running until its deadline.
    And it asks as the result fetch does (`build_status`): `result.headers`,
    and no Accept of ours. An endpoint that negotiates its answer, told
    `Accept: application/json`, answers another representation (Stability:
    {"video": <base64>, "finish_reason"}, where the video was asked for and its
    `finish-reason` header was the state), and the job read as running until
    its deadline; its answer also never matched the result fetch's request, so
    a finished job's result was downloaded twice.
    """
    result, status = desc.result, desc.status
    return (
        result.source is ResultSource.PATH
        and result.path is not None
        and status.path is not None
        and result.path.text == status.path.text
    )


def build_cancel(
    desc: ProviderDescription,
    remote_job_id: str,
    extra_headers: Mapping[str, str] | None = None,
    status_url: str | None = None,
) -> HttpRequest:
    """A cancel: to the recorded status URL when configured so (`cancel.use_status_url`),
    else to the path template."""
    spec = desc.cancel
    if not spec.supported:
        raise RequestBuildError(f"provider {desc.name}: cancellation unsupported: {spec.reason}")
    url = _job_url(desc, "cancels go", spec.use_status_url, spec.path, remote_job_id, status_url)
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
    elif source == "files":
        if not status.result_file_ids:
            raise RequestBuildError("the final status named no result files")
        urls = [
            # no path: the ids are the files' URLs, each checked as a result_url is
            resolve_url(desc, file_id)
            if spec.path is None
            else _join(desc, spec.path, {"job_id": remote_job_id, "file_id": file_id})
            for file_id in status.result_file_ids
        ]
    else:
        return []
    pages = spec.pages
    if pages is not None and pages.offset_param is not None:
        # the first page is named, never left to a default (as a lookup's)
        urls = [_with_query(url, _offset_query(pages, "0")) for url in urls]
    if pages is not None and pages.page_param is not None:
        urls = [_with_query(url, {pages.page_param: str(pages.first_page)}) for url in urls]
    # config allows a method and a body with source = path alone (GET, none otherwise)
    payload = _render_json(spec.body, {"job_id": remote_job_id})
    return [
        _request(desc, "result", spec.method, url, _result_headers(desc), payload) for url in urls
    ]


def build_result_page(
    desc: ProviderDescription,
    first: HttpRequest,
    page_token: str,
    page_url: str | None = None,
) -> HttpRequest:
    """The next page of a paged result (`result.pages`), from what
    `responses.result_next_page` read of the page before.

    A token: the first page's URL with it in `page_token_param` (replacing any
    value the URL had for it). An offset: the first page's URL with it in
    `offset_param`. The next page's URL (`next_page_url`): as the page named it,
    resolved against `page_url`, the URL that page answered from (else the
    first page's), and only where a provider's own pages are: the base_url's
    origin (scheme, host, port), an `auth.extra_hosts` host or a
    `result.allowed_hosts` host. A page elsewhere is refused, never fetched:
    a result is joined from the provider's pages, and a link in a body must not
    send our fetches (or, on an extra host, our credential) where it likes.
    """
    spec = desc.result.pages
    if spec is None:
        raise RequestBuildError(f"provider {desc.name}: the result is not paged")
    if spec.next_page_url is not None:
        url = _next_page_url(desc, page_url or first.url, page_token)
    elif spec.offset_param is not None:
        url = _with_query(first.url, _offset_query(spec, page_token))
    elif spec.page_param is not None:
        # the token is "<number>:<count>" (`responses.result_next_page`)
        url = _with_query(first.url, {spec.page_param: page_token.partition(":")[0]})
    elif spec.page_token_body_field is not None:
        payload = copy.deepcopy(first.json)
        set_value(payload, spec.page_token_body_field, page_token)
        return _request(desc, "result", first.method, first.url, _result_headers(desc), payload)
    else:
        url = _with_query(first.url, {spec.page_token_param: page_token})
    return _request(desc, "result", "GET", url, _result_headers(desc), None)


def _offset_query(spec: ResultPages, offset: str) -> dict[str, str]:
    assert spec.offset_param is not None
    query = {spec.offset_param: offset}
    if spec.page_size is not None:
        query[spec.page_size_param] = str(spec.page_size)
    return query


def _with_query(url: str, params: Mapping[str, str]) -> str:
    """`url` with `params` at the end of its query, replacing any value it had for
    them; the rest of the query is kept as written (a signed link's signature
    covers its bytes, which decoding and encoding again may change)."""
    parts = urlsplit(url)
    kept = [
        pair
        for pair in parts.query.split("&")
        if pair and unquote_plus(pair.partition("=")[0]) not in params
    ]
    added = urlencode(list(params.items()), quote_via=quote)
    return urlunsplit(parts._replace(query="&".join([*kept, added])))


def _linked_url(desc: ProviderDescription, base: str, named: str, what: str) -> str:
    """The absolute URL of a link an answer named (`what`), resolved against `base`
    (the URL that answered), that the sender may send: never parsed past its
    length, no character a path may not hold, no user name or password (the
    client would send them as Basic credentials in our token's place), and
    `check_sendable`'s hosts only."""
    if len(named) > MAX_URL_CHARS:  # before any parsing: never quoted, never worked on
        raise RequestBuildError(_too_long(what, len(named)))
    check_path_value(named, what)
    url, parts = _joined(base, named.strip(), what)
    if parts.username is not None or parts.password is not None:
        raise RequestBuildError(f"{what} carries a user name or password")
    check_sendable(desc, url, what)
    return url


def _next_page_url(desc: ProviderDescription, page_url: str, named: str) -> str:
    """The absolute URL of the next page a page named (`build_result_page`)."""
    what = "the next page's URL"
    url = _linked_url(desc, page_url, named, what)
    extra = desc.auth.extra_hosts if desc.auth is not None else ()
    if _origin_of(url) in _page_origins(desc.base_url, extra, desc.result.allowed_hosts):
        return url
    parts = urlsplit(url)
    host = _host_of(httpx.URL(url))  # check_sendable parsed it so
    port = f":{parts.port}" if parts.port is not None else ""
    raise RequestBuildError(
        f"{what} is on {parts.scheme}://{_quote(host)}{port}, not the provider's origin "
        f"({_origin_text(desc.base_url)}): not fetched, as a result's pages are the "
        "provider's own (name the host in result.allowed_hosts if it serves them, "
        "as host:port on a port not its scheme's default)"
    )


def _origin_text(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def _joined(base: str, named: str, what: str) -> tuple[str, SplitResult]:
    """`named` resolved against `base`: an http(s) URL with a host, parsed whole."""
    try:
        url = urljoin(base, named)
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsed now: a bad port is refused here
    except ValueError:
        # urlsplit's refusals (a bad port...); their text would repeat the URL
        raise RequestBuildError(f"{what} cannot be parsed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RequestBuildError(f"{what} is not an http(s) URL ({parts.scheme or 'no'} scheme)")
    return url, parts


def build_redirect(desc: ProviderDescription, previous: HttpRequest, location: str) -> HttpRequest:
    """The next hop of a result fetch answered by a redirect to `location`.

    Relative locations resolve against the URL that answered. Only http(s)
    targets are followed. A hop to where the credential may not go (the rule
    every call follows, `_may_receive_credential`: the base URL's origin, or
    an `auth.extra_hosts` host) drops it and every other secret header, and
    they stay dropped: a signed storage link needs none, and would hand ours
    to whoever serves it. The target passes `check_sendable` like any URL the
    provider gives.
    """
    what = "the redirect's Location"
    check_path_value(location, what)
    url, _ = _joined(previous.url, location, what)
    check_sendable(desc, url, what)
    headers = dict(previous.headers)
    if not _may_receive_credential(desc, url):
        secret = {name.lower() for name in previous.secret_headers}
        headers = {k: v for k, v in headers.items() if k.lower() not in secret}
        if desc.auth is not None and desc.auth.sigv4 is not None:
            _drop_amz_headers(headers)
    return HttpRequest(
        action=previous.action,
        method="GET",
        url=url,
        headers=headers,
        timeout=previous.timeout,
        secret_headers=previous.secret_headers,
    )


def build_followed(desc: ProviderDescription, document_url: str, link: str) -> HttpRequest:
    """The fetch of the link a result document names (`result.follow`): the result.

    Resolved against the URL the document answered from, and built as the fetch of
    a result URL a status names is (`build_result_requests`): a GET with the
    result's headers, passed by `check_sendable` (an internal host only where the
    operator named it), the credential only on the origins it always goes to
    (`_may_receive_credential`): a signed storage link needs none. A link with a
    user name or password is refused: the client would send it as credentials.
    """
    url = _linked_url(desc, document_url, link, "the link the result document names")
    return _request(desc, "result", "GET", url, _result_headers(desc), None)


def errors_list_url(
    desc: ProviderDescription, remote_job_id: str, errors_url: str | None
) -> str | None:
    """Where a batch's failed items are listed: the URL its status named, which
    wins, else `[result.errors] path` for this job; None: nowhere to read."""
    spec = desc.result.errors
    if spec is None:
        return None
    if errors_url:
        return errors_url
    if spec.path is None:
        return None
    return _join(desc, spec.path, {"job_id": remote_job_id})


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
    if spec.next_page_url is not None and page_token:
        url = _lookup_page_url(desc, page_token)
        return _request(desc, "lookup", spec.method, url, _base_headers(desc), None)
    values = {"client_reference": client_reference}
    if idempotency_token is not None:
        values["idempotency_token"] = create_token(desc.create, idempotency_token)
    url = _join(desc, spec.path, values)
    params: dict[str, str] = {}
    if spec.query_param:
        params[spec.query_param] = client_reference
    params.update(_lookup_page(spec, page_token))
    payload = _render_json(spec.body, values)
    if page_token and spec.page_token_body_field is not None:
        set_value(payload, spec.page_token_body_field, page_token)
    return _request(
        desc, "lookup", spec.method, add_query(url, params), _base_headers(desc), payload
    )


def _lookup_page_url(desc: ProviderDescription, named: str) -> str:
    """The next lookup page the page before named by its whole URL (Twilio's
    `meta.next_page_url`), on the provider's own origin only: a page from elsewhere
    could list any job as ours, and it would be adopted."""
    what = "the lookup's next page URL"
    url = _linked_url(desc, desc.base_url + "/", named, what)
    extra = desc.auth.extra_hosts if desc.auth is not None else ()
    if _origin_of(url) in _page_origins(desc.base_url, extra, ()):
        return url
    raise RequestBuildError(
        f"{what} is on {_origin_text(url)}, not the provider's origin "
        f"({_origin_text(desc.base_url)}): not followed"
    )


def _lookup_page(spec: LookupSpec, page_token: str | None) -> dict[str, str]:
    """Which page to send for: a numbered first page is named, never left to a default.

    `page_token` is the cursor, or for numbered paging what
    `responses.parse_lookup` computed from the page before: the offset, or
    "<page number>:<items read>".
    """
    params: dict[str, str] = {}
    if spec.page_size is not None:
        params[spec.page_size_param] = str(spec.page_size)
    if spec.page_param is not None:
        params[spec.page_param] = (
            page_token.partition(":")[0] if page_token else str(spec.first_page)
        )
    elif spec.offset_param is not None:
        params[spec.offset_param] = page_token or "0"
    elif page_token and spec.page_token_body_field is None:
        params[spec.page_token_param] = page_token
    return params


def resolve_url(desc: ProviderDescription, url: str) -> str:
    """An absolute http(s) URL for a URL the provider gave us (maybe relative),
    one the sender can send to a host it may reach (`check_sendable`)."""
    if len(url) > MAX_URL_CHARS:  # before any parsing: never quoted, never worked on
        raise RequestBuildError(_too_long("the provider's URL", len(url)))
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
    check_sendable(desc, absolute, "the provider's URL")
    return absolute


def check_sendable(desc: ProviderDescription, url: str, what: str) -> None:
    """Refuse (RequestBuildError) a URL the sender would not, or should not, send.

    Parsed as httpx parses it, since httpx is what connects: a URL urllib
    accepts but httpx refuses (`1.2.3.999`, port `abc`) would otherwise fail
    every attempt at the sender, never counted, never escalated. Then the
    port must be 1-65535 (httpx lets `99999` through to the connect), and the
    host must not be an internal address (`_internal`) unless the operator
    named it (`configured_hosts`): a result URL is often one the submitter
    chose, echoed back, and what it answers is stored for the agent to read.
    No name is resolved here: the reconciler's connections resolve it and
    refuse an internal address at connect time (`reconciler.lanes`).
    """
    if len(url) > MAX_URL_CHARS:
        raise RequestBuildError(_too_long(what, len(url)))
    if _under_base_url(desc, url):
        return  # our own base URL, checked at load, and a path we quoted: every status read
    try:
        target = httpx.URL(url)
        # the host decoded: an invalid IDN A-label (`xn--sf-test`) raises only here
        named = target.host
        host = _host_of(target) if named else ""
    except (httpx.InvalidURL, ValueError, TypeError) as exc:  # idna's errors are ValueErrors
        raise RequestBuildError(f"{what} cannot be sent: {_quote(str(exc))}") from None
    if target.scheme not in ("http", "https") or not named:
        raise RequestBuildError(f"{what} is not an http(s) URL with a host")
    if target.port is not None and not 1 <= target.port <= 65535:
        raise RequestBuildError(f"{what} names port {target.port}, outside 1-65535")
    if trusts(configured_hosts(desc), host, _effective_port(target)):
        return
    kind = why_internal(host)
    if kind is not None:
        raise RequestBuildError(
            f"{what} points at {_quote(host)}, {kind}: refused, as it is not the "
            "base_url's host, an auth.extra_hosts host or a result.allowed_hosts host"
        )


def normal_host(host: str) -> str:
    """`host` as `check_sendable` compares it: lower case, ASCII (IDNA's
    `xn--` form, as httpx sends it), no trailing dot, an IP address in its
    canonical form (brackets dropped). ValueError when it is no bare host."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if any(c in bare for c in "/?#@\\ ") or (":" in bare and _ip_literal(bare.lower()) is None):
        raise ValueError("a bare host is expected (no scheme, user, port or path)")
    try:
        parsed = httpx.URL("http://" + (f"[{bare}]" if ":" in bare else bare) + "/")
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ValueError("not a host name or IP address") from None
    normal = _host_of(parsed) if parsed.raw_host else ""
    if not normal:  # `.` is a trailing dot alone: no host
        raise ValueError("not a host name or IP address")
    return normal


def _host_of(url: httpx.URL) -> str:
    return _normal_host(url.raw_host.decode("ascii"))


def _normal_host(host: str) -> str:
    # every trailing dot: `127.0.0.1..` is no name a resolver takes, yet read as
    # `127.0.0.1.` it was no address either, and passed as a public host
    name = host.lower().rstrip(".")
    address = _ip_literal(name)
    return str(address) if address is not None else name


def _under_base_url(desc: ProviderDescription, url: str) -> bool:
    """`url` is the base URL followed by a plain path: the base URL's own origin
    (its authority ends at the `/` after it; base_url has no query, fragment or
    credentials, checked at load), so the parse a URL otherwise gets is skipped."""
    return url.startswith(desc.base_url.rstrip("/") + "/") and _plain_path(url)


def _plain_path(url: str) -> bool:
    """Nothing after the base URL that httpx could read otherwise: printable
    ASCII without a backslash (a path built by quoting, or a provider's own)."""
    return url.isascii() and url.isprintable() and "\\" not in url


def configured_hosts(desc: ProviderDescription) -> frozenset[str]:
    """The hosts the operator named: base_url's, auth.extra_hosts, result.allowed_hosts,
    each as `host_entry` writes it (a bare host, or `host:port` for that port alone);
    `trusts` says whether they name a host and port."""
    extra = desc.auth.extra_hosts if desc.auth is not None else ()
    return _hosts_named(desc.base_url, extra, desc.result.allowed_hosts)


@functools.cache
def _hosts_named(
    base_url: str, extra_hosts: tuple[str, ...], allowed_hosts: tuple[str, ...]
) -> frozenset[str]:
    """Cached: a description's hosts never change, and URLs are checked on every call."""
    hosts = {_entry_text(*_entry_parts(h)) for h in (*allowed_hosts, *extra_hosts)}
    with contextlib.suppress(httpx.InvalidURL, ValueError, TypeError):  # then nothing is sent
        hosts.add(_host_of(httpx.URL(base_url)))
    return frozenset(hosts)


def trusts(named: frozenset[str], host: str, port: int | None) -> bool:
    """Whether `named` (`configured_hosts`) names `host` (`normal_host`'s form) on
    `port` (the one connected to, a default one written out): the bare host names
    it on every port, `host:port` on that port alone."""
    return host in named or (port is not None and _entry_text(host, port) in named)


def host_entry(entry: str) -> str:
    """An operator's host entry (`auth.extra_hosts`, `result.allowed_hosts`) as it is
    compared: `normal_host`, then `:port` when one is written (`files.internal:9000`,
    `[::1]:8443`). ValueError when it is neither a bare host nor one with a port."""
    host, port = _split_entry(entry)
    return _entry_text(host, port)


def _split_entry(entry: str) -> tuple[str, int | None]:
    """`host` or `host:port` (an IPv6 address with a port in brackets), checked."""
    if any(c in entry for c in "/?#@\\ "):
        raise ValueError("a host or host:port is expected (no scheme, user or path)")
    text = entry
    bracketed = text.startswith("[") and "]:" in text
    if bracketed or (text.count(":") == 1 and not text.startswith("[")):
        host, _, port = text.rpartition(":")
        if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError("a port is a number 1-65535 (host:port)")
        return normal_host(host), int(port)
    return normal_host(text), None


def _entry_parts(entry: str) -> tuple[str, int | None]:
    """An entry as config checked it; one a description was built with unchecked
    (a plugin's, a test's) is a host as written, lower case, on every port."""
    try:
        return _split_entry(entry)
    except ValueError:
        return _normal_host(entry), None


def _entry_text(host: str, port: int | None) -> str:
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def why_internal(host: str) -> str | None:
    """Why `host` is internal (a loopback name, or an IP literal in a range no
    public service uses), or None."""
    if host == "localhost" or host.endswith(".localhost"):
        return "a loopback name"
    if ":" in host and _ip_literal(host) is None:
        return "an IPv6 address that cannot be checked"
    address = _ip_literal(host)
    if address is None:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address in _SITE_LOCAL:  # deprecated (RFC 3879), yet routed inside some sites
            return "a private address"
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            address = embedded
    for kind, hit in (
        ("a loopback address", address.is_loopback),
        ("a link-local address (cloud metadata services live there)", address.is_link_local),
        ("an unspecified address", address.is_unspecified),
        ("a multicast address", address.is_multicast),
        ("a private address", address.is_private),
        ("an address no public service uses", address.is_reserved or not address.is_global),
    ):
        if hit:
            return kind
    return None


# NAT64's well-known prefix (RFC 6052): the IPv4 host is the last 32 bits. On an
# IPv6-only network with DNS64 every IPv4-only name resolves into it. (The
# local-use prefix 64:ff9b:1::/48 places the IPv4 address where its operator
# chose, so it stays "no public service": name such hosts in allowed_hosts.)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 host an IPv6 address reaches, judged in its place: ::ffff:a.b.c.d,
    the deprecated ::a.b.c.d, NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address))
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    return None


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` names without DNS: an IPv6 literal, or an IPv4
    address in any form inet_aton reads (`1.2.3.4`, `127.1`, `0x7f000001`,
    `017700000001`, `2130706433`)."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return None
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_PART.fullmatch(p) for p in parts):
        return None
    numbers = [_inet_number(p) for p in parts]
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    return ipaddress.IPv4Address(value * 256 ** (4 - len(head)) + last)


def _inet_number(part: str) -> int:
    if part.startswith("0x"):
        return int(part[2:] or "0", 16)
    if part.startswith("0"):
        return int(part or "0", 8)
    return int(part)


def _too_long(what: str, length: int) -> str:
    return f"{what} is {length} characters long; at most {MAX_URL_CHARS} are sent"


def _quote(text: str) -> str:
    """At most _QUOTE_CHARS of `text`: a refusal never repeats a huge URL."""
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."


def add_query(url: str, params: Mapping[str, str]) -> str:
    if not params:
        return url
    parts = urlsplit(url)
    pairs = [*parse_qsl(parts.query, keep_blank_values=True), *params.items()]
    # a space as %20, never "+": read alike by a form decoder, and as written by
    # AWS's signature (which signs "+" as itself, where some servers read a space)
    return urlunsplit(parts._replace(query=urlencode(pairs, quote_via=quote)))


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
    for name, value in [*desc.headers.items(), *(extra or {}).items()]:
        _put(headers, name, value)
    return headers


def _put(headers: dict[str, str], name: str, value: str) -> None:
    """Set `name`, replacing it however it was spelt: header names are
    case-insensitive, and `headers = {x-amz-target = ...}` overridden by a
    create's `set_headers = {X-Amz-Target = ...}` sent both (AWS then read the
    create as the other operation); so did `headers = {accept = ...}`, our Accept."""
    for known in [k for k in headers if k.lower() == name.lower()]:
        del headers[known]
    headers[name] = value


def _request(
    desc: ProviderDescription,
    action: str,
    method: str,
    url: str,
    headers: dict[str, str],
    payload: Any,
    secret_headers: frozenset[str] = frozenset(),
    secret_fields: tuple[ValuePath, ...] = (),
    *,
    content: bytes | None = None,
) -> HttpRequest:
    """`content`: the body's bytes when it is not sent as `payload`'s JSON (a form)."""
    check_sendable(desc, url, f"the {action} URL")
    auth = desc.auth
    if auth is not None and auth.sigv4 is not None:
        secret_headers = secret_headers | _SIGNATURE_HEADERS
        if _may_receive_credential(desc, url):
            if content is None and payload is not None:
                content = _json_bytes(payload)  # what is signed is what is sent
                if not any(name.lower() == "content-type" for name in headers):
                    headers["Content-Type"] = "application/json"
            headers.update(_signed(auth, method, url, headers, content or b""))
        else:
            _drop_amz_headers(headers)
    elif auth is not None:
        secret_headers = secret_headers | {auth.header} | {a.header for a in auth.also}
        if _may_receive_credential(desc, url):
            _put(headers, auth.header, auth.header_value())
            for also in auth.also:  # a second credential header (Adobe's x-api-key)
                _put(headers, also.header, also.header_value())
    return HttpRequest(
        action=action,
        method=method,
        url=url,
        headers=headers,
        json=payload,
        timeout=desc.limits.request_timeout,
        secret_headers=secret_headers,
        secret_fields=secret_fields,
        answer_secrets=_echoed_secrets(desc, action),
        content=content,
    )


def _drop_amz_headers(headers: dict[str, str]) -> None:
    """A call to another host than the signed API's (a pre-signed S3 link) carries
    none of its `x-amz-*` headers: S3 refuses a pre-signed request with one its
    link did not sign (403 "There were headers present in the request which were
    not signed"): the description's `X-Amz-Target`, a signed hop's `X-Amz-Date`."""
    for name in [k for k in headers if k.lower().startswith("x-amz-")]:
        del headers[name]


# A signed call's credential headers: redacted wherever the call is recorded.
_SIGNATURE_HEADERS = frozenset({"Authorization", "X-Amz-Security-Token"})


def _json_bytes(payload: Any) -> bytes:
    """A JSON body as httpx would send it (compact, UTF-8), fixed before signing."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _signed(
    auth: AuthSpec, method: str, url: str, headers: dict[str, str], body: bytes
) -> dict[str, str]:
    """The signature headers of a call (`auth.sigv4`), signed now."""
    assert auth.sigv4 is not None
    try:
        credentials = sigv4.parse_credentials(auth.secret.reveal())
    except sigv4.CredentialsError as exc:  # checked at load; a rotated file is checked too
        raise RequestBuildError(f"the AWS credentials cannot sign: {exc}") from None
    region, service = auth.sigv4.region, auth.sigv4.service
    # Signed as httpx will send it: AWS encodes the path it received once more,
    # and httpx percent-encodes what a provider's URL left raw (a space, `|`, `é`).
    wire = str(httpx.URL(url))
    return sigv4.sign(method, wire, headers, body, credentials, region, service, signing_time())


def signed_as_it_leaves(desc: ProviderDescription, req: HttpRequest) -> HttpRequest:
    """`req` signed again now, as it leaves (`[auth] scheme = "aws_sigv4"`).

    A call is signed when it is built, and may leave much later: after a
    wait for a provider slot, or as the fifth of a result's files fetched one
    after another. AWS refuses a signature dated more than five minutes from
    its clock ("Signature expired"), so a call is signed again just before it
    is sent. A redirect's next hop (`build_redirect`) carries the previous
    hop's headers; signed again here, its signature covers its own URL. Only
    a call that carries a signature is signed again: one that was given none
    (another host, a hop past one) stays so.
    """
    auth = desc.auth
    if auth is None or auth.sigv4 is None:
        return req
    names = {name.lower() for name in req.headers}
    if "authorization" not in names or not _may_receive_credential(desc, req.url):
        return req
    content = req.content
    if content is None and req.json is not None:
        content = _json_bytes(req.json)
    headers = sigv4.without_signature(req.headers)
    headers.update(_signed(auth, req.method, req.url, headers, content or b""))
    return dataclasses.replace(req, headers=headers, content=content)


def signing_time() -> datetime:
    """When a call is signed (tests fix it)."""
    return datetime.now(UTC)


def _echoed_secrets(desc: ProviderDescription, action: str) -> tuple[Secret, ...]:
    """The callback token a provider echoes in its answers (with the callback URL
    it was given: `static_header` with `query`), scrubbed from every answer but a
    result's, whose bytes are the result (and are checked against digests)."""
    hooks = desc.webhooks
    if action == "result" or hooks is None or not hooks.token_in_url:
        return ()
    return hooks.secrets


def _may_receive_credential(desc: ProviderDescription, url: str) -> bool:
    """The base URL's origin (RFC 6454: scheme, host, port, a default port the
    same as none written), or an https `auth.extra_hosts` origin: the host on 443,
    or on the port its entry names (`host:port`). A host is never enough: another
    port on it is another server, whoever runs it."""
    if _under_base_url(desc, url):
        return True  # the base URL's own authority: every status read
    extra = desc.auth.extra_hosts if desc.auth is not None else ()
    return _origin_of(url) in _credential_origins(desc.base_url, extra)


# An origin (RFC 6454) as compared: scheme, host (`normal_host`'s form), port
# (a default one written out: `https://h` and `https://h:443` are one origin).
Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_of(url: str) -> Origin | None:
    """`url`'s origin as the sender (httpx) reads it; None when it has none."""
    try:
        target = httpx.URL(url)
        host = _host_of(target) if target.host else ""
    except (httpx.InvalidURL, ValueError, TypeError):
        return None
    port = _effective_port(target)
    if not host or port is None:
        return None
    return target.scheme, host, port


def _effective_port(target: httpx.URL) -> int | None:
    return target.port or _DEFAULT_PORTS.get(target.scheme)


@functools.cache
def _credential_origins(base_url: str, extra_hosts: tuple[str, ...]) -> frozenset[Origin]:
    """Where the credential may go: base_url's origin, each extra host's on https."""
    origins = {_origin_on("https", *_entry_parts(entry)) for entry in extra_hosts}
    base = _origin_of(base_url)
    return frozenset(origins | ({base} if base is not None else set()))


@functools.cache
def _page_origins(
    base_url: str, extra_hosts: tuple[str, ...], allowed_hosts: tuple[str, ...]
) -> frozenset[Origin]:
    """Where a result's next page may be (`_next_page_url`): where the credential may
    go, and each `result.allowed_hosts` host on base_url's scheme, on that scheme's
    default port or the port its entry names. A bare entry means no other port: the
    operator named a server, not every service its host may run."""
    scheme = urlsplit(base_url).scheme
    allowed = {_origin_on(scheme, *_entry_parts(entry)) for entry in allowed_hosts}
    return _credential_origins(base_url, extra_hosts) | allowed


def _origin_on(scheme: str, host: str, port: int | None) -> Origin:
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]
