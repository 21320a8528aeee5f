"""`create.resend_query`: query parameters only a create sent again carries.
Snowflake's SQL API takes our requestId on every submission and `retry=true`
"only when retrying the request"; before, a description could only write it into
create.path, sent with the first submission too, against the docs."""

from __future__ import annotations

from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.requests import RESEND, build_create

PATH = "/api/v2/statements?requestId={idempotency_token}&async=true"


def load(**create: Any) -> ProviderDescription:
    table = {
        "base_url": "https://acct.snowflakecomputing.com",
        "create": {
            "path": PATH,
            "idempotency": "client_job_id",
            "idempotency_format": "uuid",
            "job_id": "/statementHandle",
        }
        | create,
        "status": {
            "path": "/api/v2/statements/{job_id}",
            "state": "/code",
            "state_map": {"090001": "succeeded"},
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def url(desc: ProviderDescription, resend: str | None) -> str:
    req = build_create(
        desc,
        body={"statement": "SELECT 1"},
        idempotency_token="idem_0123456789abcdef0123456789abcdef",
        client_reference="op_1",
        context={RESEND: resend},
    )
    return req.url


def test_the_first_submission_goes_without_and_a_resubmission_with_them() -> None:
    desc = load(resend_query={"retry": "true"})
    first, again = url(desc, None), url(desc, "yes")
    assert "retry" not in first and "&async=true" in first
    assert again == first + "&retry=true"


def test_without_the_key_every_attempt_is_the_same() -> None:
    desc = load()
    assert url(desc, None) == url(desc, "yes")


@pytest.mark.parametrize(
    ("create", "message"),
    [
        ({"resend_query": {"async": "true"}}, "create.path already sets"),
        ({"resend_query": {"retry": True}}, "must be a name and a text value"),
    ],
)
def test_a_parameter_the_path_sets_or_that_is_not_text_is_refused(
    create: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(**create)
