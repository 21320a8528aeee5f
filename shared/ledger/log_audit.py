"""`jobwarden audit verify --checkpoint`: prove the evidence log to someone who trusts no database.

What is checked, in one repeatable-read snapshot, streaming (memory does not
grow with the log):

1. the checkpoint's signature, with a public key given by the auditor (the
   database holds no key that could sign one);
2. the log's leaves, recomputed into the tree head: at the checkpoint's size
   it must be the signed root (so nothing the checkpoint covers was rewritten,
   removed, added or re-ordered), and the stored hashes that proofs are built
   from must give the same head;
3. every evidence row against its newest leaf, recomputed from the row by
   `shared.ledger.leaves` (altered rows), every newest leaf against its row
   (removed rows), and every row has a leaf or a queued change (rows outside
   the log);
4. each operation's working state that evidence determines (its job id, its
   remote state, a failed operation's error), against that evidence
   (shared/ledger/working_state_audit.py).

Without a checkpoint, 2 proves only that the log is self-consistent: whoever
administers the database could have rewritten rows and leaves together. The
report says so rather than pretending otherwise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.db.queries import q
from shared.ledger.archive_audit import check_archive, check_archives, unchecked_note
from shared.ledger.leaves import KINDS, Digests, LeafError, LeafKind, leaf_data
from shared.ledger.log import (
    HashCache,
    LogCorrupt,
    consistency_problem,
    current_rows,
    with_hashes,
)
from shared.ledger.working_state_audit import check_working_state
from shared.tlog import (
    ALG_ED25519,
    EMPTY_ROOT,
    Checkpoint,
    CheckpointError,
    NoteError,
    ProofError,
    RootAccumulator,
    Verifier,
    leaf_hash,
    open_note,
    tree_hash,
)

# Rows fetched per round trip while streaming.
PREFETCH = 5000
# A queued change older than this is a problem: the reconciler sequences
# every log_interval (5 s by default).
MAX_PENDING_AGE = 600.0
# How long the check waits for the sequencer to log the changes it found
# queued (their rows changed, or not yet logged): a few of its intervals.
SETTLE_SECONDS = 30.0
# How often it looks, meanwhile.
SETTLE_POLL_SECONDS = 0.5
# More rows than this excused by queued changes is a backlog, not a live
# system's few seconds of writes: the check does not hold them all in memory
# to wait for them, it says so (run `audit sequence`, or start the reconciler).
MAX_EXCUSED = 100_000
# Problems listed in full; beyond this only counted (a wholesale rewrite
# would otherwise print millions of lines).
MAX_LISTED = 50

UNPROVEN = (
    "no checkpoint given: this proves the log is consistent with itself, not that it is the "
    "log that was signed. Someone with full control of the database could have rewritten rows "
    "and leaves together. Verify against a checkpoint kept off this host: "
    "--checkpoint FILE --key PUBLIC_KEY"
)


@dataclass
class LogReport:
    tree_size: int = 0
    root: bytes = b""
    checkpoint: Checkpoint | None = None
    # whether the log's first checkpoint.size leaves hash to its root (None: no checkpoint);
    # a log can extend its checkpoint and still hold problems elsewhere
    extends: bool | None = None
    rows_checked: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    unproven: str | None = None
    archives: int = 0
    archived_rows: int = 0
    # archived rows whose content was not checked (no --archive given), in words
    archives_unchecked: str | None = None
    # rows whose disagreement with the log only a queued change excused: each
    # must be logged by the sequencer while the check waits (kind, row id)
    excused: list[tuple[str, str]] = field(default_factory=list)
    # of those, how many the sequencer logged during the wait
    settled: int = 0
    # excused rows past MAX_EXCUSED, not waited for (one problem says so)
    excused_beyond: int = 0
    # evidence rows listed in log_archived, counted beside their leaves: each must
    # be one a logged archive lists (archived_rows), or it excuses a deletion no
    # archive made
    listed_archived: int = 0
    # of the excused rows, those listed as archived when the check began
    excused_listed: set[tuple[str, str]] = field(default_factory=set)
    # the archives the check has judged (log_archives ids): one made while it
    # waited is judged in its second snapshot, and excuses what it lists
    archive_ids: set[int] = field(default_factory=set)

    def excuse(self, kind: str, row_id: str) -> None:
        """A row only a queued change excuses, to wait for (verify_log)."""
        if len(self.excused) < MAX_EXCUSED:
            self.excused.append((kind, row_id))
            return
        if not self.excused_beyond:
            self.problem(
                f"more than {MAX_EXCUSED} rows differ from the log while changes to them are "
                "queued: a backlog this check does not wait for (run `jobwarden audit sequence`, "
                "or start the reconciler, then verify again)"
            )
        self.excused_beyond += 1

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_LISTED:
            self.problems.append(text)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0


def open_checkpoint(
    note: str, keys: list[Verifier], witnesses: Sequence[Verifier] = ()
) -> Checkpoint:
    """The checkpoint a signed note carries; NoteError/CheckpointError if it does not verify.

    One of `keys` (the log's, several across a rotation) must have signed it,
    and every one of `witnesses` must have cosigned it.
    """
    if any(key.algorithm != ALG_ED25519 for key in keys):
        raise NoteError("a log key is an Ed25519 signer's key; a witness's goes with --witness")
    opened = open_note(note, [*keys, *witnesses])
    signed_by = {v.vkey for v in opened.verified}
    if not signed_by & {k.vkey for k in keys}:
        raise NoteError("no signature by the log's key (only witnesses signed it)")
    missing = [w.name for w in witnesses if w.vkey not in signed_by]
    if missing:
        raise NoteError(f"no cosignature by the required witness(es) {', '.join(missing)}")
    return Checkpoint.parse(opened.text)


async def verify_log(
    conn: Any,
    checkpoint: Checkpoint | None,
    max_pending_age: float = MAX_PENDING_AGE,
    archive_root: Path | None = None,
    settle_seconds: float = SETTLE_SECONDS,
) -> LogReport:
    """Check the log (and, given one, against a checkpoint already verified by its key).

    A row that disagrees with its newest leaf (or has none) is excused only
    by a change the sequencer has yet to log, and only until it has: the
    check then waits up to `settle_seconds` for the sequencer to log each
    such row, and judges the versions it logged. Nothing the database holds
    can stand in for that: a queue entry kept from the sequencer (a trigger,
    a rule, a policy) and its `queued_at` kept young would otherwise excuse a
    deleted or forged row for ever. A change still queued longer than
    `max_pending_age` seconds is a problem too. Archived rows are checked
    against the archives under `archive_root` when given
    (shared/ledger/archive_audit.py).
    """
    report, tree = await _check_snapshot(conn, checkpoint, max_pending_age, archive_root)
    if report.excused:
        await _settle_excused(conn, report, tree, settle_seconds, archive_root)
    return report


async def _check_snapshot(
    conn: Any, checkpoint: Checkpoint | None, max_pending_age: float, archive_root: Path | None
) -> tuple[LogReport, RootAccumulator | None]:
    report = LogReport(checkpoint=checkpoint, unproven=None if checkpoint else UNPROVEN)
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        tree = await _check_tree(conn, report)
        for kind in KINDS.values():
            await _check_rows(conn, kind, report)
        await _check_versions(conn, report)
        # the operation rows' working state, against the evidence just checked
        await check_working_state(conn, report)
        report.archives, report.archived_rows = await check_archives(conn, report, archive_root)
        report.archive_ids = {a["archive_id"] for a in await conn.fetch(q("archive_list"))}
        if report.listed_archived > report.archived_rows:
            report.problem(
                f"{report.listed_archived - report.archived_rows} evidence row(s) listed as "
                "archived (log_archived) under no archive the log records: the deletions "
                "they excuse are no archive's"
            )
        if report.archived_rows and archive_root is None:
            report.archives_unchecked = unchecked_note(report.archives, report.archived_rows)
        pending = await conn.fetchrow(q("log_pending"))
        report.pending = int(pending["rows"])
        if report.pending and pending["age"] > max_pending_age:
            report.problem(
                f"{report.pending} change(s) queued for {pending['age']:.0f} s (oldest): the "
                "sequencer is not running, or the queue is being used to hide edits"
            )
    return report, tree


async def _check_tree(conn: Any, report: LogReport) -> RootAccumulator | None:
    """The tree recomputed from its leaves; the accumulator to extend it with (None
    when a leaf is missing: the log is broken, and nothing after it is bound)."""
    accumulator = RootAccumulator()
    wanted = report.checkpoint

    def at_each(size: int) -> None:
        if wanted is not None and size == wanted.size:
            _compare_checkpoint(accumulator.root(), wanted, report)

    if not await _append_leaves(conn, report, accumulator, at_each, start=_BELOW_EVERY_INDEX):
        return None
    report.tree_size, report.root = accumulator.size, accumulator.root()
    if wanted is not None and wanted.size == 0:
        _compare_checkpoint(EMPTY_ROOT, wanted, report)  # every tree extends the empty one
    if wanted is not None and accumulator.size < wanted.size:
        report.extends = False
        report.problem(
            f"the log has {accumulator.size} leaves, the checkpoint signed {wanted.size}: "
            "the newest entries were removed"
        )
    await _check_stored_hashes(conn, report, accumulator)
    return accumulator


# The first pass streams leaves from here, not from 0: a leaf below 0 (the
# owner may drop the CHECK that forbids one) is in no tree, yet the row checks
# take a row's newest leaf wherever it is, so a forged row given one passed
# for logged, against every checkpoint (a hostile superuser's test).
_BELOW_EVERY_INDEX = -(2**63)


async def _append_leaves(
    conn: Any,
    report: LogReport,
    accumulator: RootAccumulator,
    at_each: Callable[[int], None] = lambda size: None,
    start: int | None = None,
) -> bool:
    """Every leaf from the accumulator's size on (from `start`, to see those below
    0 too), recomputed and appended in order; False (a problem) at the first
    index missing. A leaf below 0 is a problem, and binds nothing."""
    query = q("log_leaf_hashes_from")
    first = accumulator.size if start is None else start
    async for row in conn.cursor(query, first, prefetch=PREFETCH):
        if row["leaf_index"] < 0:
            report.problem(
                f"leaf {row['leaf_index']} ({row['kind']} {row['row_id']}): an index below 0, "
                "in no tree: written beside the log, it proves nothing"
            )
            continue
        if row["leaf_index"] != accumulator.size:
            report.problem(f"leaf {accumulator.size} is missing (next is {row['leaf_index']})")
            return False
        accumulator.append(_recomputed_leaf(row, report))
        at_each(accumulator.size)
    return True


async def _check_stored_hashes(conn: Any, report: LogReport, accumulator: RootAccumulator) -> None:
    """The stored hashes proofs are built from must give the leaves' root."""
    cache = HashCache()
    try:
        stored = await with_hashes(conn, cache, lambda: tree_hash(accumulator.size, cache.read))
    except (LogCorrupt, ProofError) as exc:
        report.problem(f"stored hashes: {exc}")
        return
    except TypeError:  # a hash emptied (its NOT NULL dropped): HashCache cannot take it
        report.problem("stored hashes: one the tree head is read from is empty")
        return
    if stored != accumulator.root():
        report.problem("the stored hashes disagree with the leaves: proofs would not verify")


