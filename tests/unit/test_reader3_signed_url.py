"""receiver.webhooks.endpoint.signed_url with a public_webhook_url that has a query
of its own: the sender was given that query, and appends to it at most."""

from __future__ import annotations

from receiver.webhooks.endpoint import signed_url

PUBLIC = "https://hooks.example/jw/{provider}?tenant=a"


def scope(query: str) -> dict[str, object]:
    return {"path": "/jw/twilio", "query_string": query.encode()}


def test_the_query_the_sender_was_given_is_checked_once() -> None:
    assert signed_url(PUBLIC, "twilio", scope("tenant=a&token=t")) == (
        "https://hooks.example/jw/twilio?tenant=a&token=t"
    )


def test_a_request_without_the_public_urls_query_is_not_checked_as_another_url() -> None:
    checked = signed_url(PUBLIC, "twilio", scope("tenant=b"))
    assert checked == "https://hooks.example/jw/twilio?tenant=a&tenant=b"
    assert signed_url(PUBLIC, "twilio", scope("")) == "https://hooks.example/jw/twilio?tenant=a"
    # a longer value that starts like it is another query, not ours extended
    assert signed_url(PUBLIC, "twilio", scope("tenant=ab")) == (
        "https://hooks.example/jw/twilio?tenant=a&tenant=ab"
    )
