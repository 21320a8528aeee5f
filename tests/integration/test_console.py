"""The operator console over HTTP, against a real receiver on loopback (issue 15).

Sign-in, sessions, CSRF, security headers, the actions through the ledger, and
every page rendered with the receiver role's own privileges. Actions are
recorded on the console's own login in jobwarden_operator
(JW_CONSOLE_DATABASE_URL); without one, the receiver's role may not decide and
the console says so.
"""

from __future__ import annotations

import hashlib
import html
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bench.harness import TestClock
from receiver.console import operations as console_operations
from receiver.console import sessions
from receiver.console import timeline as console_timeline
from receiver.console.base import CONSOLE_LOGIN_REFUSED, RECEIVER_MAY_NOT_DECIDE
from shared import ledger
from shared.db.connect import ResolvedDatabase
from shared.db.queries import q
from shared.ledger import decisions, log, log_audit
from shared.ledger.states import LocalState
from tests.integration.agent_support import make_token
from tests.integration.console_support import (
    Receiver,
    action_form,
    as_login,
    console_login,
    csrf_of,
    escalated,
    running_receiver,
    sign_in,
)
from tests.integration.test_receipts import _signed
from tests.support import drive, submit

S = LocalState


@pytest_asyncio.fixture
async def receiver(pg_server: ResolvedDatabase, db_url: str) -> AsyncIterator[Receiver]:
    """The receiver as jobwarden_receiver, with a console login in jobwarden_operator."""
    async with (
        console_login(pg_server.admin_url, db_url) as console_url,
        running_receiver(db_url, console_url) as running,
    ):
        yield running


@pytest_asyncio.fixture
async def receiver_alone(db_url: str) -> AsyncIterator[Receiver]:
    """The receiver as jobwarden_receiver and no console login (JW_CONSOLE_DATABASE_URL unset)."""
    async with running_receiver(db_url) as running:
        yield running


@pytest_asyncio.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10.0) as http:
        yield http


@pytest_asyncio.fixture
async def operator(db: Any) -> str:
    return await make_token(db, "dana", "operator")


async def signed_in(client: httpx.AsyncClient, receiver: Receiver, token: str) -> None:
    answer = await sign_in(client, receiver, token)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console/inbox"


def set_cookie_of(response: httpx.Response, name: str) -> str:
    (header,) = [h for h in response.headers.get_list("set-cookie") if h.startswith(name + "=")]
    return header


async def listed(client: httpx.AsyncClient, receiver: Receiver, query: str) -> list[str]:
    """Every operation id the list shows for `query`, following its Next links."""
    shown: list[str] = []
    path = f"/console/operations?{query}"
    while path:
        answer = await client.get(receiver.url(path))
        assert answer.status_code == 200, answer.text
        shown += re.findall(r'<a href="/console/operations/(op_[0-9A-Z]{26})"', answer.text)
        more = re.search(r'href="/console/operations\?([^"]*after=op_[^"]*)"', answer.text)
        path = f"/console/operations?{html.unescape(more.group(1))}" if more else ""
    return shown


# ------------------------------------------------------------------ sign-in


