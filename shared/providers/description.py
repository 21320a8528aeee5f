"""The validated, immutable form of a provider description (SPEC §5).

`config.py` turns TOML into these objects and checks every key; everything
else in the adapter layer reads them and never re-validates. Paths and
templates are already parsed here, so a description that exists is one that
can be used.

TOML reference (``[providers.<name>]``; *path* = JSON pointer ``/a/b``, dotted
``a.b``, ``header:Name`` or, for webhooks, ``query:name``; a body path may pick
a list's first element whose member equals a value with a selector,
``/data/tasks/[operation=export/url]/url`` or ``data.tasks[operation=export/url].url``
(compared as text, numbers and booleans as JSON writes them; a pointer key that
starts with ``[`` is escaped ``~2``; read only: refused in the paths jobwarden
writes, idempotency_body_field, client_reference_field and set_body; full
rules in ``shared/providers/paths.py``); *paths* = a path or a list of paths;
*template* = text with ``{placeholders}``)::

    description, base_url (required), preset, plugin, [plugin_options]
    request_id_headers = [..]           headers holding the provider's request id
    headers = {Name = "value"}          static, non-secret headers
    [auth]     header ("Authorization"), value ("Bearer {secret}"),
               secret_env | secret_file, optional (false), extra_hosts (hosts also
                 given the credential, over https only: a bare host on 443, or
                 host:port on that port),
               [auth.also.<Header>] value ("{secret}"), secret_env | secret_file: a
                 further credential header sent with the first (Adobe's x-api-key
                 client id beside its bearer token), kept as the first is;
               or scheme = "aws_sigv4" + region, service, credentials_file (the
                 credential_process JSON; else AWS_ACCESS_KEY_ID,
                 AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN): every call signed
    [create]   method (POST), path (template: {client_reference}, {idempotency_token};
                 {webhook_url} only as one query parameter's whole value, left out
                 with no public_webhook_url: fal.ai's ?fal_webhook={webhook_url}),
               idempotency = header|body|client_job_id|none (required),
               idempotency_header ("Idempotency-Key" in header mode),
               idempotency_format = token|uuid (token; uuid = a UUID derived from it,
                 for APIs that accept only UUIDs: AIP-155 request_id, Azure Operation-Id),
               idempotency_body_field, client_reference_field (body paths),
               set_body = {path = template-or-literal} (a string is a template; a table
                 or list literal, refused when one of its strings names a placeholder),
               set_headers = {Name = template}
                 (template values: client_reference, operation_id, idempotency_token,
                  webhook_url, webhook_secret, result_deadline_seconds, trace_id),
               encoding = json|form|multipart (json: the body built as JSON is sent as
                 an HTML form or multipart/form-data, one field per top-level member;
                 multipart files as {content_base64, filename, content_type}, other
                 objects as JSON parts, which a path below the top level writes into:
                 shared/providers/bodies.py),
               form_nesting = none|brackets (none: a form refuses an object member;
                 brackets: encoding = "form" only, an object written a[b]=v at any depth
                 and a list's items a[0]=x, a[1]=y, Stripe's and Rack's way:
                 parameters[interval_start]=...; paths below the top level may then be
                 written: client_reference_field = "/metadata/operation"),
               min_result_deadline_seconds (1: the least result_deadline_seconds sent),
               job_id, state, status_url (paths; status_url may list fallbacks),
               poll_after_seconds (a path: the accepted answer's hint of when the first
                 read is worth making, seconds or ISO 8601, e.g. ElevenLabs'
                 "/expected_duration_sec"; a Retry-After outranks it, a delivery
                 still wakes the job sooner),
               accepted_statuses ([200,201,202]), sync_result_statuses ([]), sync_result
                 (a path: the result of a create answered done, told by one of
                 sync_result_statuses, or by `state` read as succeeded: Dropbox's 200
                 {".tag": "complete", ...} beside {".tag": "async_job_id", ...}),
               conflict_reject_codes ([]), error_code ("/error/code"),
               already_exists_codes ([]: with idempotency = client_job_id, the codes of a
                 4xx documented as "a job with this id already exists", e.g. BigQuery's
                 409 "duplicate", AWS JSON's 400 ConflictException: the job is read by
                 that id through the [lookup] it needs and adopted, not the create resent),
               error_message ("/error/message"),
               idempotency_window_seconds (none: how long after the first attempt the
                 provider honours our token, e.g. MediaConvert's 60; a lost create is
                 resent only while a resend can arrive inside it, then looked up, or
                 left to a human, as with idempotency = none),
               resend_query = {name = "value"} (query parameters added to a create sent
                 again after an attempt that may have reached the provider, never to
                 the first: Snowflake's { retry = "true" } beside
                 ?requestId={idempotency_token}),
               not_created_statuses ([]: 4xx/5xx codes the provider documents as "nothing
                 was created", e.g. [429]; such an answer is back-pressure: the create is
                 sent again after Retry-After or the backoff, never looked up or escalated),
               [not_created_codes] (path = [codes]: error codes documented as "nothing was
                 created", read at that path of any answer without a job id, e.g.
                 "/errors/0/extensions/code" = ["THROTTLED"]; the same back-pressure)
    [status]   method (GET), path (template: {job_id} / {+job_id}), use_status_url,
               body = {..} (with a method that carries one: the JSON object sent, its
                 strings templates: {job_id}; AWS JSON 1.1's Get, every call POST /
                 with X-Amz-Target in the top-level headers, Transcribe's
                 { TranscriptionJobName = "{job_id}" }; a GraphQL query's variables),
               state (a path, or a list: the first holding a state is read, e.g.
                 Databricks' ["/state/result_state", "/state/life_cycle_state"]) +
                 [status.state_map] | done (AIP-151),
               cancelled_error_codes (error codes of a failed read that mean the job was
                 cancelled: [1] with done; else none, needs error_code or error: BigQuery's
                 ["stopped"], Snowflake's 422 ["000604"]),
               error, error_code, error_message (paths: a list is tried in order, the
                 first holding a value read, e.g. Elasticsearch's ["/error/reason",
                 "/response/failures/0/cause/reason"]; code and message lists of one
                 length are read as pairs), progress_completed, progress_total,
               progress_percent | progress_fraction (a share of 1: Runway's 0.42 is
               42 %), updated_at, poll_after_seconds, estimated_end (a
               timestamp) | estimated_seconds_left (from the answer), result_url, errors_url,
               counts_total, counts_succeeded, counts_failed, counts_cancelled (paths),
               [status.throttle_codes] (path = [codes]: error codes a non-2xx read
                 carries when the provider throttles without 429 or Retry-After, e.g.
                 AWS's "/__type" = ["ProvisionedThroughputExceededException"]: such a
                 read is back-pressure, read again at the backoff, never a refused read;
                 a result fetch answering one is retried as a 429 is; listed, a 2xx read
                 carrying `errors` and no state whose code is none of them is an answer,
                 counted toward a human: Marketo's 200 "/errors/0/code" = ["606", "615"]
                 beside its 602, an expired token),
               [status.not_found_codes] (path = [codes]: error codes a non-2xx read
                 carries when the job is gone, told by a code, not a 404: Dropbox's
                 409 "/error/.tag" = ["invalid_async_job_id"], read as a 404 is; or
                 what a 2xx read naming no state holds there, null or nothing read
                 as "null" unless the read carries an error (GraphQL's `errors`, the
                 status's error paths): Leonardo's 200 "/generations_by_pk" = ["null"]),
               outcome_from_counts, outcome_from_counts_states, not_found_statuses,
               error_means_failed (false; true: a state mapped to succeeded or
                 partially_succeeded, or no state at all, read with an error at
                 error/error_code/error_message (one required) is failed, that error
                 its reason: fal.ai's {"status": "COMPLETED", "error", "error_type"},
                 Transloadit's failed assembly, {"error", "message"} and no "ok"),
               error_only_when_failed (false; true: the error paths are read only on a
                 read whose state is failed, cancelled or partially_succeeded, a
                 status message every read carries and the reason only once the
                 job failed: Apify's
                 "/data/statusMessage", "Crawling: 2 of 5 pages" while it runs, else
                 kept as the operation's last error; not with error_means_failed),
               [status.state_from_http_status] ({"202" = "running", "200" = "succeeded"}:
                 the state when the body names none, e.g. an ARM `Location` URL),
               state_in_error_statuses ([]: 4xx/5xx codes whose body may still be the
                 job, read for its state as a 2xx's is: Intercom's failed export,
                 504 with {"status": "failed"}; a body naming no mapped state (a
                 gateway's page) leaves the code the error it is; not a code
                 state_from_http_status maps or not_found_statuses holds)
    [cancel]   supported (true if the table exists), method (POST), path, idempotent,
               reason, accepted_statuses, state,
               deletes_job (false; true: the cancel deletes the job, running or not, and a
                 miss after our accepted cancel is the job cancelled; turns read_first on),
               read_first (false; true with deletes_job: read the status under the same
                 lease right before
                 each cancel and send none once the job ended, for a cancel that deletes
                 a finished job and its result, e.g. Runway's DELETE /v1/tasks/{id}),
               ends_failed (false; true: the cancel ends the job in the state its own
                 failure reads, e.g. Airflow's PATCH {"state": "failed"} of a DAG run:
                 a failed read once our cancel was accepted is the job cancelled, by us),
               body = {..} (the JSON object sent with the cancel, e.g. Salesforce's
                 {state = "Aborted"}; its strings are templates: {job_id}; none = no body)
               resend_statuses ([]: 4xx/5xx answers documented as a cancel not taken,
                 e.g. [429]: a cancel unsafe to repeat is sent again after Retry-After),
               use_status_url (false; true: the cancel goes to the status URL the create
                 answer gave, e.g. Azure AI Speech's DELETE on `self`; path optional),
               [refused_codes] (path = [codes]: what a 2xx cancel answer carries when
                 the cancel was not taken, a boolean read as JSON writes it, e.g.
                 Baseten's "/canceled" = ["false"]: a refusal, as a 4xx is)
    [result]   source = inline|url|path|files|webhook|none (required; webhook: the
                 result comes in a delivery alone, at `inline` of the newest delivery
                 attached to the operation that holds a value there, e.g. Baseten's
                 "/data"; needs [webhooks]; our read still decides the state),
               path (template:
               {job_id}, {file_id}), inline (path; "" = whole body), file_ids (paths;
                 with source = files and no path, each id is a URL fetched as a
                 result_url is: Runway's `output` list; here alone a path may hold
                 [*], every element of a list: CloudConvert's
                 "/data/tasks/[operation=export/url]/result/files/[*]/url"),
               headers = {Name = "value"} (static, non-secret, sent with the result's
                 fetches alone, over the top-level headers: Rev.ai's transcript's
                 Accept = "application/vnd.rev.transcript.v1.0+json"),
               method (GET), body = {..} (source = path only: the request's JSON
                 object, strings are templates: {job_id}; a POST read, e.g. AWS's),
               side_effects, partial_on_cancel (source = path: a cancelled job's
               output is read at its path too), format = json|jsonl|csv|text|binary,
               items, item_id,
               item_error, item_success + item_success_values (json/jsonl only),
               item_code, item_message (paths in a failed item: its error's code and
                 message where item_error cannot give both, e.g. Zendesk's "/error",
                 "/details"; json/jsonl, with item_error, item_success or
                 failures_only),
               failures_only (false; true: the result lists the job's failures alone,
                 every item (row, line) a failed item, e.g. HubSpot's import errors;
                 json with items, or jsonl; the successes are the status's counts
                 alone, never looked for in it, and a result of failures is not the
                 verdict "every item failed"; a job failed with failed items counted
                 has its failures read and kept too, as a cancelled job's output is),
               empty_without_items (false; true: a json document, or page, without
                 its list at items holds none, e.g. BigQuery's `rows`, left out when
                 there is no row; else such a document is refused as a typo'd path),
               base64 (a path into the fetched JSON, or into the inline value: the
                 result is the base64 text there, decoded strictly (RFC 4648, padded,
                 no other characters); format = binary, expect.content_types its one
                 type, max_bytes its decoded size; source = path, url or inline, e.g.
                 Stability's "/video", OpenAI's "/data/0/b64_json"), base64_url (false;
                 true: the URL-safe alphabet, padding optional),
               follow_redirects (false: a 3xx answer to a result fetch is not followed;
                 true: up to 5 redirects, the credential dropped for good once a hop
                 leaves the origins it goes to (base_url's, an auth.extra_hosts entry's),
                 http(s) targets only, every hop in the call log),
               follow (a path into the fetched JSON document naming the result's link:
                 the result is what that link answers, one hop further, e.g. MiniMax's
                 file record "/file/download_url", Azure AI Speech's files listing
                 "/values/[kind=Transcription]/links/contentUrl"; format, expect and
                 checksums judge the followed bytes, the document need only be JSON
                 with an http(s) URL there (relative: to the document's URL), else the
                 result is result_unavailable; the link is fetched as a status-named
                 result URL is: the credential only on its origins, an internal host
                 only if allowed_hosts names it, follow_redirects, max_bytes; a 4xx on
                 the first attempt reads the status and the document afresh for a new
                 link; source = url, path or files (each file's document followed); a
                 paged document (next_page_token, next_page_url) is read whole and its
                 first page naming a link followed; not with base64, pages.offset_param,
                 side_effects or partial_on_cancel),
               compression (with follow: a path into the document naming how the
                 linked file is compressed, e.g. Amazon SP-API's "/compressionAlgorithm":
                 GZIP (any case) is decompressed before it is judged and kept, absent or
                 null is as sent, another algorithm result_validation_failed naming it),
               allowed_hosts ([]: hosts, exact match, case-insensitive, on which a
                 provider-given URL may reach a loopback/private/link-local address, a
                 bare host on any port, host:port ([::1]:8443) on that port alone; the
                 base_url's host and auth.extra_hosts always may),
               empty_without_url (false; true: a final status naming no result URL
                 whose status.counts_total is 0 is an empty result, stored without a
                 fetch: Shopify's bulk operations; source = url only, not with format
                 json, a csv with a header row, or a required checksum),
               empty_states ([]: raw states, each one status.state_map reads as
                 succeeded, that end the job with nothing to collect: an empty
                 result, stored without a fetch; Intercom's export "no_data"; source
                 url, path or files, format and checksum as empty_without_url's)
    [result.failed]  (source url, path or files) statuses (required: 4xx/5xx codes,
               not 429/502/503/504, of the result's first fetch that are the
               provider's verdict that the job failed, e.g. fal.ai's 422), error,
               error_code, error_message (paths into that answer; a 5xx needs one:
               an answer carrying none is no verdict)
    [result.csv]  (format = csv only) header (true), delimiter (","), required_columns,
               id_column, failed_column + failed_values, error_column (columns: a header
               name, or a 0-based index)
    [result.expect]  content_types, required_fields (json/jsonl), max_bytes (50 MiB; at most 2**60),
               checksum = content-digest|digest|none or a table { source =
               content-digest|digest|header|status, header (source = header), field
               (source = status: a path into the status response), algorithm =
               sha256|sha512|md5, encoding = hex|base64, required (true) },
               item_count = "from_status_counts"|path (path: json/jsonl only; without it
                 the status counts are still a floor: a result whose items cannot reach
                 counts_total, or its announced successes, is not valid)
    [result.pages]  (a result served a page at a time; format csv, json or jsonl;
               source url or path) one way to the next page, exactly one of:
                 next_page_token (where a page names the next page's token, e.g.
                   "header:Sforce-Locator" or "/next_cursor") + page_token_param
                   ("page_token": the query parameter the first page's URL carries it in)
                   or page_token_body_field (a body path the token is written at, with
                   result.body: Textract's "/NextToken");
                 next_page_url (where a page names the next page's URL, e.g. Firecrawl's
                   "/next"; absolute or relative to that page's URL, fetched as given, only
                   on an origin (scheme, host, port; a default port the same as none)
                   named: base_url's, an auth.extra_hosts host's (https, 443 or its
                   host:port) or a result.allowed_hosts host's (base_url's scheme, its
                   default port or the entry's host:port): elsewhere it is not fetched and
                   the result is result_unavailable; the credential goes only where it
                   always may);
                 offset_param (the query parameter of the items already read, 0 on the
                   first page, e.g. Apify's "offset"; needs result.items with json) +
                   page_size + page_size_param ("page_size"), sent on every page when set,
                   last_page = empty|short|total + total (a path, header:NAME unless json),
                   as [lookup]'s: an empty page always ends it;
                 page_param (the page number's query parameter, e.g. Snowflake's
                   "partition") + first_page (0 or 1, required) + page_count (required: a
                   path read on the first page (header:NAME unless json), a number or a
                   list whose length is the number of pages, e.g.
                   "/resultSetMetaData/partitionInfo"; unreadable, the first page is the
                   last);
               end_values ([]: token or URL values meaning "last page", e.g. ["null"]),
               max_pages (1000: a result with more is not collected); a page naming one
               already fetched (the same URL) is a loop, not collected either
    [result.errors]  the list of a batch's failed items, read after its result: at the
               status's errors_url, or, when the status names none, at path (template
               with {job_id}: HubSpot's "/crm/v3/imports/{job_id}/errors"; without one
               it needs status.errors_url); format = json (default) | csv;
               json: items (required), item_index, item_id, item_code, item_message
               (paths in an item); csv (a header row first, every row one failed
               item): item_id, item_message (column names or 0-based indexes;
               item_message required, e.g. Salesforce's "sf__Error"); paged by
               next_page_token (a body path, or header:NAME, e.g.
               "header:Sforce-Locator"), page_token_param ("page_token"), end_values
               ([]: token values meaning "last page", e.g. ["null"]), page_size,
               page_size_param ("page_size"); at most 50 pages are read (a csv list:
               until 100 failed items, as a CSV result's), the counts staying the status's
    [lookup]   supported (true if the table exists), reason, kind = list|get (get: a
                 direct read, which must name {client_reference} or {idempotency_token}
                 in its path or body, or use query_param, unless a plugin builds
                 it), method,
               path (template: {client_reference}, {idempotency_token}), query_param,
               body = {..} (the JSON object sent, its strings templates over the
                 path's placeholders; a POST read: AWS Transcribe's Get naming the
                 job we named, { TranscriptionJobName = "{idempotency_token}" }),
               page_token_body_field (a body path the next page's token is written
                 at, instead of page_token_param: with body and next_page_token;
                 Azure Data Factory's queryPipelineRuns "/continuationToken"),
               list, match, job_id, next_page_token, has_more, page_token_param,
               next_page_url (a path: the next page's whole URL, followed as given,
                 instead of next_page_token: Twilio's "/meta/next_page_url", its
                 PageToken inside; null or absent on the last page; the provider's
                 origin only), max_pages (10), not_found_means_absent (kind = get),
               status_url (a path into the found item or the GET answer: the found
                 job's status URL);
               numbered paging instead of a cursor (kind = list): page_param (the page
               number's parameter) + first_page (required: 0 or 1), or offset_param
               (items already read, from 0); last_page = empty|short|total (how the
               end is known: an empty page, always; a page shorter than page_size; the
               items read reaching `total`, a path; default total when `total` is set,
               else empty); page_size + page_size_param ("page_size"), sent when set
    [webhooks] supported (true; false: no webhooks, the table's other keys unread,
                 e.g. a preset's turned off for a provider that sends none),
               scheme = standard_webhooks|stripe|github|slack|shopify|generic_hmac|
                 hmac|asymmetric|static_header|twilio|mailgun|jwt (required),
               [options] (checked by shared.signatures, per scheme: README "Webhook
               signature schemes"; static_header: header, or query for a token in
               the callback URL), secrets_env | secrets_file
               (one or a list: rotation), optional, tolerance_seconds (300), event_id,
               state, [state_map] (over status.state_map), thin, get_challenge (a
               query parameter: a GET carrying it is answered with its value as
               text/plain, Dropbox's unsigned endpoint check; or a table: param,
               verify_token + verify_token_env | verify_token_file (Meta's and
               Strava's hub.verify_token, required on the GET), answer =
               text|json, method = GET|POST (POST: Microsoft Graph's and Azure AI
               Speech's POST ?validationToken=)); and where the event
               names its operation, at least one of (paths; tried in this order):
                 operation_id (our operation id echoed back, e.g. `?op={operation_id}`
                   in the webhook URL set_body gives the provider, or the create's
                   client_reference_field; `operation_ref` is its former name, accepted
                   but not together with it),
                 client_reference (the agent's client reference of the operation, e.g.
                   echoed request metadata; matches only when exactly one operation of
                   the provider has it),
                 job_id (the provider's job id; an event for a job id not yet recorded
                   is kept and attached when it is);
               challenge = zoom|slack|event_grid (a signed endpoint challenge answered,
                 never stored; or a table: answer, when, equals, token, where the
                 sender puts them elsewhere; event_grid needs events),
               events (a body path to a list of events in one delivery, "" for the
                 body itself: each element an event of its own, the table's body paths
                 read in it; HubSpot, SendGrid, Event Grid, Graph's "/value"),
               allowed_origins ([]: the origins whose CloudEvents OPTIONS handshake is
                 answered, host names perhaps with a port, or ["*"]; none: 405)
    [limits]   backoff_base (2), backoff_factor (2), backoff_cap (60), max_concurrency (8),
               request_timeout (10), create_deadline_seconds (3600),
               result_deadline_seconds (86400), cancel_deadline_seconds (900),
               webhook_backstop_poll_seconds (300),
               default_poll_after_seconds, result_retry_seconds (3600)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from shared.ledger.states import RemoteState
from shared.providers.paths import PathSource, ValuePath
from shared.providers.templates import Template
from shared.secret import Secret
from shared.signatures import static_header
from shared.signatures.challenges import ChallengeAnswer

if TYPE_CHECKING:
    from shared.providers.adapter import ProviderAdapter


class Idempotency(StrEnum):
    """How a create request proves it is a repeat of an earlier one."""

    HEADER = "header"  # e.g. Idempotency-Key: <token>
    BODY = "body"  # e.g. {"request_id": <token>} (AIP-155)
    CLIENT_JOB_ID = "client_job_id"  # we choose the job id (Azure Operation-Id)
    NONE = "none"  # the provider cannot deduplicate: never blind-retry a create


class BodyEncoding(StrEnum):
    """How a create's body is sent (shared/providers/bodies.py)."""

    JSON = "json"
    FORM = "form"  # application/x-www-form-urlencoded
    MULTIPART = "multipart"  # multipart/form-data


