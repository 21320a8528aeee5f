"""The console's decisions given input a form can carry but the ledger cannot hold,
and two operators deciding the same escalation from two sessions at once."""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from bench.pgproxy import Fault, PgProxy
from receiver.console import actions, timeline
from receiver.console.render import when
from shared import ledger
from shared.db.connect import ResolvedDatabase, connection
from shared.ledger import decisions, tokens
from shared.ledger.states import LocalState
from tests.integration.agent_support import finish_with_result, make_token
from tests.integration.console_support import (
    Receiver,
    action_form,
    console_login,
    escalated,
    running_receiver,
    sign_in,
)
from tests.integration.test_console import client, operator, receiver, signed_in  # noqa: F401
from tests.support import drive, lock_waits, submit

S = LocalState
COMMIT = re.compile(r"^\s*COMMIT", re.IGNORECASE)
DECISION_INSERT = re.compile(r"INSERT INTO decisions")


async def test_a_reason_with_nul_is_refused_in_words_not_a_500(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
) -> None:
    """A form's %00 decodes to NUL, which PostgreSQL text cannot hold: the insert
    failed in the driver, an 'Unexpected server error' page and a logged traceback."""
    op_id = await escalated(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page.text), "target": "failed", "reason": "vendor\x00says failed"},
    )
    assert answer.status_code == 409, answer.text
    assert "NUL" in answer.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert await db.fetchval("SELECT state::text FROM operations") == "needs_attention"


@pytest.mark.parametrize("hours", ["nan", "inf", "-2", "0", "1e400", "721"])
async def test_an_extension_out_of_bounds_is_refused_and_nothing_is_recorded(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
    hours: str,
) -> None:
    """No test gave the form a NaN, an infinity or a negative: each is refused."""
    op_id = await escalated(db)
    await db.execute("UPDATE operations SET remote_job_id = 'job_1' WHERE operation_id = $1", op_id)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/reconcile"),
        data={**action_form(page.text), "reason": "vendor fixed it", "extend_hours": hours},
    )
    assert answer.status_code == 409, answer.text
    assert "more than 0 and at most 720 hours" in answer.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


async def test_two_sessions_resolving_one_escalation_at_once_one_wins_once(
    receiver: Receiver,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
) -> None:
    """Two operators, two sessions, the same page: exactly one decision is recorded,
    the other is told the operation moved (the CLI has this test; the console had none)."""
    carol = await make_token(db, "carol", "operator")
    async with httpx.AsyncClient(timeout=10.0) as dana, httpx.AsyncClient(timeout=10.0) as other:
        for who, token in ((dana, operator), (other, carol)):
            assert (await sign_in(who, receiver, token)).status_code == 303
        for _ in range(4):
            op_id = await escalated(db)
            pages = [
                await c.get(receiver.url(f"/console/operations/{op_id}")) for c in (dana, other)
            ]
            answers = await asyncio.gather(
                dana.post(
                    receiver.url(f"/console/operations/{op_id}/resolve"),
                    data={
                        **action_form(pages[0].text),
                        "target": "failed",
                        "reason": "dana: failed",
                    },
                ),
                other.post(
                    receiver.url(f"/console/operations/{op_id}/resolve"),
                    data={
                        **action_form(pages[1].text),
                        "target": "cancel_requested",
                        "reason": "carol: stop it",
                    },
                ),
            )
            codes = sorted(a.status_code for a in answers)
            assert codes == [303, 409], [a.text[:500] for a in answers]
            (refused,) = [a for a in answers if a.status_code == 409]
            said = html.unescape(refused.text)
            assert any(
                words in said
                for words in (
                    "concurrent or stale decision",  # both passed the checks: the row lock told
                    "moved since this page was shown",  # the first had committed: check_seen told
                    "it may have changed state meanwhile",  # ... between check_seen and the load
                )
            ), said
            decided = await db.fetch(
                "SELECT decision_id FROM decisions WHERE operation_id = $1", op_id
            )
            assert len(decided) == 1
            closed_by = await db.fetch(
                "SELECT decision_id FROM escalations WHERE operation_id = $1", op_id
            )
            assert [r["decision_id"] for r in closed_by] == [decided[0]["decision_id"]]