async def test_an_operator_token_opens_a_session_held_in_a_strict_httponly_cookie(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    answer = await sign_in(client, receiver, operator)
    assert answer.status_code == 303 and answer.headers["location"] == "/console/inbox"
    cookie = set_cookie_of(answer, sessions.COOKIE)
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/console"} <= attributes
    assert "secure" not in attributes  # plain http on loopback; https gets Secure
    secret = client.cookies[sessions.COOKIE]
    stored = await db.fetch("SELECT session_sha256 FROM console_sessions")
    assert [r["session_sha256"] for r in stored] == [hashlib.sha256(secret.encode()).hexdigest()]
    inbox = await client.get(receiver.url("/console/inbox"))
    assert inbox.status_code == 200
    assert "operator:dana" in inbox.text
    assert operator not in inbox.text and secret not in inbox.text


async def test_an_agent_token_is_refused_with_a_clear_message(
    receiver: Receiver, client: httpx.AsyncClient, db: Any
) -> None:
    agent = await make_token(db, "claude")
    answer = await sign_in(client, receiver, agent)
    assert answer.status_code == 403
    assert "agent token" in answer.text and "--operator" in answer.text
    assert sessions.COOKIE not in client.cookies
    assert await db.fetchval("SELECT count(*) FROM console_sessions") == 0


async def test_an_unknown_token_is_refused(receiver: Receiver, client: httpx.AsyncClient) -> None:
    answer = await sign_in(client, receiver, "jw_not-a-real-token")
    assert answer.status_code == 401 and "not valid" in answer.text
    assert "jw_not-a-real-token" not in answer.text


async def test_sign_in_without_its_csrf_token_is_refused(
    receiver: Receiver, client: httpx.AsyncClient, operator: str
) -> None:
    await client.get(receiver.url("/console/signin"))
    answer = await client.post(receiver.url("/console/signin"), data={"token": operator})
    assert answer.status_code == 403 and "CSRF" in answer.text
    assert sessions.COOKIE not in client.cookies


async def test_pages_need_a_session(receiver: Receiver, client: httpx.AsyncClient) -> None:
    for path in ("/console/inbox", "/console/operations", "/console/audit"):
        answer = await client.get(receiver.url(path))
        assert answer.status_code == 303 and answer.headers["location"] == "/console/signin"


# ------------------------------------------------------------------ CSRF and origin


async def test_a_post_without_or_with_a_wrong_csrf_token_is_refused(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await escalated(db)
    await signed_in(client, receiver, operator)
    action = receiver.url(f"/console/operations/{op_id}/resolve")
    form = {"target": "failed", "reason": "the provider confirmed it failed"}
    missing = await client.post(action, data=form)
    assert missing.status_code == 403 and "CSRF" in missing.text
    wrong = await client.post(action, data={**form, "csrf": "0" * 64})
    assert wrong.status_code == 403
    signout = await client.post(receiver.url("/console/signout"))
    assert signout.status_code == 403
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert await db.fetchval("SELECT state::text FROM operations") == "needs_attention"


async def test_a_post_from_another_origin_is_refused(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await escalated(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page.text), "target": "failed", "reason": "from elsewhere"},
        headers={"Origin": "https://evil.example"},
    )
    assert answer.status_code == 403 and "another site" in answer.text
    # What a browser says of a cross-site form even when it hides the Origin.
    fetched = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page.text), "target": "failed", "reason": "from elsewhere"},
        headers={"Sec-Fetch-Site": "cross-site", "Origin": "null"},
    )
    assert fetched.status_code == 403 and "another site" in fetched.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


# ------------------------------------------------------------------ expiry and sign-out


async def test_an_idle_session_expires(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, clock: TestClock
) -> None:
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url("/console/inbox"))
    assert page.status_code == 200
    await clock.advance(sessions.IDLE_SECONDS + 1)
    expired = await client.get(receiver.url("/console/inbox"))
    assert expired.status_code == 303
    assert expired.headers["location"] == "/console/signin?why=expired"
    post = await client.post(receiver.url("/console/signout"), data={"csrf": csrf_of(page.text)})
    assert post.status_code == 403 and "expired" in post.text


async def test_a_used_session_still_ends_at_its_absolute_lifetime(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, clock: TestClock
) -> None:
    await signed_in(client, receiver, operator)
    step = sessions.IDLE_SECONDS - 60
    elapsed = 0
    while elapsed + step < sessions.ABSOLUTE_SECONDS:
        await clock.advance(step)
        elapsed += step
        assert (await client.get(receiver.url("/console/inbox"))).status_code == 200
    await clock.advance(sessions.ABSOLUTE_SECONDS - elapsed + 1)
    assert (await client.get(receiver.url("/console/inbox"))).status_code == 303


