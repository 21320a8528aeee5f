"""`jobwarden audit verify`: the operation row's working state, against its evidence.

The log covers an operation as submitted and every piece of evidence, not the
columns the ledger keeps on the row as it goes (the operation leaf covers the
intent only: shared/ledger/leaves.py). Some of those the reconciler acts on
and agents read, and a database superuser could rewrite them without a
history row. Where a column's value follows from evidence rows, which the
log's own checks bind, it is compared with them here:

- `remote_job_id` (the job the reconciler reads, cancels and collects): the
  job id every transition since its recording carries (the history trigger
  copies it, and a recorded id is never replaced), or, before any such
  transition, one a call's answer or an operator's adoption named;
- `remote_state` (succeeded, completed_with_errors, ...): the newest status
  read that showed a state, or a newer result verdict (empty included: a
  state emptied by hand is shown to agents as plain success);
- a failed operation's `last_error`, when its failing transition cites the
  newest such read: the error that read observed;
- the progress agents are shown (`progress_completed`, `progress_total`,
  `progress_percent`): each what the newest status read giving it logged;
- the deadlines (`create_deadline`, `result_deadline`: when the reconciler
  stops retrying a create, and gives up on a job): as the submission logged
  them (its first history row, migration 040), the result deadline as the
  newest operator decision that extended it says;
- the status URL every read of the job goes to (`status_url`): as the first
  transition to carry the job id logged it, by digest (migration 041; the
  URL is set with the job id and a trigger refuses any change after);
- who asked to cancel and why (`cancel_requested_by`, `cancel_reason`): as
  the newest transition that recorded an intent says (a request's actor and
  cause, or the operator decision it cites).

Also every reference migration 039 took off foreign keys (an event's
operation, an observation's operation and webhook event): each must name a row
that is there. The log's checks name an attached event deleted with no archive
listing it, but not a cited row an archive's listing excused, nor one deleted
while its attachment was still queued for the log; this check names those.

Each is read in the snapshot the log's row checks use, and the ledger writes
each column in the transaction (the statement, for the last two) that writes
its evidence: a live system's working state always agrees with the evidence
that snapshot shows. That evidence may still be queued for the sequencer; the
row checks then wait for it to be logged as it is (verify_log's settling),
so nothing here needs excusing.

What no logged evidence determines is not judged (README, *The evidence
log*): the deadlines of an operation submitted before migration 040 (until an
operator extends one), the status URL of a job first carried before 041 (or
by a transition a replaced history trigger wrote) or rewritten while a job
found in cancel_requested, or while an operator stopped the operation, waits
for its first transition, the copy of the status read kept to record a lost one
(`status_request`), the cancel deadline, an intent recorded with no
transition (while stopped for a human, before any other), the forecast's
progress anchor, and any other error.
"""

from __future__ import annotations

from typing import Any, Protocol

from shared.db.queries import q
from shared.ledger.operations import MAX_ACTOR, MAX_CAUSE, history_text

# Rows fetched per round trip (only operations that disagree are returned).
PREFETCH = 1000
# A job id or state quoted in a problem is cut to this many characters.
QUOTED = 80


class Reports(Protocol):
    def problem(self, text: str) -> None: ...


