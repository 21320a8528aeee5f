"""Provider adapters: declarative descriptions and the pure code that reads and writes HTTP.

Adapters know no database and perform no HTTP. They build request
descriptions (`HttpRequest`) and read response descriptions (`HttpResponse`)
into canonical facts; the reconciler sends, records and decides.

Entry points: `load_providers` / `load_preset` (TOML -> `ProviderDescription`),
`adapter_for(desc)` (the hooks the reconciler and receiver call, plugin-aware),
`describe_guarantees(desc)` (what the provider can promise), `next_poll_delay`.
"""

from shared.providers.adapter import ProviderAdapter, ProviderPlugin, adapter_for, register_plugin
from shared.providers.config import load_preset, load_providers, parse_providers, preset_names
from shared.providers.delivery import classify_transport_error, may_have_been_delivered
from shared.providers.description import ProviderDescription
from shared.providers.errors import (
    ConfigError,
    RequestBuildError,
    UnsafeJobIdError,
    WebhookParseError,
)
from shared.providers.facts import (
    CancelFact,
    Counts,
    CreateFact,
    ErrorInfo,
    ErrorsPage,
    ItemFailure,
    LookupFact,
    ResultCheck,
    StatusFact,
    WebhookFact,
)
from shared.providers.guarantees import describe_guarantees
from shared.providers.messages import Headers, HttpRequest, HttpResponse
from shared.providers.requests import (
    build_cancel,
    build_create,
    build_errors_page,
    build_lookup,
    build_result_requests,
    build_status,
    resolve_url,
)
from shared.providers.responses import (
    inline_result,
    parse_cancel,
    parse_create,
    parse_errors_page,
    parse_lookup,
    parse_status,
    parse_webhook,
)
from shared.providers.results import validate_inline_result, validate_result
from shared.providers.timing import next_poll_delay, parse_retry_after
from shared.redaction import sanitize_headers, sanitize_url

__all__ = [
    "CancelFact",
    "ConfigError",
    "Counts",
    "CreateFact",
    "ErrorInfo",
    "ErrorsPage",
    "Headers",
    "HttpRequest",
    "HttpResponse",
    "ItemFailure",
    "LookupFact",
    "ProviderAdapter",
    "ProviderDescription",
    "ProviderPlugin",
    "RequestBuildError",
    "ResultCheck",
    "StatusFact",
    "UnsafeJobIdError",
    "WebhookFact",
    "WebhookParseError",
    "adapter_for",
    "build_cancel",
    "build_create",
    "build_errors_page",
    "build_lookup",
    "build_result_requests",
    "build_status",
    "classify_transport_error",
    "describe_guarantees",
    "inline_result",
    "load_preset",
    "load_providers",
    "may_have_been_delivered",
    "next_poll_delay",
    "parse_cancel",
    "parse_create",
    "parse_errors_page",
    "parse_lookup",
    "parse_providers",
    "parse_retry_after",
    "parse_status",
    "parse_webhook",
    "preset_names",
    "register_plugin",
    "resolve_url",
    "sanitize_headers",
    "sanitize_url",
    "validate_inline_result",
    "validate_result",
]
