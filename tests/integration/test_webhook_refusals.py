"""Refused deliveries reach the database, batched, from every receiver process (issue 15).

A real receiver on loopback, as jobwarden_receiver (so migration 017's grants
are the ones tested): refusals are tallied in memory and added when the
console's webhooks page asks and at shutdown; nothing the sender chose is
stored.
"""

from __future__ import annotations

import html
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest

from receiver.webhooks import refusals
from shared.db.connect import ResolvedDatabase
from shared.ledger import webhooks
from shared.providers import load_preset
from shared.settings import Settings
from tests.harness import WEBHOOK_SECRET
from tests.integration.agent_support import make_token
from tests.integration.console_support import Receiver, console_login, running_receiver, sign_in

# The simulator's preset with webhooks on (a secret), so "sim" takes deliveries.
WITH_WEBHOOKS = Settings(
    providers={"sim": load_preset("simulator", env={"JW_SIM_WEBHOOK_SECRET": WEBHOOK_SECRET})}
)
FORGED = {"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"}


async def refuse_some(client: httpx.AsyncClient, receiver: Receiver) -> list[int]:
    """Three kinds of refusal, one with a sender-chosen path segment and one forged signature."""
    answers = [
        await client.post(receiver.url("/webhooks/no-such-provider-x9"), json={"a": 1}),
        await client.post(receiver.url("/webhooks/sim"), json={"a": 1}, headers=FORGED),
        await client.post(receiver.url("/webhooks/sim"), json={"a": 1}, headers=FORGED),
        await client.get(receiver.url("/webhooks/sim")),
    ]
    return [a.status_code for a in answers]


async def counts(db: Any) -> dict[tuple[str, str], int]:
    rows = await db.fetch("SELECT provider, reason, refusals FROM webhook_refusal_counts")
    return {(r["provider"], r["reason"]): r["refusals"] for r in rows}


async def test_refusals_are_added_at_shutdown_without_anything_the_sender_chose(
    db_url: str, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refusals, "FLUSH_SECONDS", 3600.0)  # only the shutdown flush adds them
    async with (
        running_receiver(db_url, base=WITH_WEBHOOKS) as receiver,
        httpx.AsyncClient(timeout=10.0) as client,
    ):
        statuses = await refuse_some(client, receiver)
    assert statuses[0] == 404 and statuses[3] == 405, statuses
    assert statuses[1] == statuses[2] and statuses[1] in (400, 401), statuses
    tally = await counts(db)
    sim_reasons = {reason for (provider, reason) in tally if provider == "sim"}
    assert tally[("unknown", "unknown_provider")] == 1
    assert tally[("sim", "method_not_allowed")] == 1
    forged = sim_reasons - {"method_not_allowed"}
    assert len(forged) == 1 and tally[("sim", forged.pop())] == 2, tally
    latest = await db.fetch("SELECT provider, reason, status FROM webhook_refusals_latest")
    assert sorted(r["status"] for r in latest) == sorted(statuses)
    stored = str(await db.fetch("SELECT * FROM webhook_refusals_latest")) + str(tally)
    assert "no-such-provider-x9" not in stored and "AAAA" not in stored


async def test_the_console_shows_every_refusal_by_reason(
    pg_server: ResolvedDatabase, db_url: str, db: Any
) -> None:
    operator = await make_token(db, "dana", "operator")
    async with (
        console_login(pg_server.admin_url, db_url) as console_url,
        running_receiver(db_url, console_url, WITH_WEBHOOKS) as receiver,
        httpx.AsyncClient(timeout=10.0) as client,
    ):
        assert (await sign_in(client, receiver, operator)).status_code == 303
        before = await client.get(receiver.url("/console/webhooks"))
        assert "None refused." in before.text
        await refuse_some(client, receiver)
        # The page adds its own process's pending refusals before reading.
        page = html.unescape((await client.get(receiver.url("/console/webhooks"))).text)
    assert "unknown_provider" in page and "method_not_allowed" in page
    # sim: two forged and one GET refused, nothing stored; unknown: one.
    assert '<td data-label="Received">3</td>' in page
    assert '<td data-label="Received">1</td>' in page
    assert "None refused." not in page
    assert "no-such-provider-x9" not in page
    assert sum((await counts(db)).values()) == 4


@pytest.mark.parametrize("flushes", [1, 2])
async def test_counts_add_up_across_flushes_and_days(db: Any, flushes: int) -> None:
    """Two processes (or two flushes) adding to one (provider, reason, day) sum, never overwrite."""
    at = datetime(2026, 12, 2, 23, 59, tzinfo=UTC)
    one = webhooks.RefusalCount("sim", "bad_signature", date(2026, 12, 2), 3, at)
    other_day = webhooks.RefusalCount("sim", "bad_signature", date(2026, 12, 3), 1, at)
    for _ in range(flushes):
        await webhooks.record_refusals(db, [one, other_day], [], keep=10)
    rows = await db.fetch("SELECT day, refusals FROM webhook_refusal_counts ORDER BY day")
    assert [(r["day"].day, r["refusals"]) for r in rows] == [(2, 3 * flushes), (3, flushes)]


async def test_only_the_newest_refusals_are_kept(db: Any) -> None:
    at = datetime(2026, 12, 2, tzinfo=UTC)
    for flush in range(4):
        batch = [
            webhooks.Refusal("sim", "bad_signature", 401, at + timedelta(seconds=flush * 10 + i))
            for i in range(5)
        ]
        await webhooks.record_refusals(db, [], batch, keep=3)
    kept = await db.fetch("SELECT at FROM webhook_refusals_latest ORDER BY at")
    # At most `keep` older ones plus the last flush's; the newest always there.
    assert 5 <= len(kept) <= 3 + 5
    assert kept[-1]["at"] == at + timedelta(seconds=34)
