"""Provider descriptions written as a new user writes them, and what a rig's
tests settle on.

The TOML files under `unseen/` are each one provider table, checked by
`jobwarden providers check`; a test loads one without its `base_url` (the rig
points it at the fake) and may override whole keys of a table.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState

S = LocalState
UNSEEN = Path(__file__).parent / "unseen"
# Where an operation stops being moved without a new fact: what a test settles on.
ENDS = frozenset(
    {
        S.SUCCEEDED,
        S.RESULT_TIMED_OUT,
        S.FAILED,
        S.CANCELLED,
        S.NEEDS_ATTENTION,
        S.RESULT_UNAVAILABLE,
        S.RESULT_VALIDATION_FAILED,
        S.CANCELLATION_UNCONFIRMED,
    }
)


def described(name: str, **over: dict[str, Any]) -> dict[str, Any]:
    """The user's provider table `unseen/<name>.toml` (the rig sets base_url), `over`
    merged into it table by table."""
    with (UNSEEN / f"{name}.toml").open("rb") as f:
        (table,) = tomllib.load(f)["providers"].values()
    del table["base_url"]
    for key, value in over.items():
        table[key] = {**table.get(key, {}), **value}
    return dict(table)


async def reason(r: Any, op_id: str) -> str:
    """What the operation's record says went wrong (its last error, or escalation)."""
    op = await r.op(op_id)
    if op.last_error:
        return str(op.last_error.get("message"))
    esc = await r.escalation(op_id)
    return str(esc["reason"]) if esc else ""


async def cancelled_with_no_endpoint(r: Any, op_id: str) -> None:
    """A cancel asked at a provider with no cancel endpoint: nothing is sent, and at
    its (short) deadline a human is told so, the job unconfirmed, never "cancelled"."""
    await r.cancel(op_id, cancel_deadline_s=0.5)
    assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
    said = (await r.escalation(op_id))["reason"]
    assert "no cancel endpoint" in said and "no cancel was sent" in said, said
    assert await r.calls(op_id, "cancel") == []