class FormNesting(StrEnum):
    """How a form (`create.encoding = "form"`) carries a member that is an object or
    a list of them (shared/providers/bodies.py)."""

    NONE = "none"  # refused: a form field is text (the default)
    # Stripe's and Rack's: {"a": {"b": 1}} is a[b]=1, a list's items a[0]=x, a[1]=y
    BRACKETS = "brackets"


class TokenFormat(StrEnum):
    """The form in which the idempotency token travels (see `tokens.wire_token`)."""

    TOKEN = "token"  # noqa: S105 -- a format name: the token as minted, idem_<32 hex>
    UUID = "uuid"  # a UUID derived from it, for APIs that accept nothing else


class ResultSource(StrEnum):
    INLINE = "inline"  # inside the final status body
    URL = "url"  # a URL found in the status body
    PATH = "path"  # a path template on the provider's base URL
    # file ids in the status body, each fetched via a path template, or, without
    # one, file URLs (Runway's `output`), each fetched as a result URL is
    FILES = "files"
    NONE = "none"  # the job produces no result document
    # in a signed delivery alone (Baseten's async output: no read holds it), at
    # `inline` in the newest delivery attached to the operation that holds it
    WEBHOOK = "webhook"


class ResultFormat(StrEnum):
    JSON = "json"
    JSONL = "jsonl"  # one JSON item per line
    CSV = "csv"  # one item per row (see CsvOptions)
    TEXT = "text"  # UTF-8 text, no items
    BINARY = "binary"  # any bytes: only size and checksum are checked, never parsed

    @property
    def is_json(self) -> bool:
        return self in (ResultFormat.JSON, ResultFormat.JSONL)