async def test_sign_out_ends_the_session_everywhere(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    await signed_in(client, receiver, operator)
    secret = client.cookies[sessions.COOKIE]
    page = await client.get(receiver.url("/console/inbox"))
    answer = await client.post(receiver.url("/console/signout"), data={"csrf": csrf_of(page.text)})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/signin?why=signed_out"
    assert await db.fetchval("SELECT count(*) FROM console_sessions") == 0
    # the old cookie, replayed, opens nothing
    async with httpx.AsyncClient(cookies={sessions.COOKIE: secret}) as replay:
        assert (await replay.get(receiver.url("/console/inbox"))).status_code == 303


async def test_revoking_the_token_ends_its_sessions(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    await signed_in(client, receiver, operator)
    await db.execute("UPDATE api_tokens SET revoked_at = now()")
    assert (await client.get(receiver.url("/console/inbox"))).status_code == 303


# ------------------------------------------------------------------ headers


async def test_every_page_carries_the_security_headers(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await escalated(db)
    signin = await client.get(receiver.url("/console/signin"))
    await signed_in(client, receiver, operator)
    pages = [signin]
    for path in (
        "/console/inbox",
        "/console/operations",
        f"/console/operations/{op_id}",
        "/console/webhooks",
        "/console/providers",
        "/console/audit",
        "/console/static/console.js",
    ):
        answer = await client.get(receiver.url(path))
        assert answer.status_code == 200, (path, answer.text)
        pages.append(answer)
    for answer in pages:
        h = answer.headers
        assert "script-src 'self'" in h["content-security-policy"]
        assert "frame-ancestors 'none'" in h["content-security-policy"]
        assert "unsafe-inline" not in h["content-security-policy"]
        assert h["x-frame-options"] == "DENY"
        assert h["referrer-policy"] == "no-referrer"
        assert h["x-content-type-options"] == "nosniff"
    for answer in pages[:-1]:
        assert answer.headers["cache-control"] == "no-store"
        assert "<script>" not in answer.text and " on" + "click=" not in answer.text


# ------------------------------------------------------------------ actions


async def test_resolving_from_the_inbox_records_a_decision_by_the_token_name(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    """On the console's own login (jobwarden_operator); the actor is the operator token's."""
    op_id = await escalated(db, "two job ids for one token")
    await signed_in(client, receiver, operator)
    inbox = await client.get(receiver.url("/console/inbox"))
    assert op_id in inbox.text and "two job ids for one token" in inbox.text
    assert 'value="failed"' in inbox.text  # the allowed moves are buttons
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(inbox.text), "target": "failed", "reason": "provider says failed"},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/console/operations/{op_id}?done=resolved"
    decision = await db.fetchrow("SELECT actor, decision, reason FROM decisions")
    assert dict(decision) == {
        "actor": "operator:dana",
        "decision": "needs_attention -> failed",
        "reason": "provider says failed",
    }
    assert await db.fetchval("SELECT state::text FROM operations") == "failed"
    assert await db.fetchval("SELECT resolved_at IS NOT NULL FROM escalations")
    timeline = await client.get(receiver.url(answer.headers["location"]))
    assert "Decision recorded" in timeline.text and "provider says failed" in timeline.text
    assert op_id not in (await client.get(receiver.url("/console/inbox"))).text


async def test_without_a_console_login_the_receiver_role_may_not_decide_and_says_so(
    receiver_alone: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    receiver = receiver_alone
    assert not await db.fetchval(
        "SELECT has_table_privilege('jobwarden_receiver', 'decisions', 'INSERT')"
    )
    op_id = await escalated(db)
    timed_out = await submit(db)
    await drive(db, timed_out, S.RESULT_TIMED_OUT)
    await signed_in(client, receiver, operator)  # sessions: the receiver's role
    for path in ("/console/inbox", "/console/operations", f"/console/operations/{op_id}"):
        assert (await client.get(receiver.url(path))).status_code == 200, path
    for target, action, form in (
        (op_id, "resolve", {"target": "failed", "reason": "provider says failed"}),
        (timed_out, "reconcile", {"reason": "the provider is slow today"}),
    ):
        page = await client.get(receiver.url(f"/console/operations/{target}"))
        refused = await client.post(
            receiver.url(f"/console/operations/{target}/{action}"),
            data={**action_form(page.text), **form},
        )
        assert refused.status_code == 503, refused.text
        assert RECEIVER_MAY_NOT_DECIDE in html.unescape(refused.text)
        assert "postgresql://" not in refused.text and "operator:dana" in refused.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert await db.fetchval("SELECT resolved_at IS NULL FROM escalations")
    states = await db.fetch("SELECT operation_id, state::text FROM operations")
    assert {r["operation_id"]: r["state"] for r in states} == {
        op_id: "needs_attention",
        timed_out: "result_timed_out",
    }


async def test_a_console_login_the_database_refuses_is_a_clear_page_without_the_url(
    db_url: str, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    missing = as_login(db_url, f"jwcon_missing_{uuid.uuid4().hex[:12]}")
    op_id = await escalated(db)
    async with running_receiver(db_url, missing) as receiver:
        await signed_in(client, receiver, operator)
        page = await client.get(receiver.url(f"/console/operations/{op_id}"))
        refused = await client.post(
            receiver.url(f"/console/operations/{op_id}/resolve"),
            data={**action_form(page.text), "target": "failed", "reason": "provider failed"},
        )
    assert refused.status_code == 503, refused.text
    assert CONSOLE_LOGIN_REFUSED in html.unescape(refused.text)
    assert "jwcon_missing_" not in refused.text and "postgresql://" not in refused.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


async def test_an_action_on_a_page_shown_before_the_operation_moved_is_refused(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    """Shown for one escalation, the click resolved another: meanwhile someone resumed
    the operation and it was escalated again, for another reason (a review)."""
    op_id = await submit(db)
    await drive(db, op_id, LocalState.ACCEPTED)  # a job id: observation may resume
    await drive(db, op_id, LocalState.NEEDS_ATTENTION)
    first = await ledger.load_operation(db, op_id)
    await decisions.escalate(db, first, LocalState.NEEDS_ATTENTION, "two job ids for one token")
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    async with db.transaction():
        resumed = await ledger.load_operation(db, op_id)
        await decisions.decide(
            db, resumed, LocalState.OBSERVING, actor="operator:erin", reason="read it again"
        )
    await drive(db, op_id, LocalState.NEEDS_ATTENTION)
    again = await ledger.load_operation(db, op_id)
    await decisions.escalate(db, again, LocalState.NEEDS_ATTENTION, "the job vanished")
    stale = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page.text), "target": "failed", "reason": "provider says failed"},
    )
    assert stale.status_code == 409 and "has moved since this page was shown" in stale.text
    decisions_made = await db.fetch("SELECT actor FROM decisions ORDER BY decision_id")
    assert [d["actor"] for d in decisions_made] == ["operator:erin"]
    assert await db.fetchval("SELECT state::text FROM operations") == "needs_attention"


async def test_a_move_the_machine_forbids_is_a_clear_refusal_not_a_500(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await escalated(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    form = action_form(page.text)
    forbidden = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**form, "target": "succeeded", "reason": "looks fine"},
    )
    assert forbidden.status_code == 409 and "not an operator move" in forbidden.text
    short = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**form, "target": "failed", "reason": "x"},
    )
    assert short.status_code == 409 and "at least 3 characters" in short.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


async def test_observing_with_no_job_on_record_points_to_the_cli_to_adopt_one(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    """Was "the ledger refused the move (constraint remote_states_have_job_id)"."""
    op_id = await escalated(db, "a create with no answer and no way to look it up")
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    refused = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page.text), "target": "observing", "reason": "found the job"},
    )
    assert refused.status_code == 409 and "has no job on record to observe" in refused.text
    assert f"jobwarden resolve {op_id} --decision observing --job-id JOB" in refused.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