def _recomputed_leaf(row: Any, report: LogReport) -> bytes:
    """The leaf hash from what the leaf records (kind, id, deletion, digests), never the
    stored hash: so every leaf, old versions included, is bound by the tree.

    A leaf missing what it records (its table's NOT NULL dropped by the owner)
    is a problem, hashed as if empty there, never a traceback: the check goes
    on and the tree shows whether the checkpoint covered it."""
    digests = Digests(
        _bytes(row["row_sha256"]), _bytes(row["fixed_sha256"]), _bytes(row["settled_sha256"])
    )
    kind, row_id, stored = row["kind"], row["row_id"], row["leaf_hash"]
    hashed = leaf_hash(leaf_data(kind or "", row_id or "", digests))
    where = f"leaf {row['leaf_index']}"
    missing = [name for name, value in (("kind", kind), ("row id", row_id)) if value is None]
    if missing:
        report.problem(f"{where}: records no {' and no '.join(missing)}")
    elif kind not in KINDS:
        report.problem(f"{where}: records an unknown kind {kind!r}")
    if row["deleted"] is not (digests.row is None):
        report.problem(f"{where}: its deleted flag contradicts its digests")
    elif digests.row is not None and digests.fixed is None:
        report.problem(f"{where}: records no fixed digest, though not deleted")
    if stored is None or hashed != bytes(stored):
        report.problem(f"{where}: its stored hash is not the hash of what it records")
    return hashed


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _compare_checkpoint(root: bytes, wanted: Checkpoint, report: LogReport) -> None:
    report.extends = root == wanted.root_hash
    if not report.extends:
        report.problem(
            f"the first {wanted.size} leaves do not hash to the checkpoint's root: "
            "entries it covers were rewritten, removed, added or re-ordered"
        )


