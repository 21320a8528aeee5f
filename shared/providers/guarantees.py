"""What a provider description can and cannot promise, in plain words.

Used by `jobwarden providers check`: an operator pointing jobwarden at a real
API must see before the first job what happens when a create response is lost,
whether a cancel can be sent, whether webhooks can be trusted and whether a
corrupted result would be caught. Each line is (guarantee, holds?, why).
"""

from __future__ import annotations

from shared import signatures
from shared.ledger.states import RemoteState
from shared.providers.checksums import source_label
from shared.providers.description import (
    CancelSpec,
    Checksum,
    ChecksumAlgorithm,
    GetAnswer,
    Idempotency,
    LastPage,
    LookupKind,
    LookupSpec,
    ProviderDescription,
    ResultFormat,
    ResultPages,
    ResultSource,
    TokenFormat,
    WebhookScheme,
    WebhookSpec,
    template_names,
)
from shared.providers.responses import body_event_id

Guarantee = tuple[str, bool, str]


def describe_guarantees(desc: ProviderDescription) -> list[Guarantee]:
    return [
        _at_most_once(desc),
        _lookup(desc),
        _cancellable(desc),
        _webhooks(desc),
        _result_integrity(desc),
    ]


def _at_most_once(desc: ProviderDescription) -> Guarantee:
    name, holds, why = _token_guarantee(desc)
    return name, holds, why + _window_note(desc) + _not_created_note(desc)


def _window_note(desc: ProviderDescription) -> str:
    """How long the token holds (`create.idempotency_window_seconds`): past it, a
    lost create is not resent. Before, the line said "returns the original job"
    with no limit, for a MediaConvert token that holds a minute."""
    window = desc.create.idempotency_window_seconds
    if window is None or desc.create.idempotency is Idempotency.NONE:
        return ""
    after = "looked up instead" if desc.lookup.supported else "escalated to an operator"
    return (
        f", only while it can arrive within {window}s of the first attempt "
        f"(create.idempotency_window_seconds); past that, it is {after}"
    )


def _not_created_note(desc: ProviderDescription) -> str:
    """What `create.not_created_statuses` changes, said where an operator weighs
    duplicates: such a refusal is resent, so the claim must come from the docs."""
    spec = desc.create
    listed = [f"HTTP {code}" for code in sorted(spec.not_created_statuses)]
    listed += [
        f"{'/'.join(sorted(codes))} at {path.text}" for path, codes in spec.not_created_codes
    ]
    if not listed:
        return ""
    return (
        f"; {', '.join(listed)} to a create is taken as 'nothing was created' "
        "(create.not_created_statuses, not_created_codes): the create is sent again after "
        "its Retry-After or the backoff, with no lookup and no escalation, so the provider's "
        "docs must say that answer creates nothing"
    )


def _token_guarantee(desc: ProviderDescription) -> Guarantee:
    spec = desc.create
    name = "at-most-once create"
    form = " (as a UUID derived from it)" if spec.idempotency_format is TokenFormat.UUID else ""
    if spec.idempotency is Idempotency.HEADER:
        return (
            name,
            True,
            (
                f"the token travels{form} in the {spec.idempotency_header} header; a retry "
                "after a lost response returns the original job"
            ),
        )
    if spec.idempotency is Idempotency.BODY:
        field = spec.idempotency_body_field.text if spec.idempotency_body_field else "?"
        return (
            name,
            True,
            (
                f"the token travels{form} in the body field {field}; a retry after a lost "
                "response returns the original job"
            ),
        )
    if spec.idempotency is Idempotency.CLIENT_JOB_ID:
        return (
            name,
            True,
            (
                f"we choose the job id ({'a UUID derived from our token' if form else 'our token'}"
                "); a second create with it cannot make a second job"
            ),
        )
    return (
        name,
        False,
        (
            "the provider has no idempotency: a create whose response is lost is never "
            "retried automatically"
            + (
                " (it is looked up instead)"
                if desc.lookup.supported
                else " and escalates to an operator"
            )
        ),
    )


def _lookup(desc: ProviderDescription) -> Guarantee:
    spec = desc.lookup
    name = "lookup after lost response"
    if spec.supported and spec.path is not None:
        if spec.kind is LookupKind.GET:
            how = f"a direct read of {spec.method} {spec.path.text}{_body_note(spec)}"
        elif spec.query_param:
            # a path with a query of its own (GitLab's ?ref=main) gets ours after an &
            sep = "&" if "?" in spec.path.text else "?"
            how = (
                f"{spec.method} {spec.path.text}{sep}{spec.query_param}=<operation id> "
                f"{_pages(spec)}"
            )
        else:
            how = (
                f"scanning {spec.method} {spec.path.text}{_body_note(spec)} {_pages(spec)} "
                f"for our reference in {spec.match.text if spec.match else '?'}"
            )
        if spec.kind is LookupKind.LIST:
            how += _blind(spec)
        return name, True, f"the job is found by our operation id via {how}"
    if desc.create.idempotency is not Idempotency.NONE:
        return (
            name,
            False,
            (f"no lookup ({spec.reason}); a same-token retry recovers the job instead"),
        )
    return (
        name,
        False,
        (
            f"create after a lost response cannot be reconciled automatically ({spec.reason}); "
            "the operation escalates to an operator"
        ),
    )


