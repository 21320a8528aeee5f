"""GET challenges that carry a verify token: Meta's and Strava's subscription checks.

Meta (WhatsApp Cloud API, Messenger, Instagram) and Strava check a webhook
endpoint with an unsigned GET carrying `hub.mode=subscribe`, `hub.challenge`
and `hub.verify_token`, the token the developer typed in when subscribing.
Meta wants the challenge back as the body; Strava wants `{"hub.challenge":
"…"}` as JSON. Both samples check the token before answering: with
`get_challenge = { param, verify_token, verify_token_env | _file, answer }`
the receiver answers only a GET that carries it (compared in constant time),
and refuses any other (403 `bad_verify_token`) before it looks at the
challenge, so whoever else found the URL gets nothing back. Meta's POSTs are
then verified as before (`X-Hub-Signature-256: sha256=<hex HMAC of the body
under the app secret>`). Everything runs through the real receiver on a
loopback socket.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from shared.providers.config import advisories
from shared.providers.errors import ConfigError
from shared.providers.guarantees import describe_guarantees
from tests.integration.test_more_official_signers import _providers, _receiver
from tests.integration.test_receiver_support import stored_events

META_WEBHOOKS = """
[providers.meta.webhooks]
scheme = "hmac"
secrets_env = "META_APP_SECRET"
job_id = "/entry/0/changes/0/value/statuses/0/id"
state = "/entry/0/changes/0/value/statuses/0/status"
event_id = "/entry/0/changes/0/value/statuses/0/id"
GET_CHALLENGE
[providers.meta.webhooks.options]
signature_header = "X-Hub-Signature-256"
prefix = "sha256="
"""
META_TOML = (
    META_WEBHOOKS.replace("GET_CHALLENGE", "")
    + """
[providers.meta.webhooks.get_challenge]
param = "hub.challenge"
verify_token = "hub.verify_token"
verify_token_env = "META_VERIFY_TOKEN"
"""
)
STRAVA_TOML = """
[providers.strava.webhooks]
scheme = "static_header"
secrets_env = "STRAVA_CALLBACK_TOKEN"
job_id = "/object_id"

[providers.strava.webhooks.options]
query = "token"

[providers.strava.webhooks.get_challenge]
param = "hub.challenge"
verify_token = "hub.verify_token"
verify_token_env = "STRAVA_VERIFY_TOKEN"
answer = "json"
"""
APP_SECRET = "meta-app-secret"
VERIFY_TOKEN = "meatyhamhock"
META_ENV = {"META_APP_SECRET": APP_SECRET, "META_VERIFY_TOKEN": VERIFY_TOKEN}
STRAVA_ENV = {
    "STRAVA_CALLBACK_TOKEN": "strava-callback-token-0123456789",
    "STRAVA_VERIFY_TOKEN": "STRAVA",
}
SUBSCRIBE = {"hub.mode": "subscribe", "hub.challenge": "1158201444"}
META_BODY = json.dumps(
    {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "statuses": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkV", "status": "sent"}]
                        },
                    }
                ],
            }
        ],
    }
).encode()


def _meta_signature(secret: str, body: bytes) -> str:
    """Meta's recipe: `sha256=` and the hex HMAC-SHA256 of the raw body under the app secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _rejected(rx: Any, provider: str, reason: str) -> float:
    labels = {"provider": provider, "reason": reason}
    return float(rx.metric("jobwarden_webhook_events_rejected_total", labels))


async def test_meta_subscription_check_and_a_signed_delivery(db: Any, pool: Any) -> None:
    providers = _providers("meta", META_TOML, META_ENV)
    async with _receiver(pool, providers) as rx:
        check = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": VERIFY_TOKEN}
        )
        # signed with the app secret, then with the verify token as if it were a key
        delivered, forged = [
            await rx.client.post(
                "/webhooks/meta",
                content=META_BODY,
                headers={
                    "Content-Type": "application/json",
                    "X-Hub-Signature-256": _meta_signature(key, META_BODY),
                },
            )
            for key in (APP_SECRET, VERIFY_TOKEN)
        ]
    assert (check.status_code, check.text) == (200, "1158201444")
    assert check.headers["content-type"].startswith("text/plain")
    assert delivered.status_code == 200, delivered.text
    assert forged.status_code == 401  # the verify token is no key to the POSTs
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "wamid.HBgLMTY1MDM4Nzk0MzkV"


