"""When to read a running job again, from what the provider has told us so far.

The naive loop reads on a fixed schedule (5 s, x1.5, capped at a minute) and
learns the end up to a minute late, every time. A provider that reports
progress tells us more: two samples of it (the one stored on the operation
and the one a status read brings, each at the moment it was true — the
provider's `updated_at` when it gives one) give a rate, and the rate a
predicted end. We read just after that end. What this assumes, and where it
falls back:

- Progress grows roughly steadily while the job runs. A single sample (no
  earlier one, or the value did not move) gives the average rate since the
  job was submitted, which counts queueing as work: a late estimate, never an
  early one, so it only ever shortens the schedule. A rate measured between
  two samples is trusted, but no wait is longer than the job's age so far
  (or the backoff cap): a wrong forecast costs at most a doubling of the
  wait, not the job's whole length. Each read refines it.
- Inside the forecast window reads are at most WINDOW_SPACING of the backoff
  cap apart, which bounds the lag; once what is left of the window is no
  wider than that, one read just after its end does (late by at most the
  window's width plus the forecast margin).
- A forecast already overdue (the job was predicted to be done and is not),
  no progress at all, or a progress that goes backwards: no forecast; the
  adapter's schedule applies (its provider hints, then capped backoff with
  jitter).
- Progress reported in two steps or more but none shown yet: a steady job
  shows a step before it ends, so the end is not what the next read looks
  for, the first step is. The capped backoff stretches up to QUIET_STRETCH
  times, never past the job's age (a job that jumps from nothing to done is
  seen at most that much later than on the plain schedule). Not when a
  provider hint sets the schedule, nor when the progress has one step
  ("0 of 1" says nothing a steady job would show first).
- Never earlier than the provider's `poll_after_seconds` or `Retry-After`
  (the latter, imposed, is never shortened nor lengthened here).
- With webhooks, reads are only a backstop for a lost delivery: the first
  at the backstop interval after acceptance (no read at acceptance: it would
  only learn "queued"), then one just after the forecast end (the delivery
  should be there by then), and without a forecast a wait of twice the job's
  age, so a job an hour long is read about three times, not every five
  minutes. A lost delivery is noticed by the read that follows: within the
  larger of the backstop interval and twice the job's age at its end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.providers.description import Limits
from shared.providers.timing import MAX_HONOURED_DELAY, backoff_ceiling, is_poll_hint

# Read this long after the forecast end: its share of the forecast (progress
# reported in whole items rounds down) plus the backoff floor.
FORECAST_MARGIN = 0.02
# With webhooks, the backstop read after a forecast end waits this much longer
# than the forecast (the delivery is expected first).
BACKSTOP_SLACK = 1.1
# Inside a forecast window, reads are at most this share of the backoff cap apart.
WINDOW_SPACING = 0.4
# With progress in steps and none shown yet, the backoff stretches up to this many times.
QUIET_STRETCH = 2.0
# Without a forecast, a backstop waits this many times the job's age.
BACKSTOP_AGE_FACTOR = 2.0
# The longest a backstop waits, whatever the job's age.
MAX_BACKSTOP_SECONDS = 6 * 3600.0


@dataclass(frozen=True)
class Sample:
    """How far the job was (0..1), when that was true, and the progress's step
    (1/total for whole items: a rate over fewer than two steps is mostly rounding)."""

    fraction: float
    at: datetime
    step: float = 0.0


def fraction(completed: float | None, total: float | None, percent: float | None) -> float | None:
    """The share done, from items or a percentage; None when neither says.

    Whole items and whole percents round down: between two changes the job is
    on average half a step further than it says, and a rate taken from
    rounded-down samples read at arbitrary times would be late by up to a
    step. None of it applies at 0 (the job may not have started) or at the end.
    """
    if completed is not None and total is not None and total > 0 and completed >= 0:
        return _half_step(completed, total)
    if percent is not None and 0 <= percent <= 100:
        return _half_step(percent, 100.0)
    return None


def resolution(completed: float | None, total: float | None, percent: float | None) -> float:
    """The smallest change the progress can show (0: continuous)."""
    if completed is not None and total is not None and total > 0:
        return 1.0 / total if float(completed).is_integer() else 0.0
    if percent is not None and float(percent).is_integer():
        return 0.01
    return 0.0


def quiet(done: float | None, step: float) -> bool:
    """Progress reported in two steps or more (`step`, from `resolution`), and none
    shown yet (`done`, from `fraction`)."""
    return done == 0 and 0 < step <= 0.5


def _half_step(done: float, total: float) -> float:
    if done >= total:
        return 1.0
    if done > 0 and float(done).is_integer():
        return (done + 0.5) / total
    return done / total


@dataclass(frozen=True)
class Forecast:
    """The window the job's end should fall in.

    `earliest` (None unless the rate was measured between two samples) and
    `latest`: each sample read as anywhere within its step (a count of whole
    items is true from the moment it changed until the next item), the
    fastest and the slowest rate the samples allow. Unmeasured, `latest` is
    the average since submission, which counts queueing as work.
    """

    earliest: datetime | None
    latest: datetime


def predict_end(previous: Sample | None, current: Sample, submitted: datetime) -> Forecast | None:
    """The job's end window, or None when the samples cannot say."""
    if current.fraction >= 1.0 or current.fraction <= 0 or current.at <= submitted:
        return None  # done by its progress (not by its state), or nothing to go on
    step = max(previous.step if previous else 0.0, current.step)
    nearest = max(current.fraction - step / 2, 1e-12)
    # steady progress since submission at the least: the job is no slower than this
    since = nearest / (current.at - submitted).total_seconds()
    latest = current.at + _time_to(1.0 - nearest, since)
    # a rate from a sample of no progress would count queueing as work too
    if (
        previous is None
        or previous.fraction <= 0
        or current.fraction < previous.fraction
        or (step == 0 and current.fraction == previous.fraction)
        or current.at <= previous.at
    ):
        return Forecast(None, latest)
    elapsed = (current.at - previous.at).total_seconds()
    gained = current.fraction - previous.fraction
    furthest = min(current.fraction + step / 2, 1.0)
    earliest = current.at + _time_to(1.0 - furthest, (gained + step) / elapsed)
    if gained > step * (1 + 1e-9):
        latest = min(latest, current.at + _time_to(1.0 - nearest, (gained - step) / elapsed))
    return Forecast(min(earliest, latest), latest)