def _body_note(spec: LookupSpec) -> str:
    """What the lookup's body (`lookup.body`) names, where the job is named in it."""
    names = sorted(template_names(spec.body))
    return f" (its body naming {', '.join('{' + n + '}' for n in names)})" if names else ""


def _blind(spec: LookupSpec) -> str:
    """What a list none of whose jobs carries a reference proves: nothing (see
    responses.unreferenced_listing), so check `match` against a captured item."""
    where = spec.match.text if spec.match is not None else "?"
    cause = "items that leave it out" if spec.filtered else "only jobs made elsewhere"
    return (
        f"; a list whose jobs carry no reference at {where} (a wrong path, or {cause}) "
        "proves no absence: the create is not sent again, a human decides"
    )


def _pages(spec: LookupSpec) -> str:
    """Which pages a list lookup reads, as it will read them (see responses.parse_lookup)."""
    size = f" of {spec.page_size}" if spec.page_size is not None else ""
    limit = f"up to {spec.max_pages} pages{size}"
    unread = "a scan cut short by that limit proves no absence: the create is not sent again"
    if spec.page_param is not None:
        first, last = spec.first_page, spec.first_page + spec.max_pages - 1
        return (
            f"(pages ?{spec.page_param}={first} to {last}, {limit}, until {_end(spec)}; {unread})"
        )
    if spec.offset_param is not None:
        offsets = f"by offset, ?{spec.offset_param}=<items read>, from 0"
        return f"({offsets}, {limit}, until {_end(spec)}; {unread})"
    if spec.next_page_token is not None:
        sent = (
            f"the body's {spec.page_token_body_field.text}"
            if spec.page_token_body_field is not None
            else f"?{spec.page_token_param}="
        )
        return f"(following the cursor at {spec.next_page_token.text} in {sent}, {limit}; {unread})"
    if spec.next_page_url is not None:
        return f"(following the next page's URL at {spec.next_page_url.text}, {limit}; {unread})"
    if spec.filtered:
        return "(one page: the provider filters the list by our reference)"
    return "(its first page only: no paging is described)"


def _end(spec: LookupSpec) -> str:
    if spec.last_page is LastPage.SHORT:
        return f"a page of fewer than {spec.page_size} items"
    if spec.last_page is LastPage.TOTAL and spec.total is not None:
        return f"the items read reach {spec.total.text}"
    return "an empty page"


def _cancellable(desc: ProviderDescription) -> Guarantee:
    spec = desc.cancel
    name = "cancellable"
    if not spec.supported or spec.path is None:
        return name, False, f"cancellation is unsupported: {spec.reason}"
    if not _reads_cancelled(desc) and not spec.deletes_job and not spec.ends_failed:
        return (
            name,
            False,
            f"{spec.method} {spec.path.text} is sent, but no status the description reads "
            "means cancelled (status.state_map, state_from_http_status, "
            "cancelled_error_codes): a cancel can never be confirmed; the operation ends "
            "with the job (or cancellation_unconfirmed at the cancel deadline)",
        )
    return (
        name,
        True,
        (
            f"{spec.method} {spec.path.text} ({_cancel_repeat(spec)}); success is declared only "
            f"when a status read shows the job cancelled"
            f"{' (deletes_job: or gone, after our accepted cancel)' if spec.deletes_job else ''}"
            f"{' (ends_failed: or failed, after our accepted cancel)' if spec.ends_failed else ''}"
            f"{_read_first_note(spec)}"
        ),
    )


def _reads_cancelled(desc: ProviderDescription) -> bool:
    """Can a status read show the job cancelled? (A plugin may read it its own way.)"""
    status = desc.status
    if desc.plugin_class is not None:
        return True
    states = {*status.state_map.values(), *status.state_from_http_status.values()}
    return (
        RemoteState.CANCELLED in states
        # done's default (1), or the codes a failed read names when cancelled
        or bool(status.cancelled_error_codes)
        # a batch whose items all read cancelled (Anthropic's request_counts)
        or (status.outcome_from_counts and bool(status.counts_cancelled))
    )