async def _check_rows(conn: Any, kind: LeafKind, report: LogReport) -> None:
    checked = 0
    async for row in conn.cursor(q(f"log_check_{kind.name}"), prefetch=PREFETCH):
        checked += 1
        if row["log_archived"]:
            report.listed_archived += 1
        problem = _row_problem(kind, row)
        if problem is _EXCUSED:
            report.excuse(kind.name, row["log_row_id"])
            if row["log_archived"]:
                report.excused_listed.add((kind.name, row["log_row_id"]))
        elif problem:
            report.problem(f"{kind.table} {row['log_row_id']}: {problem}")
    report.rows_checked[kind.name] = checked


async def _settle_excused(
    conn: Any,
    report: LogReport,
    tree: RootAccumulator | None,
    settle_seconds: float,
    archive_root: Path | None = None,
) -> None:
    """Wait for the sequencer to log every excused row, then judge what it logged.

    A row it never logs is a problem: the sequencer is stopped, or its queue
    entry is kept from it. What it logged is judged in one snapshot as the
    first pass judged the log: the leaves appended since are recomputed into
    the tree and must agree with the stored hashes (a leaf written beside the
    tree, at any index, binds nothing); each logged row is judged against its
    newest leaf again, and no longer excused if it is gone (its deletion must
    be a leaf); its versions follow the version rules. A row created meanwhile
    is dated by its leaf, as any is.

    One exception, waited for once more: a row an archive made meanwhile
    lists, deleted since it was logged. `audit archive` sequences the log,
    commits the archive (deleting the rows) and only then sequences the
    deletions; a look between the two found the rows gone, their deletions
    queued, as the first snapshot excuses an archived row's (and waits for).
    """
    logged = await _wait_for_leaves(conn, report, report.excused, report.tree_size, settle_seconds)
    report.settled = len(logged)
    archived_meanwhile: set[tuple[str, str]] = set()
    may_wait = tree is not None
    while logged:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            if tree is not None and await _append_leaves(conn, report, tree):
                await _check_stored_hashes(conn, report, tree)
            archived_meanwhile |= await _check_new_archives(conn, report, archive_root)
            deleted = await _rejudge(conn, report, logged, archived_meanwhile, may_wait)
            kinds, ids = map(list, zip(*logged, strict=True))
            await _check_versions(conn, report, q("log_versions_of"), kinds, ids)
        if not deleted or tree is None:
            return
        may_wait = False  # once: a row deleted is not deleted again
        logged = await _wait_for_leaves(conn, report, deleted, tree.size, settle_seconds)