async def _page_open(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
) -> tuple[str, str, str]:
    """An escalated operation's page open in dana's session: (its id, the page, her token)."""
    op_id = await escalated(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    token_id = await db.fetchval("SELECT token_id FROM api_tokens WHERE caller = 'dana'")
    return op_id, page.text, token_id


async def _resolve_as_failed(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    op_id: str,
    page: str,
) -> httpx.Response:
    return await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={**action_form(page), "target": "failed", "reason": "vendor says failed"},
    )


async def _refused_and_nothing_decided(answer: httpx.Response, db: Any) -> None:
    assert answer.status_code == 403 and "session has expired or ended" in answer.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert await db.fetchval("SELECT state::text FROM operations") == "needs_attention"


async def test_a_decision_posted_after_its_token_was_revoked_is_refused_and_not_recorded(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
) -> None:
    """The page was open, its form filled, when the token was revoked (`jobwarden tokens
    revoke`): the POST is refused and nothing is recorded. test_console's revocation
    test only reads a page; no test posted a decision after a revocation."""
    op_id, page, token_id = await _page_open(receiver, client, operator, db)
    assert await tokens.revoke_token(db, token_id) is not None
    answer = await _resolve_as_failed(receiver, client, op_id, page)
    await _refused_and_nothing_decided(answer, db)


