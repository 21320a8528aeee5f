"""`jobwarden reconciler`: the daemon around `Reconciler.run_once()`.

APScheduler is only the clock: an interval job sweeps due rows, another does
housekeeping. LISTEN/NOTIFY makes a sweep start at once when the receiver or
an agent changes something. Nothing per-operation lives in memory between
sweeps, so SIGKILL at any line loses and duplicates nothing. SIGTERM stops
claiming, lets in-flight steps finish (bounded by `shutdown_grace`), hands
leases back and exits 0. Under systemd (Type=notify) it reports READY,
WATCHDOG and STOPPING. The evidence log is sequenced and signed by a child
process it starts and watches (reconciler/sequencer.py), off this event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import ssl
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from reconciler.connect_guard import trusted_hosts
from reconciler.context import Context, build_adapters
from reconciler.lanes import Lane, Lanes, tls_context
from reconciler.sequencer import STOP_SECONDS as SEQUENCER_STOP_SECONDS
from reconciler.sequencer import LogSettings, SequencerProcess
from reconciler.wakeups import SenderFilter
from reconciler.worker import Reconciler
from shared import heap, sdnotify, telemetry
from shared.db.connect import connect, create_pool
from shared.db.migrate import MigrationError, pending_migrations
from shared.db.queries import q
from shared.failure_streak import FailureStreak
from shared.ledger import log as evidence_log
from shared.ledger.webhooks import StragglerSweep, purge_webhook_events
from shared.providers import ConfigError
from shared.result_store import ResultStore
from shared.secret import SecretError
from shared.settings import Settings, check_reconciler_settings
from shared.tlog import Signer, Verifier

log = logging.getLogger("jobwarden.reconciler")
T = TypeVar("T")

# The channel wake-ups are sent on (jw_request_wake, the receiver).
WAKEUP_CHANNEL = "jobwarden_wakeup"

# Housekeeping (webhook dedupe retention) runs this often; hourly is plenty for
# a retention measured in days.
HOUSEKEEPING_SECONDS = 3600.0
# A webhook event committed in the instant its job id was being recorded is
# attached by this sweep; once a minute bounds that (rare) delay.
STRAGGLER_SECONDS = 60.0
# Pool size: steps hold a connection only around their writes, not during calls.
POOL_SIZE = 16
# Bound on every statement of the reconciler's pool (asyncpg's command_timeout:
# past it the statement is cancelled, and a connection that does not answer the
# cancel either is dropped and replaced). A database failover or a network cut
# that sends no FIN or RST leaves a connection half-open: its statement never
# returns, and the poll writer's single chain, every status read behind it,
# waited with it for good. Our statements take milliseconds; the largest (a
# housekeeping slice, a claim at a million rows) well under a second.
STATEMENT_TIMEOUT_SECONDS = 60.0
# How often a reconciler waiting for `jobwarden migrate` looks (`_migrated`).
MIGRATION_CHECK_SECONDS = 1.0
# A lost LISTEN connection is opened again after this long, doubling on each
# failure up to the cap: a terminated backend is replaced at once, a database
# down for minutes is asked twice a minute, and the sweep tick covers the gap.
LISTEN_RETRY_FIRST_SECONDS = 0.5
LISTEN_RETRY_MAX_SECONDS = 30.0
# How often the LISTEN connection is asked to answer. A cut that sends no FIN
# or RST (a network partition, a host gone) fires no termination callback; TCP
# would notice only after hours, and every wake-up meanwhile would go nowhere.
LISTEN_CHECK_SECONDS = 30.0
# A connect or a check on the LISTEN connection taking longer than this counts
# as failed: both take milliseconds on a live server.
LISTEN_TIMEOUT_SECONDS = 10.0
# keep_listening ended by an unexpected error is started again this much later.
LISTEN_RESTART_SECONDS = 1.0
# SIGTERM: handing the leases back is one UPDATE. Against a database that has
# gone silent it would wait for asyncpg's 60 s connect timeout, or for ever on
# a query; unreturned leases only lapse (lease_seconds), so give up sooner.
RELEASE_SECONDS = 10.0
# SIGTERM: a graceful close waits for the server's answer (and a pool, for every
# connection to be given back); past this the connections are dropped instead,
# well inside systemd's stop timeout.
CLOSE_SECONDS = 5.0


async def _watchdog_ping() -> None:
    sdnotify.notify("WATCHDOG=1")


def new_scheduler() -> AsyncIOScheduler:
    """The daemon's scheduler: a job that starts late runs late, once.

    APScheduler's default skips a run more than a second late, so one stall
    of the loop (a big result written, a host paused) skipped a watchdog
    ping, and two such stalls let systemd kill a healthy daemon; the sweep
    and the hourly jobs lost whole periods the same way.
    """
    return AsyncIOScheduler(
        timezone=UTC, job_defaults={"misfire_grace_time": None, "coalesce": True}
    )


class Daemon:
    def __init__(
        self,
        reconciler: Reconciler,
        settings: Settings,
        database_url: str,
        sequencer: SequencerProcess,
        *,
        settle_heap: bool = False,
    ) -> None:
        self.reconciler = reconciler
        self.settle_heap = settle_heap  # this process is the daemon: see run_reconciler
        self.sequencer = sequencer
        self.sequencing: asyncio.Task[None] | None = None
        self.settings = settings
        self.database_url = database_url
        self.scheduler = new_scheduler()
        # the database down fails a sweep every sweep_interval: one line, not thousands
        self.sweep_failures = FailureStreak(log, "sweep failed")
        self.stopping = asyncio.Event()
        self.wake = asyncio.Event()
        self.senders = SenderFilter(reconciler.ctx.pool)
        self.checks: set[asyncio.Task[None]] = set()
        self.looking: set[int] = set()  # pids whose sender is being looked up
        self.held_wake: asyncio.TimerHandle | None = None  # see _wake_for_unknown_sender
        self.sweeping: asyncio.Task[None] | None = None
        self.straggler_sweep = StragglerSweep()
        self.listener: Any = None
        self.listener_pid: int | None = None
        self.listener_lost = asyncio.Event()
        self.listening: asyncio.Task[None] | None = None

    async def sweep(self) -> None:
        """Run batches until nothing more is due (or we are stopping)."""
        self.wake.clear()
        while not self.stopping.is_set():
            counts = await self.reconciler.run_once()
            if counts["claimed"] < self.settings.claim_batch and not self.wake.is_set():
                return
            self.wake.clear()

    async def tick(self) -> None:
        """Start a sweep, or have the running one go round once more.

        It returns at once: a tick that awaited the sweep outlived the next
        ones while a slow call ran, and the scheduler logged every skipped
        tick (a warning every sweep_interval).
        """
        if self.sweeping is None or self.sweeping.done():
            self.sweeping = asyncio.create_task(self.sweep())
            self.sweeping.add_done_callback(self._sweep_ended)
        else:
            self.wake.set()

    def _sweep_ended(self, sweeping: asyncio.Task[None]) -> None:
        if sweeping.cancelled():
            return
        failure = sweeping.exception()
        if failure is None:
            self.sweep_failures.succeeded()
        else:
            self.sweep_failures.failed(failure)

    def on_notify(self, _conn: Any, pid: int, *_: Any) -> None:
        """A wake-up: acted on at once from a known jobwarden sender, after a look
        at its role otherwise, and ignored from an agent's session.

        One look per pid at a time: wake-ups arriving meanwhile share its
        verdict (two looks at one agent used to warn twice).
        """
        if self.stopping.is_set():
            return
        verdict = self.senders.cached(pid)
        if verdict:
            self._wake()
        elif verdict is None and pid not in self.looking:
            self.looking.add(pid)
            checking = asyncio.get_running_loop().create_task(self._check_sender(pid))
            self.checks.add(checking)
            checking.add_done_callback(self.checks.discard)

    async def _check_sender(self, pid: int) -> None:
        try:
            sender = await self.senders.look(pid)
        except Exception:  # the next sweep comes anyway
            log.warning("could not check a wake-up's sender", exc_info=True)
            return
        finally:
            self.looking.discard(pid)
        if self.stopping.is_set():
            return
        if sender is None:  # gone already (a CLI): unknown, and a wake-up is harmless
            self._wake_for_unknown_sender()
        elif sender.trusted:
            self._wake()
        elif self.senders.first_warning(sender):
            log.warning(
                "wake-up ignored: its sender may not read operations (an agent?)",
                extra={"ctx": {"pid": pid, "role_oid": sender.role}},
            )

    def _wake_for_unknown_sender(self) -> None:
        """Wake now, or at the end of the unknown senders' window (one held
        wake-up covers the rest): an agent that disconnects at once cannot
        make the reconciler sweep more than once per window."""
        if self.held_wake is not None:
            return
        delay = self.senders.unknown_delay()
        if delay <= 0:
            self._wake()
        else:
            self.held_wake = asyncio.get_running_loop().call_later(delay, self._release_held_wake)

    def _release_held_wake(self) -> None:
        self.held_wake = None
        if not self.stopping.is_set():
            self._wake()

    def _wake(self) -> None:
        self.wake.set()
        job = self.scheduler.get_job("sweep")
        if job is not None and (self.sweeping is None or self.sweeping.done()):
            job.modify(next_run_time=datetime.now(UTC))

    async def housekeeping(self) -> None:
        purged = await purge_webhook_events(
            self.reconciler.ctx.pool, self.settings.webhook_retention_days
        )
        log.info("housekeeping", extra={"ctx": {"webhook_events_purged": purged}})

    async def stragglers(self) -> None:
        """Attach events that committed while their job id was being recorded."""
        await self.straggler_sweep.run(self.reconciler.ctx.pool)  # logs what it attached

    async def listen(self) -> None:
        """Open the LISTEN connection; its loss sets `listener_lost`."""
        # asyncio.timeout, not wait_for: on 3.11, a cancel that meets a failed
        # connect comes out of wait_for as the connect's error, and is lost
        async with asyncio.timeout(LISTEN_TIMEOUT_SECONDS):
            conn = await connect(self.database_url)
        try:
            await conn.add_listener(WAKEUP_CHANNEL, self.on_notify)
        except BaseException:  # cancelled (shutdown) or failed: no connection left behind
            conn.terminate()
            raise
        conn.add_termination_listener(self._on_listener_terminated)
        self.listener, self.listener_pid = conn, conn.get_server_pid()
        self.listener_lost.clear()

    def _on_listener_terminated(self, conn: Any) -> None:
        # a replaced connection's late callback, or our own close at shutdown, is no loss
        if conn is self.listener and not self.stopping.is_set():
            self.listener_lost.set()

    def _start_listening(self) -> None:
        self.listening = asyncio.create_task(self.keep_listening())
        self.listening.add_done_callback(self._listening_ended)

    def _listening_ended(self, listening: asyncio.Task[None]) -> None:
        """keep_listening ends only when cancelled: anything else would leave
        wake-ups unheard without a word (the sweep tick still runs), so it is
        logged and started again."""
        if listening.cancelled() or self.stopping.is_set():
            return
        log.error(
            "wake-up listener stopped unexpectedly; starting it again in %g s",
            LISTEN_RESTART_SECONDS,
            exc_info=listening.exception(),
        )
        asyncio.get_running_loop().call_later(LISTEN_RESTART_SECONDS, self._restart_listening)

    def _restart_listening(self) -> None:
        if not self.stopping.is_set():
            self._start_listening()

    async def keep_listening(self) -> None:
        """Open the LISTEN connection again whenever it is lost, for the daemon's life.

        Without this, a database restart, pg_terminate_backend or a network
        cut ends NOTIFY wake-ups until the process restarts, and every wake
        waits for the next sweep tick. Runs beside the scheduler, which keeps
        sweeping on its tick meanwhile; shutdown cancels it.
        """
        while True:
            how = await self._until_listener_lost()
            log.warning(
                "wake-up listener connection lost; connecting again",
                extra={"ctx": {"server_pid": self.listener_pid, "how": how}},
            )
            self.listener.terminate()  # already closed, or a silent cut: drop it
            attempts = await self._listen_again()
            log.info(
                "wake-up listener connected again; sweeping for wake-ups sent meanwhile",
                extra={"ctx": {"server_pid": self.listener_pid, "attempts": attempts}},
            )
            # a NOTIFY sent while nobody listened is gone: look for what it announced
            self._wake()

    async def _until_listener_lost(self) -> str:
        """Wait for the termination callback, or a check the connection fails; says which."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LISTEN_CHECK_SECONDS):
                    await self.listener_lost.wait()
            if self.listener_lost.is_set() or self.listener.is_closed():
                return "closed"
            try:
                await self.listener.fetchval(q("listener_ping"), timeout=LISTEN_TIMEOUT_SECONDS)
            except Exception as exc:
                return f"check failed: {type(exc).__name__}"

    async def _listen_again(self) -> int:
        """Connect until it works, backing off; returns the number of attempts."""
        delay = LISTEN_RETRY_FIRST_SECONDS
        attempts = 0
        while True:
            attempts += 1
            try:
                await self.listen()
                return attempts
            except Exception as exc:  # the type only: a message may quote the server's address
                log.warning(
                    "wake-up listener: could not connect",
                    extra={
                        "ctx": {
                            "error": type(exc).__name__,
                            "attempt": attempts,
                            "retry_in_seconds": delay,
                        }
                    },
                )
            await asyncio.sleep(delay)
            delay = min(2 * delay, LISTEN_RETRY_MAX_SECONDS)

    async def run(self) -> None:
        await self.listen()  # a database that cannot be reached stops the daemon at start
        self._start_listening()
        self.scheduler.add_job(
            self.tick,
            "interval",
            seconds=self.settings.sweep_interval,
            id="sweep",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )
        self.scheduler.add_job(
            self.housekeeping,
            "interval",
            seconds=HOUSEKEEPING_SECONDS,
            id="housekeeping",
            max_instances=1,
            coalesce=True,
        )
        self.scheduler.add_job(
            self.stragglers,
            "interval",
            seconds=STRAGGLER_SECONDS,
            id="stragglers",
            max_instances=1,
            coalesce=True,
        )
        watchdog = sdnotify.watchdog_interval_seconds()
        if watchdog:
            # a coroutine runs on the loop; a plain function would wait for a
            # thread of the default executor, which slow DNS lookups may hold
            self.scheduler.add_job(_watchdog_ping, "interval", seconds=watchdog, id="watchdog")
        self.sequencing = asyncio.create_task(self.sequencer.supervise())
        self.scheduler.start()
        if self.settle_heap:  # start-up's objects out of every full collection's walk
            heap.settle()
        sdnotify.notify("READY=1")
        log.info("reconciler started", extra={"ctx": {"worker_id": self.settings.worker_id}})
        await self.stopping.wait()
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop claiming, finish or cancel the sweep, hand leases back, stop the
        sequencer child, close the listener.

        Each step is attempted whatever the one before did: with the database
        down at SIGTERM, handing leases back fails (they lapse on their own),
        yet the child must still be waited for and the listener closed, and
        the process must exit 0 rather than with a traceback. A failure is
        logged by its exception type; every wait is bounded.
        """
        sdnotify.notify("STOPPING=1")
        self.reconciler.stop_claiming()  # batches in progress do not top up
        try:
            self.scheduler.shutdown(wait=False)  # no new sweeps
        except Exception as exc:
            _failed("stop the scheduler", exc)
        self.sequencer.stop()  # its supervisor ends it meanwhile (the batch finishes)
        # no reconnecting from here on, and no sender check holding a pool connection
        await _cancelled([t for t in (self.listening, *self.checks) if t is not None])
        if self.sweeping is not None and not self.sweeping.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.sweeping), self.settings.shutdown_grace)
            except (TimeoutError, Exception):
                self.sweeping.cancel()
                # Its steps are cancelled and awaited before any lease is handed back.
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.sweeping
        released = await _attempt(
            "hand leases back", self.reconciler.release_all(), RELEASE_SECONDS
        )
        if self.sequencing is not None:
            # bounded: SIGKILL comes after STOP_SECONDS; past that, cancel (the
            # child dies with this process anyway)
            await _attempt("stop the log sequencer", self.sequencing, SEQUENCER_STOP_SECONDS + 5)
        if self.listener is not None:
            self.listener.remove_termination_listener(self._on_listener_terminated)
            # close(timeout=) drops the connection when the server does not answer
            await _attempt("close the listener", self.listener.close(timeout=CLOSE_SECONDS), None)
        log.info("reconciler stopped", extra={"ctx": {"leases_released": released}})


def _failed(what: str, exc: BaseException) -> None:
    log.warning("shutdown: could not %s", what, extra={"ctx": {"error": type(exc).__name__}})


async def _attempt(what: str, step: Awaitable[T], seconds: float | None) -> T | None:
    """One shutdown step, bounded by `seconds`; a failure is logged, not raised."""
    try:
        return await asyncio.wait_for(step, seconds)
    except asyncio.CancelledError as exc:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # shutdown itself is being cancelled
        _failed(what, exc)  # the awaited task was cancelled, not us
    except Exception as exc:
        _failed(what, exc)
    return None


async def _cancelled(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait for them to end, for CLOSE_SECONDS at most (a
    task that swallowed its cancellation must not hold the process)."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=CLOSE_SECONDS)


async def close_pool(pool: Any, seconds: float = CLOSE_SECONDS) -> None:
    """Close `pool` gracefully if that is quick, else drop its connections.

    A graceful close waits for every connection to be given back and for the
    server to answer each one's goodbye: a task stuck on a database gone
    silent would keep the process from exiting until systemd kills it.
    """
    try:
        await asyncio.wait_for(pool.close(), seconds)
    except Exception as exc:
        _failed("close the pool gracefully; dropping its connections", exc)
        pool.terminate()


async def _rollback_only(conn: Any) -> None:
    """Pool reset for the reconciler: it keeps no session state (no LISTEN, no
    session locks or settings on pooled connections), so the default reset's
    extra round trip per release buys nothing; an abandoned transaction is
    still rolled back."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