async def _wait_for_leaves(
    conn: Any,
    report: LogReport,
    keys: Sequence[tuple[str, str]],
    since: int,
    settle_seconds: float,
) -> list[tuple[str, str]]:
    """Of `keys`, those the sequencer logs (a leaf at `since` or beyond) within
    `settle_seconds`; each other one is a problem."""
    waiting = set(keys)
    deadline = time.monotonic() + settle_seconds
    while True:
        kinds, ids = map(list, zip(*waiting, strict=True))
        rows = await conn.fetch(q("log_logged_since"), since, kinds, ids)
        waiting -= {(r["kind"], r["row_id"]) for r in rows}
        if not waiting or time.monotonic() >= deadline:
            break
        await asyncio.sleep(SETTLE_POLL_SECONDS)
    for kind_name, row_id in sorted(waiting):
        report.problem(
            f"{KINDS[kind_name].table} {row_id}: differs from the log, and its queued change "
            f"was not logged within {settle_seconds:g} s: the sequencer is not running, "
            "or the queue is being used to hide a change"
        )
    return [key for key in keys if key not in waiting]


async def _check_new_archives(
    conn: Any, report: LogReport, archive_root: Path | None
) -> set[tuple[str, str]]:
    """The rows listed by archives made while the check waited, each archive judged
    as the first snapshot judges every one.

    `audit archive` sequences the log itself, then may archive (list and
    delete) the very rows the check was waiting for: a scheduled archive run
    during a verify. Such a listing is bound by its archive's record like
    any other, so it excuses the deletion; one slipped in under an archive the
    first snapshot had already judged, or under none, still does not.
    """
    listed: set[tuple[str, str]] = set()
    for archive in await conn.fetch(q("archive_list")):
        if archive["archive_id"] in report.archive_ids:
            continue
        report.archive_ids.add(archive["archive_id"])
        report.archives += 1
        report.archived_rows += await check_archive(conn, archive, report, archive_root)
        rows = await conn.fetch(q("archive_manifest_rows"), archive["archive_id"])
        listed |= {(r["kind"], r["row_id"]) for r in rows}
    if listed and archive_root is None:
        report.archives_unchecked = unchecked_note(report.archives, report.archived_rows)
    return listed