async def test_a_token_revoked_after_the_session_check_stops_the_decision(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The revocation commits after the request's session check and before the
    decision's transaction: the decision was recorded, committed after its token was
    revoked (the check happened once, as the request began). The session is now held
    in the decision's own transaction: refused, nothing recorded."""
    op_id, page, token_id = await _page_open(receiver, client, operator, db)
    revoked: list[Any] = []
    moves = timeline.traced_moves

    @contextlib.asynccontextmanager
    async def revoked_first(*args: Any) -> AsyncIterator[None]:
        # between the session check (the request's start) and the decision
        revoked.append(await tokens.revoke_token(db, token_id))
        async with moves(*args):
            yield

    monkeypatch.setattr(timeline, "traced_moves", revoked_first)
    answer = await _resolve_as_failed(receiver, client, op_id, page)
    assert revoked and revoked[0] is not None  # the revocation did come in between
    await _refused_and_nothing_decided(answer, db)


async def test_a_revocation_waits_for_the_decision_it_began_during(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A revocation sent while a decision is being recorded waits for it: the decision
    is ordered before the revocation (before, nothing held the token: revoked at
    once, the decision committed after it)."""
    op_id, page, token_id = await _page_open(receiver, client, operator, db)
    other = await asyncpg.connect(db_url)
    waits = await lock_waits(other)
    revoking: list[asyncio.Task[Any]] = []
    seen = actions.check_seen

    async def revoked_meanwhile(conn: Any, operation_id: str, shown: str | None) -> None:
        # the session is held by now: the revocation must wait for this transaction
        revoke = asyncio.create_task(tokens.revoke_token(other, token_id))
        revoking.append(revoke)
        waiting = asyncio.create_task(waits.get())  # its backend waits for a lock
        async with asyncio.timeout(30):
            await asyncio.wait({revoke, waiting}, return_when=asyncio.FIRST_COMPLETED)
        assert waiting.done() and not revoke.done()  # not revoked while the decision is made
        await seen(conn, operation_id, shown)

    monkeypatch.setattr(actions, "check_seen", revoked_meanwhile)
    try:
        answer = await _resolve_as_failed(receiver, client, op_id, page)
        assert answer.status_code == 303, answer.text
        revoked = await revoking[0]
    finally:
        await other.close()
    assert revoked is not None  # then revoked, once the decision had committed
    assert await db.fetchval("SELECT count(*) FROM decisions") == 1
    assert await db.fetchval("SELECT state::text FROM operations") == "failed"


async def timed_out_long_ago(db: Any) -> str:
    """An operation in result_timed_out whose result deadline is long past."""
    op_id = await submit(db)
    await drive(db, op_id, S.RESULT_TIMED_OUT)
    await db.execute(
        "UPDATE operations SET result_deadline = created_at + interval '1 ms'"
        " WHERE operation_id = $1",
        op_id,
    )
    return op_id


@pytest.mark.parametrize(
    ("hours", "at_least"), [("2", "110 minutes"), ("", "50 minutes")], ids=["typed", "default"]
)
async def test_resolve_to_observing_extends_the_deadline_as_reconcile_does(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
    hours: str,
    at_least: str,
) -> None:
    """The form's "Resolve → observing" button ignored the extension typed beside it
    and gave none by default: the operation, its deadline long past, went back to
    observing only to be timed out again at the reconciler's next sweep."""
    op_id = await timed_out_long_ago(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    assert 'name="extend_hours"' in page.text and 'value="observing"' in page.text
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={
            **action_form(page.text),
            "target": "observing",
            "reason": "the provider is slow today",
            "extend_hours": hours,
        },
    )
    assert answer.status_code == 303, answer.text
    row = await db.fetchrow(
        "SELECT state::text, result_deadline > now() + $1::text::interval AS extended"
        " FROM operations",
        at_least,
    )
    assert tuple(row) == ("observing", True)


@pytest.mark.parametrize("action", ["resolve", "reconcile"])
async def test_resuming_with_seconds_left_extends_the_deadline_by_default(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
    action: str,
) -> None:
    """The default hour applied only once the result deadline had passed: resumed
    with 30 seconds left and no hours typed, the operation was timed out again
    right after. Now it applies when less than the reconciler's deadline grace
    remains (decisions.resume_extension, the CLI's rule too)."""
    op_id = await timed_out_long_ago(db)
    await db.execute("UPDATE operations SET result_deadline = now() + interval '30 seconds'")
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/{action}"),
        data={**action_form(page.text), "target": "observing", "reason": "provider is slow"},
    )
    assert answer.status_code == 303, answer.text
    row = await db.fetchrow(
        "SELECT state::text, result_deadline > now() + interval '50 minutes' FROM operations"
    )
    assert tuple(row) == ("observing", True)


async def test_an_extension_with_a_resolution_that_does_not_observe_is_refused(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
) -> None:
    """It was dropped without a word (the CLI refuses --extend-deadline there)."""
    op_id = await timed_out_long_ago(db)
    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/resolve"),
        data={
            **action_form(page.text),
            "target": "needs_attention",
            "reason": "look at it tomorrow",
            "extend_hours": "2",
        },
    )
    assert answer.status_code == 409, answer.text
    assert "only when observation resumes" in answer.text
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert await db.fetchval("SELECT state::text FROM operations") == "result_timed_out"


async def test_a_cancel_of_an_operation_that_just_succeeded_claims_no_intent(
    db: Any, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconciler finishes the operation between the console's check (observing:
    cancellable) and the cancel request: request_cancel recorded nothing and said so
    (the state it found, succeeded), yet the page said 'Cancel intent recorded; the
    operation waits for an operator'. Now it is refused: already succeeded."""
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    loaded = actions.load

    async def load_then_the_reconciler_finishes_it(conn: Any, operation_id: str) -> Any:
        op = await loaded(conn, operation_id)
        async with connection(db_url) as reconciler:
            await finish_with_result(reconciler, operation_id, total=1)
        return op

    monkeypatch.setattr(actions, "load", load_then_the_reconciler_finishes_it)
    with pytest.raises(actions.ActionRefused, match="already succeeded: nothing to cancel"):
        await actions.cancel(
            db, op_id, actor="operator:dana", reason="not needed", cancel_deadline_s=None
        )
    row = await db.fetchrow(
        "SELECT state::text, cancel_requested_at FROM operations WHERE operation_id = $1", op_id
    )
    assert tuple(row) == ("succeeded", None)