async def create_reconciler_pool(database_url: str, **kwargs: Any) -> Any:
    """The reconciler's pool: small, without asyncpg's per-release reset query, and
    every statement bounded (STATEMENT_TIMEOUT_SECONDS, unless `command_timeout`)."""
    kwargs.setdefault("command_timeout", STATEMENT_TIMEOUT_SECONDS)
    return await create_pool(
        database_url, min_size=1, max_size=POOL_SIZE, reset=_rollback_only, **kwargs
    )


def check_startup(settings: Settings) -> Signer | None:
    """What the reconciler checks before it starts, each failure a ConfigError
    naming the setting: every call fits in a lease, the CA file loads, the
    signing key can be read and is a signer key, and so is every previous public
    key (read here, so a bad key stops the daemon at start, not its sequencer
    child). Returns the signer, if any.
    `jobwarden providers check` runs the same checks."""
    check_reconciler_settings(settings)
    try:
        tls_context(settings.provider_ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"provider_ca_file ({settings.provider_ca_file}, JW_PROVIDER_CA_FILE):"
            f" cannot load it: {exc}"
        ) from None
    try:
        signer = evidence_log.load_signer(settings.log_signing_key_file, os.environ)
    except (SecretError, ValueError) as exc:
        raise ConfigError(
            f"checkpoint signing key (log_signing_key_file, JW_LOG_SIGNING_KEY_FILE): {exc}"
        ) from None
    previous_log_keys(settings)
    return signer