def _quoted(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= QUOTED else text[: QUOTED - 3] + "..."


async def check_working_state(conn: Any, report: Reports) -> None:
    """Each operation whose working state disagrees with its evidence is a problem.

    `conn` must be inside the caller's (repeatable-read) transaction."""
    async for row in conn.cursor(q("audit_job_ids"), prefetch=PREFETCH):
        report.problem(f"operations {row['operation_id']}: {_job_id_problem(row)}")
    async for row in conn.cursor(q("audit_remote_states"), prefetch=PREFETCH):
        report.problem(f"operations {row['operation_id']}: {_remote_state_problem(row)}")
    async for row in conn.cursor(q("audit_failed_errors"), prefetch=PREFETCH):
        report.problem(
            f"operations {row['operation_id']}: last_error differs from the error logged by "
            f"the status read its failure cites (observation {row['observation_id']}, "
            f"history seq {row['seq']})"
        )
    async for row in conn.cursor(q("audit_progress"), prefetch=PREFETCH):
        report.problem(f"operations {row['operation_id']}: {_progress_problem(row)}")
    async for row in conn.cursor(q("audit_deadlines"), prefetch=PREFETCH):
        for differs in _deadline_problems(row):
            report.problem(f"operations {row['operation_id']}: {differs}")
    async for row in conn.cursor(q("audit_status_urls"), prefetch=PREFETCH):
        report.problem(f"operations {row['operation_id']}: {_status_url_problem(row)}")
    async for row in conn.cursor(q("audit_cancel_intents"), prefetch=PREFETCH):
        problem = _cancel_problem(row)
        if problem:
            report.problem(f"operations {row['operation_id']}: {problem}")
    async for row in conn.cursor(q("audit_dangling_references"), prefetch=PREFETCH):
        report.problem(
            f"{row['tbl']} {row['row_id']}: {row['col']} {_quoted(row['ref'])} names no row "
            f"of {row['ref_tbl']} (a deletion left it cited)"
        )


def _job_id_problem(row: Any) -> str:
    job = row["remote_job_id"]
    if row["first_seq"] is None:
        return (
            f"remote_job_id {_quoted(job)} is named by none of its logged transitions, "
            "calls or decisions"
        )
    if row["carries_two"]:
        return "its logged history carries more than one job id (a recorded one never changes)"
    if row["dropped_at"] is not None:
        return (
            f"its logged history carries a job id from seq {row['first_seq']}, but seq "
            f"{row['dropped_at']} none (a recorded one is never cleared)"
        )
    carried = _quoted(row["carried_job"])
    if job is None:
        return f"remote_job_id is empty, but its logged history carries job {carried}"
    return (
        f"remote_job_id {_quoted(job)} differs from the logged job id its history carries "
        f"({carried}, seq {row['last_seq']})"
    )


def _cancel_problem(row: Any) -> str | None:
    """Whether the intent on the row is the one its newest intent-recording transition
    logged (None: it is; the query returns rows that differ before the cause is
    written as a transition writes it)."""
    by, why, seq = row["cancel_requested_by"], row["cancel_reason"], row["seq"]
    decision = row["decision_id"]
    if decision is not None:
        if not row["decided"]:
            return f"the decision #{decision} its cancel (history seq {seq}) cites is not its own"
        return (
            "who asked to cancel and why (cancel_requested_by, cancel_reason) differ from "
            f"the logged decision #{decision} that asked (history seq {seq})"
        )
    if (
        by is not None
        and why is not None
        and history_text(by, MAX_ACTOR) == row["actor"]
        and history_text(f"cancel: {why}", MAX_CAUSE) == row["cause"]
    ):
        return None
    return (
        "who asked to cancel and why (cancel_requested_by, cancel_reason) differ from "
        f"the logged request (history seq {seq})"
    )


def _status_url_problem(row: Any) -> str:
    """Names the logged URL by its digest only: a presigned URL's query is a secret."""
    first = f"the first transition to carry its job (history seq {row['seq']})"
    logged = row["logged"]
    if row["empty"]:
        return f"status_url is empty, but {first} logged one ({logged})"
    if logged == "none":
        return (
            f"status_url is set, but {first} logged none (its job is read at a path built "
            "from its id)"
        )
    return f"status_url differs from the one {first} logged ({logged})"


def _progress_text(completed: Any, total: Any, percent: Any) -> str:
    return f"completed {completed}, total {total}, percent {percent}"


def _progress_problem(row: Any) -> str:
    shown = _progress_text(
        row["progress_completed"], row["progress_total"], row["progress_percent"]
    )
    if row["observation_id"] is None:
        return f"progress ({shown}) was shown by no logged status read of its own"
    logged = _progress_text(row["completed"], row["total"], row["percent"])
    return (
        f"progress ({shown}) differs from what its newest status reads logged ({logged}, "
        f"up to observation {row['observation_id']})"
    )


def _deadline_problems(row: Any) -> list[str]:
    problems = []
    if row["create_differs"]:
        problems.append(
            f"create_deadline {row['create_deadline']} differs from the one its submission "
            f"logged ({row['logged_create']}, history seq 1)"
        )
    logged = row["logged_result"]
    if logged is not None and row["result_deadline"] != logged:
        source = (
            "its submission logged (history seq 1)"
            if row["decision_id"] is None
            else f"the logged decision #{row['decision_id']} that last extended it set"
        )
        problems.append(
            f"result_deadline {row['result_deadline']} differs from the one {source} ({logged})"
        )
    return problems


def _remote_state_problem(row: Any) -> str:
    state = _quoted(row["remote_state"])
    if row["observation_id"] is None:
        return f"remote_state {state} was shown by no logged status read of its own"
    if row["remote_state"] is None:
        return (
            f"remote_state is empty, but its newest status read showed "
            f"{_quoted(row['observed'])} (observation {row['observation_id']})"
        )
    return (
        f"remote_state {state} differs from the logged state of its newest status read "
        f"({_quoted(row['observed'])}, observation {row['observation_id']})"
    )


__all__ = ["check_working_state"]