async def test_a_decision_cut_at_its_commit_says_it_may_have_been_recorded(
    pg_server: ResolvedDatabase,
    db_url: str,
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
) -> None:
    """The console's decision connection cut at the COMMIT (the server committed, the
    answer lost) was 'The database is unavailable; retry shortly': the operator
    believed nothing was done. Now the page says it may have been recorded; the
    retry from the old page is refused (it moved), so nothing is applied twice."""
    op_id = await escalated(db)
    async with (
        console_login(pg_server.admin_url, db_url) as console_url,
        PgProxy.from_url(console_url) as proxy,
        running_receiver(db_url, proxy.url_for(console_url)) as through_proxy,
    ):
        await signed_in(client, through_proxy, operator)
        page = await client.get(through_proxy.url(f"/console/operations/{op_id}"))
        form = {**action_form(page.text), "target": "failed", "reason": "vendor says failed"}
        proxy.arm(Fault(action="drop_after", match=COMMIT, after_match=DECISION_INSERT))
        cut = await client.post(
            through_proxy.url(f"/console/operations/{op_id}/resolve"), data=form
        )
        assert proxy.fired.is_set()
        assert cut.status_code == 503, cut.text
        said = html.unescape(cut.text)
        assert "may have been recorded" in said and "retry shortly" not in said
        assert await db.fetchval("SELECT state::text FROM operations") == "failed"
        again = await client.post(
            through_proxy.url(f"/console/operations/{op_id}/resolve"), data=form
        )
        assert again.status_code == 409 and "moved since this page" in html.unescape(again.text)
    assert await db.fetchval("SELECT count(*) FROM decisions") == 1


async def test_a_cancel_raced_by_an_escalation_with_an_earlier_intent_says_it_stands(
    receiver: Receiver,  # noqa: F811
    client: httpx.AsyncClient,  # noqa: F811
    operator: str,  # noqa: F811
    db: Any,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Observing with carol's intent left from an escalation an operator resumed: the
    page offers Cancel. The reconciler escalates it between the console's check and
    the cancel request, which keeps carol's intent (one waiting for an operator):
    dana's was recorded nowhere, yet the page said 'Cancel intent recorded'. Now it
    says carol's intent stands and how to cancel now, as `jobwarden cancel` does."""
    op_id = await escalated(db)
    await db.execute("UPDATE operations SET remote_job_id = 'job_1' WHERE operation_id = $1", op_id)
    await ledger.request_cancel(db, op_id, requested_by="operator:carol", reason="first")
    resumed = await ledger.load_operation(db, op_id)
    await decisions.decide(db, resumed, S.OBSERVING, actor="operator:carol", reason="resume")
    earlier = await db.fetchval("SELECT cancel_requested_at FROM operations")
    requested = ledger.cancel_intent

    async def escalated_first(conn: Any, operation_id: str, **kwargs: Any) -> Any:
        async with connection(db_url) as reconciler:
            await drive(reconciler, operation_id, S.NEEDS_ATTENTION)
        return await requested(conn, operation_id, **kwargs)

    await signed_in(client, receiver, operator)
    page = await client.get(receiver.url(f"/console/operations/{op_id}"))
    assert f"/console/operations/{op_id}/cancel" in page.text
    monkeypatch.setattr(ledger, "cancel_intent", escalated_first)
    answer = await client.post(
        receiver.url(f"/console/operations/{op_id}/cancel"),
        data={**action_form(page.text), "reason": "dana: stop it"},
    )
    assert answer.status_code == 409, answer.text
    said = html.unescape(answer.text)
    assert "Cancel intent recorded" not in said
    assert f"Not recorded: the cancel intent of operator:carol at {when(earlier)} stands" in said
    assert "resolve it to cancel_requested" in said
    row = await db.fetchrow(
        "SELECT state::text, cancel_requested_by, cancel_reason FROM operations"
    )
    assert tuple(row) == ("needs_attention", "operator:carol", "first")