def previous_log_keys(settings: Settings) -> tuple[Verifier, ...]:
    """The public keys of signing keys rotated out; ConfigError naming the setting and
    the file if one cannot be read or is no log's public key (read at start, like the
    signing key, so the sequencer child never meets a bad one)."""
    try:
        return evidence_log.load_previous_keys(settings.log_previous_key_files)
    except evidence_log.KeyFileError as exc:
        raise ConfigError(
            f"previous checkpoint keys (log_previous_key_files, JW_LOG_PREVIOUS_KEY_FILES): {exc}"
        ) from None


def prepare_results_dir(store: ResultStore) -> None:
    """results_dir made, a result written there and removed (ConfigError if it cannot
    be), and what crashed writes left swept: a read-only or full disk is said at
    start, not as every collection failing. Not in `check_startup`, which
    `jobwarden providers check` runs too: a check must not create the directory
    (as root, owned by root) before the service's first start."""
    try:
        store.check_writable()
    except OSError as exc:
        raise ConfigError(
            f"results_dir ({store.root}, JW_RESULTS_DIR): cannot write a result"
            f" there: {exc.strerror or type(exc).__name__}"
        ) from None
    swept = store.sweep_temporaries()
    if swept:
        log.info("removed crashed writes' temporary files", extra={"ctx": {"files": swept}})