@pytest.mark.parametrize(
    "token",
    [
        None,  # no token at all
        "",
        "meatyhamhoc",  # a prefix of it
        "meatyhamhockx",
        "MEATYHAMHOCK",
        APP_SECRET,  # another secret of ours is not the token
        ["meatyhamhock", "meatyhamhock"],  # sent twice: which one
    ],
)
async def test_a_get_without_the_verify_token_gets_nothing_back(
    db: Any, pool: Any, token: str | list[str] | None
) -> None:
    providers = _providers("meta", META_TOML, META_ENV)
    params: dict[str, Any] = dict(SUBSCRIBE)
    if token is not None:
        params["hub.verify_token"] = token
    async with _receiver(pool, providers) as rx:
        answer = await rx.client.get("/webhooks/meta", params=params)
        refused = _rejected(rx, "meta", "bad_verify_token")
    assert answer.status_code == 403
    assert answer.json() == {"error": "bad_verify_token"}
    assert "1158201444" not in answer.text
    assert refused == 1
    assert await stored_events(db) == []


async def test_the_token_is_checked_before_the_challenge(pool: Any) -> None:
    """A challenge we would not echo tells a caller without the token nothing either."""
    providers = _providers("meta", META_TOML, META_ENV)
    async with _receiver(pool, providers) as rx:
        no_token = await rx.client.get("/webhooks/meta", params={"hub.challenge": "<b>"})
        with_token = await rx.client.get(
            "/webhooks/meta", params={"hub.challenge": "<b>", "hub.verify_token": VERIFY_TOKEN}
        )
        no_challenge = await rx.client.get(
            "/webhooks/meta", params={"hub.verify_token": VERIFY_TOKEN}
        )
    assert no_token.status_code == 403
    assert with_token.status_code == 400 and with_token.json() == {"error": "bad_challenge"}
    assert no_challenge.status_code == 405  # no challenge: any GET


async def test_strava_gets_its_challenge_back_as_json(db: Any, pool: Any) -> None:
    providers = _providers("strava", STRAVA_TOML, STRAVA_ENV)
    async with _receiver(pool, providers) as rx:
        check = await rx.client.get(
            "/webhooks/strava",
            params={
                "hub.mode": "subscribe",
                "hub.challenge": "15f7d1a91c1f40f8a748fd134752feb3",
                "hub.verify_token": "STRAVA",
            },
        )
        wrong = await rx.client.get(
            "/webhooks/strava",
            params={"hub.challenge": "15f7d1a9", "hub.verify_token": "strava"},
        )
    assert check.status_code == 200
    assert check.headers["content-type"] == "application/json"
    assert check.json() == {"hub.challenge": "15f7d1a91c1f40f8a748fd134752feb3"}
    assert wrong.status_code == 403
    assert await stored_events(db) == []


async def test_a_verify_token_rotated_in_its_file_is_followed(
    pool: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "verify-token"
    token_file.write_text("first-token\n")
    monkeypatch.setattr("shared.secret.RECHECK_SECONDS", 0.0)
    toml = META_TOML.replace(
        'verify_token_env = "META_VERIFY_TOKEN"', f'verify_token_file = "{token_file}"'
    )
    providers = _providers("meta", toml, {"META_APP_SECRET": APP_SECRET})
    async with _receiver(pool, providers) as rx:
        first = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": "first-token"}
        )
        token_file.write_text("second-token\n")
        old = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": "first-token"}
        )
        new = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": "second-token"}
        )
    assert (first.status_code, old.status_code, new.status_code) == (200, 403, 200)


@pytest.mark.parametrize(
    ("table", "env", "says"),
    [
        ('{ param = "hub.challenge", verify_token = "hub.verify_token" }', {}, "verify_token_env"),
        (
            '{ param = "hub.challenge", verify_token_env = "META_VERIFY_TOKEN" }',
            META_ENV,
            "verify_token",
        ),
        (
            '{ param = "hub.challenge", verify_token = "hub.challenge", '
            'verify_token_env = "META_VERIFY_TOKEN" }',
            META_ENV,
            "must differ from param",
        ),
        ('{ verify_token = "t", verify_token_env = "META_VERIFY_TOKEN" }', META_ENV, "param"),
        ('{ param = "a b" }', {}, "param"),
        ("5", {}, "a query parameter's name, or a table"),
        ('{ param = "hub.challenge", answer = "xml" }', {}, "answer"),
        ('{ param = "hub.challenge", mode = "subscribe" }', {}, "mode"),
        (
            '{ param = "hub.challenge", verify_token = "hub.verify_token", '
            'verify_token_env = "META_VERIFY_TOKEN" }',
            {"META_APP_SECRET": APP_SECRET, "META_VERIFY_TOKEN": "a\u0007b"},
            "unprintable",
        ),
        (
            '{ param = "hub.challenge", verify_token = "hub.verify_token", '
            'verify_token_env = "NOT_SET" }',
            {"META_APP_SECRET": APP_SECRET},
            "NOT_SET",
        ),
    ],
)
def test_a_get_challenge_table_that_cannot_work_is_refused_at_load(
    table: str, env: dict[str, str], says: str
) -> None:
    toml = META_WEBHOOKS.replace("GET_CHALLENGE", f"get_challenge = {table}")
    with pytest.raises(ConfigError) as refused:
        _providers("meta", toml, {"META_APP_SECRET": APP_SECRET, **env})
    assert "get_challenge" in str(refused.value) and says in str(refused.value)
    assert VERIFY_TOKEN not in str(refused.value)


