"""Every transition the history trigger accepts passes verify's replay.

`audit verify` now replays each history row through the state machine
(shared/ledger/audit.py `_transition_problem`). A false alarm there breaks
every chain holding a legitimate move: each edge of the database's own
`state_edges` (the authority the trigger reads, every edge ever added by a
migration) is taken with real evidence of each kind it accepts, then the
whole database is verified.
"""

from __future__ import annotations

from typing import Any

from shared.ledger import audit
from shared.ledger import operations as ledger
from shared.ledger.states import Evidence, LocalState
from tests.support import call, drive, prepare_and_evidence, submit

S = LocalState


async def _evidence_of_kind(
    db: Any, op_id: str, src: LocalState, dst: LocalState, kind: str
) -> tuple[Evidence, int] | None:
    """Evidence of `kind` for src -> dst: the usual (tests/support.py), or a
    create's answer where an edge also takes a call (a synchronous result, a
    refused create, while a cancel was pending)."""
    chosen = await prepare_and_evidence(db, op_id, src, dst)
    if chosen is None or chosen[0] == kind:
        return chosen
    assert kind == Evidence.CALL, (src, dst, kind)
    if dst is S.FAILED:
        return (Evidence.CALL, await call(db, op_id, "create", 422))
    job = (await ledger.load_operation(db, op_id)).remote_job_id or "job_x"
    return (Evidence.CALL, await call(db, op_id, "create", 200, job))


async def test_every_edge_of_every_evidence_kind_replays(db: Any) -> None:
    edges = await ledger.state_edges_in_db(db)
    taken = 0
    for (src_text, dst_text), kinds in sorted(edges.items()):
        src, dst = LocalState(src_text), LocalState(dst_text)
        choices: list[str | None] = [*sorted(kinds)] or [None]
        for kind in choices:
            op_id = await submit(db)
            await drive(db, op_id, src)
            if kind is None:
                evidence = await prepare_and_evidence(db, op_id, src, dst)
            else:
                evidence = await _evidence_of_kind(db, op_id, src, dst, kind)
            actor = "operator:t" if src is S.NEEDS_ATTENTION else "reconciler:t"
            await ledger.transition(db, op_id, src, dst, actor=actor, cause="t", evidence=evidence)
            taken += 1
    checked, breaks = await audit.verify(db)
    assert breaks == []
    assert checked == taken