class Checksum(StrEnum):
    """Where the checksum of the result bytes comes from."""

    CONTENT_DIGEST = "content-digest"  # RFC 9530 Content-Digest: sha-256=:b64:
    DIGEST = "digest"  # RFC 3230 (obsolete) Digest: SHA-256=b64
    HEADER = "header"  # a named header of the result response (x-amz-checksum-sha256)
    STATUS = "status"  # a field of the final status response (/output_sha256)
    NONE = "none"


class ChecksumAlgorithm(StrEnum):
    SHA256 = "sha256"
    SHA512 = "sha512"
    # Integrity against corruption only (legacy object stores: Content-MD5, ETag),
    # never against a party that wants to forge a result.
    MD5 = "md5"


class ChecksumEncoding(StrEnum):
    HEX = "hex"
    BASE64 = "base64"


@dataclass(frozen=True)
class ChecksumOptions:
    """Details of `ResultExpect.checksum`.

    `algorithm` None: for content-digest/digest, every sha-256/sha-512 member
    present is checked (at least one must be); set, that member must be present.
    For header/status sources the algorithm is always set and the value is
    `encoding`-encoded. `required` False: a missing checksum passes with a note;
    a wrong one still fails.
    """

    algorithm: ChecksumAlgorithm | None = None
    encoding: ChecksumEncoding = ChecksumEncoding.HEX
    header: str | None = None
    status_field: ValuePath | None = None  # source = status: where in the status response
    required: bool = True