async def _migrated(pool: Any, wait: float, stop: asyncio.Event) -> list[str]:
    """The migrations still pending once `wait` seconds (migration_wait) have passed,
    or once `stop` is set (SIGTERM while waiting: the caller ends there).

    A reconciler restarted before `jobwarden migrate` (an upgrade in the
    wrong order) waits for it: exiting at once, restarted every 5 s by
    systemd, it used up the unit's start limit (10 starts in 5 minutes) in
    under a minute and stayed down for good. Waiting less than the unit's
    TimeoutStartSec each time, it is started at most six times in five
    minutes, so it comes up once the migration is applied, however late.
    """
    async with pool.acquire() as conn:
        pending = await pending_migrations(conn)
    if not pending:
        return pending
    log.warning(
        "database not migrated: waiting for `jobwarden migrate`",
        extra={"ctx": {"pending": len(pending), "seconds": wait}},
    )
    deadline = time.monotonic() + wait
    unreachable = False
    while pending and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), MIGRATION_CHECK_SECONDS)
        if stop.is_set():
            return pending
        try:
            async with pool.acquire() as conn:
                pending = await pending_migrations(conn)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if not unreachable:  # a database restarting under the migration: still waiting
                log.warning(
                    "waiting for `jobwarden migrate`: the database did not answer",
                    extra={"ctx": {"error": type(exc).__name__}},
                )
            unreachable = True
    return pending