def _cancel_repeat(spec: CancelSpec) -> str:
    """How often the cancel may go. With read_first it harms an ended job: never "safe"."""
    if spec.read_first:
        sent = "sent, and resent after an uncertain answer," if spec.idempotent else "sent once,"
        return (
            f"read_first: {sent} only after a status read under the same lease shows the job "
            "still running"
        )
    if spec.idempotent:
        return "idempotent, safe to resend"
    return "not idempotent: sent once by the lease owner"


def _read_first_note(spec: CancelSpec) -> str:
    """What read_first leaves open, or the keys' hint for a DELETE without them.

    A DELETE that aborts a running job may leave nothing to read either (Runway's:
    "aborted and deleted tasks will not be able to be fetched again"): without
    deletes_job each such cancel stops for a human, so a DELETE is told of both.
    """
    gone = (
        "; if a job this DELETE cancels reads not found after it, set "
        "cancel.deletes_job = true (each such cancel stops for a human without it)"
    )
    if spec.read_first:
        window = (
            "; a job that ends between that read and the cancel's arrival is still hit by "
            "it (the window is narrowed, not closed)"
        )
        return window + (gone if spec.method == "DELETE" and not spec.deletes_job else "")
    if spec.method == "DELETE":
        return (
            "; if this DELETE also deletes a finished job and its result, set "
            "cancel.read_first = true, or cancel.deletes_job = true if it deletes a "
            "running one too"
        )
    return ""


def _webhooks(desc: ProviderDescription) -> Guarantee:
    spec = desc.webhooks
    name = "webhooks signed"
    if spec is None:
        return name, False, "no webhooks configured (or no secret available): polling only"
    signed, line = _deliveries(spec)
    carries = (
        "; the result is read from a delivery (result.source = webhook)"
        if desc.result.source is ResultSource.WEBHOOK
        else ""
    )
    notes = _batch_note(spec) + _get_challenge_note(spec) + _origins_note(spec)
    return name, signed, line + carries + notes


def _origins_note(spec: WebhookSpec) -> str:
    """Whose CloudEvents OPTIONS handshake the receiver answers (`allowed_origins`)."""
    if not spec.allowed_origins:
        return ""
    who = "any origin" if "*" in spec.allowed_origins else ", ".join(spec.allowed_origins)
    return f"; answers the CloudEvents OPTIONS handshake of {who} (others refused 403)"


def _batch_note(spec: WebhookSpec) -> str:
    """How a batch delivery (`events`) is read, if the provider sends them."""
    if spec.events is None:
        return ""
    where = f"at {spec.events.text}" if spec.events.text else "the body"
    own_id = body_event_id(spec)
    key = f"its own id at {own_id.text}" if own_id else "its bytes' sha256"
    return (
        f"; batches: each element of the list {where} is an event of its own, deduplicated "
        f"on {key}, answered once all are stored"
    )


def _deliveries(spec: WebhookSpec) -> tuple[bool, str]:
    """Whether the scheme signs a delivery's body, and what it guarantees of one."""
    rotation = f"{len(spec.secrets)} active secret(s)"
    if spec.scheme is WebhookScheme.STATIC_HEADER:
        where = (
            f"token in the URL's query parameter {spec.options['query']!r}"
            if spec.token_in_url
            else "header"
        )
        return (
            False,
            f"authenticated by a static shared {where} ({rotation}), not a signature over "
            "the body, no replay protection; every event is confirmed by our own status read",
        )
    if spec.scheme is WebhookScheme.JWT and not signatures.signs_body(
        spec.scheme.value, spec.options
    ):  # a bearer token (Pub/Sub push): the body is unsigned
        return (
            False,
            f"a signed token ({spec.scheme.value}, {rotation}, issued within "
            f"{spec.tolerance_seconds}s) names this endpoint but does not cover the body: "
            "deduplicated on the body's sha256, no id read from it; every event is "
            "confirmed by our own status read",
        )
    if spec.scheme is WebhookScheme.MAILGUN:
        replay = (
            f"{spec.tolerance_seconds}s replay tolerance; the signature covers a timestamp "
            "and a single-use token, not the event data: deduplicated on the signed "
            "single-use token, so a signature copied onto other data is a duplicate, but a "
            "copy raced ahead of the genuine delivery within the window is read"
        )
    elif spec.scheme is WebhookScheme.TWILIO:
        json_key = (
            f"the event id at {spec.event_id.text}, else its sha256"
            if spec.event_id is not None
            else "its sha256"
        )
        replay = (
            "no timestamp is signed, so no replay window: a form is deduplicated on the "
            f"digest of the signed URL and fields, a JSON body on {json_key}; a replayed "
            "delivery at most triggers a read"
        )
    elif signatures.signs_timestamp(spec.scheme.value, spec.options):
        replay = f"{spec.tolerance_seconds}s replay tolerance" + _dedupe_note(spec)
    else:
        replay = (
            "no timestamp is signed, so no replay window: a replayed delivery is "
            "deduplicated and at most triggers a read"
        )
    challenge = (
        f"; answers {spec.challenge.answer.value} endpoint challenges, only once verified "
        "(never stored)"
        if spec.challenge is not None
        else ""
    )
    kind = f"{spec.scheme.value} signatures"
    if spec.options.get("construction") == "secret_suffix":
        # not an HMAC: the operator is told what the sender's signature is worth
        kind = (
            f"{spec.scheme.value} signatures (secret_suffix: a plain digest of the content "
            "then the secret, weaker than an HMAC)"
        )
    return (
        True,
        f"{kind}, {rotation}, {replay}{challenge}; events only trigger our own status read",
    )