# A CSV column: its header name (header = true), or its 0-based position.
CsvColumn = str | int


@dataclass(frozen=True)
class CsvOptions:
    """`[result.csv]`: every data row is one item.

    A row is failed when `failed_column` holds one of `failed_values` (exact
    match), or, with no `failed_values`, any non-empty value.
    """

    header: bool = True
    delimiter: str = ","
    required_columns: tuple[str, ...] = ()
    id_column: CsvColumn | None = None
    failed_column: CsvColumn | None = None
    failed_values: frozenset[str] = frozenset()
    error_column: CsvColumn | None = None

    @property
    def can_fail_rows(self) -> bool:
        return self.failed_column is not None


class WebhookScheme(StrEnum):
    STANDARD_WEBHOOKS = "standard_webhooks"
    STRIPE = "stripe"
    GITHUB = "github"
    GENERIC_HMAC = "generic_hmac"
    STATIC_HEADER = "static_header"
    SLACK = "slack"
    SHOPIFY = "shopify"
    HMAC = "hmac"
    ASYMMETRIC = "asymmetric"
    TWILIO = "twilio"
    MAILGUN = "mailgun"
    JWT = "jwt"


class LookupKind(StrEnum):
    LIST = "list"  # list endpoint filtered by (or scanned for) our client reference
    GET = "get"  # direct read by a client-chosen id; 404 can prove absence


class LastPage(StrEnum):
    """How a numbered lookup (page_param or offset_param), or a result paged by
    offset (`result.pages.offset_param`), knows it read the last page.

    An empty page always ends it, whatever the choice: `empty` costs one more
    request than the others but cannot be misled by a provider that caps the
    page size below the one asked for, which `short` can.
    """

    EMPTY = "empty"  # the first page without items
    SHORT = "short"  # a page with fewer items than page_size
    TOTAL = "total"  # the items read reach the count at `total`


HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class SigV4:
    """Calls signed with AWS Signature Version 4 for this region and service."""

    region: str
    service: str


@dataclass(frozen=True)
class AuthHeader:
    """A further credential header of `[auth]` (`[auth.also.<Name>]`): an API that
    asks for two on every call (Adobe PDF Services: the access token in
    Authorization and the client id in `x-api-key`). Sent, redacted and kept to
    the credential's origins exactly as the main header is."""

    header: str
    value: Template
    secret: Secret

    def header_value(self) -> str:
        return self.value.text.replace("{secret}", self.secret.reveal())


@dataclass(frozen=True)
class AuthSpec:
    """The credential header; the value is rendered only when a request is built.

    With `sigv4`, `secret` holds the credentials as credential_process JSON and
    each call is signed (shared/providers/sigv4.py), `header` and `value` unused.
    """

    header: str
    value: Template
    secret: Secret
    # Hosts besides the base URL's that may receive the credential (status or
    # result URLs on a sibling host), over https only: `requests.host_entry`'s
    # form, a bare host on 443, `host:port` on that port. Every other origin,
    # another port of one of these included, gets no credential.
    extra_hosts: tuple[str, ...] = ()
    sigv4: SigV4 | None = None
    also: tuple[AuthHeader, ...] = ()

    def header_value(self) -> str:
        return self.value.text.replace("{secret}", self.secret.reveal())


@dataclass(frozen=True)
class BodyField:
    """A create-body field we set: a template string, or a literal TOML value whose
    strings may be templates too (a list of callback objects: Speechmatics'
    `notification_config`)."""

    path: ValuePath
    template: Template | None
    literal: Any = None

    @property
    def templates(self) -> tuple[Template, ...]:
        """Every template the field holds, at its top or inside its literal."""
        if self.template is not None:
            return (self.template,)
        return tuple(_nested_templates(self.literal))


def _nested_templates(value: Any) -> list[Template]:
    if isinstance(value, Template):
        return [value]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in _nested_templates(item)]
    if isinstance(value, list):
        return [t for item in value for t in _nested_templates(item)]
    return []