async def run_reconciler(
    settings: Settings, database_url: str, *, settle_heap: bool = False
) -> int:
    """The daemon until SIGTERM/SIGINT; 2 when the database is not migrated.

    `settle_heap`: this process is the reconciler (`jobwarden reconciler`): once
    started, what start-up made leaves the collector's walks (shared/heap.py).
    Not for a reconciler inside another program, whose objects it would freeze.
    """
    check_startup(settings)
    store = ResultStore(settings.results_dir)
    prepare_results_dir(store)
    pool = await create_reconciler_pool(database_url)
    telemetry.configure("jobwarden-reconciler")  # only if OTEL_EXPORTER_OTLP_*ENDPOINT is set
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()  # SIGTERM before the daemon runs (waiting for a migration)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        try:
            pending = await _migrated(pool, settings.migration_wait, stop)
        except MigrationError as exc:  # a changed file, or a newer jobwarden's schema
            log.error("schema does not match this jobwarden", extra={"ctx": {"problem": str(exc)}})
            print(f"reconciler: {exc}; run the jobwarden version that migrated it")
            return 2
        if stop.is_set():
            log.info("reconciler stopped while waiting for `jobwarden migrate`")
            return 0
        if pending:
            log.error("database not migrated", extra={"ctx": {"pending": pending}})
            print(f"reconciler: run `jobwarden migrate` first ({', '.join(pending)} pending)")
            return 2
        lane = functools.partial(Lane, authorities=settings.provider_ca_file)
        async with Lanes(
            settings.max_in_flight, lane, trusted_hosts=trusted_hosts(settings.providers)
        ) as lanes:
            ctx = Context(
                pool=pool,
                settings=settings,
                lanes=lanes,
                adapters=build_adapters(settings.providers),
                store=store,
                webhook_url=settings.public_webhook_url or None,
                database_url=database_url,
            )
            sequencer = SequencerProcess(LogSettings.of(settings), database_url)
            daemon = Daemon(
                Reconciler(ctx), settings, database_url, sequencer, settle_heap=settle_heap
            )
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, daemon.stopping.set)
            if stop.is_set():  # a signal since the wait: the daemon stops at once
                daemon.stopping.set()
            await daemon.run()
        return 0
    finally:
        await close_pool(pool)
        await telemetry.shutdown()  # exports the spans still batched