def _get_challenge_note(spec: WebhookSpec) -> str:
    """What the receiver answers a sender's GET check with (`get_challenge`), if any."""
    get = spec.get_challenge
    if get is None:
        return ""
    if get.verify_param is not None and get.verify_token is None:
        return (
            f"; refuses every {get.method} check (its ?{get.verify_param}= verify token is "
            "not set, optional webhooks)"
        )
    form = "as text/plain" if get.answer is GetAnswer.TEXT else f'as {{"{get.param}": …}}'
    asked = f"only with ?{get.verify_param}= the verify token, " if get.verify_param else ""
    body = ", its body unread" if get.method == "POST" else ""
    return (
        f"; echoes a {get.method}'s ?{get.param}= {form} ({asked}unsigned{body}, never "
        "stored: the asker's own value)"
    )


def _dedupe_note(spec: WebhookSpec) -> str:
    """The dedupe key, where the description alone says it: Slack's scheme (Zoom's
    too) signs no event id, so without an `event_id` path in the body it is the
    body's hash, and a sender resending the same event with another field (a
    retry counter) is stored twice."""
    if spec.scheme is WebhookScheme.SLACK and spec.event_id is None:
        return ": no event id is configured, so deliveries are deduplicated on the body's sha256"
    return ""


def _result_integrity(desc: ProviderDescription) -> Guarantee:
    spec = desc.result
    expect = spec.expect
    name = "result integrity checked"
    if spec.source is ResultSource.NONE:
        return name, False, "the job produces no result document"
    checks = [f"max {expect.max_bytes} bytes"]
    if expect.content_types:
        checks.append("content type")
    if expect.required_fields:
        checks.append("required fields " + ", ".join(p.text for p in expect.required_fields))
    if expect.item_count_from_status or expect.item_count is not None:
        checks.append("item counts")
    if spec.format is ResultFormat.CSV:
        checks.append("CSV rows well-formed")
    elif spec.format is ResultFormat.TEXT:
        checks.append("UTF-8 text")
    if spec.pages is not None:
        checks.append(f"every page ({_paging(spec.pages)}, at most {spec.pages.max_pages})")
    side = "; fetching it has side effects, so it is fetched once" if spec.side_effects else ""
    if spec.source is ResultSource.WEBHOOK:
        inline = spec.inline.text if spec.inline is not None else ""
        side = (
            f"; it comes in a signed delivery alone (result.source = webhook, at {inline!r}):"
            " lost with a delivery that never arrives"
        )
    listed = ", ".join(checks)
    if expect.checksum is Checksum.NONE:
        return name, False, f"no checksum from the provider; checked: {listed}{side}"
    options = expect.checksum_options
    source = source_label(expect.checksum, options)
    algorithm = options.algorithm.value if options.algorithm is not None else "sha-256"
    caveats = []
    if options.algorithm is ChecksumAlgorithm.MD5:
        caveats.append("md5 catches corruption, not deliberate tampering")
    if not options.required:
        caveats.append("a result without a checksum is still accepted")
    caveat = f" ({'; '.join(caveats)})" if caveats else ""
    return name, True, f"{source} {algorithm} verified{caveat}; also checked: {listed}{side}"


def _paging(pages: ResultPages) -> str:
    """How `providers check` says a paged result leads from page to page."""
    if pages.next_page_token is not None:
        return f"the next named by {pages.next_page_token.text}"
    if pages.next_page_url is not None:
        return (
            f"the next page's URL named by {pages.next_page_url.text}, "
            "on the provider's origin or allowed hosts only"
        )
    if pages.page_param is not None:
        count = pages.page_count.text if pages.page_count else ""
        return f"by number, ?{pages.page_param}=<n> from {pages.first_page}, as many as {count}"
    size = f"&{pages.page_size_param}={pages.page_size}" if pages.page_size is not None else ""
    end = {
        LastPage.EMPTY: "to an empty page",
        LastPage.SHORT: "to a page shorter than page_size",
        LastPage.TOTAL: f"until the items read reach {pages.total.text if pages.total else ''}",
    }[pages.last_page]
    return f"by offset, ?{pages.offset_param}=<items read>{size}, {end}"