@dataclass(frozen=True)
class CreateSpec:
    method: str
    path: Template
    idempotency: Idempotency
    idempotency_header: str | None
    idempotency_body_field: ValuePath | None
    client_reference_field: ValuePath | None
    set_body: tuple[BodyField, ...]
    set_headers: tuple[tuple[str, Template], ...]
    job_id: ValuePath | None
    state: ValuePath | None
    # First path that yields a value wins (ARM: Azure-AsyncOperation, then Location).
    status_url: tuple[ValuePath, ...]
    accepted_statuses: frozenset[int]
    sync_result_statuses: frozenset[int]
    sync_result: ValuePath | None
    # Error codes that make a 409 a definitive rejection. Any other 409 may be
    # "a request with this token is still in progress" and is ambiguous.
    conflict_reject_codes: frozenset[str]
    error_code: ValuePath
    error_message: ValuePath
    idempotency_format: TokenFormat = TokenFormat.TOKEN
    # Non-2xx codes the provider documents as "refused, nothing was created"
    # (Runway's 429). Such an answer is back-pressure, not an uncertain create:
    # the same create goes out again after its Retry-After (else the backoff).
    # Empty by default: a 429 or 5xx may follow work the provider started.
    not_created_statuses: frozenset[int] = frozenset()
    # Error codes the provider documents as "nothing was created", each read at
    # its own path of the answer, whatever its status (GraphQL answers 200 with
    # `userErrors` OPERATION_IN_PROGRESS, or `errors` THROTTLED): the same
    # back-pressure as not_created_statuses. Pairs (path, codes as text).
    not_created_codes: tuple[tuple[ValuePath, frozenset[str]], ...] = ()
    # The smallest `{result_deadline_seconds}` a create sends: a provider that
    # stops the job at that deadline may refuse a shorter one (Replicate's
    # Cancel-After: 5 s). Never less than 1: a deadline of 0 means "now" or "none".
    min_result_deadline_seconds: int = 1
    # How the body is sent: JSON, or built as JSON and sent as a form.
    encoding: BodyEncoding = BodyEncoding.JSON
    # How a form carries an object member: refused, or in brackets (Stripe's
    # parameters[interval_start]=...).
    form_nesting: FormNesting = FormNesting.NONE
    # Where an accepted create's answer says when the first read is worth making
    # (ElevenLabs' `expected_duration_sec`, which no status read repeats): the
    # first read waits that long, as for a status's poll_after_seconds.
    poll_after_seconds: ValuePath | None = None
    # Error codes of a 4xx the provider documents as "a job with this id already
    # exists" (client_job_id only: BigQuery's 409 reason "duplicate", Transcribe's
    # 400 ConflictException). The id is ours,
    # so such an answer to a resend is our earlier create: the job is read by
    # that id (the lookup) and adopted, never resent or escalated as a conflict.
    already_exists_codes: frozenset[str] = frozenset()
    # Query parameters a create carries only when sent again after an attempt that
    # may have reached the provider (Snowflake's retry=true, "set to true only
    # when retrying the request"); the first attempt goes without them.
    resend_query: tuple[tuple[str, str], ...] = ()
    # How long after its first use the provider honours our token (MediaConvert's
    # clientRequestToken: "within one minute of a successful request"). A create
    # whose answer was lost is sent again with it only while a resend can still
    # arrive inside that time; past it, as with idempotency = none: the lookup,
    # or a human. None: for as long as the operation lives.
    idempotency_window_seconds: int | None = None

    @property
    def asks_callback(self) -> bool:
        """Does the create tell the provider where to call back (`{webhook_url}` in its
        path, a body field or a header)? Then a reconciler that knows no URL of ours
        leaves it out of every create, and no callback comes; without it, the
        provider calls back wherever its own settings say (a dashboard's webhook)."""
        templates = [self.path, *(t for f in self.set_body for t in f.templates)]
        templates += [template for _, template in self.set_headers]
        return any("webhook_url" in template.names for template in templates)


@dataclass(frozen=True)
class StatusSpec:
    method: str
    path: Template | None
    use_status_url: bool
    state: ValuePath | None
    state_map: Mapping[str, RemoteState]
    done: ValuePath | None
    error: ValuePath | None
    error_code: ValuePath | None
    error_message: ValuePath | None
    cancelled_error_codes: frozenset[str]
    progress_completed: ValuePath | None
    progress_total: ValuePath | None
    progress_percent: ValuePath | None
    updated_at: ValuePath | None
    poll_after_seconds: ValuePath | None
    result_url: ValuePath | None
    errors_url: ValuePath | None
    counts_total: tuple[ValuePath, ...]
    counts_succeeded: tuple[ValuePath, ...]
    counts_failed: tuple[ValuePath, ...]
    # Items cancelled (a subset of the not-ok ones): a batch whose only
    # non-successes are cancellations and has no success ended cancelled.
    counts_cancelled: tuple[ValuePath, ...]
    outcome_from_counts: bool
    # Raw states whose outcome the counts decide; None = every raw state mapped
    # to succeeded or partially_succeeded.
    outcome_from_counts_states: frozenset[str] | None
    not_found_statuses: frozenset[int]
    # State read from the HTTP status code when the body carries none: polling an
    # ARM `Location` URL answers 202 until done, then 200/204 with no status field.
    state_from_http_status: Mapping[int, RemoteState] = field(default_factory=dict)
    # Non-2xx codes whose answer may still be the job (Intercom's failed export,
    # read 504 with the job in its body): the body's state, when it names one the
    # state map knows, decides the read; else the code is the error it always was.
    state_in_error_statuses: frozenset[int] = frozenset()
    # The JSON object a status read sends (with method = POST): a GraphQL
    # query naming the job in its variables (Shopify's `node(id:)`); None: none.
    body: TemplatedJson = None
    # When the provider expects the job to end: a timestamp (OpenAI fine-tuning's
    # `estimated_finish`), or seconds from its answer; the poller reads near it.
    estimated_end: ValuePath | None = None
    estimated_seconds_left: ValuePath | None = None
    # Error codes a refused status read carries when the provider throttles
    # without a 429, a Retry-After or a spent-quota header (AWS: 400 with
    # `__type` ProvisionedThroughputExceededException): back-pressure, never a
    # refused read counting toward a human.
    throttle_codes: tuple[tuple[ValuePath, frozenset[str]], ...] = ()
    # Error codes a refused status read carries when the job is gone, told by a
    # code and not a 404 (Dropbox's 409 `invalid_async_job_id` for a job id
    # expired or never issued): read as "job not found", as a 404 is.
    not_found_codes: tuple[tuple[ValuePath, frozenset[str]], ...] = ()
    # Progress as a share of 1 (Runway's `progress`: 0.42 is 42 %), read in
    # place of `progress_percent`: one or the other.
    progress_fraction: ValuePath | None = None
    # A state mapped to succeeded (or partially_succeeded) read with an error at
    # `error`/`error_code`/`error_message` is a failure (fal.ai's newer status:
    # `COMPLETED` with `error` and `error_type`); off by default, as an error
    # beside a success is a warning at other providers.
    error_means_failed: bool = False
    # The error paths name an error only on a read whose state is failed,
    # cancelled or partially succeeded (its message says which items failed): a
    # status message every read carries (Apify's `statusMessage`, "Crawling: 2 of
    # 5 pages", "Finished! ..."), the reason only once the job failed; on other
    # reads it was kept as the operation's last error.
    error_only_when_failed: bool = False
    # `state` written as a list: the paths after the first, tried in order when
    # the ones before hold no state (absent, null or empty). Databricks names a
    # run's result_state only once it ended: ["/state/result_state",
    # "/state/life_cycle_state"].
    state_also: tuple[ValuePath, ...] = ()
    # `error_code` / `error_message` written as lists: the paths after the first,
    # tried in order when the ones before hold nothing. Elasticsearch ends a task
    # with `error`, and a reindex aborted on its documents with
    # `response.failures`: ["/error/reason", "/response/failures/0/cause/reason"].
    error_code_also: tuple[ValuePath, ...] = ()
    error_message_also: tuple[ValuePath, ...] = ()

    @property
    def state_paths(self) -> tuple[ValuePath, ...]:
        """Every path a state is read at, in the order tried."""
        return (self.state, *self.state_also) if self.state is not None else ()

    @property
    def error_code_paths(self) -> tuple[ValuePath, ...]:
        """Every path an error code is read at, in the order tried."""
        return (self.error_code, *self.error_code_also) if self.error_code is not None else ()

    @property
    def error_message_paths(self) -> tuple[ValuePath, ...]:
        """Every path an error message is read at, in the order tried."""
        first = self.error_message
        return (first, *self.error_message_also) if first is not None else ()

    def answers(self, status_code: int) -> bool:
        """Whether a status read with this code may say where the job is (a 2xx, a
        code mapped to a state, such as a 303 See Other at completion, or one whose
        body is read for it: `state_in_error_statuses`, a body naming none is then
        a read naming no state)."""
        return (
            200 <= status_code < 300
            or status_code in self.state_from_http_status
            or status_code in self.state_in_error_statuses
        )