def test_providers_check_says_the_get_needs_the_verify_token() -> None:
    meta = _providers("meta", META_TOML, META_ENV)["meta"]
    strava = _providers("strava", STRAVA_TOML, STRAVA_ENV)["strava"]
    [meta_line] = [line for name, _, line in describe_guarantees(meta) if name == "webhooks signed"]
    [strava_line] = [
        line for name, _, line in describe_guarantees(strava) if name == "webhooks signed"
    ]
    assert (
        "echoes a GET's ?hub.challenge= as text/plain (only with ?hub.verify_token= the "
        "verify token, unsigned" in meta_line
    )
    assert 'as {"hub.challenge": …} (only with ?hub.verify_token=' in strava_line
    assert VERIFY_TOKEN not in meta_line


def test_optional_webhooks_whose_verify_token_is_not_set_load_with_any_answer() -> None:
    """`optional = true` without the token: the webhooks load, no GET is answered;
    the table's other keys (`answer`) are still read, not called unknown."""
    toml = STRAVA_TOML.replace(
        'scheme = "static_header"', 'scheme = "static_header"\noptional = true'
    )
    env = {"STRAVA_CALLBACK_TOKEN": STRAVA_ENV["STRAVA_CALLBACK_TOKEN"]}
    webhooks = _providers("strava", toml, env)["strava"].webhooks
    assert webhooks is not None and webhooks.get_challenge is not None
    assert webhooks.get_challenge.verify_token is None
    with pytest.raises(ConfigError) as refused:  # a bad answer is still a mistake
        _providers("strava", toml.replace('answer = "json"', 'answer = "xml"'), env)
    assert "answer" in str(refused.value)


async def test_optional_webhooks_without_their_verify_token_refuse_every_get_and_say_so(
    pool: Any,
) -> None:
    """The POSTs are verified as ever; the GET check cannot pass (no token to match),
    is counted as `bad_verify_token`, and `providers check` warns, where it used to be
    a silent 405 the sender's dashboard reported as an endpoint that does not answer."""
    toml = META_TOML.replace('scheme = "hmac"', 'scheme = "hmac"\noptional = true')
    meta = _providers("meta", toml, {"META_APP_SECRET": APP_SECRET})["meta"]
    [line] = [line for name, _, line in describe_guarantees(meta) if name == "webhooks signed"]
    assert "refuses every GET check (its ?hub.verify_token= verify token is not set" in line
    assert any("verify token that is not set" in w for w in advisories(meta))
    async with _receiver(pool, {"meta": meta}) as rx:
        check = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": VERIFY_TOKEN}
        )
        refused = _rejected(rx, "meta", "bad_verify_token")
        delivered = await rx.client.post(
            "/webhooks/meta",
            content=META_BODY,
            headers={
                "Content-Type": "application/json",
                "X-Hub-Signature-256": _meta_signature(APP_SECRET, META_BODY),
            },
        )
    assert check.status_code == 403 and "1158201444" not in check.text
    assert refused == 1
    assert delivered.status_code == 200


async def test_no_log_record_holds_the_token_or_a_guess(
    pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The README's promise: the token (and what a caller tried) is never logged."""
    caplog.set_level(logging.DEBUG)
    providers = _providers("meta", META_TOML, META_ENV)
    async with _receiver(pool, providers) as rx:
        answered = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": VERIFY_TOKEN}
        )
        refused = await rx.client.get(
            "/webhooks/meta", params={**SUBSCRIBE, "hub.verify_token": "guessed-token"}
        )
    assert (answered.status_code, refused.status_code) == (200, 403)
    logged = [  # the server's records (the test's own HTTP client logs its URLs)
        f"{record.getMessage()} {vars(record)}"
        for record in caplog.records
        if not record.name.startswith(("httpx", "httpcore"))
    ]
    assert any("bad_verify_token" in line for line in logged)  # the refusal is logged
    assert not [line for line in logged if VERIFY_TOKEN in line or "guessed-token" in line]