def _time_to(distance: float, rate: float) -> timedelta:
    """How long `distance` takes at `rate`, bounded: a crawling rate must not
    overflow a datetime, and one too small for a double (progress steps of
    1e-320) is zero, which must not divide."""
    bound = 10 * 365 * 86400.0
    return timedelta(seconds=min(distance / rate, bound) if rate > 0 else bound)


def next_read(
    scheduled: float,
    earliest_in: float | None,
    latest_in: float | None,
    *,
    age: float,
    limits: Limits,
    webhooks: bool,
    imposed: bool,
    poll_after: float | None,
    quiet: bool = False,
) -> float:
    """Seconds until the next status read, given the adapter's own schedule.

    `scheduled` is what the adapter chose (hints, backoff, backstop);
    `earliest_in`/`latest_in` the seconds until the forecast window's ends
    (None: no forecast; `earliest_in` None: not measured); `age` the seconds
    since the operation was submitted; `imposed` whether a Retry-After decided
    `scheduled` (then it stands as it is); `quiet` whether the read showed
    progress in steps but none yet (see `quiet()`).
    """
    if imposed:
        return scheduled
    if latest_in is None:
        if webhooks:
            return _backstop(scheduled, None, age)
        if quiet and not is_poll_hint(poll_after) and limits.default_poll_after_seconds is None:
            return max(scheduled, min(QUIET_STRETCH * scheduled, age))
        return scheduled
    floor = max(limits.backoff_base / 2, _hint(poll_after) or 0.0)
    if webhooks:
        # only a measured forecast may push the backstop past the age-based one
        measured = earliest_in is not None and latest_in > 0
        return _backstop(scheduled, latest_in if measured else None, age, floor)
    margin = limits.backoff_base / 2
    if earliest_in is None:  # the latest plausible end: it may only shorten the schedule
        if latest_in <= 0:
            return scheduled
        return max(min(latest_in * (1 + FORECAST_MARGIN) + margin, scheduled), floor)
    if latest_in <= 0:
        return scheduled  # past even the slowest rate: not steady, trust the schedule
    spacing = limits.backoff_cap * WINDOW_SPACING
    if latest_in - max(earliest_in, 0.0) <= spacing:
        # what is left of the window is narrow: one read just after its end
        wait = latest_in * (1 + FORECAST_MARGIN) + margin
    elif earliest_in > 0:
        wait = earliest_in * (1 + FORECAST_MARGIN) + margin
    else:
        # inside a wide window (coarse progress): halve it with each read, at most
        # `spacing` apart
        wait = min(latest_in / 2, spacing)
    longest = max(limits.backoff_cap, min(age, MAX_HONOURED_DELAY))
    return max(min(wait, longest), floor)


def backoff_reads_by(age: float, limits: Limits) -> int:
    """How many reads the plain schedule makes in a job's first `age` seconds: the
    fixed interval, or the capped backoff at its ceilings (its fewest reads)."""
    fixed = limits.default_poll_after_seconds
    if fixed:
        return int(age // fixed)
    elapsed, reads = 0.0, 0
    wait = backoff_ceiling(limits, reads)
    while wait < limits.backoff_cap and elapsed + wait <= age and reads < 64:
        elapsed, reads = elapsed + wait, reads + 1
        wait = backoff_ceiling(limits, reads)
    return reads + (int((age - elapsed) // wait) if age > elapsed and wait > 0 else 0)


def _hint(poll_after: float | None) -> float | None:
    """A provider's poll hint as the adapter honours it (at most a day; junk ignored)."""
    if poll_after is None or not math.isfinite(poll_after) or poll_after <= 0:
        return None
    return min(poll_after, MAX_HONOURED_DELAY)


def _backstop(scheduled: float, latest_in: float | None, age: float, floor: float = 0.0) -> float:
    """With webhooks: after the latest plausible end, else a wait growing with age;
    never beyond MAX_BACKSTOP_SECONDS unless the adapter's own schedule says so."""
    wait = BACKSTOP_AGE_FACTOR * age if latest_in is None else latest_in * BACKSTOP_SLACK + floor
    return max(scheduled, min(wait, MAX_BACKSTOP_SECONDS))