# A JSON value whose strings are templates (`CancelSpec.body`): a Template where
# the TOML had a string, the TOML value itself elsewhere.
TemplatedJson = Any


@dataclass(frozen=True)
class CancelSpec:
    supported: bool
    method: str
    path: Template | None
    idempotent: bool
    reason: str
    accepted_statuses: frozenset[int]
    state: ValuePath | None
    # The JSON object sent with the cancel, or None for no body: some APIs cancel
    # by changing the job's state (Salesforce: PATCH {"state": "Aborted"}), and
    # an empty body is refused with a 4xx the job outlives.
    body: TemplatedJson = None
    # Read the job's status right before each cancel (same lease) and send none
    # once it ended: some APIs' only cancel deletes a finished job and its
    # result (Runway's DELETE /v1/tasks/{id}), which a cancel racing the end
    # would otherwise destroy. It narrows that window to the read's answer
    # and the cancel's arrival; it cannot close it.
    read_first: bool = False
    # The cancel deletes the job (Luma's DELETE /generations/{id}): once it was
    # accepted, a status read answering "no such job" is the job cancelled by
    # us, not a job lost. Without it, such a miss went to a human.
    deletes_job: bool = False
    # The cancel ends the job failed, as its own failure reads (Airflow's PATCH
    # {"state": "failed"}, the only way to stop a DAG run): once it was
    # accepted, a failed read is the job cancelled by us. Without it, every
    # confirmed cancel of such a job ended `failed`, a failure the job never had.
    ends_failed: bool = False
    # Answers the provider documents as a cancel not taken (a 429 that served
    # nothing): the cancel is sent again after its Retry-After, idempotent or
    # not. Without them, a cancel unsafe to repeat is sent once whatever the
    # answer, and a refused one waits for a human at the cancel deadline.
    resend_statuses: frozenset[int] = frozenset()
    # The cancel goes to the status URL the create answer gave (Azure AI Speech:
    # DELETE on a transcription's `self`, its only name), as status reads may
    # (`status.use_status_url`); `path` then serves a job with no URL on record.
    use_status_url: bool = False
    # Codes a 2xx cancel answer carries when the provider did not take it (path ->
    # codes, read as `create.not_created_codes` are; a boolean as JSON writes it):
    # Baseten's 200 {"canceled": false, "message": "Only QUEUED requests may be
    # canceled"}. Such an answer is a refusal, as a 4xx is.
    refused_codes: tuple[tuple[ValuePath, frozenset[str]], ...] = ()


@dataclass(frozen=True)
class ResultExpect:
    content_types: tuple[str, ...]
    required_fields: tuple[ValuePath, ...]
    max_bytes: int
    checksum: Checksum
    item_count_from_status: bool
    item_count: ValuePath | None
    checksum_options: ChecksumOptions = field(default_factory=ChecksumOptions)


@dataclass(frozen=True)
class ErrorsSpec:
    """The paginated per-item failure list of a batch (SPEC §7: never inline).

    Where it is: the URL the status names (`status.errors_url`), else `path`, a
    template with {job_id}: some APIs keep the list at a fixed place the status
    never names (HubSpot's `/crm/v3/imports/{id}/errors`, Salesforce's
    `failedResults/`). A JSON page holds its items at `items`; a CSV page
    (`format = "csv"`, header row first) is its rows, read by the columns
    `id_column` and `message_column` name.
    """

    items: ValuePath | None  # None only with format = csv
    next_page_token: ValuePath | None
    page_token_param: str
    page_size: int | None
    page_size_param: str
    item_index: ValuePath | None
    item_id: ValuePath | None
    item_code: ValuePath | None
    item_message: ValuePath | None
    path: Template | None = None
    format: ResultFormat = ResultFormat.JSON
    id_column: CsvColumn | None = None
    message_column: CsvColumn | None = None
    # Token values that mean "no next page" (Salesforce's "null" Sforce-Locator)
    end_values: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ResultPages:
    """A result served a page at a time: every page is fetched, and the result is
    their parts joined, or it is not collected at all.

    One of three ways leads to the next page (config refuses two): a token the
    page names (Salesforce Bulk 2.0's `Sforce-Locator` header, a body cursor),
    sent back in `page_token_param` on the first page's URL; the next page's URL
    the page names (Firecrawl's `next`), fetched as given, resolved against the
    page's own URL, only on an origin named: the base_url's, or an
    `auth.extra_hosts` or `result.allowed_hosts` host's (never another port or
    scheme of it); or an offset (Apify's dataset items:
    `?offset=0&limit=1000`), the number of items already read, sent in
    `offset_param` (0 on the first page), the end known by `last_page`; or a
    page number (Snowflake's partitions: `?partition=1`), sent in `page_param`
    from `first_page`, the count read on the first page at `page_count`.
    """

    next_page_token: ValuePath | None
    page_token_param: str
    # Token values that mean "no next page" besides an absent or empty one
    # (Salesforce sends the text "null" on the last page); next_page_url's too.
    end_values: frozenset[str]
    max_pages: int
    next_page_url: ValuePath | None = None
    offset_param: str | None = None
    page_size: int | None = None  # sent in page_size_param on every page (offset_param)
    page_size_param: str = "page_size"
    last_page: LastPage = LastPage.EMPTY  # how an offset-paged result's end is known
    total: ValuePath | None = None  # the result's item count (last_page = total)
    # Where the next page's token goes in the result request's body instead of
    # its query (Textract: GetDocumentTextDetection's `NextToken`, a POST to `/`).
    page_token_body_field: ValuePath | None = None
    # Paged by number (Snowflake's result partitions, `?partition=N`): the page's
    # number in `page_param`, from `first_page`; the first page says how many
    # there are at `page_count` (a number, or a list: its length).
    page_param: str | None = None
    first_page: int = 0
    page_count: ValuePath | None = None

    @property
    def named(self) -> ValuePath | None:
        """Where a page names the next (its token or its URL); None: paged by offset
        or by number."""
        return self.next_page_token or self.next_page_url

    @property
    def counted(self) -> bool:
        """Does the next page's request depend on the page before's own token (an
        offset, a page number), passed to `result_next_page`?"""
        return self.offset_param is not None or self.page_param is not None