async def _rejudge(
    conn: Any,
    report: LogReport,
    keys: Sequence[tuple[str, str]],
    archived_meanwhile: set[tuple[str, str]],
    may_wait: bool,
) -> list[tuple[str, str]]:
    """Each row the sequencer logged during the wait, against its newest leaf now;
    the rows to wait for once more (see _settle_excused), when `may_wait`.

    As in the first pass, except that a row that is gone is no longer excused
    by a change queued again: its deletion had time to be logged; and a row
    listed as archived only since the first pass (whose count vouched for the
    listings then) is a problem unless an archive made meanwhile lists it
    (`archived_meanwhile`, judged by _check_new_archives): an archive excuses
    the deletion of nothing listed behind the check's back.
    """
    kinds, ids = map(list, zip(*keys, strict=True))
    newest = await conn.fetch(q("log_newest_of"), kinds, ids)
    leaves = {(r["log_kind"], r["log_row_id"]): dict(r) for r in newest}
    rows = await current_rows(conn, [(KINDS[kind], row_id) for kind, row_id in keys])
    deleted: list[tuple[str, str]] = []
    for kind_name, row_id in keys:
        kind, row = KINDS[kind_name], rows.get((kind_name, row_id))
        judged = {**(dict(row) if row is not None else {}), **leaves[(kind_name, row_id)]}
        judged["log_row_exists"] = row is not None
        if (
            judged["log_archived"]
            and (kind_name, row_id) not in report.excused_listed
            and (kind_name, row_id) not in archived_meanwhile
        ):
            report.problem(
                f"{kind.table} {row_id}: listed as archived only while this check waited"
            )
        problem = _row_problem(kind, judged)
        if problem is _EXCUSED and row is None:
            if may_wait and (kind_name, row_id) in archived_meanwhile:
                deleted.append((kind_name, row_id))
                continue
            problem = "removed (its leaf is in the log, the row is gone)"
        if problem and problem is not _EXCUSED:
            report.problem(f"{kind.table} {row_id}: {problem}")
    return deleted


async def _check_versions(
    conn: Any, report: LogReport, query: str | None = None, *args: Any
) -> None:
    """The rules every row's versions follow (stream of rows logged more than once,
    or of the rows `query` names)."""
    versions: list[Any] = []
    async for row in conn.cursor(query or q("log_versions"), *args, prefetch=PREFETCH):
        if versions and (versions[0]["kind"], versions[0]["row_id"]) != (
            row["kind"],
            row["row_id"],
        ):
            _judge_versions(versions, report)
            versions = []
        versions.append(row)
    if versions:
        _judge_versions(versions, report)


def _judge_versions(versions: list[Any], report: LogReport) -> None:
    kind = KINDS.get(versions[0]["kind"])
    if kind is None:
        return  # reported by the tree pass
    where = f"{kind.table} {versions[0]['row_id']}"
    problem = _version_problem(kind, versions)
    if problem:
        report.problem(f"{where}: {problem}")