async def test_reconcile_now_resumes_observation_with_an_extended_deadline(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.RESULT_TIMED_OUT)
    before = await db.fetchval("SELECT result_deadline FROM operations")
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/reconcile"),
        data={
            **action_form(page.text),
            "reason": "the provider is slow today",
            "extend_hours": "2",
        },
    )
    assert answer.status_code == 303, answer.text
    row = await db.fetchrow("SELECT state::text, result_deadline FROM operations")
    assert row["state"] == "observing" and row["result_deadline"] > before
    actor = await db.fetchval("SELECT actor FROM decisions")
    assert actor == "operator:dana"


async def test_cancel_from_the_console_is_a_request_never_a_claim(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/cancel"),
        data={**action_form(page.text), "reason": "wrong month exported"},
    )
    assert answer.status_code == 303
    row = await db.fetchrow("SELECT state::text, cancel_requested_by FROM operations")
    assert dict(row) == {"state": "cancel_requested", "cancel_requested_by": "operator:dana"}
    shown = await client.get(receiver.url(answer.headers["location"]))
    assert "NOT confirmed" in shown.text


# ------------------------------------------------------------------ pages


async def test_the_operations_list_filters_and_pages_by_keyset(
    receiver: Receiver,
    client: httpx.AsyncClient,
    operator: str,
    db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(console_operations, "PAGE_SIZE", 2)
    ids = [await submit(db) for _ in range(3)]
    await drive(db, ids[0], S.OBSERVING)
    await signed_in(client, receiver, operator)
    first = await client.get(receiver.url("/console/operations"))
    assert ids[2] in first.text and ids[1] in first.text and ids[0] not in first.text
    assert f"after={ids[1]}" in first.text
    second = await client.get(receiver.url(f"/console/operations?after={ids[1]}"))
    assert ids[0] in second.text and ids[1] not in second.text
    observing = await client.get(receiver.url("/console/operations?state=observing"))
    assert ids[0] in observing.text and ids[1] not in observing.text
    old = await client.get(receiver.url("/console/operations?older_than=1h"))
    assert "No operation matches" in old.text
    bad = await client.get(receiver.url("/console/operations?state=nonsense"))
    assert bad.status_code == 400 and "not a state" in bad.text
    huge = await client.get(receiver.url("/console/operations?older_than=99999999d"))
    assert huge.status_code == 400 and "at most" in huge.text  # not a timestamp overflow (500)


async def test_the_stream_announces_a_transition(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await submit(db)
    await signed_in(client, receiver, operator)
    async with client.stream("GET", receiver.url("/console/stream")) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.aiter_lines()
        assert await anext(lines) == "event: ready"
        await drive(db, op_id, S.ACCEPTED)
        while (line := await anext(lines)) != "event: changed":
            assert line in ("data: {}", "", ": keep-alive"), line


async def test_the_timeline_shows_calls_and_the_receipt_status(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    assert page.status_code == 200
    call = await db.fetchrow("SELECT method, url, trace_id FROM provider_calls LIMIT 1")
    assert call["url"] in page.text and call["trace_id"] in page.text
    assert "create_pending → <strong>accepted</strong>" in page.text
    assert "No signed checkpoint yet" in page.text
    missing = await client.get(receiver.url("/console/operations/op_00000000000000000000000000"))
    assert missing.status_code == 404


async def test_resolving_to_cancel_requested_renews_the_cancel_intent(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await escalated(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page.text), "target": "cancel_requested", "reason": "stop it"},
    )
    assert answer.status_code == 303, answer.text
    row = await db.fetchrow(
        "SELECT state::text, cancel_requested_by, cancel_reason, cancel_sent_at FROM operations"
    )
    assert dict(row) == {
        "state": "cancel_requested",
        "cancel_requested_by": "operator:dana",
        "cancel_reason": "stop it",
        "cancel_sent_at": None,
    }


async def test_reconcile_now_on_an_unconfirmed_cancel_asks_for_a_fresh_read(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.CANCELLATION_UNCONFIRMED)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/reconcile"),
        data={**action_form(page.text), "reason": "did it stop after all?"},
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"].endswith("?done=read")
    decision = await db.fetchrow("SELECT actor, decision FROM decisions")
    assert dict(decision) == {"actor": "operator:dana", "decision": "status read"}
    assert await db.fetchval("SELECT state::text FROM operations") == "cancellation_unconfirmed"


async def test_an_open_live_stream_neither_keeps_the_session_alive_nor_outlives_it(
    receiver: Receiver,
    client: httpx.AsyncClient,
    operator: str,
    clock: TestClock,
    db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(console_operations, "KEEPALIVE_SECONDS", 0.2)  # the check's period
    await signed_in(client, receiver, operator)
    async with client.stream("GET", receiver.url("/console/stream")) as stream:
        lines = stream.aiter_lines()
        assert await anext(lines) == "event: ready"  # opening the stream was a use
        seen = await db.fetchval("SELECT last_seen_at FROM console_sessions")
        while await anext(lines) != ": keep-alive":  # the session was checked, still live
            pass
        # checking is not using: an unattended tab does not refresh the session
        assert await db.fetchval("SELECT last_seen_at FROM console_sessions") == seen
        await clock.advance(sessions.IDLE_SECONDS + 1)
        while (line := await anext(lines)) != "event: signed_out":
            assert line in ("", ": keep-alive", "data: {}"), line


async def test_the_audit_page_shows_the_last_recorded_verification(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any
) -> None:
    await signed_in(client, receiver, operator)
    before = html.unescape((await client.get(receiver.url("/console/audit"))).text)
    assert "None recorded." in before
    await drive(db, await submit(db), S.SUCCEEDED)
    await log.sequence_all(db)  # as the reconciler's sequencer does: nothing left queued
    report = await log_audit.verify_log(db, None)
    await log_audit.record_verification(db, report, chains_checked=1, chain_breaks=0, seconds=0.25)
    after = html.unescape((await client.get(receiver.url("/console/audit"))).text)
    assert "None recorded." not in after and "OK" in after
    assert "no checkpoint: the log was checked only against itself" in after
    assert f"{report.tree_size} leaves" in after and "a report, not a proof" in after


async def test_every_outcome_filter_shows_exactly_what_the_agent_view_says(
    receiver: Receiver,
    client: httpx.AsyncClient,
    operator: str,
    db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An outcome filter walks the outcome's states (console_operations_in_states);
    the agent view's own `outcome` column is the oracle, paged two at a time."""
    monkeypatch.setattr(console_operations, "PAGE_SIZE", 2)
    for state in (S.OBSERVING, S.SUCCEEDED, S.FAILED, S.CANCELLED, S.ACCEPTED, S.OBSERVING):
        await drive(db, await submit(db), state)
    await escalated(db)
    await submit(db)  # create_pending: outcome none
    await signed_in(client, receiver, operator)
    for outcome in console_operations.OUTCOMES:
        expected = [
            r["operation_id"]
            for r in await db.fetch(
                "SELECT operation_id FROM operations_overview "
                "WHERE outcome IS NOT DISTINCT FROM $1 ORDER BY created_at DESC, operation_id DESC",
                None if outcome == "none" else outcome,
            )
        ]
        assert await listed(client, receiver, f"outcome={outcome}") == expected, outcome
    # A state the outcome cannot come from: nothing, without a query.
    none = await client.get(receiver.url("/console/operations?state=failed&outcome=succeeded"))
    assert "No operation matches" in none.text


def test_the_outcomes_partition_the_states() -> None:
    covered: list[str] = []
    for outcome in console_operations.OUTCOMES:
        if outcome != "completed_with_errors":  # shares succeeded with `succeeded`
            covered += console_operations.outcome_states(outcome) or []
    assert sorted(covered) == sorted(s.value for s in S)


async def test_a_long_timeline_shows_its_newest_entries_and_says_so(
    receiver: Receiver,
    client: httpx.AsyncClient,
    operator: str,
    db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(console_timeline, "TIMELINE_ENTRIES", 3)
    op_id = await submit(db)
    await drive(db, op_id, S.SUCCEEDED)  # more than three entries on record
    everything = await db.fetch(q("operator_timeline"), op_id, None)
    assert len(everything) > 3
    await signed_in(client, receiver, operator)
    page = html.unescape((await client.get(receiver.url(f"/console/operations/{op_id}"))).text)
    assert "Only the newest 3 entries are shown here" in page
    assert f"<code>jobwarden show {op_id}</code> prints them all" in page
    newest = await db.fetch(q("operator_timeline"), op_id, 3)
    assert [tuple(r) for r in newest] == [tuple(r) for r in everything[-3:]]


async def test_age_filters_are_exact_bounds_and_page_with_the_cursor(
    receiver: Receiver,
    client: httpx.AsyncClient,
    operator: str,
    db: Any,
    clock: TestClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """older/newer than bound the index scan (where it starts: jw_console_upper_at/_id;
    where it stops), with the keyset cursor: every page right, on the test clock."""
    monkeypatch.setattr(console_operations, "PAGE_SIZE", 1)
    old = [await submit(db) for _ in range(2)]
    await clock.advance(3 * 3600)
    new = [await submit(db) for _ in range(2)]
    await signed_in(client, receiver, operator)

    assert await listed(client, receiver, "older_than=2h") == old[::-1]
    assert await listed(client, receiver, "newer_than=2h") == new[::-1]
    assert await listed(client, receiver, "older_than=1h&newer_than=4h") == old[::-1]
    assert await listed(client, receiver, "") == [*new[::-1], *old[::-1]]
    assert await listed(client, receiver, "older_than=5h") == []


async def test_a_rare_per_row_filter_reads_a_bounded_window_and_searches_on(
    receiver: Receiver,
    client: httpx.AsyncClient,
    operator: str,
    db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """completed_with_errors shares the state succeeded: a page reads at most SCAN_ROWS
    succeeded operations, then offers to search on, and the search finds what is there."""
    monkeypatch.setattr(console_operations, "SCAN_ROWS", 2)
    ids = [await submit(db) for _ in range(5)]
    for op_id in ids:
        await drive(db, op_id, S.SUCCEEDED)
    await signed_in(client, receiver, operator)
    first = html.unescape(
        (await client.get(receiver.url("/console/operations?outcome=completed_with_errors"))).text
    )
    assert "No match among the 2 operations read so far." in first
    assert "Search older operations" in first
    # Following the search to the end shows every succeeded one under `succeeded`.
    assert await listed(client, receiver, "outcome=succeeded") == ids[::-1]
    assert await listed(client, receiver, "outcome=completed_with_errors") == []
    assert await listed(client, receiver, "state=succeeded&kind=export") == ids[::-1]
    # One result with failed items (written around the write-once guard, as a
    # fixture): the agent view calls it completed_with_errors, and so does the list.
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")
        await db.execute("UPDATE results SET items_failed = 1 WHERE operation_id = $1", ids[1])
    view = await db.fetchval(
        "SELECT outcome FROM operations_overview WHERE operation_id = $1", ids[1]
    )
    assert view == "completed_with_errors"
    assert await listed(client, receiver, "outcome=completed_with_errors") == [ids[1]]
    rest = [i for i in ids[::-1] if i != ids[1]]
    assert await listed(client, receiver, "outcome=succeeded") == rest


async def test_the_console_shows_the_checkpoint_receipts_use_never_a_forged_newer_row(
    receiver: Receiver, client: httpx.AsyncClient, operator: str, db: Any, pool: Any
) -> None:
    """A row claiming more leaves than the log made the audit page and every timeline
    say "all covered" by a checkpoint the log does not agree with."""
    op_id = await submit(db)
    await drive(db, op_id, S.SUCCEEDED)
    await _signed(pool)
    size = await db.fetchval("SELECT max(tree_size) FROM log_checkpoints")
    await db.execute(
        "INSERT INTO log_checkpoints (tree_size, root_hash, note) VALUES ($1, $2, $3)",
        size + 1_000_000,
        b"\x01" * 32,
        "forged-note-content",
    )
    await signed_in(client, receiver, operator)
    audit = html.unescape((await client.get(receiver.url("/console/audit"))).text)
    assert f"{size} leaves" in audit and "forged-note-content" not in audit
    assert "1 newer checkpoint row(s) do not agree with the log" in audit
    timeline = html.unescape((await client.get(receiver.url(f"/console/operations/{op_id}"))).text)
    assert f"tree size {size}," in timeline and f"tree size {size + 1_000_000}" not in timeline
    # only forged rows left (the owner, triggers off): the log needs an operator
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")
        await db.execute("DELETE FROM log_checkpoints WHERE tree_size = $1", size)
    audit = html.unescape((await client.get(receiver.url("/console/audit"))).text)
    assert "The log's checkpoints need an operator: no usable signed checkpoint" in audit
    timeline = html.unescape((await client.get(receiver.url(f"/console/operations/{op_id}"))).text)
    assert "No usable checkpoint" in timeline and "covered by the latest" not in timeline