@dataclass(frozen=True)
class ResultFailed:
    """Answers of the result fetch that are the provider's verdict that the job
    failed (`[result.failed]`). Some APIs say "done" on every status read, a
    failure included, and tell it only in the result's answer (fal.ai's queue:
    `COMPLETED`, then the runner's 422 or 500 from the response URL)."""

    statuses: frozenset[int]
    error: ValuePath | None = None
    error_code: ValuePath | None = None
    error_message: ValuePath | None = None

    @property
    def markers(self) -> tuple[ValuePath, ...]:
        """Where the provider's error is; when any is named, an answer carrying none of
        them is no verdict (a proxy's HTML 500 on the way)."""
        return tuple(p for p in (self.error, self.error_code, self.error_message) if p)


@dataclass(frozen=True)
class ResultSpec:
    source: ResultSource
    path: Template | None
    inline: ValuePath | None
    file_ids: tuple[ValuePath, ...]
    side_effects: bool
    format: ResultFormat
    items: ValuePath | None
    item_id: ValuePath | None
    item_error: ValuePath | None
    item_success: ValuePath | None
    item_success_values: frozenset[str]
    expect: ResultExpect
    errors: ErrorsSpec | None
    csv: CsvOptions | None = None  # set exactly when format = csv
    # Follow a 3xx answer to a result fetch (GitHub's logs: 302 to a signed
    # archive). Off unless asked: a redirect is the provider's contract, and
    # each hop is a call of its own in the log.
    follow_redirects: bool = False
    # Hosts (normalized: `requests.host_entry`) a URL the provider gives may
    # name although they are internal (a loopback name, a private or
    # link-local address): an internal result store the operator runs; a bare
    # host on any port, `host:port` on that port alone. Any other internal host
    # is refused, the base_url's and auth.extra_hosts' aside: a result URL is
    # often the submitter's, echoed back. A next page (`ResultPages`) may be on
    # one: a bare host on base_url's scheme's default port, `host:port` on its.
    allowed_hosts: tuple[str, ...] = ()
    pages: ResultPages | None = None
    failed: ResultFailed | None = None
    # The provider gives no result URL for a job that produced nothing
    # (Shopify's bulk operations: `url: null`, `objectCount: "0"`): a final
    # status without a URL whose item counts total 0 is an empty result.
    empty_without_url: bool = False
    # Raw states that end the job well with nothing to collect (Intercom's export
    # `no_data`, its download_url empty): an empty result, stored without a fetch.
    empty_states: frozenset[str] = frozenset()
    # Headers of the result's fetches alone (every page, every file), over the
    # description's `headers`: Rev.ai's transcript is asked for as
    # `Accept: application/vnd.rev.transcript.v1.0+json`, its job calls as JSON.
    headers: Mapping[str, str] = field(default_factory=dict)
    # The result request of source = path: its method, and the JSON object it
    # sends (templates: {job_id}), for an API whose reads are POSTs (AWS's JSON
    # protocol: `GetDocumentTextDetection` {"JobId": ...}); None: no body.
    method: str = "GET"
    body: TemplatedJson = None
    # A cancelled job keeps what it wrote at its result path (Apify's aborted
    # run, its dataset items): fetched as its partial output. Off unless said:
    # at most providers the path of a cancelled job holds no output (a 404),
    # or something else (the job resource itself, an empty report).
    partial_on_cancel: bool = False
    # The result is base64 text at this path of the fetched JSON (source = path,
    # url) or of the inline value (source = inline): Stability's {"video": ...},
    # OpenAI's data[0].b64_json. The decoded bytes are the result (format =
    # binary, expect.content_types their one type); `base64_url`: the URL-safe
    # alphabet (RFC 4648 section 5, padding optional) instead of the standard one.
    base64: ValuePath | None = None
    base64_url: bool = False
    # The fetched answer is a JSON document naming the result's link at this
    # path (MiniMax's file record: "/file/download_url"): the result is what
    # that link answers, fetched as a status-named result URL is (no credential
    # off the provider's origins, internal hosts refused unless allowed, an
    # expired link read afresh once); format and expect judge those bytes.
    follow: ValuePath | None = None
    # Where the document `follow` read names how the linked file is compressed
    # (Amazon SP-API's report document: "compressionAlgorithm": "GZIP", absent
    # when it is not): a gzip file is kept, judged and hashed decompressed. Its
    # store serves it with no Content-Encoding, so no transport undoes it.
    compression: ValuePath | None = None
    # The result lists the job's failures alone (HubSpot's import errors, one per
    # row that failed): every item is a failed one and the successes are the
    # status's to count. Read as an ordinary result, its items all "failed" made
    # an import that wrote most of its rows a failed job, and the status's
    # successes, looked for among its items, a result "cut short".
    failures_only: bool = False
    # A JSON document without its item list at `items` holds none (BigQuery's
    # query results leave `rows` out when there is no row); else it is refused.
    empty_without_items: bool = False
    # Where a failed item names its error's code and message, when `item_error`
    # alone cannot say both (Zendesk's {"index", "error": "UserCreateFailed",
    # "details": "Email: ... is already being used"}): read in each failed item.
    item_code: ValuePath | None = None
    item_message: ValuePath | None = None

    @property
    def fetched_max_bytes(self) -> int:
        """The most a fetched answer may hold: max_bytes, or, when the result is
        base64 inside JSON, its encoded size (4 per 3 bytes) plus room for the
        JSON around it; read no further, so memory stays bounded before decoding."""
        limit = self.expect.max_bytes
        if self.base64 is None:
            return limit
        return base64_encoded_size(limit) + BASE64_ENVELOPE_BYTES

    @property
    def file_urls(self) -> bool:
        """The status names the result's files by URL (source = files, no path):
        links that expire, on a host that is not the provider's."""
        return self.source is ResultSource.FILES and self.path is None


# What a base64 result's JSON may hold besides the base64 text (finish_reason,
# seed, revised_prompt, usage...): the answer is read up to its encoded size
# plus this, and no further.
BASE64_ENVELOPE_BYTES = 64 * 1024