def _version_problem(kind: LeafKind, versions: list[Any]) -> str | None:
    live = [v for v in versions if not v["deleted"]]
    if any(v["deleted"] for v in versions[:-1]):
        return "logged again after its deletion"
    if versions[-1]["deleted"]:
        problem = _deletion_problem(kind, versions, live)
        if problem:
            return problem
    if not kind.updatable and len(live) > 1:
        return f"logged in {len(live)} versions, but such rows are written once"
    fixed = {_bytes(v["fixed_sha256"]) for v in live}
    if None in fixed:  # the schema allows it; no version the sequencer writes lacks one
        return "a version records no fixed digest (every version of a row has one)"
    if len(fixed) > 1:
        return "a later version changed what never changes (its identity or request)"
    settled = [bytes(v["settled_sha256"]) for v in live if v["settled_sha256"] is not None]
    if len(set(settled)) > 1:
        return "a later version changed its settled part (a call's answer, an attachment)"
    if settled and live[-1]["settled_sha256"] is None:
        return "a later version unsettled it"
    return None


def _deletion_problem(kind: LeafKind, versions: list[Any], live: list[Any]) -> str | None:
    """The two deletions the ledger makes: an archive's (its row's last version before
    the deletion is the one archived), and the retention purge of an event that never
    named an operation (jw_purge_webhook_events)."""
    archived = versions[-1]["archived_leaf"]
    if archived is not None:
        if len(versions) < 2 or versions[-2]["leaf_index"] != archived:
            return f"deleted, but the version archived (leaf {archived}) is not its last one"
        return None
    attached = any(v["settled_sha256"] is not None for v in live)
    if kind.name != "webhook" or attached:
        return "deleted, and only archived rows and never-attached webhook events are ever deleted"
    return None


# What _row_problem says of a row only a queued change excuses (see verify_log).
_EXCUSED = "excused while its change is queued"


def _row_problem(kind: LeafKind, row: Any) -> str | None:
    exists, queued = row["log_row_exists"], row["log_queued"]
    if row["log_leaf_hash"] is None:
        return _EXCUSED if queued else "outside the log (no leaf, no queued change)"
    if not exists:
        # gone, its deletion logged or still queued (archived rows, updatable kinds)
        if row["log_deleted"]:
            return None
        if queued and (kind.updatable or row["log_archived"]):
            return _EXCUSED
        return "removed (its leaf is in the log, the row is gone)"
    if row["log_deleted"]:
        return "present, but the log records its deletion"
    try:
        now = Digests.of(kind, row)
    except LeafError as exc:
        return f"cannot be encoded ({exc})"
    if now.row == _bytes(row["log_row_sha256"]):
        return None
    # changed since its newest leaf: only a change still queued, and one the
    # ledger can make (settling a call, attaching an event), is pending
    if not (queued and kind.updatable):
        return "altered (its content does not match its leaf)"
    if now.fixed != _bytes(row["log_fixed_sha256"]):
        return "altered (its identity or request changed since it was logged)"
    logged_settled = _bytes(row["log_settled_sha256"])
    if logged_settled is not None and now.settled != logged_settled:
        return "altered (its settled part changed since it was logged)"
    return _EXCUSED


__all__ = [
    "UNPROVEN",
    "CheckpointError",
    "LogReport",
    "NoteError",
    "consistency_problem",
    "open_checkpoint",
    "verify_log",
]


async def record_verification(
    db: Any,
    report: LogReport,
    *,
    chains_checked: int,
    chain_breaks: int,
    seconds: float,
) -> Any:
    """Note a finished verify in `audit_verifications` (migration 018) for the console.

    A report by whoever ran it, not a proof: the database's owner could write
    any row there. Returns the row (its id, time and the recording login).
    """
    cp = report.checkpoint
    return await db.fetchrow(
        q("audit_verification_record"),
        report.ok and chain_breaks == 0,
        report.tree_size,
        report.root.hex(),
        None if cp is None else cp.origin,
        None if cp is None else cp.size,
        chains_checked,
        chain_breaks,
        sum(report.rows_checked.values()),
        report.problem_count,
        report.pending,
        seconds,
    )