def base64_encoded_size(decoded: int) -> int:
    """The length of the padded base64 text of `decoded` bytes."""
    return 4 * ((decoded + 2) // 3)


@dataclass(frozen=True)
class LookupSpec:
    supported: bool
    reason: str
    kind: LookupKind
    method: str
    path: Template | None
    query_param: str | None
    list: ValuePath | None
    match: ValuePath | None
    job_id: ValuePath | None
    next_page_token: ValuePath | None
    # When set and false, there is no next page whatever next_page_token says
    # (OpenAI lists carry `last_id` on every page, `has_more` says if it counts);
    # true without a cursor, pages we cannot read: no absence is proven.
    has_more: ValuePath | None
    page_token_param: str
    max_pages: int
    not_found_means_absent: bool
    # Numbered paging, instead of a cursor (Mistral: `?page=0&page_size=100`):
    # the page number travels in page_param, counted from first_page; or the
    # number of items already read travels in offset_param. One of
    # next_page_token, page_param, offset_param at most.
    page_param: str | None = None
    offset_param: str | None = None
    first_page: int = 0
    page_size: int | None = None  # sent in page_size_param when set, in every paging
    page_size_param: str = "page_size"
    last_page: LastPage = LastPage.EMPTY
    total: ValuePath | None = None  # the list's item count (last_page = total)
    # Where the found job's status URL is (in its list item, or the GET answer):
    # for an API whose job is known only by a URL (Azure AI Speech's `self`),
    # status reads (`status.use_status_url`) go there once the job is found.
    status_url: ValuePath | None = None
    # The next page's whole URL, its cursor inside (Twilio's meta.next_page_url,
    # PageToken and all): followed as given, instead of a token sent in
    # page_token_param. One of next_page_token, next_page_url at most.
    next_page_url: ValuePath | None = None
    # The JSON object the lookup sends (with a method that carries one): an API
    # whose every call is a POST naming the job in its body (AWS JSON 1.1's
    # GetTranscriptionJob {TranscriptionJobName}); None: none.
    body: TemplatedJson = None
    # Where the next page's token is written in `body`, instead of sent in
    # page_token_param: a list read by a POST whose cursor travels in the body
    # (Azure Data Factory's queryPipelineRuns `continuationToken`). Sent as a query
    # parameter, such an API ignores it and answers the first page again.
    page_token_body_field: ValuePath | None = None

    @property
    def numbered(self) -> bool:
        """Paged by page number or offset: the next page is ours to compute."""
        return self.page_param is not None or self.offset_param is not None

    @property
    def paged(self) -> bool:
        """Can a lookup read past its first page at all?"""
        return self.numbered or self.next_page_token is not None or self.next_page_url is not None

    @property
    def filtered(self) -> bool:
        """Does the request name our reference (the provider filters the list for us),
        in its path or its body (AWS JSON 1.1's List... {JobNameContains})?"""
        names = self.path.names if self.path is not None else frozenset()
        names = names | template_names(self.body)
        return self.query_param is not None or bool(
            names & {"client_reference", "idempotency_token"}
        )


def template_names(value: TemplatedJson) -> frozenset[str]:
    """The placeholders a templated JSON value (`config._json_body`) names."""
    if isinstance(value, Template):
        return frozenset(value.names)
    if isinstance(value, Mapping):
        return frozenset().union(*(template_names(v) for v in value.values()))
    if isinstance(value, list):
        return frozenset().union(*(template_names(v) for v in value))
    return frozenset()


@dataclass(frozen=True)
class WebhookChallenge:
    """A sender's endpoint challenge (shared/signatures/challenges.py): a verified
    delivery whose `when` reads `equals` is answered with its `token` as `answer`
    says, and never stored."""

    answer: ChallengeAnswer
    when: ValuePath
    equals: str
    token: ValuePath


class GetAnswer(StrEnum):
    """How a GET challenge's value is given back: as the text itself (Dropbox,
    Meta), or as a JSON object naming it by its parameter (Strava:
    `{"hub.challenge": "…"}`)."""

    TEXT = "text"
    JSON = "json"


@dataclass(frozen=True)
class GetChallenge:
    """An unsigned GET (or POST: `method`) whose query parameter `param` is given
    back, as a sender checks an endpoint before it delivers (`[webhooks]
    get_challenge`).

    With `verify_param`, only a GET whose `verify_param` holds `verify_token`
    (the token given to the sender when the subscription was made: Meta's and
    Strava's `hub.verify_token`) is answered; with `verify_param` and no
    `verify_token` (optional webhooks whose token is not set), none is.
    """

    param: str
    verify_param: str | None = None
    verify_token: Secret | None = None
    answer: GetAnswer = GetAnswer.TEXT
    # The method the check comes by: "GET" (Dropbox, Meta, Strava), or "POST"
    # (Microsoft Graph's and Azure AI Speech's `?validationToken=`, a POST with
    # no body to read; a POST without the parameter is a delivery as ever).
    method: str = "GET"


@dataclass(frozen=True)
class WebhookSpec:
    scheme: WebhookScheme
    options: Mapping[str, Any]
    secrets: tuple[Secret, ...]
    tolerance_seconds: int
    event_id: ValuePath | None
    job_id: ValuePath | None
    state: ValuePath | None
    state_map: Mapping[str, RemoteState]
    operation_ref: ValuePath | None  # TOML `operation_id` (or its former name operation_ref)
    thin: bool
    client_reference: ValuePath | None = None
    challenge: WebhookChallenge | None = None
    # The GET a sender checks the endpoint with (Dropbox's, Meta's, Strava's).
    get_challenge: GetChallenge | None = None
    # Where a batch delivery holds its list of events (`""`: the body is the list;
    # HubSpot, SendGrid, Event Grid); the other body paths are then read in each
    # element (receiver/webhooks/batches.py).
    events: ValuePath | None = None
    # The origins whose CloudEvents abuse-protection handshake (an OPTIONS carrying
    # WebHook-Request-Origin: Azure Event Grid's, Web PubSub's) is answered; "*": any.
    allowed_origins: tuple[str, ...] = ()

    @property
    def token_in_url(self) -> bool:
        """`static_header` with `query`: the token travels in the callback URL, which
        providers echo in answers and callbacks alike."""
        return self.scheme is WebhookScheme.STATIC_HEADER and static_header.in_query(self.options)

    def scrub_token(self, body: bytes) -> bytes:
        """`body` without the callback token it may echo (`token_in_url`), else as is."""
        if not self.token_in_url:
            return body
        return static_header.scrub_held(body, self.secrets)


# Deadlines beyond a month are configuration mistakes, not business needs:
# an agent's own and a provider's defaults alike.
MAX_DEADLINE_SECONDS = 30 * 86400.0


@dataclass(frozen=True)
class Limits:
    backoff_base: float = 2.0  # first poll ≈2 s after acceptance (SPEC §4)
    backoff_factor: float = 2.0  # 2, 4, 8, ... s
    backoff_cap: float = 60.0  # about a minute between reads (two while progress shows none)
    max_concurrency: int = 8  # per provider; well under common per-key rate limits
    request_timeout: float = 10.0  # a status read slower than this is a failed read
    create_deadline_seconds: float = 3600.0  # an hour to obtain a job id
    result_deadline_seconds: float = 86400.0  # business waits a day unless told
    cancel_deadline_seconds: float = 900.0  # OpenAI batches take up to ~10 min to cancel
    webhook_backstop_poll_seconds: float = 300.0  # webhooks carry the news; polls only catch losses
    # Fixed delay when the provider gives no hint, instead of backoff (Azure
    # documents 60 s when Retry-After is absent). None = capped backoff.
    default_poll_after_seconds: float | None = None
    # How long a collection keeps retrying what may pass (a 5xx, a 429, no
    # answer, a final read naming no state) before the result is declared
    # unavailable, counted from its entry into result_collecting; at least
    # MAX_RESULT_ATTEMPTS tries whatever it says. A provider's result usually
    # outlives its outages by days: six tries (about a minute) sent a
    # five-minute outage to a human.
    result_retry_seconds: float = 3600.0


@dataclass(frozen=True)
class ProviderDescription:
    name: str
    source: str
    base_url: str
    create: CreateSpec
    status: StatusSpec
    cancel: CancelSpec
    result: ResultSpec
    lookup: LookupSpec
    limits: Limits
    description: str = ""
    preset: str | None = None
    auth: AuthSpec | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    request_id_headers: tuple[str, ...] = ()
    webhooks: WebhookSpec | None = None
    plugin: str | None = None
    plugin_class: type[ProviderAdapter] | None = field(default=None, compare=False)
    plugin_options: Mapping[str, Any] = field(default_factory=dict)


def header_names(desc: ProviderDescription) -> frozenset[str]:
    """Lower-case names of every header a path of `desc` reads (`header:Location`)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, ValuePath):
            if value.source is PathSource.HEADER:
                found.add(value.name.lower())
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for item in dataclasses.fields(value):
                walk(getattr(value, item.name))
        elif isinstance(value, list | tuple | frozenset | set):
            for item in value:
                walk(item)
        elif isinstance(value, Mapping):
            for item in value.values():
                walk(item)

    walk(desc)
    return frozenset(found)
